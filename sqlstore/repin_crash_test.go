package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// onRecordFinished runs hook once, before the first RecordFinished through it once armed.
type onRecordFinished struct {
	*sqlstore.Store
	armed atomic.Bool
	hook  func()
}

func (o *onRecordFinished) RecordFinished(ctx context.Context, migration string) error {
	if o.armed.CompareAndSwap(true, false) {
		o.hook()
	}
	return o.Store.RecordFinished(ctx, migration)
}

// rowsOf counts user u's messages on shard s.
func rowsOf(t *testing.T, p *proc, u string, s int) int {
	t.Helper()
	uid, _ := strconv.ParseInt(u, 10, 64)
	var n int
	if err := p.dbs[s].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1", uid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestResizeHoldsANewOwner: the operator drains shard 2 of 3 with a Repin to where
// a Jump of 2 places the owners, then calls Resize(2) while the application keeps serving
// requests through the same Repin (its methods are safe for concurrent use). Resize's
// Finish lists the shards for owners left behind and finds none; then, before the
// directory's count changes, a request creates a new user whom Jump(3) places on shard 2:
// Repin.Do routes by the 3-shard directory (no batch is published for the resize, the
// placement was checked less than PlacementRecheck ago) and the user's first message lands
// on shard 2. Resize returns nil; the resized directory places the user on shard 0 or 1,
// and the acknowledged message stays on shard 2, which nothing reads any more.
// That was the code before: Do now routes through the resize batch, whose Finish holds every
// owner while it lists the shards, so the write waits and lands where the resized directory
// places the user.
func TestResizeHoldsANewOwner(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 2)
		w.load(t, admin, span(1, 12), 3)
		p := e.open(t, 2)
		st := &onRecordFinished{Store: p.store}
		r, d := newRepin(t, "drain", st, 3, nil)
		two, _ := shard.NewJump(2)
		if err := r.Drain(ctx, 2, slices.Values(w.users), 3, two.Locate); err != nil {
			t.Fatal(err)
		}
		// A user the application creates later: Jump(3) places it on shard 2.
		n := ""
		for i := 1000; ; i++ {
			if s := strconv.Itoa(i); w.before.Locate(s) == 2 {
				n = s
				break
			}
		}
		w.users = append(w.users, n)
		w.acked[n] = new(atomic.Int64)
		// The application serves requests: the placement is checked now.
		if err := r.Do(ctx, w.users[0], func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		var wrote int
		var doErr error
		done := make(chan struct{})
		st.hook = func() {
			// A request served concurrently, between Finish's listing and the resize of the
			// directory: it runs now, or waits for the Finish (which holds every owner).
			go func() {
				defer close(done)
				doErr = r.Do(ctx, n, func(s int) error { wrote = s; return insertAcked(ctx, e, p, w, n, s) })
			}()
			select {
			case <-done:
			case <-time.After(200 * time.Millisecond):
			}
		}
		st.armed.Store(true)
		if err := r.Resize(ctx, 2); err != nil {
			t.Fatal("Resize:", err)
		}
		<-done
		if doErr != nil {
			t.Logf("the concurrent request was refused: %v", doErr)
			return
		}
		t.Logf("Resize returned nil; the new user %s's acknowledged message went to shard %d during it; the resized directory places the user on shard %d",
			n, wrote, d.Locate(n))
		var seen int64 = -1
		if err := r.Do(ctx, n, func(s int) error {
			uid, _ := strconv.ParseInt(n, 10, 64)
			return p.dbs[s].QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = $1", uid).Scan(&seen)
		}); err != nil {
			t.Fatal(err)
		}
		if seen != w.acked[n].Load() {
			t.Errorf("a read of user %s through the Repin after Resize sees %d messages, %d were acknowledged", n, seen, w.acked[n].Load())
		}
		w.requireClean(t, admin, d)
	})
}

// TestTwoProcessesOneRepinID: every application process makes its Repin with the
// configured ID ("pin") over the saved directory, and an operator asks two of them, P and
// Q, to pin user u to two different shards (a retried admin request with another target,
// two operators). P's Move finishes first. Q's batch has P's batch's name (same ID, same
// starting directory), which the store records finished, and u's marks say Done: Q's Move
// takes the path of a batch resumed after a crash, checks only that u's old shard is
// empty (it is: P moved u) and pins u to Q's shard, which holds none of u's rows, and
// returns nil. Q's saved directory places u where u's rows are not; Q's Do, inside the
// placement recheck interval, writes u's next message there and reads none of u's rows.
// That was the code before: Q's batch is now named by the directory it ends at too, and is
// refused.
func TestTwoProcessesOneRepinID(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 6), 4)
		u := w.users[0]
		from := w.before.Locate(u)
		toP, toQ := (from+1)%3, (from+2)%3
		p, q := e.open(t, 2), e.open(t, 2)
		rp, dp := newRepin(t, "pin", process{p.store, "P"}, 3, nil)
		rq, dq := newRepin(t, "pin", process{q.store, "Q"}, 3, nil)
		// Q serves requests: its placement check passes.
		if err := rq.Do(ctx, w.users[1], func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := rp.Move(ctx, map[string]int{u: toP}); err != nil {
			t.Fatal("P's Move:", err)
		}
		errQ := rq.Move(ctx, map[string]int{u: toQ})
		if errQ != nil {
			t.Logf("Q's Move refused: %v", errQ)
			return
		}
		t.Errorf("Q's Move of user %s to shard %d returned nil after P's Move to shard %d: Q's directory pins it to %d, which holds %d of its rows; shard %d holds %d",
			u, toQ, toP, dq.Locate(u), rowsOf(t, admin, u, dq.Locate(u)), toP, rowsOf(t, admin, u, toP))
		// Q's application keeps serving u.
		var seen int64 = -1
		if err := rq.Do(ctx, u, func(s int) error {
			if err := insertAcked(ctx, e, q, w, u, s); err != nil {
				return err
			}
			uid, _ := strconv.ParseInt(u, 10, 64)
			return q.dbs[s].QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = $1", uid).Scan(&seen)
		}); err != nil {
			t.Logf("Q's Do of user %s: %v", u, err)
		} else if seen != w.acked[u].Load() {
			t.Errorf("Q's Do of user %s wrote a message and then read %d of the %d acknowledged", u, seen, w.acked[u].Load())
		}
		v := w.verify(t, admin, dp)
		t.Logf("against P's directory (served): %v", v)
		if v.lost+v.misplaced != 0 {
			t.Errorf("acknowledged messages off the shard P's served directory reads: %v", v)
		}
	})
}

// TestRestartPinsElsewhereRefused: a Move of user u to shard a dies after its
// batch is finished, before the directory is saved. The restarted process, over the saved
// directory (without u's entry), is told to move u to shard b instead (the operator changed
// their mind, or the admin request is replayed with a new target). The batch has the
// finished batch's name, and u's marks say Done: Move pins u to shard b, which holds none
// of its rows, and returns nil. The directory saved after it places u where its rows are
// not; every process that loads it is refused from then on (the shards serve the pin to a).
// That was the code before: the batch to another shard is another migration now, refused.
func TestRestartPinsElsewhereRefused(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 6), 4)
		u := w.users[0]
		from := w.before.Locate(u)
		a, b := (from+1)%3, (from+2)%3
		r, _ := newRepin(t, "pin", e.open(t, 2).store, 3, nil)
		if err := r.Move(ctx, map[string]int{u: a}); err != nil {
			t.Fatal(err)
		}
		// The process dies before saving its directory; the restarted one loads the saved
		// directory, which has no entry.
		q := e.open(t, 2)
		again, d := newRepin(t, "pin", process{q.store, "restarted"}, 3, nil)
		if err := again.Move(ctx, map[string]int{u: b}); err != nil {
			t.Logf("Move to another shard after the restart refused: %v", err)
			return
		}
		t.Errorf("Move of user %s to shard %d after the restart returned nil: the directory pins it to %d, which holds %d of its rows; shard %d holds %d",
			u, b, d.Locate(u), rowsOf(t, admin, u, d.Locate(u)), a, rowsOf(t, admin, u, a))
		err := again.Do(ctx, u, func(int) error { return nil })
		t.Logf("Do by the directory Move returned: %v", err)
		if v := w.verify(t, admin, d); v.misplaced != 0 {
			t.Errorf("against the directory after Move returned nil: %v", v)
		}
	})
}

// TestDrainRestartedChoosingOtherwise: the operator drains a hot shard onto whichever of
// the others holds fewer rows (to picks the least loaded shard), in one batch. The process
// dies after the batch is finished, before the directory is saved. As the Repin doc says,
// the restarted process drains again with the same arguments over the saved directory; the
// same to now finds the other shard the least loaded. The batch has the finished one's name,
// the owners' marks say Done and shard 2 is empty: Drain pins every drained owner to the
// other shard, where none of their rows are, and returns nil.
// That was the code before: batches to other shards are other migrations now, refused.
func TestDrainRestartedChoosingOtherwise(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 12), 5)
		count := func(s int) int {
			var n int
			if err := admin.dbs[s].QueryRow("SELECT COUNT(*) FROM messages").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		leastLoaded := func(string) int {
			if count(0) <= count(1) {
				return 0
			}
			return 1
		}
		var drained []string
		for _, u := range w.users {
			if w.before.Locate(u) == 2 {
				drained = append(drained, u)
			}
		}
		first := leastLoaded("")
		r, d0 := newRepin(t, "drain", e.open(t, 2).store, 3, nil)
		if err := r.Drain(ctx, 2, slices.Values(w.users), 100, leastLoaded); err != nil {
			t.Fatal(err)
		}
		if second := leastLoaded(""); second == first {
			t.Fatalf("setup: the least loaded shard is still %d after the drain", first)
		}
		_ = d0
		// The process dies before saving; the restarted one drains again, as told.
		q := e.open(t, 2)
		again, d := newRepin(t, "drain", process{q.store, "restarted"}, 3, nil)
		if err := again.Drain(ctx, 2, slices.Values(w.users), 100, leastLoaded); err != nil {
			t.Logf("Drain after the restart refused: %v", err)
			return
		}
		for _, u := range drained {
			if n := rowsOf(t, admin, u, d.Locate(u)); n == 0 {
				t.Errorf("user %s: Drain returned nil, the directory pins it to shard %d, which holds none of its rows (shard %d holds %d)",
					u, d.Locate(u), first, rowsOf(t, admin, u, first))
			}
		}
		if v := w.verify(t, admin, d); v.misplaced != 0 {
			t.Errorf("against the directory after Drain returned nil: %v", v)
		}
	})
}

var _ = errors.Is
var _ = rebalance.ErrPlacement

// listed yields the owners the store lists on shard s, when called (as OwnerLister).
func listed(t *testing.T, st *sqlstore.Store, s int) func(func(string) bool) {
	return func(yield func(string) bool) {
		var owners []string
		for o, err := range st.Owners(context.Background(), s) {
			if err != nil {
				t.Error(err)
				return
			}
			owners = append(owners, o)
		}
		for _, o := range owners {
			if !yield(o) {
				return
			}
		}
	}
}

// TestDrainRestartedFindingNone: the operator drains shard 2, naming the owners
// the store lists there (OwnerLister, as Drain's own final check does). The process dies after
// the drain's batch finished, before the directory is saved. The restarted process drains
// again with the same arguments over the saved directory; the lister now finds no owner on
// shard 2, so no batch starts, and Drain checks that the shard is empty, which it is, and
// returns nil. The directory still places every drained owner on shard 2, which holds none
// of their rows; nothing asked the shards whether they serve that directory (they do not).
// That was the code before: a Drain with nothing to move asks whether the shards serve the
// directory, and is refused.
func TestDrainRestartedFindingNone(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 2)
		w.load(t, admin, span(1, 12), 3)
		two, _ := shard.NewJump(2)
		p := e.open(t, 2)
		r, _ := newRepin(t, "drain", p.store, 3, nil)
		if err := r.Drain(ctx, 2, listed(t, p.store, 2), 100, two.Locate); err != nil {
			t.Fatal(err)
		}
		q := e.open(t, 2)
		again, d := newRepin(t, "drain", process{q.store, "restarted"}, 3, nil)
		if err := again.Drain(ctx, 2, listed(t, q.store, 2), 100, two.Locate); err != nil {
			t.Logf("Drain after the restart refused: %v", err)
			return
		}
		v := w.verify(t, admin, d)
		if v.misplaced != 0 {
			t.Errorf("Drain after the restart returned nil, and its directory places the drained owners on shard 2: %v", v)
		}
		t.Logf("Do by that directory: %v", again.Do(ctx, w.users[0], func(int) error { return nil }))
	})
}

// TestLazyMovesClaim: the application adds a shard with a Lazy Migration (3 -> 4
// shards, Jump), which moves each owner on its first Do and leaves the sweep (Run) for
// later; user v is accessed and moved to shard 3. Before the sweep's Run claims the shards,
// an operator pins another user u with a Repin over the 3-shard directory (the "second
// mover by mistake" that placement claims exist to stop). Nothing recorded the lazy
// migration on the shards (its Do moved v without a claim), so the Repin's batch is
// accepted, and its Finish looks for owners left behind only on shards 0-2: Move returns
// nil and the shards serve the Repin's directory, which places v on its old shard. A read
// of v through the Repin finds none of v's acknowledged rows (they are on shard 3, where no
// router it serves reads), and the grow is refused from then on.
// That was the code before: a lazy move claims the shards first, so the Repin is refused.
func TestLazyMovesClaim(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 4)
		w.load(t, admin, span(1, 12), 3)
		var v string
		for _, x := range w.users {
			if w.after.Locate(x) == 3 {
				v = x
				break
			}
		}
		u := w.users[0]
		if u == v {
			u = w.users[1]
		}
		p := e.open(t, 2)
		grow, err := rebalance.New("grow", w.before, w.after, p.store, rebalance.Options{Mode: rebalance.Lazy})
		if err != nil {
			t.Fatal(err)
		}
		// v's first access moves it to shard 3, and writes.
		if err := grow.Do(ctx, v, func(s int) error { return insertAcked(ctx, e, p, w, v, s) }); err != nil {
			t.Fatal(err)
		}
		q := e.open(t, 2)
		r, d := newRepin(t, "pin", q.store, 3, nil)
		if err := r.Move(ctx, map[string]int{u: (d.Locate(u) + 1) % 3}); err != nil {
			t.Logf("the Repin's Move during the lazy grow refused: %v", err)
			return
		}
		t.Logf("the Repin's Move returned nil during the lazy grow")
		var seen int64 = -1
		uid, _ := strconv.ParseInt(v, 10, 64)
		if err := r.Do(ctx, v, func(s int) error {
			return q.dbs[s].QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = $1", uid).Scan(&seen)
		}); err != nil {
			t.Logf("Repin Do of v: %v", err)
		} else if seen != w.acked[v].Load() {
			t.Errorf("a read of user %s through the Repin (whose placement the shards serve) sees %d messages on shard %d, %d were acknowledged (they are on shard 3: %d)",
				v, seen, d.Locate(v), w.acked[v].Load(), rowsOf(t, admin, v, 3))
		}
		t.Logf("the grow's Run afterwards: %v", grow.Run(ctx, slices.Values(w.users)))
		if vd := w.verify(t, admin, d); vd.misplaced != 0 {
			t.Errorf("against the Repin's directory: %v", vd)
		}
	})
}

// TestLazyFinishRecorded: after a grow from 1 shard to 2 (run and finished: the
// shards serve it), the application grows to 3 shards with a Lazy Migration: each owner
// moves on its first Do. Every owner has been accessed, so the operator calls Finish
// without a Run (nothing is left to sweep); it checks every mark, finds them Done, and
// returns nil. No claim ever recorded the lazy grow on the shards, and its finish updates
// no placement there: a process still routing by 2 shards (a Repin over the 2-shard
// directory, as the application's router) is accepted by the placement check, long after
// PlacementRecheck, and writes where the 3-shard layout does not read.
// That was the code before: Finish claims first, so the shards record the finish and refuse
// the process routing by two shards.
func TestLazyFinishRecorded(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 1, 2)
		w.load(t, admin, span(1, 12), 3)
		p := e.open(t, 2)
		j1, j2, j3 := mustJump(t, 1), mustJump(t, 2), mustJump(t, 3)
		g0, err := rebalance.New("g0", j1, j2, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		runAndFinish(t, g0, w.users)
		g1, err := rebalance.New("g1", mustJump(t, 2), j3, p.store, rebalance.Options{Mode: rebalance.Lazy})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range w.users {
			if err := g1.Do(ctx, u, func(int) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if err := g1.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal("Finish:", err)
		}
		var u string
		for _, x := range w.users {
			if j2.Locate(x) != j3.Locate(x) {
				u = x
				break
			}
		}
		// A process still on 2 shards: a Repin over a 2-shard directory, a new value (it asks
		// the shards at its first Do).
		s := e.open(t, 2)
		stale, _ := newRepin(t, "app", s.store, 2, nil)
		var wrote int
		err = stale.Do(ctx, u, func(sh int) error { wrote = sh; return insertAcked(ctx, e, s, w, u, sh) })
		if errors.Is(err, rebalance.ErrPlacement) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("a process routing by 2 shards after the lazy grow to 3 finished was accepted: user %s written to shard %d, Jump(3) places it on %d", u, wrote, j3.Locate(u))
		w.requireClean(t, admin, j3)
	})
}
