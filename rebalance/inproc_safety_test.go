package rebalance

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// movingOwner returns an owner that before and after place apart.
func movingOwner(before, after shard.Sharder) string {
	for i := 0; ; i++ {
		if o := fmt.Sprint("user", i); before.Locate(o) != after.Locate(o) {
			return o
		}
	}
}

// newOwner adds an owner with no rows yet, whom before and after place apart.
func (w *world) newOwner() string {
	for i := 0; ; i++ {
		if o := fmt.Sprint("new", i); w.before.Locate(o) != w.after.Locate(o) && w.rows[o] == nil {
			w.owners = append(w.owners, o)
			w.rows[o] = new(atomic.Int64)
			return o
		}
	}
}

// panicStore panics in Mark or Copy while armed: a Store bug, or a driver that panics on
// a broken connection.
type panicStore struct {
	*memStore
	inMark, inCopy atomic.Bool
}

func (s *panicStore) Mark(ctx context.Context, migration, owner string) (Mark, error) {
	if s.inMark.Load() {
		panic("store panics in Mark")
	}
	return s.memStore.Mark(ctx, migration, owner)
}

func (s *panicStore) Copy(ctx context.Context, owner string, from, to int) error {
	if s.inCopy.Load() {
		panic("store panics in Copy")
	}
	return s.memStore.Copy(ctx, owner, from, to)
}

// TestPanicInDoReleasesTheOwner: a panic in the Store under Do (in the mark read, or in
// the move of a Lazy Do), recovered by the application as net/http does, leaves the owner's
// lock free: Run and Finish then complete.
func TestPanicInDoReleasesTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode Mode
		arm  func(*panicStore) *atomic.Bool
	}{
		{"async/mark", Async, func(s *panicStore) *atomic.Bool { return &s.inMark }},
		{"lazy/copy", Lazy, func(s *panicStore) *atomic.Bool { return &s.inCopy }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 4, 2, 3)
			st := &panicStore{memStore: w.store}
			m := w.migration(t, "panic-"+tc.name, st, Options{Mode: tc.mode})
			ctx := context.Background()
			armed := tc.arm(st)
			armed.Store(true)
			func() {
				defer func() { require.NotNil(t, recover(), "the Store's panic") }()
				_ = m.Do(ctx, movingOwner(w.before, w.after), func(int) error { return nil })
			}()
			armed.Store(false)
			done := make(chan error, 1)
			go func() {
				err := m.Run(ctx, slices.Values(w.owners))
				if err == nil {
					err = m.Finish(ctx, slices.Values(w.owners))
				}
				done <- err
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("Run and Finish still wait 5s after a recovered panic in one Do: the owner's lock leaked")
			}
			w.checkMoved(t)
			w.checkServed(t, m)
		})
	}
}

// hookStore wraps a memStore and calls a hook before SetMark, and fails SetMark while
// failMark is set.
type hookStore struct {
	*memStore
	beforeMark atomic.Pointer[func(owner string, m Mark)]
	failMark   atomic.Bool
}

func (s *hookStore) SetMark(ctx context.Context, migration, owner string, m Mark) error {
	if h := s.beforeMark.Load(); h != nil {
		(*h)(owner, m)
	}
	if s.failMark.Load() {
		return errCrash
	}
	return s.memStore.SetMark(ctx, migration, owner, m)
}

// writeBetweenCountAndMark arranges that, when mover is about to mark owner Copied (it has
// copied and counted both shards), the application writes a row of owner through app.Do,
// and waits for the write a while: long enough for a Do that does not wait for mover's
// move to land on the old shard before mover deletes it. It returns a wait for the write.
func writeBetweenCountAndMark(t *testing.T, w *world, st *hookStore, app *Migration, owner string) (wait func()) {
	t.Helper()
	return writeWhenCopied(t, st, owner, func() error {
		return app.Do(context.Background(), owner, func(s int) error {
			w.store.put(s, owner, 100, "acknowledged")
			w.rows[owner].Add(1)
			return nil
		})
	})
}

// writeWhenCopied arranges that write runs, once, when a mover over st is about to mark
// owner Copied, and waits for it a while (a write that waits for the move, as it should,
// is left running). It returns a wait for the write's end.
func writeWhenCopied(t *testing.T, st *hookStore, owner string, write func() error) (wait func()) {
	t.Helper()
	done := make(chan error, 1)
	var once atomic.Bool
	hook := func(o string, m Mark) {
		if o != owner || m != Copied || !once.CompareAndSwap(false, true) {
			return
		}
		go func() { done <- write() }()
		select {
		case err := <-done:
			done <- err
		case <-time.After(300 * time.Millisecond): // the write waits for the move
		}
	}
	st.beforeMark.Store(&hook)
	return func() {
		t.Helper()
		require.True(t, once.Load(), "the mover never marked %s Copied", owner)
		require.NoError(t, <-done)
	}
}

// TestMoverStartedTwiceWaitsForTheOtherValuesDo: the application reads and writes through
// Migration value app; the mover is started a second time by mistake as value twin, of the
// same ID, over a plain Store. A write through app.Do while twin moves the owner waits for
// the move (the values share their locks) and lands on the new shard: nothing is lost.
func TestMoverStartedTwiceWaitsForTheOtherValuesDo(t *testing.T) {
	w := newWorld(t, 1, 2, 3)
	w.owners = []string{movingOwner(w.before, w.after)}
	o := w.owners[0]
	w.rows[o] = new(atomic.Int64)
	for k := range 4 {
		w.store.put(w.before.Locate(o), o, k, fmt.Sprint(o, "/", k))
	}
	w.rows[o].Store(4)
	st := &hookStore{memStore: w.store}
	ctx := context.Background()
	app := w.migration(t, "twice", st, Options{})
	twin := w.migration(t, "twice", st, Options{})
	wait := writeBetweenCountAndMark(t, w, st, app, o)
	require.NoError(t, twin.Run(ctx, slices.Values(w.owners)))
	wait()
	require.NoError(t, app.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, app.Finish(ctx, slices.Values(w.owners)))
	w.checkMoved(t)
	w.checkServed(t, app)
}

// TestResumeWithANewValueWaitsForTheFirstValuesDo: the resume the doc describes done in
// one process: the first value's Run stops on a fault, the mover retries with a new value
// of the same ID while the application keeps using the first value. A write through the
// first value while the new one moves the owner waits for the move and is not lost.
func TestResumeWithANewValueWaitsForTheFirstValuesDo(t *testing.T) {
	w := newWorld(t, 1, 1, 2)
	w.owners = []string{movingOwner(w.before, w.after)}
	o := w.owners[0]
	w.store.put(0, o, 0, "r0")
	w.rows[o] = new(atomic.Int64)
	w.rows[o].Store(1)
	st := &hookStore{memStore: w.store}
	st.failMark.Store(true)
	ctx := context.Background()
	app := w.migration(t, "resume-new-value", st, Options{})
	require.ErrorIs(t, app.Run(ctx, slices.Values(w.owners)), errCrash)
	st.failMark.Store(false)
	wait := writeBetweenCountAndMark(t, w, st, app, o)
	resumed := w.migration(t, "resume-new-value", st, Options{})
	require.NoError(t, resumed.Run(ctx, slices.Values(w.owners)))
	wait()
	require.NoError(t, app.Finish(ctx, slices.Values(w.owners)))
	w.checkMoved(t)
	w.checkServed(t, app)
}

// TestLockTablesAreDroppedWithTheirMigrations: the process-wide table of locks by ID
// holds an ID only while a Migration value of it is reachable.
func TestLockTablesAreDroppedWithTheirMigrations(t *testing.T) {
	w := newWorld(t, 1, 2, 3)
	ids := func() int {
		lockTables.mu.Lock()
		defer lockTables.mu.Unlock()
		n := 0
		for id := range lockTables.byID {
			if len(id) > 8 && id[:8] == "dropped-" {
				n++
			}
		}
		return n
	}
	a := w.migration(t, "dropped-0", w.store, Options{Stripes: 8})
	b := w.migration(t, "dropped-0", w.store, Options{Stripes: 16})
	require.True(t, a.locks == b.locks, "two values of one ID share their locks")
	require.Len(t, b.locks.stripes, 8)
	for i := range 100 {
		w.migration(t, fmt.Sprint("dropped-", i+1), w.store, Options{Stripes: 1})
	}
	require.Eventually(t, func() bool { runtime.GC(); return ids() == 1 }, 5*time.Second, 10*time.Millisecond,
		"IDs of unreachable Migrations are dropped; the one of a live value is kept")
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}

// TestDrainRefusesAPendingBatchOntoTheDrainedShard: a failed Move leaves a batch that pins
// an owner onto shard 3; Drain(3) would finish it in its first batch and leave that owner
// on the shard it drains. It refuses, naming the owner, before moving anything; finishing
// the batch with Move and draining with a new ID then empties the shard.
func TestDrainRefusesAPendingBatchOntoTheDrainedShard(t *testing.T) {
	ctx := context.Background()
	w := newRepinWorld(t, 200)
	crash := &crashStore{memStore: w.store, op: "copy", when: "before", at: 1}
	rule, err := shard.NewJump(4)
	require.NoError(t, err)
	r, err := NewRepin("drain-pending", w.d, rule, crash, Options{})
	require.NoError(t, err)
	var p string
	for _, o := range w.owners {
		if w.d.Locate(o) != 3 {
			p = o
			break
		}
	}
	require.ErrorIs(t, r.Move(ctx, map[string]int{p: 3}), errCrash, "the hot owner's copy fails")
	crash.at = 0
	three, err := shard.NewJump(3)
	require.NoError(t, err)
	pinned := w.d.Len()
	err = r.Drain(ctx, 3, slices.Values(w.owners), 25, three.Locate)
	require.ErrorIs(t, err, ErrConfig, "Drain(3) with a pending batch that pins %s onto shard 3", p)
	require.ErrorContains(t, err, p)
	require.Equal(t, pinned, w.d.Len(), "nothing pinned by the refused Drain")
	w.check(t, r)

	require.NoError(t, r.Move(ctx, nil), "the pending batch finished")
	require.Equal(t, 3, w.d.Locate(p))
	r2, err := NewRepin("drain-pending-2", w.d, rule, w.store, Options{})
	require.NoError(t, err)
	require.NoError(t, r2.Drain(ctx, 3, slices.Values(w.owners), 25, three.Locate))
	w.check(t, r2)
	for _, o := range w.owners {
		require.NotEqual(t, 3, w.d.Locate(o), "owner %s after Drain(3)", o)
	}
}

// TestDrainNamesAnOwnerCreatedOnTheDrainedShard: while shard 3 drains, the application
// writes the first row of a new owner whom the rule places on shard 3. Over an OwnerLister
// Drain then fails with ErrUnfinished naming it, rather than return nil and let the
// shard's removal strand the row.
func TestDrainNamesAnOwnerCreatedOnTheDrainedShard(t *testing.T) {
	ctx := context.Background()
	w := newRepinWorld(t, 100)
	st := &hookStore{memStore: w.store}
	rule, err := shard.NewJump(4)
	require.NoError(t, err)
	r, err := NewRepin("drain-new-owner", w.d, rule, st, Options{})
	require.NoError(t, err)
	n := ""
	for i := 0; n == ""; i++ {
		if o := fmt.Sprint("new:", i); w.d.Locate(o) == 3 {
			n = o
		}
	}
	var once atomic.Bool
	hook := func(string, Mark) {
		if once.CompareAndSwap(false, true) { // a request of the application during the drain
			require.NoError(t, r.Do(ctx, n, func(s int) error { w.store.put(s, n, 0, "acknowledged"); return nil }))
		}
	}
	st.beforeMark.Store(&hook)
	three, err := shard.NewJump(3)
	require.NoError(t, err)
	err = r.Drain(ctx, 3, slices.Values(w.owners), 10, three.Locate)
	require.ErrorIs(t, err, ErrUnfinished, "Drain(3) after new owner %s wrote its first row on shard 3", n)
	require.ErrorContains(t, err, n)
	require.Equal(t, 1, w.store.count(3, n))

	w.owners = append(w.owners, n)
	w.rows[n] = new(atomic.Int64)
	w.rows[n].Store(1)
	r2, err := NewRepin("drain-new-owner-2", w.d, rule, w.store, Options{})
	require.NoError(t, err)
	require.NoError(t, r2.Drain(ctx, 3, slices.Values(w.owners), 10, three.Locate), "drained again with the new owner listed")
	w.check(t, r2)
}

// TestFinishIsRecordedForARestart: after Run and Finish, a new owner's first row is written
// through Do to its after shard; the process restarts while the configuration still names
// the migration. The new value reads the finish the Store recorded: Do routes the new owner
// by the after sharder, and Run is refused (ErrFinished) rather than copy the new owner's
// empty old shard over its row.
func TestFinishIsRecordedForARestart(t *testing.T) {
	w := newWorld(t, 10, 2, 3)
	ctx := context.Background()
	m := w.migration(t, "recorded", w.store, Options{})
	require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, m.Finish(ctx, slices.Values(w.owners)))

	n := w.newOwner()
	write := func(m *Migration, id int) {
		t.Helper()
		require.NoError(t, m.Do(ctx, n, func(s int) error {
			require.Equal(t, w.after.Locate(n), s, "new owner %s routed after the finish", n)
			w.store.put(s, n, id, fmt.Sprint("row ", id))
			w.rows[n].Add(1)
			return nil
		}))
	}
	write(m, 0)

	restarted := w.migration(t, "recorded", w.store, Options{}) // a crash, then the same ID
	write(restarted, 1)
	require.ErrorIs(t, restarted.Run(ctx, slices.Values(w.owners)), ErrFinished, "Run of a recorded finished migration")
	require.NoError(t, restarted.Finish(ctx, slices.Values(w.owners)))
	w.checkMoved(t)
	w.checkServed(t, restarted)
}

// TestFinishThroughAnotherValueOfTheProcess: the application routes through one value (whose
// first Do read the migration unfinished) while the operator runs and finishes it through
// another value of the ID in the same process, over the same Store or another Store value
// over the same data (a wrapper). A new owner's first write through the application's value
// then went to its old shard, after Finish had listed the shards and recorded the finish:
// nothing would ever move or find it. Values of one ID over one Store share the finish, as
// they share the locks, and a Do of an unmoved owner asks the FinishRecorder again.
func TestFinishThroughAnotherValueOfTheProcess(t *testing.T) {
	type wrapped struct{ *memStore }
	for _, name := range []string{"same store", "wrapped store"} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 10, 2, 3)
			ctx := context.Background()
			app := w.migration(t, "finished-elsewhere", w.store, Options{})
			require.NoError(t, app.Do(ctx, movingOwner(w.before, w.after), func(int) error { return nil }))
			var store Store = w.store
			if name == "wrapped store" {
				store = wrapped{w.store}
			}
			mover := w.migration(t, "finished-elsewhere", store, Options{})
			require.NoError(t, mover.Run(ctx, slices.Values(w.owners)))
			require.NoError(t, mover.Finish(ctx, slices.Values(w.owners)))

			n := w.newOwner()
			require.NoError(t, app.Do(ctx, n, func(s int) error {
				w.store.put(s, n, 0, "first row")
				w.rows[n].Add(1)
				return nil
			}))
			w.checkMoved(t)
			w.checkServed(t, mover)

			// A store of another cluster with a migration of the same ID is another migration.
			other := newWorld(t, 10, 2, 3)
			again := other.migration(t, "finished-elsewhere", other.store, Options{})
			require.NoError(t, again.Run(ctx, slices.Values(other.owners)))
			other.checkMoved(t)
		})
	}
}
