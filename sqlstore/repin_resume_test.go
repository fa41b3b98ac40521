package sqlstore_test

// A Repin resumed after an error or a crash, with other pins, more owners, or after a
// refused Resize.

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// TestRepinResumedWithOtherPins: a Move dies at its deletion (after the
// copy, before Finish); the restarted process moves the owner to another shard, or adds an
// owner to the batch: refused (ErrPlacement: the batch's placement is unfinished with
// another after sharder). The same batch then resumes and nothing is lost.
func TestRepinResumedWithOtherPins(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 6), 4)
		u := w.users[0]
		from := w.before.Locate(u)
		a, b := (from+1)%3, (from+2)%3
		r, _ := newRepin(t, "pin", &failDelete{Store: e.open(t, 2).store}, 3, nil)
		if err := r.Move(ctx, map[string]int{u: a}); !errors.Is(err, errDied) {
			t.Fatalf("Move that dies: %v", err)
		}
		again, d := newRepin(t, "pin", process{e.open(t, 2).store, "restarted"}, 3, nil)
		if err := again.Move(ctx, map[string]int{u: b}); err == nil {
			t.Error("restart, other target: nil")
		}
		if err := again.Move(ctx, map[string]int{u: a, w.users[1]: (w.before.Locate(w.users[1]) + 1) % 3}); err == nil {
			t.Error("restart, batch plus an owner: nil")
		}
		if err := again.Move(ctx, map[string]int{u: a}); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, d)
	})
}

// TestRepinFinishesAPendingBatchFirst: a Move fails at its deletion; in the same process
// the next Move adds an owner. The pending batch finishes first, alone, then the new owner
// moves as a batch of its own (the two together would be another migration, which the
// shards refused while the pending one was unfinished).
func TestRepinFinishesAPendingBatchFirst(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 2)
		w.load(t, admin, span(1, 12), 3)
		crash := &failDelete{Store: e.open(t, 2).store}
		r, d := newRepin(t, "pin", crash, 3, nil)
		u, v := w.users[0], w.users[1]
		if err := r.Move(ctx, map[string]int{u: (d.Locate(u) + 1) % 3}); !errors.Is(err, errDied) {
			t.Fatal(err)
		}
		crash.n.Store(1 << 30)
		to := (d.Locate(v) + 1) % 3
		if err := r.Move(ctx, map[string]int{v: to}); err != nil {
			t.Fatal("Move adding an owner to the pending batch:", err)
		}
		if s, ok := d.Pinned(v); !ok || s != to {
			t.Fatalf("owner %s pinned to %d (%v), want %d", v, s, ok, to)
		}
		w.requireClean(t, admin, d)
	})
}

// TestResizeRefusedChangesNothing: after a drain, a new owner's rows land on the drained
// shard, and Resize is refused (ErrUnfinished) before it claims anything: Do goes on, a
// Drain with the owner listed moves it, and Resize then succeeds. Its claim used to stay,
// so that the shards served an unfinished resize and refused every Do and Drain.
func TestResizeRefusedChangesNothing(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 2)
		w.load(t, admin, span(1, 12), 3)
		p := e.open(t, 2)
		r, d := newRepin(t, "drain", p.store, 3, nil)
		two, _ := shard.NewJump(2)
		if err := r.Drain(ctx, 2, slices.Values(w.users), 3, two.Locate); err != nil {
			t.Fatal(err)
		}
		w.load(t, admin, []int{1001}, 2) // Jump(3) places 1001 on shard 2
		if w.before.Locate("1001") != 2 {
			t.Fatal("setup")
		}
		if err := r.Resize(ctx, 2); !errors.Is(err, rebalance.ErrUnfinished) {
			t.Fatalf("Resize with an owner on the removed shard: %v", err)
		}
		if err := r.Do(ctx, w.users[0], func(int) error { return nil }); err != nil {
			t.Fatal("Do after the refused Resize:", err)
		}
		if err := r.Drain(ctx, 2, slices.Values(w.users), 3, two.Locate); err != nil {
			t.Fatal("Drain with the new owner listed:", err)
		}
		if err := r.Resize(ctx, 2); err != nil {
			t.Fatal("Resize once drained:", err)
		}
		w.requireClean(t, admin, d)
	})
}
