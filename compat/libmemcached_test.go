package compat

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLibmemcachedVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "libmemcached", "libmemcached", "conf", func(name string) bool { return name == "parse-lenient" })
	require.Equal(t, 70, files)
	require.Equal(t, 140000, placements)
	require.Equal(t, 140000+44000, presetOf(t, "libmemcached").Checked, "the preset's Checked: these and the strings'")
}

func TestLibmemcachedRefused(t *testing.T) {
	require.Equal(t, 8, checkRefusedIn(t, "libmemcached", "libmemcached", "conf"))
}

// The configuration string, checked against libmemcached's own parser: memcached(3) and
// memcached_generate_hash on every key (testdata/compat/libmemcached/csl).
func TestLibmemcachedConfigStringVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "libmemcached", "libmemcached/csl", "csl", nil)
	require.Equal(t, 22, files)
	require.Equal(t, 44000, placements)
}

func TestLibmemcachedConfigStringRefused(t *testing.T) {
	require.Equal(t, 13, checkRefusedIn(t, "libmemcached", "libmemcached/csl", "csl"))
}

// memcached_servers_parse against parse-lenient.txt, which records what libmemcached made
// of each odd list.
func TestLibmemcachedServersParse(t *testing.T) {
	var lists []string
	want := map[int]string{}
	readLines(t, filepath.Join(vectorDir, "libmemcached", "parse-lenient.conf"), func(line string) {
		if rest, ok := strings.CutPrefix(line, "servers "); ok {
			lists = append(lists, rest)
		}
	})
	n := 0
	readLines(t, filepath.Join(vectorDir, "libmemcached", "parse-lenient.txt"), func(line string) {
		if strings.HasPrefix(line, "line ") {
			n, _ = strconv.Atoi(strings.TrimSuffix(strings.Fields(line)[1], ":"))
		}
		if rest, ok := strings.CutPrefix(line, "  -> memcached_servers_parse: "); ok {
			want[n] = rest
		}
	})
	require.Len(t, want, len(lists))
	for i, list := range lists {
		got, err := lmServersParse(list)
		require.NoError(t, err, list)
		var parts []string
		for _, s := range got {
			parts = append(parts, fmt.Sprintf("[%s]:%d weight %d", s.Host, s.Port, s.Weight))
		}
		require.Equalf(t, want[i+1], strings.Join(parts, ", "), "memcached_servers_parse(%q)", list)
	}
}
