package compat

import (
	"bufio"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

// This file reads the golden vectors of testdata/compat (format in its README) and checks a
// preset against them.

const vectorDir = "../testdata/compat"

var compatKeys []string

// keys returns the one key set of every vector file, by index.
func keys(t testing.TB) []string {
	if compatKeys != nil {
		return compatKeys
	}
	f, err := os.Open(filepath.Join(vectorDir, "keys.txt"))
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "-" {
			out = append(out, "")
			continue
		}
		b, err := hex.DecodeString(line)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	require.NoError(t, sc.Err())
	compatKeys = out
	return out
}

// vectors is one vector file: the server names by index and the placements.
type vectors struct {
	servers []string
	keys    []int // key index
	owners  []int // server index
}

func readVectors(t testing.TB, path string) vectors {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var v vectors
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# servers: "); ok {
			for _, field := range strings.Split(rest, " ") {
				i, name, ok := strings.Cut(field, "=")
				require.True(t, ok, "%s: servers field %q", path, field)
				require.Equal(t, strconv.Itoa(len(v.servers)), i, "%s: servers out of order", path)
				v.servers = append(v.servers, name)
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, s, ok := strings.Cut(line, " ")
		require.True(t, ok, "%s: line %q", path, line)
		ki, err := strconv.Atoi(k)
		require.NoError(t, err)
		si, err := strconv.Atoi(s)
		require.NoError(t, err)
		v.keys = append(v.keys, ki)
		v.owners = append(v.owners, si)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, v.servers, "%s: no servers line", path)
	require.NotEmpty(t, v.keys, "%s: no vectors", path)
	return v
}

// configFiles returns the configurations of a system with the extension ext, split into
// those with vectors and the refused ones.
func configFiles(t testing.TB, system, ext string) (placed, refused []string) {
	all, err := filepath.Glob(filepath.Join(vectorDir, system, "*."+ext))
	require.NoError(t, err)
	for _, f := range all {
		if strings.HasPrefix(filepath.Base(f), "refused-") {
			refused = append(refused, f)
		} else {
			placed = append(placed, f)
		}
	}
	require.NotEmpty(t, placed)
	return placed, refused
}

// checkVectors builds every placed configuration of a system through its preset and requires
// every vector; it returns how many vectors it checked.
func checkVectors(t *testing.T, system, ext string) {
	p := presetOf(t, system)
	placed, _ := configFiles(t, system, ext)
	ks := keys(t)
	total, files := 0, 0
	for _, path := range placed {
		config, err := os.ReadFile(path)
		require.NoError(t, err)
		pl, err := p.New(config, "")
		require.NoErrorf(t, err, "%s", path)
		v := readVectors(t, strings.TrimSuffix(path, "."+ext)+".txt")
		wrong := 0
		for i, k := range v.keys {
			want := v.servers[v.owners[i]]
			if got := pl.Locate(ks[k]); got != want {
				if wrong < 5 {
					t.Errorf("%s: key %d %q: Locate = %q, want %q", filepath.Base(path), k, ks[k], got, want)
				}
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("%s: %d of %d vectors wrong", filepath.Base(path), wrong, len(v.keys))
		}
		total += len(v.keys)
		files++
	}
	t.Logf("%s: %d vectors of %d configurations checked", system, total, files)
	require.Equal(t, p.Checked, total, "%s: the preset's Checked", system)
}

// lineOf finds the line number in the system's own message at the top or the end of a
// refused configuration, or 0.
var lineInMessage = regexp.MustCompile(`\.(?:conf|cfg):(\d+)`)

// checkRefused requires every refused configuration of a system to fail with a ConfigError
// wrapping ErrConfig, at the line the system named when it named one.
func checkRefused(t *testing.T, system, ext string) {
	p := presetOf(t, system)
	_, refused := configFiles(t, system, ext)
	require.NotEmpty(t, refused)
	for _, path := range refused {
		config, err := os.ReadFile(path)
		require.NoError(t, err)
		_, err = p.New(config, "")
		require.ErrorIsf(t, err, ErrConfig, "%s was accepted", path)
		var ce *ConfigError
		require.Truef(t, errors.As(err, &ce), "%s: %T is no *ConfigError", path, err)
		require.Truef(t, strings.HasPrefix(err.Error(), "compat: "+system+": "), "%s: %q", path, err)
		require.Positivef(t, ce.Line, "%s: %v names no line", path, err)
		if m := lineInMessage.FindSubmatch(config); m != nil {
			want, _ := strconv.Atoi(string(m[1]))
			require.Equalf(t, want, ce.Line, "%s: %v: the system names line %d", filepath.Base(path), err, want)
		}
		t.Logf("%s: %v", filepath.Base(path), err)
	}
}

func presetOf(t testing.TB, system string) Preset {
	for _, p := range Presets() {
		if p.System == system {
			return p
		}
	}
	t.Fatalf("no preset %q", system)
	return Preset{}
}

// checkZeroAllocs requires Locate and AppendN with room to allocate nothing.
func checkZeroAllocs(t *testing.T, p pool.Pool) {
	dst := make([]string, 0, 3)
	for _, k := range []string{"", "user:1000", "{tag}rest", strings.Repeat("x", 1000)} {
		require.Zerof(t, testing.AllocsPerRun(100, func() { _ = p.Locate(k) }), "Locate(%.20q) allocates", k)
		require.Zerof(t, testing.AllocsPerRun(100, func() { dst = p.AppendN(dst[:0], k, 3) }), "AppendN(%.20q, 3) allocates", k)
	}
}
