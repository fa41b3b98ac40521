package sqlstore_test

// A Repin that replays a batch finished before, and a Finish after a crash inside
// RecordFinished: each test's comment gives the sequence, which lost or stranded a row.

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// TestStaleRepinReplaysAnOlderBatch: every application process makes its Repin with the
// configured ID ("pin") over the saved directory, as in TestTwoProcessesOneRepinID. P
// pins user u to shard a, then (a later admin request) to shard b: two batches, "pin/A/B"
// and "pin/B/C". Q, whose directory is still A, then gets the first request again (an
// admin request delivered twice, a retry). Q's batch is "pin/A/B", recorded finished,
// u's marks in it say Done and u's old shard under A holds none of u's rows (they are on
// b now): Move takes the path of a batch resumed after a crash, pins u to a, where none of
// u's rows are, and returns nil. Q's next Do (inside the placement recheck interval, as in
// TestTwoProcessesOneRepinID) writes u's message on shard a, where the directory the
// shards serve (P's, u on b) never reads it, and reads none of u's rows.
// That was the code before: the Move ends by asking whether the shards serve the directory as
// pinned, and is refused.
func TestStaleRepinReplaysAnOlderBatch(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 6), 4)
		u := w.users[0]
		from := w.before.Locate(u)
		a, b := (from+1)%3, (from+2)%3
		p, q := e.open(t, 2), e.open(t, 2)
		rp, dp := newRepin(t, "pin", process{p.store, "P"}, 3, nil)
		rq, dq := newRepin(t, "pin", process{q.store, "Q"}, 3, nil)
		// Q serves requests: its placement check passes.
		if err := rq.Do(ctx, w.users[1], func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := rp.Move(ctx, map[string]int{u: a}); err != nil {
			t.Fatal("P's first Move:", err)
		}
		if err := rp.Move(ctx, map[string]int{u: b}); err != nil {
			t.Fatal("P's second Move:", err)
		}
		errQ := rq.Move(ctx, map[string]int{u: a})
		if errQ != nil {
			t.Logf("Q's replay of the first request refused: %v", errQ)
			return
		}
		t.Errorf("Q's Move of user %s to shard %d (replayed) returned nil after P moved it to %d then %d: Q's directory pins it to %d, which holds %d of its rows; shard %d holds %d",
			u, a, a, b, dq.Locate(u), rowsOf(t, admin, u, dq.Locate(u)), b, rowsOf(t, admin, u, b))
		var seen int64 = -1
		wrote := -1
		if err := rq.Do(ctx, u, func(s int) error {
			wrote = s
			if err := insertAcked(ctx, e, q, w, u, s); err != nil {
				return err
			}
			uid, _ := strconv.ParseInt(u, 10, 64)
			return q.dbs[s].QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = $1", uid).Scan(&seen)
		}); err != nil {
			if !errors.Is(err, rebalance.ErrPlacement) {
				t.Fatal(err)
			}
			t.Logf("Q's Do of user %s: %v", u, err)
		} else {
			t.Errorf("Q's Do of user %s returned nil: wrote a message on shard %d and read %d of the %d acknowledged", u, wrote, seen, w.acked[u].Load())
		}
		if v := w.verify(t, admin, dp); v.lost+v.misplaced != 0 {
			t.Errorf("acknowledged messages off the shard P's served directory reads: %v", v)
		}
	})
}

// TestRepinPinUnpinPinAnOwnerWithoutRows: one process, one Repin ("pin"). The operator
// pins user u, who has no rows yet (a big customer provisioned onto a shard of its own
// before it writes), to shard a; later unpins it; later pins it to a again. The third
// batch has the first one's name ("pin/A/B": same directory before, same pins after),
// recorded finished, u's mark in it says Done, and u's old shard holds none of its rows
// (it has none anywhere): Move takes the path of a batch resumed after a crash, claims
// nothing, pins u and returns nil. The shards still serve the unpin ("pin/B/A",
// finished): the Repin's directory (B) is no longer one they accept, yet its Do, inside
// the placement recheck interval, writes u's first message on shard a, where the
// directory the shards serve (no entry: the rule's shard) never reads it. After the
// interval every Do of every owner through this Repin is refused, and so is every Move:
// the Repin is wedged, with u's message on a shard no accepted router reads.
// That was the code before: the second pin is refused (ErrFinished: the shards serve the
// directory as it stands, so the finished batch is no crash's to resume), before it
// changes the directory, and the Repin keeps serving and moving.
func TestRepinPinUnpinPinAnOwnerWithoutRows(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 6), 4)
		u := "1000" // no rows yet
		w.users = append(w.users, u)
		w.acked[u] = new(atomic.Int64)
		p := e.open(t, 2)
		r, d := newRepin(t, "pin", p.store, 3, nil)
		a := (w.before.Locate(u) + 1) % 3
		if err := r.Move(ctx, map[string]int{u: a}); err != nil {
			t.Fatal("first pin:", err)
		}
		if err := r.Unpin(ctx, u); err != nil {
			t.Fatal("unpin:", err)
		}
		if err := r.Do(ctx, w.users[0], func(int) error { return nil }); err != nil {
			t.Fatal("Do after the unpin:", err)
		}
		if err := r.Move(ctx, map[string]int{u: a}); err != nil {
			t.Logf("second pin refused: %v", err)
			if !errors.Is(err, rebalance.ErrFinished) {
				t.Errorf("second pin refused with %v, want ErrFinished", err)
			}
			if _, ok := d.Pinned(u); ok {
				t.Errorf("the refused pin of user %s is left in the directory", u)
			}
			if err := r.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, p, w, u, s) }); err != nil {
				t.Errorf("Do of user %s after the refused pin: %v", u, err)
			}
			if err := r.Move(ctx, map[string]int{w.users[1]: (d.Locate(w.users[1]) + 1) % 3}); err != nil {
				t.Errorf("a Move of another user after the refused pin: %v", err)
			}
			if v := w.verify(t, admin, d); v.lost+v.misplaced != 0 {
				t.Errorf("against the directory: %v", v)
			}
			return
		}
		t.Errorf("second pin of user %s to shard %d returned nil without a claim; the shards serve the directory without the entry", u, a)
		wrote := -1
		if err := r.Do(ctx, u, func(s int) error { wrote = s; return insertAcked(ctx, e, p, w, u, s) }); err != nil {
			t.Logf("Do of user %s after the second pin: %v", u, err)
		} else {
			t.Errorf("Do of user %s after the second pin wrote its message on shard %d; the directory the shards serve places it on %d", u, wrote, w.before.Locate(u))
		}
		if v := w.verify(t, admin, w.before); v.lost+v.misplaced != 0 {
			t.Errorf("against the directory the shards serve (no entry): %v", v)
		}
		time.Sleep(rebalance.PlacementRecheck + 100*time.Millisecond)
		if err := r.Do(ctx, w.users[1], func(int) error { return nil }); err != nil {
			t.Errorf("after the recheck interval, Do of another user through the Repin: %v", err)
		}
		if err := r.Move(ctx, map[string]int{w.users[1]: (d.Locate(w.users[1]) + 1) % 3}); err != nil {
			t.Errorf("after the second pin, a Move of another user: %v", err)
		}
	})
}

// diesInRecordFinished is a process that dies inside RecordFinished after the shards
// recorded the finish and before the control database did (RecordFinished writes each
// shard, then the control database, each in a transaction of its own).
type diesInRecordFinished struct {
	*sqlstore.Store
	shards []*sql.DB
}

func (d *diesInRecordFinished) RecordFinished(ctx context.Context, migration string) error {
	for _, db := range d.shards {
		if _, err := db.ExecContext(ctx, "UPDATE rebalance_placement SET finished = 1 WHERE migration = ?", migration); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO rebalance_finished (migration) SELECT migration FROM rebalance_placement WHERE migration = ? ON CONFLICT (migration) DO NOTHING", migration); err != nil {
			return err
		}
	}
	return errDied
}

// TestFinishAfterACrashInRecordFinished (SQLite, control database of its own): an Async
// grow (2 -> 3 shards) is run; its Finish dies inside RecordFinished, after every shard
// recorded the grow finished and before the control database did. The restarted process
// makes the Migration again, as the doc says, and finishes: its value claimed nothing
// yet, so Finish claims first (today's change), and every shard refuses the claim with
// ErrFinished ("finished here"); Run says ErrFinished too. Both say the grow is finished,
// yet the control database does not record it, so the restarted value's Do reads a new
// user's missing mark as Unmoved and writes its first message on its before shard, where
// the after sharder (what the shards serve, finished) does not place it. No Finish can
// ever complete: each one's claim is refused by the shards.
// That was the code before: Finish completes the record, and the new user goes to its after
// shard.
func TestFinishAfterACrashInRecordFinished(t *testing.T) {
	e := newSQLite(t, 3)
	ctx := context.Background()
	admin := e.open(t, 2)
	w := newWorld(t, e, 2, 3)
	w.load(t, admin, w.moving(1, 3), 4)
	p := e.open(t, 2)
	m, err := rebalance.New("grow", w.before, w.after, &diesInRecordFinished{Store: p.store, shards: p.dbs}, rebalance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx, slices.Values(w.users)); err != nil {
		t.Fatal(err)
	}
	if err := m.Finish(ctx, slices.Values(w.users)); !errors.Is(err, errDied) {
		t.Fatalf("Finish that dies in RecordFinished: %v", err)
	}
	p.close()
	q := e.open(t, 2) // the restarted process
	again, err := rebalance.New("grow", w.before, w.after, q.store, rebalance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errFinish := again.Finish(ctx, slices.Values(w.users))
	errRun := again.Run(ctx, slices.Values(w.users))
	t.Logf("after the restart: Finish: %v; Run: %v", errFinish, errRun)
	if errFinish != nil {
		t.Errorf("Finish after the restart can never complete (all owners are Done): %v", errFinish)
	}
	n := strconv.Itoa(w.moving(1000, 1)[0])
	w.users = append(w.users, n)
	w.acked[n] = new(atomic.Int64)
	wrote := -1
	if err := again.Do(ctx, n, func(s int) error { wrote = s; return insertAcked(ctx, e, q, w, n, s) }); err != nil {
		t.Logf("Do of a new user: %v", err)
	} else if wrote != w.after.Locate(n) {
		t.Errorf("new user %s written on shard %d after the finish the shards record; the after sharder places it on %d", n, wrote, w.after.Locate(n))
	}
	if v := w.verify(t, admin, w.after); v.lost+v.misplaced != 0 {
		t.Errorf("against the after sharder: %v", v)
	}
}

// diesAfterControl is a process that dies inside RecordFinished after shard 0 and the
// control database recorded the finish (one database where the control is in shard 0, as
// on PostgreSQL here) and before the other shards did.
type diesAfterControl struct {
	*sqlstore.Store
	p  *proc
	pg bool
}

func (d *diesAfterControl) RecordFinished(ctx context.Context, migration string) error {
	q := func(s string) string {
		if d.pg {
			return strings.ReplaceAll(s, "?", "$1")
		}
		return s
	}
	for _, db := range []*sql.DB{d.p.dbs[0], d.p.ctl} {
		if _, err := db.ExecContext(ctx, q("UPDATE rebalance_placement SET finished = 1 WHERE migration = ?"), migration); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, q("INSERT INTO rebalance_finished (migration) VALUES (?) ON CONFLICT (migration) DO NOTHING"), migration); err != nil {
			return err
		}
	}
	return errDied
}

// TestFinishAfterACrashRecordingTheControl: an Async grow (2 -> 3 shards) runs; its Finish
// dies inside RecordFinished once shard 0 and the control database recorded it, before
// shards 1 and 2 did. The restarted process finishes again, as the doc says: the control
// database says finished, and Finish returned nil at once, leaving shards 1 and 2 serving
// the grow unfinished. The migration back (3 -> 2) was then refused on them for ever
// (ErrPlacement: an unfinished migration is served), with no call that could finish the
// record. That was the code before: a Finish of a migration recorded finished completes the
// record on every shard.
func TestFinishAfterACrashRecordingTheControl(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.moving(1, 3), 4)
		p := e.open(t, 2)
		dies := &diesAfterControl{Store: p.store, p: p, pg: e.dialect == sqlstore.PostgreSQL}
		m, err := rebalance.New("grow", w.before, w.after, dies, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, slices.Values(w.users)); !errors.Is(err, errDied) {
			t.Fatalf("Finish that dies in RecordFinished: %v", err)
		}
		p.close()
		q := e.open(t, 2) // the restarted process
		again, err := rebalance.New("grow", w.before, w.after, q.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatalf("Finish after the restart: %v", err)
		}
		back, err := rebalance.New("back", w.after, w.before, q.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := back.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatalf("the migration back, after the grow's Finish returned nil: %v", err)
		}
		if err := back.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatalf("the migration back: Finish: %v", err)
		}
		if v := w.verify(t, admin, w.before); v.lost+v.misplaced+v.duplicated != 0 {
			t.Errorf("against the before sharder, after the migration back: %v", v)
		}
	})
}
