package compat

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/pool"
)

// presetConfig builds a preset from a committed configuration.
func presetConfig(t testing.TB, system, file string) pool.Pool {
	config, err := os.ReadFile(filepath.Join(vectorDir, system, file))
	require.NoError(t, err)
	p, err := presetOf(t, system).New(config, "")
	require.NoError(t, err)
	return p
}

// One configuration of each kind per preset: the ones the benchmarks and the allocation check
// use.
var presetCases = []struct{ system, file string }{
	{"twemproxy", "ketama-md5-10.yml"},
	{"twemproxy", "ketama-fnv1a_64-10.yml"},
	{"twemproxy", "modula-fnv1a_64-10.yml"},
	{"twemproxy", "ketama-fnv1a_64-5-tag-colons.yml"},
	{"libmemcached", "weighted-md5-10.conf"},
	{"libmemcached", "consistent-default-10.conf"},
	{"libmemcached", "modula-default-10.conf"},
	{"libmemcached", "namespace-md5-5.conf"},
	{"spymemcached", "ketama-ketama-spy-10.conf"},
	{"spymemcached", "ketama-native-spy-10-11211-unordered.conf"},
	{"spymemcached", "arraymod-native-10.conf"},
	{"hashring", "list-10-unordered.json"},
	{"nginx", "hash-10.conf"},
	{"nginx", "hash-down-weights.conf"},
	{"nginx", "chash-10.conf"},
	{"haproxy", "map-default-10.cfg"},
	{"haproxy", "consistent-default-10.cfg"},
	{"goredis", "ring-10-shards-unordered.json"},
	{"jedis", "unnamed-10.json"},
	{"jedis", "unnamed-10-md5.json"},
	{"jedis", "named-3-tag-default.json"},
	{"grpc", "weights-1-2-3-4.json"},
	{"pymemcache", "hash-10.json"},
	{"uhashring", "md5-10.json"},
	{"uhashring", "ketama-10-weights.json"},
	{"python-memcache", "modula-10-weights-mixed.json"},
	{"redis-shard", "crc32-10.json"},
	{"redis-shard", "md5-10.json"},
}

func TestPresetsAllocateNothing(t *testing.T) {
	for _, c := range presetCases {
		t.Run(c.file, func(t *testing.T) { checkZeroAllocs(t, presetConfig(t, c.system, c.file)) })
	}
}

func TestPresetsList(t *testing.T) {
	var systems []string
	for _, p := range Presets() {
		require.NotEmpty(t, p.Doc, p.System)
		require.NotNil(t, p.New, p.System)
		systems = append(systems, p.System)
	}
	for _, s := range []string{"twemproxy", "libmemcached", "spymemcached", "hashring", "nginx", "haproxy", "goredis", "jedis",
		"pymemcache", "uhashring", "python-memcache", "redis-shard"} {
		require.Contains(t, systems, s)
	}
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(systems))), len(systems), "a system listed twice")
}

// shard.NewJedisRing(n) is Jedis's unnamed MD5 ring of n shards; the jedis preset of n unnamed
// shards with MD5 must agree with it on every key, shard i being the i-th shard's address.
func TestNewJedisRingAgreesWithPreset(t *testing.T) {
	ks := keys(t)
	for _, n := range []int{1, 2, 3, 10, 50} {
		c := JedisConfig{Hashing: "MD5"}
		for i := range n {
			c.Shards = append(c.Shards, JedisShard{Host: "10.0.0.1", Port: 7000 + i, Weight: 1})
		}
		p, err := NewJedis(c)
		require.NoError(t, err)
		r, err := shard.NewJedisRing(n)
		require.NoError(t, err)
		for _, k := range ks {
			require.Equalf(t, "10.0.0.1:"+strconv.Itoa(7000+r.Locate(k)), p.Locate(k), "%d shards, key %q", n, k)
		}
	}
}

// Remove keeps every preset's promise: under nginx's hash the removed server's slots become
// holes and its keys go where AppendN sent them second; the rings move only its keys; HAProxy
// map-based rebuilds its table.
func TestPresetRemove(t *testing.T) {
	ks := keys(t)
	for _, c := range []struct {
		system, file, victim string
		nextOnRemove         bool // the new owner is AppendN's second
		minimal              bool // only the victim's keys move
	}{
		{"nginx", "hash-5.conf", "127.0.0.1:31003", true, true},
		{"nginx", "chash-5.conf", "127.0.0.1:31003", true, true},
		{"haproxy", "consistent-default-5.cfg", "s3", false, true},
		{"haproxy", "map-default-5.cfg", "s3", false, false},
		{"goredis", "ring-5-numeric-names.json", "3", true, true},
		{"jedis", "unnamed-5.json", "10.0.0.3:6379", true, true},
		{"jedis", "named-5-weighted.json", "w2", true, true},
		{"pymemcache", "hash-5.json", "127.0.0.1:21203", true, true},
		{"uhashring", "md5-5-names.json", "cache-c", true, true},
		{"uhashring", "ketama-5.json", "127.0.0.1:21205", false, false},
		{"python-memcache", "modula-5.json", "127.0.0.1:21205", false, false},
		{"redis-shard", "crc32-5.json", "node3", false, true},
	} {
		p := presetConfig(t, c.system, c.file)
		before := owners(p, ks)
		second := make([]string, len(ks))
		for i, k := range ks {
			second[i] = p.AppendN(nil, k, 2)[1]
		}
		require.NoError(t, p.Remove(c.victim), c.file)
		moved := 0
		for i, k := range ks {
			after := p.Locate(k)
			require.NotEqual(t, c.victim, after)
			if after == before[i] {
				continue
			}
			moved++
			if c.minimal {
				require.Equalf(t, c.victim, before[i], "%s: key %q moved from %q", c.file, k, before[i])
			}
			if c.nextOnRemove {
				require.Equalf(t, second[i], after, "%s: key %q", c.file, k)
			}
		}
		t.Logf("%s: Remove(%s) moved %d of %d keys", c.file, c.victim, moved, len(ks))
		// Add brings it back in place.
		require.NoError(t, p.Add(pool.Node{Name: c.victim, Weight: 1}), c.file)
		if c.file != "named-5-weighted.json" { // its weight was 2, not 1
			require.Equalf(t, before, owners(p, ks), "%s: Remove then Add", c.file)
		}
	}
}

// Marking a server down in the configuration and removing it from the pool are the same.
func TestNginxDownIsRemove(t *testing.T) {
	ks := keys(t)
	for _, method := range []string{"hash", "chash"} {
		down := presetConfig(t, "nginx", method+"-down.conf")
		full := presetConfig(t, "nginx", method+"-5.conf")
		require.NoError(t, full.Remove("127.0.0.1:31003"))
		require.Equal(t, owners(down, ks), owners(full, ks), method)
	}
}

// The empty key is hashed like any other: nginx round-robins it, so no answer is nginx's; this
// pins the documented one.
func TestNginxEmptyKey(t *testing.T) {
	require.Equal(t, "127.0.0.1:31001", presetConfig(t, "nginx", "hash-5.conf").Locate(""), "hash: slot 0")
	p := presetConfig(t, "nginx", "chash-5.conf")
	require.Equal(t, p.AppendN(nil, "", 1)[0], p.Locate(""))
}

// A server added in code goes after the section's servers, numbered after them; one that the
// section has comes back with its id.
func TestHAProxyAddNumbersAfterTheSection(t *testing.T) {
	b, err := ParseHAProxy([]byte("backend b\n balance uri\n hash-type consistent\n server a x:1 id 5\n server b x:2\n server c x:3 disabled\n"), "")
	require.NoError(t, err)
	p, err := NewHAProxy(b)
	require.NoError(t, err)
	require.NoError(t, p.Add(pool.Node{Name: "d"}))
	// Ids a=5, b=1, c=2 (disabled), then d=3: as if d's line were written last.
	b2, err := ParseHAProxy([]byte("backend b\n balance uri\n hash-type consistent\n server a x:1 id 5\n server b x:2\n server c x:3 disabled\n server d x:4\n"), "")
	require.NoError(t, err)
	q, err := NewHAProxy(b2)
	require.NoError(t, err)
	require.Equal(t, owners(q, keys(t)), owners(p, keys(t)))
	require.NoError(t, p.Add(pool.Node{Name: "c"}))
	b2.Servers[2].Disabled = false
	q, err = NewHAProxy(b2)
	require.NoError(t, err)
	require.Equal(t, owners(q, keys(t)), owners(p, keys(t)))
}

func owners(p pool.Pool, ks []string) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = p.Locate(k)
	}
	return out
}

// fuzzPreset builds a preset from arbitrary text: it must refuse with a short ConfigError
// wrapping ErrConfig, or give a pool whose lookups name members, in memory proportional to
// the text (and the pool's table).
func fuzzPreset(f *testing.F, system, ext string) {
	fuzzBuild(f, system, ext, presetOf(f, system).New)
}

func fuzzBuild(f *testing.F, system, ext string, build func([]byte, string) (pool.Pool, error)) {
	placed, refused := configFiles(f, system, ext)
	for _, path := range append(placed, refused...) {
		b, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		var pl pool.Pool
		var err error
		got := allocated(func() { pl, err = build(config, "") })
		// Memory in proportion to the text, besides the pool's own table, which its limits
		// bound: at most ring.MaxPoints points of 16 bytes, and their index.
		if budget := uint64(64*len(config) + 160<<20); got > budget {
			t.Fatalf("%d bytes of text: %d bytes allocated, over %d", len(config), got, budget)
		}
		if err != nil {
			var ce *ConfigError
			if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is no ConfigError wrapping ErrConfig", err, err)
			}
			if len(err.Error()) > maxErrorLen {
				t.Fatalf("an error of %d bytes, over %d: %.200s", len(err.Error()), maxErrorLen, err)
			}
			return
		}
		members := map[string]bool{}
		for _, n := range pl.Nodes() {
			members[n.Name] = true
		}
		for _, k := range []string{"", "a", "{x}y", "user:1"} {
			if o := pl.Locate(k); !members[o] {
				t.Fatalf("Locate(%q) = %q, not a member of %v", k, o, pl.Nodes())
			}
		}
	})
}

// The nginx fuzz target asks no resolver: a name NginxResolve does not know is one address.
func FuzzNginx(f *testing.F) {
	resolve := func(host string) (int, error) {
		if _, known := nginxKnownHost(host); known {
			return NginxResolve(host)
		}
		return 1, nil
	}
	fuzzBuild(f, "nginx", "conf", func(config []byte, name string) (pool.Pool, error) {
		u, err := ParseNginx(config, name, resolve)
		if err != nil {
			return nil, err
		}
		return NewNginx(u)
	})
}

func FuzzHAProxy(f *testing.F) { fuzzPreset(f, "haproxy", "cfg") }
func FuzzGoRedis(f *testing.F) { fuzzPreset(f, "goredis", "json") }
func FuzzJedis(f *testing.F)   { fuzzPreset(f, "jedis", "json") }

func FuzzPymemcache(f *testing.F)     { fuzzPreset(f, "pymemcache", "json") }
func FuzzUhashring(f *testing.F)      { fuzzPreset(f, "uhashring", "json") }
func FuzzPythonMemcache(f *testing.F) { fuzzPreset(f, "python-memcache", "json") }
func FuzzRedisShard(f *testing.F)     { fuzzPreset(f, "redis-shard", "json") }

var sink int

// BenchmarkLocate times Locate through every preset next to the generic engines with their
// default options, on the same keys, in one run.
func BenchmarkLocate(b *testing.B) {
	ks := keys(b)
	ks = ks[:1024]
	run := func(name string, p pool.Pool) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				s += len(p.Locate(ks[i&1023]))
			}
			sink = s
		})
	}
	nodes := make([]pool.Node, 10)
	for i := range nodes {
		nodes[i] = pool.Node{Name: fmt.Sprintf("127.0.0.1:%d", 31001+i)}
	}
	ring, err := pool.NewRing(nodes, pool.RingOptions{})
	require.NoError(b, err)
	run("pool=ring/nodes=10", ring)
	rdv, err := pool.NewRendezvous(nodes, pool.RendezvousOptions{})
	require.NoError(b, err)
	run("pool=rendezvous/nodes=10", rdv)
	mod, err := pool.NewModula(nodes, pool.ModulaOptions{})
	require.NoError(b, err)
	run("pool=modula/nodes=10", mod)
	for _, c := range presetCases {
		run("preset="+c.system+"/config="+c.file, presetConfig(b, c.system, c.file))
	}
}

// A change that would make more points or slots than a pool holds fails with pool.ErrLimit and
// leaves the pool as it was; so does a configuration, at the line that crosses the limit.
func TestPresetLimits(t *testing.T) {
	ks := keys(t)[:200]
	for _, c := range []struct{ system, file, node string }{
		{"nginx", "chash-10.conf", "127.0.0.1:31001"},
		{"jedis", "unnamed-10.json", "10.0.0.1:6379"},
	} {
		p := presetConfig(t, c.system, c.file)
		before, members := owners(p, ks), p.Nodes()
		require.ErrorIsf(t, p.SetWeight(c.node, pool.MaxWeight), pool.ErrLimit, "%s", c.file) // 160 points per unit
		require.Equal(t, before, owners(p, ks), c.file)
		require.Equal(t, members, p.Nodes(), c.file)
	}
	for _, c := range []struct {
		method        string
		count, weight int
	}{{"hash $key", 65, pool.MaxWeight}, {"hash $key consistent", 2, 20000}} {
		var b strings.Builder
		fmt.Fprintf(&b, "upstream u {\n  %s;\n", c.method)
		for i := range c.count {
			fmt.Fprintf(&b, "  server 127.0.0.1:%d weight=%d;\n", 1000+i, c.weight)
		}
		b.WriteString("}\n")
		_, err := presetOf(t, "nginx").New([]byte(b.String()), "")
		require.ErrorIs(t, err, pool.ErrLimit)
		require.ErrorIs(t, err, ErrConfig)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce))
		require.Equal(t, 2+c.count, ce.Line, "%v", err)
	}
}

// RingOf gives the Ring of every preset built on one and nil for the others; the Ring
// places every key as the pool does, by its arcs too; a memcached-family Ring refuses
// changes of its own, which its server list would not know of, and follows the pool's.
func TestRingOf(t *testing.T) {
	ks := keys(t)[:500]
	noRing := map[string]bool{"modula-fnv1a_64-10.yml": true, "modula-default-10.conf": true,
		"arraymod-native-10.conf": true, "hash-10.conf": true, "hash-down-weights.conf": true, "map-default-10.cfg": true,
		"ring-10-shards-unordered.json": true, "hash-10.json": true, "modula-10-weights-mixed.json": true}
	for _, c := range presetCases {
		p := presetConfig(t, c.system, c.file)
		r := RingOf(p)
		if noRing[c.file] {
			require.Nil(t, r, c.file)
			continue
		}
		require.NotNil(t, r, c.file)
		checkRingAgrees(t, c.file, p, r, ks)
		if _, wrapped := p.(*ringPool); !wrapped {
			continue
		}
		victim := p.Nodes()[1].Name
		err := r.Remove(victim)
		require.ErrorIs(t, err, pool.ErrNode, "%s: Remove on the Ring itself", c.file)
		err = r.Add(pool.Node{Name: "10.9.9.9:11211", Weight: 1})
		require.ErrorIs(t, err, pool.ErrNode, "%s: Add on the Ring itself", c.file)
		checkRingAgrees(t, c.file, p, r, ks)
		require.NoError(t, p.Remove(victim), c.file)
		require.Equal(t, r, RingOf(p), c.file)
		checkRingAgrees(t, c.file, p, r, ks)
	}
	require.Nil(t, RingOf(nil))
}

// checkRingAgrees checks that r places every key as p does, by Locate and by the arc that
// holds its position.
func checkRingAgrees(t *testing.T, file string, p pool.Pool, r *pool.Ring, ks []string) {
	t.Helper()
	var arcs []pool.Arc
	for a := range r.Arcs() {
		arcs = append(arcs, a)
	}
	for _, k := range ks {
		want := p.Locate(k)
		require.Equal(t, want, r.Locate(k), "%s: key %q", file, k)
		pos := r.Position(k)
		i, _ := slices.BinarySearchFunc(arcs, pos, func(a pool.Arc, pos uint64) int { return cmp.Compare(a.Last, pos) })
		require.Equal(t, want, arcs[i].Node, "%s: key %q at %#016x", file, k, pos)
	}
}
