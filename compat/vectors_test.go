package compat

import (
	"bufio"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

// This file reads the golden vectors of testdata/compat (see its README for the format) and
// checks presets against them.

const vectorRoot = "../testdata/compat"

// vectorKeys returns the key set of every vector file, by index.
func vectorKeys(t testing.TB) []string {
	t.Helper()
	var keys []string
	readLines(t, filepath.Join(vectorRoot, "keys.txt"), func(line string) {
		if strings.HasPrefix(line, "#") {
			return
		}
		if line == "-" {
			keys = append(keys, "")
			return
		}
		b, err := hex.DecodeString(line)
		require.NoError(t, err)
		keys = append(keys, string(b))
	})
	require.Len(t, keys, 2000)
	return keys
}

// vectorFile is one .txt: the servers' names by index, and each carried key's server.
type vectorFile struct {
	names  []string
	owners map[int]int // key index -> server index
}

func readVectorFile(t testing.TB, path string) vectorFile {
	t.Helper()
	v := vectorFile{owners: map[int]int{}}
	readLines(t, path, func(line string) {
		if rest, ok := strings.CutPrefix(line, "# servers: "); ok {
			v.names = parseServersLine(t, rest)
			return
		}
		if strings.HasPrefix(line, "#") {
			return
		}
		k, s, ok := strings.Cut(line, " ")
		require.Truef(t, ok, "%s: %q", path, line)
		ki, err1 := strconv.Atoi(k)
		si, err2 := strconv.Atoi(s)
		require.NoError(t, errors.Join(err1, err2), "%s: %q", path, line)
		v.owners[ki] = si
	})
	require.NotEmptyf(t, v.names, "%s has no servers: line", path)
	return v
}

// parseServersLine reads "0=name 1=name ..."; a name may hold spaces, so each entry runs
// to the next " <index>=".
func parseServersLine(t testing.TB, s string) []string {
	var names []string
	for i := 0; ; i++ {
		prefix := strconv.Itoa(i) + "="
		require.Truef(t, strings.HasPrefix(s, prefix), "servers line: want %q at %q", prefix, s)
		s = s[len(prefix):]
		next := " " + strconv.Itoa(i+1) + "="
		end := strings.Index(s, next)
		if end < 0 {
			return append(names, s)
		}
		names = append(names, s[:end])
		s = s[end+1:]
	}
}

func readLines(t testing.TB, path string, f func(string)) {
	t.Helper()
	file, err := os.Open(path)
	require.NoError(t, err)
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := strings.TrimSuffix(sc.Text(), "\r"); line != "" {
			f(line)
		}
	}
	require.NoError(t, sc.Err())
}

// presetOf returns the preset of system.
func presetOf(t testing.TB, system string) Preset {
	for _, p := range Presets() {
		if p.System == system {
			return p
		}
	}
	t.Fatalf("no preset %q", system)
	return Preset{}
}

// checkVectors builds the preset of every configuration of system (ext, refused-* and the
// names skip says aside) and requires every carried key on the recorded server. It returns
// the numbers of files and of placements checked.
func checkVectors(t *testing.T, system, ext string, skip func(name string) bool) (files, placements int) {
	return checkVectorsIn(t, system, system, ext, skip)
}

// checkVectorsIn is checkVectors over the files of dir (under testdata/compat).
func checkVectorsIn(t *testing.T, system, dir, ext string, skip func(name string) bool) (files, placements int) {
	keys := vectorKeys(t)
	preset := presetOf(t, system)
	paths, err := filepath.Glob(filepath.Join(vectorRoot, dir, "*."+ext))
	require.NoError(t, err)
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), "."+ext)
		if strings.HasPrefix(name, "refused-") || skip != nil && skip(name) {
			continue
		}
		txt := strings.TrimSuffix(path, ext) + "txt"
		if _, err := os.Stat(txt); err != nil {
			continue
		}
		config, err := os.ReadFile(path)
		require.NoError(t, err)
		p, err := preset.New(config, "")
		require.NoErrorf(t, err, "%s", path)
		v := readVectorFile(t, txt)
		got := 0
		for k, s := range v.owners {
			if owner := p.Locate(keys[k]); owner != v.names[s] {
				t.Errorf("%s: key %d (%.40q): Locate = %q, want %q (server %d)", name, k, keys[k], owner, v.names[s], s)
				continue
			}
			got++
		}
		require.Equalf(t, len(v.owners), got, "%s: %d of %d placements", name, got, len(v.owners))
		files++
		placements += got
	}
	t.Logf("%s: %d of %d placements reproduced, %d configuration files", dir, placements, placements, files)
	return files, placements
}

// checkRefused requires every refused-* configuration of system to fail with ErrConfig and a
// message that names the system, and the line where the text has one.
func checkRefused(t *testing.T, system, ext string) int {
	return checkRefusedIn(t, system, system, ext)
}

// checkRefusedIn is checkRefused over the files of dir (under testdata/compat).
func checkRefusedIn(t *testing.T, system, dir, ext string) int {
	preset := presetOf(t, system)
	paths, err := filepath.Glob(filepath.Join(vectorRoot, dir, "refused-*."+ext))
	require.NoError(t, err)
	for _, path := range paths {
		config, err := os.ReadFile(path)
		require.NoError(t, err)
		_, err = preset.New(config, "")
		require.ErrorIsf(t, err, ErrConfig, "%s must be refused", path)
		require.Truef(t, strings.HasPrefix(err.Error(), "compat: "+system+": "), "%s: %v", path, err)
		t.Logf("%s: %v", filepath.Base(path), err)
	}
	return len(paths)
}

// locateAll returns Locate of every key.
func locateAll(p pool.Pool, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p.Locate(k)
	}
	return out
}
