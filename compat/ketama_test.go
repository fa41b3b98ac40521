package compat

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

// The tests every ketama-family preset (twemproxy, libmemcached, spymemcached, hashring)
// shares: vectors in any directory, refusals, and the Pool interface over every
// configuration of the vectors.

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

// checkVectorsIn builds the preset of system from every configuration of dir (under
// testdata/compat) with extension ext, but refused-* and those skip names, and requires every
// carried key on the recorded server. It returns the numbers of files and of placements. (It
// reads server names that hold spaces, which readVectors does not.)
func checkVectorsIn(t *testing.T, system, dir, ext string, skip func(name string) bool) (files, placements int) {
	keys := keys(t)
	preset := presetOf(t, system)
	paths, err := filepath.Glob(filepath.Join(vectorDir, dir, "*."+ext))
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

// checkRefusedIn requires every refused-* configuration of dir (under testdata/compat) to
// fail with a ConfigError wrapping ErrConfig that names the system and a line; it returns
// how many there are.
func checkRefusedIn(t *testing.T, system, dir, ext string) int {
	preset := presetOf(t, system)
	paths, err := filepath.Glob(filepath.Join(vectorDir, dir, "refused-*."+ext))
	require.NoError(t, err)
	for _, path := range paths {
		config, err := os.ReadFile(path)
		require.NoError(t, err)
		_, err = preset.New(config, "")
		require.ErrorIsf(t, err, ErrConfig, "%s must be refused", path)
		var ce *ConfigError
		require.Truef(t, errors.As(err, &ce), "%s: %T is no *ConfigError", path, err)
		require.Positivef(t, ce.Line, "%s: %v names no line", path, err)
		require.Truef(t, strings.HasPrefix(err.Error(), "compat: "+system+": "), "%s: %v", path, err)
		t.Logf("%s: %v", filepath.Base(path), err)
	}
	return len(paths)
}

func TestPresetsRefuseGarbage(t *testing.T) {
	for _, p := range Presets() {
		_, err := p.New([]byte("\x00\xff garbage {"), "")
		require.ErrorIsf(t, err, ErrConfig, "%s: garbage", p.System)
		require.Truef(t, strings.HasPrefix(err.Error(), "compat: "+p.System+": "), "%s: %v", p.System, err)
	}
}

// presetConfigs returns every configuration of the vector sets that a preset accepts, by
// system, with the preset.
func presetConfigs(t testing.TB) map[string][][]byte {
	out := map[string][][]byte{}
	for system, glob := range map[string]string{
		"twemproxy": "twemproxy/*.yml", "libmemcached": "libmemcached/*.conf", "spymemcached": "spymemcached/*.conf",
		"hashring": "hashring/*.json",
	} {
		paths, err := filepath.Glob(filepath.Join(vectorDir, glob))
		require.NoError(t, err)
		csl, err := filepath.Glob(filepath.Join(vectorDir, "libmemcached/csl/*.csl"))
		require.NoError(t, err)
		if system == "libmemcached" {
			paths = append(paths, csl...)
		}
		for _, path := range paths {
			if strings.HasPrefix(filepath.Base(path), "refused-") {
				continue
			}
			config, err := os.ReadFile(path)
			require.NoError(t, err)
			out[system] = append(out[system], config)
		}
	}
	return out
}

// Locate and AppendN allocate nothing through any preset, on every configuration of the
// vectors, with the empty key, a long key and UTF-8.
func TestPresetAllocs(t *testing.T) {
	keys := []string{"", "user:1000", strings.Repeat("k\xc3\xa9", 200), "{tag}rest"}
	for system, configs := range presetConfigs(t) {
		preset := presetOf(t, system)
		for _, config := range configs {
			p, err := preset.New(config, "")
			if err != nil {
				continue // accepted-* configurations of spymemcached are checked elsewhere
			}
			dst := make([]string, 0, 3)
			for _, k := range keys {
				require.Zerof(t, testing.AllocsPerRun(20, func() { _ = p.Locate(k) }), "%s: Locate(%.20q) allocates\n%s", system, k, config)
				require.Zerof(t, testing.AllocsPerRun(20, func() { dst = p.AppendN(dst[:0], k, 3) }), "%s: AppendN(%.20q) allocates", system, k)
			}
		}
	}
}

// A change through the Pool places keys as the system does with the configuration changed
// that way: each case gives a base configuration, a change, and the text with the change
// written in.
func TestPresetChanges(t *testing.T) {
	keys := keys(t)
	twem := func(dist, servers string) string {
		return "alpha:\n  listen: 127.0.0.1:22121\n  hash: fnv1a_64\n  distribution: " + dist + "\n  servers:\n" + servers
	}
	spy := func(extra string) string {
		return "locator=CONSISTENT\nhash=KETAMA_HASH\n" + extra
	}
	for _, tc := range []struct {
		system, base string
		change       func(p pool.Pool) error
		want         string
	}{
		{"twemproxy", twem("ketama", "   - 10.0.0.1:11211:1\n   - 10.0.0.2:11211:2\n"),
			func(p pool.Pool) error { return p.Add(pool.Node{Name: "10.0.0.3", Weight: 3}) },
			twem("ketama", "   - 10.0.0.1:11211:1\n   - 10.0.0.2:11211:2\n   - 10.0.0.3:11211:3\n")},
		{"twemproxy", twem("ketama", "   - 10.0.0.1:11211:1\n   - 10.0.0.2:11211:2\n   - 10.0.0.3:11211:3\n"),
			func(p pool.Pool) error { return p.Remove("10.0.0.1") },
			twem("ketama", "   - 10.0.0.2:11211:2\n   - 10.0.0.3:11211:3\n")},
		{"twemproxy", twem("modula", "   - 10.0.0.2:11211:1 b\n   - 10.0.0.1:11211:2 a\n"),
			func(p pool.Pool) error { return p.SetWeight("b", 5) },
			twem("modula", "   - 10.0.0.2:11211:5 b\n   - 10.0.0.1:11211:2 a\n")},
		{"libmemcached", "behavior DISTRIBUTION CONSISTENT\nserver 10.0.0.1 11211 0\nserver 10.0.0.2 11212 0\n",
			func(p pool.Pool) error { return p.Add(pool.Node{Name: "10.0.0.3:11213", Weight: 2}) },
			"behavior DISTRIBUTION CONSISTENT\nserver 10.0.0.1 11211 0\nserver 10.0.0.2 11212 0\nserver 10.0.0.3 11213 2\n"},
		{"libmemcached", "behavior DISTRIBUTION CONSISTENT\nserver 10.0.0.1 11211 0\nserver 10.0.0.2 11212 0\nbehavior HASH MD5\n",
			func(p pool.Pool) error { return p.Add(pool.Node{Name: "10.0.0.3:11211"}) }, // rebuilt with the current hash
			"behavior DISTRIBUTION CONSISTENT\nbehavior HASH MD5\nserver 10.0.0.1 11211 0\nserver 10.0.0.2 11212 0\nserver 10.0.0.3 11211 0\n"},
		{"libmemcached", "behavior SORT_HOSTS 1\nbehavior HASH CRC\nserver 10.0.0.5 11211 0\nserver 10.0.0.1 11211 0\n",
			func(p pool.Pool) error { return p.Add(pool.Node{Name: "10.0.0.3:11211"}) },
			"behavior SORT_HOSTS 1\nbehavior HASH CRC\nserver 10.0.0.5 11211 0\nserver 10.0.0.1 11211 0\nserver 10.0.0.3 11211 0\n"},
		{"libmemcached", "behavior KETAMA_WEIGHTED 1\nserver 10.0.0.1 11211 1\nserver 10.0.0.2 11211 2\nserver 10.0.0.3 11211 3\n",
			func(p pool.Pool) error { return p.Remove("10.0.0.2:11211") },
			"behavior KETAMA_WEIGHTED 1\nserver 10.0.0.1 11211 1\nserver 10.0.0.3 11211 3\n"},
		{"spymemcached", spy("servers=10.0.0.1:11211 10.0.0.2:11211\nweights=1 2\n"),
			func(p pool.Pool) error { return p.Add(pool.Node{Name: "10.0.0.3:11211", Weight: 3}) },
			spy("servers=10.0.0.1:11211 10.0.0.2:11211 10.0.0.3:11211\nweights=1 2 3\n")},
		{"spymemcached", spy("servers=localhost:11211 127.0.0.1:11211 10.0.0.2:11211\nweights=1 2 3\n"),
			func(p pool.Pool) error { return p.SetWeight("localhost:11211", 5) }, // one address: both entries
			spy("servers=localhost:11211 127.0.0.1:11211 10.0.0.2:11211\nweights=5 5 3\n")},
		{"spymemcached", "hash=FNV1A_32_HASH\nservers=10.0.0.1:11211 10.0.0.2:11211 10.0.0.1:11211\n",
			func(p pool.Pool) error { return p.Remove("10.0.0.1:11211") },
			"hash=FNV1A_32_HASH\nservers=10.0.0.2:11211\n"},
		{"hashring", `{"servers": {"a:1": 1, "b:2": 2}, "algorithm": null, "options": {}}`,
			func(p pool.Pool) error { return p.Add(pool.Node{Name: "c:3", Weight: 3}) },
			`{"servers": {"a:1": 1, "b:2": 2, "c:3": 3}, "algorithm": null, "options": {}}`},
		{"hashring", `{"servers": ["a:1", "b:2", "c:3"], "algorithm": "sha1", "options": {"default port": 2}}`,
			func(p pool.Pool) error { return p.SetWeight("b:2", 4) },
			`{"servers": {"a:1": 1, "b:2": 4, "c:3": 1}, "algorithm": "sha1", "options": {"default port": 2}}`},
	} {
		preset := presetOf(t, tc.system)
		p, err := preset.New([]byte(tc.base), "")
		require.NoError(t, err, tc.base)
		before := owners(p, keys)
		require.NoError(t, tc.change(p), tc.base)
		want, err := preset.New([]byte(tc.want), "")
		require.NoError(t, err, tc.want)
		require.Equalf(t, owners(want, keys), owners(p, keys), "%s: after the change\n%s\nfrom\n%s", tc.system, tc.want, tc.base)
		for _, k := range keys[:200] {
			require.Equal(t, want.AppendN(nil, k, 3), p.AppendN(nil, k, 3))
		}
		byName := func(a, b pool.Node) int { return strings.Compare(a.Name, b.Name) }
		// the same members; Nodes lists them in the order they joined
		require.Equal(t, slices.SortedFunc(slices.Values(want.Nodes()), byName), slices.SortedFunc(slices.Values(p.Nodes()), byName))
		require.NotEqualf(t, before, owners(p, keys), "%s: the change moved no key", tc.system)
	}
}

// Bad input through the Pool is refused with the engine's errors, and changes nothing.
func TestPresetBadChanges(t *testing.T) {
	keys := keys(t)[:500]
	for system, configs := range presetConfigs(t) {
		p, err := presetOf(t, system).New(configs[0], "")
		require.NoError(t, err)
		nodes, before := p.Nodes(), owners(p, keys)
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name
		}
		for _, tc := range []struct {
			err  error
			want error
		}{
			{p.Add(pool.Node{Name: ""}), pool.ErrNode},
			{p.Add(pool.Node{Name: nodes[0].Name}), pool.ErrNode},
			{p.Add(pool.Node{Name: "10.9.9.9:1", Weight: -1}), pool.ErrWeight},
			{p.Add(pool.Node{Name: "10.9.9.9:1"}, pool.Node{Name: "10.9.9.9:1"}), pool.ErrNode},
			{p.Remove("no such node:1"), pool.ErrNode},
			{p.Remove(names...), pool.ErrEmpty},
			{p.SetWeight("no such node:1", 2), pool.ErrNode},
			{p.SetWeight(nodes[0].Name, pool.MaxWeight+1), pool.ErrWeight},
		} {
			require.ErrorIsf(t, tc.err, tc.want, "%s", system)
			require.Truef(t, strings.HasPrefix(tc.err.Error(), "compat: "+system+": "), "%v", tc.err)
			require.Equal(t, nodes, p.Nodes())
			require.Equal(t, before, owners(p, keys))
		}
		// Adding a node and removing it again restores the placement.
		// (Weight 1: a heavier server would turn libmemcached's weighted flag on for good.)
		require.NoError(t, p.Add(pool.Node{Name: "10.9.9.9:11211", Weight: 1}))
		require.NoError(t, p.Remove("10.9.9.9:11211"))
		require.Equalf(t, before, owners(p, keys), "%s: add and remove", system)
	}
}

// Lookups during changes see the placement before or after each change, never a mix.
func TestPresetConcurrentChanges(t *testing.T) {
	keys := keys(t)[:200]
	for system, configs := range presetConfigs(t) {
		p, err := presetOf(t, system).New(configs[len(configs)/2], "")
		require.NoError(t, err)
		extra := pool.Node{Name: "10.9.9.9:11211", Weight: 2}
		a := owners(p, keys)
		require.NoError(t, p.Add(extra))
		b := owners(p, keys)
		require.NoError(t, p.Remove(extra.Name))
		var (
			stop atomic.Bool
			wg   sync.WaitGroup
			bad  atomic.Value
		)
		for g := range 2 {
			wg.Go(func() {
				for i := g; !stop.Load(); i++ {
					j := i % len(keys)
					if got := p.Locate(keys[j]); got != a[j] && got != b[j] {
						bad.Store(fmt.Sprintf("%s: Locate(%q) = %q, want %q or %q", system, keys[j], got, a[j], b[j]))
						return
					}
					runtime.Gosched()
				}
			})
		}
		for range 20 {
			require.NoError(t, p.Add(extra))
			require.NoError(t, p.Remove(extra.Name))
		}
		stop.Store(true)
		wg.Wait()
		if msg := bad.Load(); msg != nil {
			t.Fatal(msg)
		}
	}
}

// A change the system cannot place with is refused as the text would be (here: more modula
// slots than a table holds), with ErrConfig, and changes nothing.
func TestPresetRefusedChanges(t *testing.T) {
	tw, err := presetOf(t, "twemproxy").New([]byte("a:\n  listen: 127.0.0.1:1\n  distribution: modula\n  servers:\n   - 10.0.0.1:1:1\n"), "")
	require.NoError(t, err)
	var many []pool.Node
	for i := range 70 {
		many = append(many, pool.Node{Name: fmt.Sprint("n", i), Weight: pool.MaxWeight})
	}
	err = tw.Add(many...)
	require.ErrorIs(t, err, ErrConfig, "modula slots past the limit")
	require.Regexp(t, "^compat: twemproxy: weights that sum to 4587521 modula slots", err.Error())
	require.Equal(t, []pool.Node{{Name: "10.0.0.1:1", Weight: 1}}, tw.Nodes())
}
