package coord_test

import (
	"errors"
	"testing"

	"github.com/shardkit/shard/coord"
)

// BenchmarkCurrent measures the read every routed access makes: an atomic load of the view
// and a monotonic clock reading, no lock, in parallel on every core.
func BenchmarkCurrent(b *testing.B) {
	c := openB(b)
	rev, err := c.Update(b.Context(), 0, jump(5))
	if errors.Is(err, coord.ErrConflict) { // made by an earlier round of this benchmark
		_, rev, err = c.Get(b.Context())
	}
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Wait(b.Context(), rev); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := c.Current(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkUpdate measures one compare-and-swap of the record and the wait until the
// client's own watch delivers it, against the embedded server (fsync on).
func BenchmarkUpdate(b *testing.B) {
	c := openB(b)
	rev, err := c.Update(b.Context(), 0, jump(1))
	if errors.Is(err, coord.ErrConflict) {
		_, rev, err = c.Get(b.Context())
	}
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if rev, err = c.Update(b.Context(), rev, jump(1+i%100)); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Wait(b.Context(), rev); err != nil {
			b.Fatal(err)
		}
	}
}

func openB(b *testing.B) *coord.Client {
	c, err := coord.Open(b.Context(), servers[0].endpoints, "/coord-bench/"+b.Name()+"/", coord.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
