package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

// benchConfigs are the configurations BenchmarkPresetLocate times: ten servers each,
// through every kind of placement the presets have.
var benchConfigs = []struct{ system, file string }{
	{"twemproxy", "twemproxy/ketama-md5-10.yml"},
	{"twemproxy", "twemproxy/ketama-fnv1a_64-10.yml"},
	{"twemproxy", "twemproxy/modula-fnv1a_64-10.yml"},
	{"libmemcached", "libmemcached/weighted-md5-10.conf"},
	{"libmemcached", "libmemcached/consistent-default-10.conf"},
	{"libmemcached", "libmemcached/modula-default-10.conf"},
	{"spymemcached", "spymemcached/ketama-ketama-spy-10.conf"},
	{"spymemcached", "spymemcached/ketama-native-spy-10-11211-unordered.conf"},
	{"spymemcached", "spymemcached/arraymod-native-10.conf"},
	{"hashring", "hashring/list-10-unordered.json"},
}

var benchSink int

// BenchmarkPresetLocate times Locate through each preset and, in the same run, through the
// generic engines over ten nodes with their default options (pool.Ring: XXH64, 160 points
// per node; pool.Modula: XXH64), and the bare key hashes the presets use:
//
//	go test ./compat -run '^$' -bench PresetLocate
func BenchmarkPresetLocate(b *testing.B) {
	keys := measure.Keys(1, 1<<14, 16)
	run := func(name string, p pool.Pool) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				s += len(p.Locate(keys[i&(len(keys)-1)]))
			}
			benchSink = s
		})
	}
	for _, c := range benchConfigs {
		config, err := os.ReadFile(filepath.Join(vectorRoot, c.file))
		if err != nil {
			b.Fatal(err)
		}
		p, err := presetOf(b, c.system).New(config, "")
		if err != nil {
			b.Fatal(err)
		}
		run(fmt.Sprintf("preset=%s/config=%s", c.system, filepath.Base(c.file)), p)
	}
	nodes := make([]pool.Node, 10)
	for i := range nodes {
		nodes[i] = pool.Node{Name: fmt.Sprintf("127.0.0.1:%d", 24101+i)}
	}
	ring, err := pool.NewRing(nodes, pool.RingOptions{})
	if err != nil {
		b.Fatal(err)
	}
	run("engine=ring", ring)
	modula, err := pool.NewModula(nodes, pool.ModulaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	run("engine=modula", modula)
	// The bare key hashes, which cost most of a preset's lookup: a preset adds to the
	// engine its own hash, in place of XXH64.
	for _, h := range []struct {
		name string
		hash func(string) uint32
	}{{"xxh64", func(k string) uint32 { return uint32(keyhash.XXH64(k)) }}, {"md5", keyhash.MD5.Sum32},
		{"fnv1a_64", keyhash.FNV64a.Sum32}, {"one_at_a_time", keyhash.OneAtATime.Sum32}, {"java_hashcode", keyhash.JavaHashCode}} {
		b.Run("keyhash="+h.name, func(b *testing.B) {
			b.ReportAllocs()
			var s uint32
			for i := 0; b.Loop(); i++ {
				s += h.hash(keys[i&(len(keys)-1)])
			}
			benchSink = int(s)
		})
	}
}
