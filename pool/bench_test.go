package pool

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/shardkit/shard/internal/jumphash"
	"github.com/shardkit/shard/internal/keyhash"
)

// Speed of the pools, side by side with the cheapest placement there is, in one run:
//
//	go test ./pool -run '^$' -bench 'XXHashModulo|Maglev|Memento|MultiProbe'
//
// Every lookup goes through the same interface, the baseline's too. op=build reports the
// memory a pool keeps, in B/node, next to the time and the garbage of building it.

var (
	benchSizes = []int{10, 100, 1000, 10_000}
	benchSink  string
	benchDst   = make([]string, 0, 3)
)

// locator is the lookup every benchmark times.
type locator interface{ Locate(key string) string }

// xxhashModulo places a key on node xxhash64(key) % n: the baseline the Maglev and Memento
// lookups are measured against (the issue asks for them within 1.5 times its time).
type xxhashModulo []string

func (m xxhashModulo) Locate(key string) string {
	return m[keyhash.XXH64(key)%uint64(len(m))]
}

func benchLocate(b *testing.B, p locator) {
	keys := benchKeys()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		benchSink = p.Locate(keys[i&(len(keys)-1)])
		i++
	}
}

func BenchmarkXXHashModulo(b *testing.B) {
	for _, n := range benchSizes {
		names := make(xxhashModulo, n)
		for i, node := range benchNodes(n) {
			names[i] = node.Name
		}
		b.Run(fmt.Sprintf("op=locate/nodes=%d", n), func(b *testing.B) { benchLocate(b, names) })
	}
}

// benchVersusModulo times p's Locate and xxhashModulo's over the same nodes in alternating
// batches of keys, so that both see the same load on a shared machine, and reports the
// ratio of their times as x-modulo. One iteration is one batch of each.
func benchVersusModulo(b *testing.B, p locator, nodes []Node) {
	const batch = 256
	keys := benchKeys()
	modulo := make(xxhashModulo, len(nodes))
	for i, n := range nodes {
		modulo[i] = n.Name
	}
	var times [2]time.Duration
	i := 0
	for b.Loop() {
		for j, l := range [2]locator{p, modulo} {
			start := time.Now()
			for k := range batch {
				benchSink = l.Locate(keys[(i+k)&(len(keys)-1)])
			}
			times[j] += time.Since(start)
		}
		i += batch
	}
	b.ReportMetric(float64(times[0])/float64(times[1]), "x-modulo")
	b.ReportMetric(float64(times[0])/float64(b.N*batch), "ns/locate")
}

// benchPoolOps times Locate, AppendN(3) and building a pool of each size.
func benchPoolOps[P Pool](b *testing.B, newPool func([]Node) (P, error), extra func(b *testing.B, nodes []Node)) {
	for _, n := range benchSizes {
		nodes := benchNodes(n)
		p, err := newPool(nodes)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("op=locate/nodes=%d", n), func(b *testing.B) { benchLocate(b, p) })
		b.Run(fmt.Sprintf("op=locate-vs-modulo/nodes=%d", n), func(b *testing.B) { benchVersusModulo(b, p, nodes) })
		b.Run(fmt.Sprintf("op=appendN3/nodes=%d", n), func(b *testing.B) {
			keys := benchKeys()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				benchDst = p.AppendN(benchDst[:0], keys[i&(len(keys)-1)], 3)
				i++
			}
		})
		b.Run(fmt.Sprintf("op=build/nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := newPool(nodes); err != nil {
					b.Fatal(err)
				}
			}
			// After the loop: b.Loop resets the timer, and with it the metrics reported.
			b.ReportMetric(float64(retained(func() any { p, _ := newPool(nodes); return p }))/float64(n), "B/node")
		})
		if extra != nil {
			extra(b, nodes)
		}
	}
}

// retained returns the heap that the value build returns keeps alive.
func retained(build func() any) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

func BenchmarkMaglev(b *testing.B) {
	benchPoolOps(b, func(nodes []Node) (*Maglev, error) { return NewMaglev(nodes, MaglevOptions{}) }, nil)
}

// jumpNames places a key on node JumpHash(xxhash64(key), n), as shard.Jump does: the floor
// under Memento's Locate.
type jumpNames []string

func (j jumpNames) Locate(key string) string {
	return j[jumphash.Guava(keyhash.XXH64(key), len(j))]
}

// BenchmarkMemento also times bare jump hashing against the baseline, which is what Memento
// adds its check of removed buckets to, and Locate after a tenth and a half of the nodes,
// every tenth or every second one, left from the middle: keys of removed buckets follow
// replacement chains.
func BenchmarkMemento(b *testing.B) {
	benchPoolOps(b, NewMemento, func(b *testing.B, nodes []Node) {
		jump := make(jumpNames, len(nodes))
		for i, n := range nodes {
			jump[i] = n.Name
		}
		b.Run(fmt.Sprintf("op=jump-vs-modulo/nodes=%d", len(nodes)), func(b *testing.B) { benchVersusModulo(b, jump, nodes) })
		for _, every := range []int{10, 2} {
			p, err := NewMemento(nodes)
			if err != nil {
				b.Fatal(err)
			}
			var gone []string
			for i := 0; i < len(nodes)-1; i += every {
				gone = append(gone, nodes[i].Name)
			}
			if err := p.Remove(gone...); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("op=locate-removed%d%%/nodes=%d", 100/every, len(nodes)), func(b *testing.B) { benchLocate(b, p) })
		}
	})
}

func BenchmarkMultiProbe(b *testing.B) {
	benchPoolOps(b, func(nodes []Node) (*MultiProbe, error) { return NewMultiProbe(nodes, MultiProbeOptions{}) }, nil)
}
