package rebalance

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/shardkit/shard"
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

// BenchmarkPlanKeys plans 100k keys for a small and a large resize; allocs and B/op show
// that a plan's memory follows the pairs of shards seen, not before x after.
func BenchmarkPlanKeys(b *testing.B) {
	keys := testKeys(100_000)
	for _, n := range []int{5, 20000} {
		before, _ := shard.NewModulo(n)
		after, _ := shard.NewModulo(n + 1)
		b.Run(fmt.Sprintf("shards=%d->%d", n, n+1), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchPlan = PlanKeys(before, after, slices.Values(keys))
			}
			b.ReportMetric(float64(len(benchPlan.Flows)), "flows")
		})
	}
}

var benchPlan *Plan

// BenchmarkPlanRing plans a ring's growth by one shard from its arcs: ranges is the plan's
// length, ranges/vnodes its length against the bound v of the sharding lecture's [003] "only
// contiguous arcs move" (at most one arc per new point; the arc across position 0, if it
// moves, is two ranges).
func BenchmarkPlanRing(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, v := range []int{16, 160, 1000} {
			before, _ := shard.NewRing(n, shard.RingOptions{Vnodes: v})
			after, _ := shard.NewRing(n+1, shard.RingOptions{Vnodes: v})
			b.Run(fmt.Sprintf("shards=%d->%d/vnodes=%d", n, n+1, v), func(b *testing.B) {
				b.ReportAllocs()
				var p *LeafPlan
				for b.Loop() {
					p, _ = PlanRing(before, after)
				}
				b.ReportMetric(float64(len(p.Ranges)), "ranges")
				b.ReportMetric(float64(len(p.Ranges))/float64(v), "ranges/vnodes")
			})
		}
	}
}
