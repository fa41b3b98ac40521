package pool

import (
	"fmt"
	"runtime"
	"testing"
)

// benchPools are the pools the benchmarks compare, by name, each built from nodes.
var benchPools = []struct {
	name string
	new  func(nodes []Node) (Pool, error)
}{
	{"ring", newRingPool(RingOptions{})},
	{"rendezvous", newRendezvousPool(RendezvousOptions{})},
	{"maglev", maglevContract.newPool},
	{"memento", mementoContract.newPool},
	{"multiprobe", multiProbeContract.newPool},
	{"modula", newModulaPool(ModulaOptions{})},
}

// benchNodes returns n nodes named like servers, weights 1.
func benchNodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprintf("10.%d.%d.%d:6379", i>>16, i>>8&255, i&255)}
	}
	return nodes
}

// benchKeys returns 16384 random 16-byte keys (testKeys without its adversarial ones).
func benchKeys() []string { return testKeys(1<<14 + 6)[6:] }

var poolSink int

func BenchmarkPoolLocate(b *testing.B) {
	keys := benchKeys()
	for _, size := range []int{10, 100, 1000, 10000} {
		for _, c := range benchPools {
			p, err := c.new(benchNodes(size))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("pool=%s/nodes=%d", c.name, size), func(b *testing.B) {
				b.ReportAllocs()
				s := 0
				for i := 0; b.Loop(); i++ {
					s += len(p.Locate(keys[i&(len(keys)-1)]))
				}
				poolSink = s
			})
		}
	}
}

func BenchmarkPoolAppendN(b *testing.B) {
	keys := benchKeys()
	for _, size := range []int{10, 100, 1000, 10000} {
		for _, c := range benchPools {
			p, err := c.new(benchNodes(size))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("pool=%s/nodes=%d/n=3", c.name, size), func(b *testing.B) {
				b.ReportAllocs()
				dst := make([]string, 0, 3)
				s := 0
				for i := 0; b.Loop(); i++ {
					dst = p.AppendN(dst[:0], keys[i&(len(keys)-1)], 3)
					s += len(dst[2])
				}
				poolSink = s
			})
		}
	}
}

// BenchmarkPoolBuild times a new pool of 10 to 10000 nodes (160 points per node for the
// ring) and reports the heap it keeps per node.
func BenchmarkPoolBuild(b *testing.B) {
	for _, size := range []int{10, 100, 1000, 10000} {
		nodes := benchNodes(size)
		for _, c := range benchPools {
			b.Run(fmt.Sprintf("pool=%s/nodes=%d", c.name, size), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.new(nodes); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(keptBytes(func() any { p, _ := c.new(nodes); return p }))/float64(size), "B/node")
			})
		}
	}
}

// keptBytes returns how much the heap grows by keeping what build returns.
func keptBytes(build func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return after.HeapAlloc - before.HeapAlloc
}

// BenchmarkPoolLocateBatch compares LocateBatch with a loop of Locate on the same 4096 keys
// (ns/op is per key in both).
func BenchmarkPoolLocateBatch(b *testing.B) {
	keys := benchKeys()[:1<<12]
	dst := make([]string, len(keys))
	for _, size := range []int{10, 1000, 10000} {
		for _, c := range benchPools {
			p, err := c.new(benchNodes(size))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("pool=%s/nodes=%d/call=loop", c.name, size), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					dst[i&(len(keys)-1)] = p.Locate(keys[i&(len(keys)-1)])
				}
			})
			b.Run(fmt.Sprintf("pool=%s/nodes=%d/call=batch", c.name, size), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if i&(len(keys)-1) == 0 {
						LocateBatch(p, keys, dst)
					}
				}
			})
		}
	}
}
