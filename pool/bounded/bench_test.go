package bounded

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAcquire times an Acquire, the Release of the lease taken 64 acquires before (so 64
// leases are out and owners fill up) and one Locate of the pool, which counts the acquires
// that went past the key's owner (off-owner%: with 64 leases on 100 nodes every capacity is
// 1, so most do):
//
//	go test ./pool/bounded -run '^$' -bench Acquire -benchtime 200000x
func BenchmarkAcquire(b *testing.B) {
	for _, n := range []int{10, 100} {
		for _, skew := range []string{"uniform", "zipf1.1"} {
			b.Run(fmt.Sprintf("pool=ring/nodes=%d/keys=%s", n, skew), func(b *testing.B) {
				p := pools(b, nodesN(n, false))["ring"]
				r := rand.New(rand.NewPCG(1, 1))
				z := rand.NewZipf(r, 1.1, 1, 9999)
				keys := make([]string, 1<<14)
				for i := range keys {
					if skew == "uniform" {
						keys[i] = fmt.Sprint("key-", r.IntN(10000))
					} else {
						keys[i] = fmt.Sprint("key-", z.Uint64())
					}
				}
				bal, err := New(p, Options{})
				if err != nil {
					b.Fatal(err)
				}
				held := make([]Lease, 64)
				for i := range held {
					if held[i], err = bal.Acquire(keys[i]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				off := 0
				for i := 0; i < b.N; i++ {
					k := keys[i&(len(keys)-1)]
					l, err := bal.Acquire(k)
					if err != nil {
						b.Fatal(err)
					}
					if l.Node() != p.Locate(k) {
						off++
					}
					h := &held[i&63]
					if err := (*h).Release(); err != nil {
						b.Fatal(err)
					}
					*h = l
				}
				b.StopTimer()
				b.ReportMetric(100*float64(off)/float64(b.N), "off-owner%")
			})
		}
	}
}

// BenchmarkAcquireParallel is BenchmarkAcquire from every core at once: no lock, one
// contended total and one counter per node.
func BenchmarkAcquireParallel(b *testing.B) {
	p := pools(b, nodesN(10, false))["ring"]
	bal, err := New(p, Options{})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l, err := bal.Acquire(keys[i%len(keys)])
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Release(); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
