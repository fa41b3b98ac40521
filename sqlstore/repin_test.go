package sqlstore_test

import (
	"context"
	"errors"
	"iter"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// beforeDelete runs hook once, before the first deletion of an old copy through it.
type beforeDelete struct {
	*sqlstore.Store
	once sync.Once
	hook func()
}

func (b *beforeDelete) Delete(ctx context.Context, owner string, shard int) error {
	b.once.Do(b.hook)
	return b.Store.Delete(ctx, owner, shard)
}

func (b *beforeDelete) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	b.once.Do(b.hook)
	return b.Store.DeleteChecked(ctx, migration, owner, shard)
}

// newRepin returns a Repin of id over st and its directory: a Jump of n shards holding
// entries (none if nil), with a second Jump of n as the rule.
func newRepin(t *testing.T, id string, st rebalance.Store, n int, entries iter.Seq2[string, int]) (*rebalance.Repin, *shard.Directory) {
	t.Helper()
	fallback, _ := shard.NewJump(n)
	rule, _ := shard.NewJump(n)
	d := shard.NewDirectory(fallback, nil)
	if entries != nil {
		if err := d.Load(entries); err != nil {
			t.Fatal(err)
		}
	}
	r, err := rebalance.NewRepin(id, d, rule, st, rebalance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r, d
}

// process is a Store as a process of the given name sees it, for a test that plays two
// processes (or a process and its restart) in one: Repin values of one ID share the batch
// under way only with values over a Store of the same process, as two processes share
// nothing.
type process struct {
	*sqlstore.Store
	name string
}

func (p process) Identity() string { return p.Store.Identity() + " in process " + p.name }

// TestTwoRepinsOfOneOwner: two operators pin the same user, each with a Repin of its own ID
// in a process of its own, to two different shards. The second Repin runs whole between the
// first one's copy and its deletion of the old copy. Both returned nil: the user's rows
// ended on both new shards, each directory placing it on its own, so what the application
// wrote through either was missing from the other. Now each batch of a Repin claims the
// shards with a placement of its own, as a migration does: while the first batch is
// unfinished the second Repin is refused (ErrPlacement) before it moves anything, and so is
// it after, its directory not knowing the first one's pin (the first batch's placement is
// finished, and its after sharder is no longer the second's before).
func TestTwoRepinsOfOneOwner(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 4), 4)
		u := w.users[0]
		from := w.before.Locate(u)
		second, _ := newRepin(t, "pin-b", e.open(t, 2).store, 3, nil)
		var secondErr error
		moveSecond := func() { secondErr = second.Move(ctx, map[string]int{u: (from + 2) % 3}) }
		pa := e.open(t, 2)
		first, d := newRepin(t, "pin-a", &beforeDelete{Store: pa.store, hook: moveSecond}, 3, nil)
		if err := first.Move(ctx, map[string]int{u: (from + 1) % 3}); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(secondErr, rebalance.ErrPlacement) {
			t.Errorf("second Repin of user %s while the first one's batch is unfinished: %v, want ErrPlacement", u, secondErr)
		}
		moveSecond()
		if !errors.Is(secondErr, rebalance.ErrPlacement) {
			t.Errorf("second Repin of user %s, its directory without the first one's pin: %v, want ErrPlacement", u, secondErr)
		}
		if err := first.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, pa, w, u, s) }); err != nil {
			t.Fatal(err)
		}
		if s, _ := d.Pinned(u); s != (from+1)%3 {
			t.Fatalf("user %s pinned to shard %d, want %d", u, s, (from+1)%3)
		}
		w.requireClean(t, admin, d)
	})
}

// TestRepinResize: the operator drains shard 2 of 3 with a Repin, to where a Jump of 2
// shards places the owners, removes the shard, and unpins the drained owners. The resize and
// the unpinning are recorded as batches that move nothing: a process that loads the saved
// entries into a directory of 2 shards is served, one still routing by 3 shards, or by the
// entries removed, is refused. Writes through the first, and every row moved, are where the
// resized directory places them.
func TestRepinResize(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 2)
		w.load(t, admin, span(1, 12), 3)
		r, d := newRepin(t, "drain", e.open(t, 2).store, 3, nil)
		two, _ := shard.NewJump(2)
		if err := r.Drain(ctx, 2, slices.Values(w.users), 3, two.Locate); err != nil {
			t.Fatal(err)
		}
		if err := r.Resize(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if d.Shards() != 2 {
			t.Fatalf("after Resize the directory has %d shards, want 2", d.Shards())
		}
		// Another process loads the saved entries.
		q := e.open(t, 2)
		load := func(n int) *rebalance.Repin {
			r, _ := newRepin(t, "drain-2", q.store, n, d.Entries())
			return r
		}
		u := w.users[0]
		if err := load(3).Do(ctx, u, func(int) error { return nil }); !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("Do by the directory of 3 shards after the resize: %v, want ErrPlacement", err)
		}
		if err := load(2).Do(ctx, u, func(s int) error { return insertAcked(ctx, e, q, w, u, s) }); err != nil {
			t.Fatal(err)
		}
		// The drained owners' entries now agree with the rule: unpinning them moves nothing,
		// and the directory without them is served, the one that kept them refused.
		if err := r.Unpin(ctx, slices.Collect(maps.Keys(maps.Collect(d.Entries())))...); err != nil {
			t.Fatal(err)
		}
		if d.Len() != 0 {
			t.Fatalf("%d entries left after Unpin", d.Len())
		}
		if err := load(2).Do(ctx, u, func(s int) error { return insertAcked(ctx, e, q, w, u, s) }); err != nil {
			t.Fatal(err)
		}
		stale, _ := newRepin(t, "drain-3", q.store, 2, maps.All(map[string]int{u: two.Locate(u)}))
		if err := stale.Do(ctx, u, func(int) error { return nil }); !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("Do by a directory with an entry unpinned: %v, want ErrPlacement", err)
		}
		w.requireClean(t, admin, d)
	})
}

// failDelete fails every deletion of an old copy from the nth on, as a process that died
// there would leave the store.
type failDelete struct {
	*sqlstore.Store
	n atomic.Int64
}

var errDied = errors.New("the process died")

func (f *failDelete) Delete(ctx context.Context, owner string, shard int) error {
	if f.n.Add(-1) < 0 {
		return errDied
	}
	return f.Store.Delete(ctx, owner, shard)
}

func (f *failDelete) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	if f.n.Add(-1) < 0 {
		return errDied
	}
	return f.Store.DeleteChecked(ctx, migration, owner, shard)
}

// TestDrainAfterACrash: a Drain of three batches dies in its third, after two batches were
// pinned in its directory but before the directory was saved. The restarted process makes
// a Repin of the same ID over the saved directory, which has none of the pins, and drains
// again: the two batches the shards recorded finished are pinned again (their owners' marks
// say Done), without claiming the shards, which serve the third, unfinished; the third
// resumes. Nothing is lost and the shard ends empty.
func TestDrainAfterACrash(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 2)
		w.load(t, admin, span(1, 30), 3)
		var drained []string
		for _, u := range w.users {
			if w.before.Locate(u) == 2 {
				drained = append(drained, u)
			}
		}
		if len(drained) < 7 {
			t.Fatalf("%d users on shard 2, want at least 7", len(drained))
		}
		two, _ := shard.NewJump(2)
		drain := func(st rebalance.Store) (*shard.Directory, error) {
			r, d := newRepin(t, "drain", st, 3, nil)
			return d, r.Drain(ctx, 2, slices.Values(w.users), 3, two.Locate)
		}
		crash := &failDelete{Store: e.open(t, 2).store}
		crash.n.Store(7) // two batches of three, and one owner of the third
		if _, err := drain(crash); !errors.Is(err, errDied) {
			t.Fatalf("Drain that dies in its third batch: %v", err)
		}
		d, err := drain(process{e.open(t, 2).store, "restarted"})
		if err != nil {
			t.Fatal("Drain after the restart:", err)
		}
		u := drained[len(drained)-1]
		if s, ok := d.Pinned(u); !ok || s != two.Locate(u) {
			t.Fatalf("user %s pinned to %d (%v), want %d", u, s, ok, two.Locate(u))
		}
		w.requireClean(t, admin, d)
	})
}

// TestRepinPinsWithoutMoving: a Move that pins an owner where the directory already places
// it moves no row, but changes the directory's entries, and so its fingerprint: it is
// recorded as a batch too, and the Moves after it, and a process that loads the saved
// entries, are served.
func TestRepinPinsWithoutMoving(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 4), 2)
		p := e.open(t, 2)
		r, d := newRepin(t, "pin", p.store, 3, nil)
		a, b, c := w.users[0], w.users[1], w.users[2]
		for _, pins := range []map[string]int{{a: (d.Locate(a) + 1) % 3}, {b: d.Locate(b)}, {c: (d.Locate(c) + 1) % 3}} {
			if err := r.Move(ctx, pins); err != nil {
				t.Fatalf("Move %v: %v", pins, err)
			}
		}
		q, _ := newRepin(t, "pin-2", e.open(t, 2).store, 3, d.Entries())
		if err := q.Do(ctx, b, func(s int) error { return insertAcked(ctx, e, p, w, b, s) }); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, d)
	})
}

// TestSharedDuringARepinBatch: a Repin's batch fails before deleting its owner's old copy;
// the application writes the owner's new row through the Repin, whose Do finishes the
// owner's move first, to the owner's new shard. An operator then starts a Shared migration of the same shards, from the rule the
// directory falls back to: its claim and its accesses are refused while the batch is
// unfinished (before, the shards served nothing yet and accepted both: two movers moving one
// owner by two plans, one of them from the old copy, which lacks the new row). Once the
// batch is finished, nothing is lost.
func TestSharedDuringARepinBatch(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 2)
		w.load(t, admin, span(1, 6), 3)
		u := w.moving(1, 1)[0] // jump 3 and jump 2 place it apart
		us := strconv.Itoa(u)
		p := e.open(t, 2)
		crash := &failDelete{Store: p.store}
		r, d := newRepin(t, "pin", crash, 3, nil)
		to := (w.before.Locate(us) + 1) % 3
		if to == w.after.Locate(us) {
			to = (to + 1) % 3
		}
		if err := r.Move(ctx, map[string]int{us: to}); !errors.Is(err, errDied) {
			t.Fatalf("Move that fails at its deletion: %v", err)
		}
		crash.n.Store(1 << 30) // the process is back: its Do finishes the owner's move
		if err := r.Do(ctx, us, func(s int) error { return insertAcked(ctx, e, p, w, us, s) }); err != nil {
			t.Fatal(err)
		}
		q := e.open(t, 2)
		m := w.shared(t, q, "shrink", rebalance.SharedOptions{})
		if err := w.write(ctx, m, us); !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("Shared write while the batch is unfinished: %v, want ErrPlacement", err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); !errors.Is(err, rebalance.ErrPlacement) {
			t.Fatalf("Shared Run while the batch is unfinished: %v, want ErrPlacement", err)
		}
		if err := r.Move(ctx, nil); err != nil {
			t.Fatal("the pending batch:", err)
		}
		w.requireClean(t, admin, d)
	})
}

// TestRepinOfAStaleDirectory: after a grow that no directory took part in has finished, a
// directory with an entry the shards never served (one pinned by hand, or loaded from an
// old file) is refused: its owner's rows are where the grow's rule put them, not where the
// entry says.
func TestRepinOfAStaleDirectory(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		_, w, p, grow := growUnderWay(t, e)
		runAndFinish(t, grow, w.users)
		u := w.users[0]
		r, _ := newRepin(t, "stale", p.store, 3, maps.All(map[string]int{u: (w.after.Locate(u) + 1) % 3}))
		called := false
		if err := r.Do(ctx, u, func(int) error { called = true; return nil }); !errors.Is(err, rebalance.ErrPlacement) || called {
			t.Fatalf("Do by a directory with an entry never served: %v (function called: %v), want ErrPlacement", err, called)
		}
		if err := r.Move(ctx, map[string]int{w.users[1]: (w.after.Locate(w.users[1]) + 1) % 3}); !errors.Is(err, rebalance.ErrPlacement) {
			t.Fatalf("Move by a directory with an entry never served: %v, want ErrPlacement", err)
		}
	})
}

// TestRepinBackToAnEarlierDirectory: a Repin pins a user to another shard, a second Repin
// unpins it (its rows move back), and after a restart the operator moves it again with the
// first Repin's ID, from the directory as it was before the first Move. That batch has the
// finished first batch's name and marks (Done): it is refused (ErrFinished) rather than
// pinned without moving the user's rows; with a new ID it moves.
func TestRepinBackToAnEarlierDirectory(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 4), 3)
		p := e.open(t, 2)
		r, d := newRepin(t, "pin", p.store, 3, nil)
		u := w.users[0]
		to := (d.Locate(u) + 1) % 3
		if err := r.Move(ctx, map[string]int{u: to}); err != nil {
			t.Fatal(err)
		}
		back, err := rebalance.NewRepin("unpin", d, mustJump(t, 3), p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := back.Unpin(ctx, u); err != nil {
			t.Fatal(err)
		}
		q := process{e.open(t, 2).store, "restarted"}
		again, d2 := newRepin(t, "pin", q, 3, nil)
		if err := again.Move(ctx, map[string]int{u: to}); !errors.Is(err, rebalance.ErrFinished) {
			t.Fatalf("Move with the first ID from the directory it started from: %v, want ErrFinished", err)
		}
		if _, ok := d2.Pinned(u); ok {
			t.Fatal("the refused Move pinned the user")
		}
		fresh, d3 := newRepin(t, "pin-2", q, 3, nil)
		if err := fresh.Move(ctx, map[string]int{u: to}); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, d3)
	})
}

func mustJump(t *testing.T, n int) shard.Sharder {
	t.Helper()
	j, err := shard.NewJump(n)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
