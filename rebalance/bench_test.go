package rebalance

import (
	"context"
	"slices"
	"testing"
)

// BenchmarkDo measures what routing through a Migration costs per access, beyond the store:
// an owner that keeps its shard (two Locates), one that changes shard (a stripe lock and a
// mark read from the in-memory store), and any owner after Finish.
func BenchmarkDo(b *testing.B) {
	w := newWorld(b, 100, 5, 10)
	ctx := context.Background()
	m, _ := New("bench", w.before, w.after, w.store, Options{})
	var stays, moves string
	for _, o := range w.owners {
		if w.before.Locate(o) == w.after.Locate(o) {
			stays = o
		} else {
			moves = o
		}
	}
	fn := func(int) error { return nil }
	for _, c := range []struct{ name, owner string }{{"owner=stays", stays}, {"owner=moves", moves}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = m.Do(ctx, c.owner, fn)
			}
		})
	}
	if err := m.Run(ctx, slices.Values(w.owners)); err != nil {
		b.Fatal(err)
	}
	if err := m.Finish(ctx, slices.Values(w.owners)); err != nil {
		b.Fatal(err)
	}
	b.Run("finished", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = m.Do(ctx, moves, fn)
		}
	})
}
