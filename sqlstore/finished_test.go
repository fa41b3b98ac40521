package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// insertAcked writes one acknowledged message of user u on shard s through p's pools.
func insertAcked(ctx context.Context, e *engine, p *proc, w *world, u string, s int) error {
	id := nextID.Add(1)
	uid, _ := strconv.ParseInt(u, 10, 64)
	q := "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)"
	if e.dialect == sqlstore.SQLite {
		q = "INSERT INTO messages (id, user_id, time, message, sender) VALUES (?, ?, ?, ?, ?)"
	}
	if _, err := p.dbs[s].ExecContext(ctx, q, id, uid, id, "acknowledged", int64(7)); err != nil {
		return err
	}
	w.mu.Lock()
	w.ledger[id] = uid
	w.mu.Unlock()
	w.acked[u].Add(1)
	return nil
}

// TestFinishIsRecordedInTheControlDatabase: after an in-process Migration's Run and
// Finish, a new user's first message goes to its after shard; the process restarts with
// the same ID (the configuration still names the migration). The new value reads the finish
// the control database recorded: Do routes the new user by the after sharder, and Run is
// refused (ErrFinished) rather than copy the new user's empty old shard over its message.
func TestFinishIsRecordedInTheControlDatabase(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 1, 2)
		w.load(t, admin, w.moving(1, 3), 4)
		p := e.open(t, 2)
		m, err := rebalance.New("finished", w.before, w.after, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		n := strconv.Itoa(w.moving(1000, 1)[0])
		w.users = append(w.users, n)
		w.acked[n] = new(atomic.Int64)
		write := func(m *rebalance.Migration, p *proc) {
			t.Helper()
			if err := m.Do(ctx, n, func(s int) error {
				if want := w.after.Locate(n); s != want {
					return errors.New("new user " + n + " routed to shard " + strconv.Itoa(s) + " after the finish, want " + strconv.Itoa(want))
				}
				return insertAcked(ctx, e, p, w, n, s)
			}); err != nil {
				t.Fatal(err)
			}
		}
		write(m, p)
		p.close()
		q := e.open(t, 2) // the restarted process
		again, err := rebalance.New("finished", w.before, w.after, q.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		write(again, q)
		if err := again.Run(ctx, slices.Values(w.users)); !errors.Is(err, rebalance.ErrFinished) {
			t.Fatalf("Run after the restart: %v, want ErrFinished", err)
		}
		if err := again.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal("Finish after the restart:", err)
		}
		w.requireClean(t, admin, w.after)
	})
}

// growUnderWay loads two users the grow from 2 shards to 3 moves, and moves the first of
// them through a Migration "grow" of a process p that it returns with the grow unfinished.
func growUnderWay(t *testing.T, e *engine) (admin *proc, w *world, p *proc, grow *rebalance.Migration) {
	t.Helper()
	admin = e.open(t, 2)
	w = newWorld(t, e, 2, 3)
	w.load(t, admin, w.moving(1, 2), 4)
	p = e.open(t, 2)
	grow, err := rebalance.New("grow", w.before, w.after, p.store, rebalance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := grow.Run(context.Background(), slices.Values(w.users[:1])); err != nil {
		t.Fatal(err)
	}
	return admin, w, p, grow
}

// runAndFinish runs m over users, then finishes it.
func runAndFinish(t *testing.T, m *rebalance.Migration, users []string) {
	t.Helper()
	ctx := context.Background()
	if err := m.Run(ctx, slices.Values(users)); err != nil {
		t.Fatal(err)
	}
	if err := m.Finish(ctx, slices.Values(users)); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationBackBeforeTheFirstFinished: the operator makes the migration back (3 shards
// -> 2) while the grow (2 -> 3) has moved one of two users, and the application routes
// through it. The back migration's before sharder places the user the grow has not moved
// on a shard that holds none of its rows: a write there, then the back Run's copy of that
// shard over the user's old rows, lost them while Run and Finish returned nil. Now the
// grow's claim records its placement on the shards: the back value's Do is refused before
// it calls the function, and so is its Run; once the grow has finished, the back migration
// runs and finishes, losing nothing.
func TestMigrationBackBeforeTheFirstFinished(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin, w, p, grow := growUnderWay(t, e)
		three, _ := shard.NewJump(3)
		two, _ := shard.NewJump(2)
		back, err := rebalance.New("back", three, two, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		u := w.users[1] // not moved by the grow: its rows are where two places it
		called := false
		err = back.Do(ctx, u, func(s int) error { called = true; return insertAcked(ctx, e, p, w, u, s) })
		if !errors.Is(err, rebalance.ErrPlacement) || called {
			t.Fatalf("back's Do while the grow is unfinished: %v (function called: %v), want ErrPlacement before the function", err, called)
		}
		if err := back.Run(ctx, slices.Values(w.users)); !errors.Is(err, rebalance.ErrPlacement) {
			t.Fatalf("back's Run while the grow is unfinished: %v, want ErrPlacement", err)
		}
		runAndFinish(t, grow, w.users)
		w.requireClean(t, admin, w.after)
		// The grow finished: a new value of the back migration is served, and moves.
		back, err = rebalance.New("back", three, two, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := back.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, p, w, u, s) }); err != nil {
			t.Fatal(err)
		}
		runAndFinish(t, back, w.users)
		w.requireClean(t, admin, two)
	})
}

// TestRepinBeforeTheMigrationFinished: the operator pins a user with a Repin over the grow's
// after layout while the grow (2 -> 3) is unfinished. The user the grow has not moved has
// its rows on its 2-shard place; the Repin copied "nothing" from its 3-shard place, and
// while the batch's Finish refused (the rows were left on a shard it does not give the user)
// the Repin's Do, routing by the pending batch, sent the user's writes to the empty shard
// it was to be pinned to. Now the Repin asks the shards first: they serve the grow
// unfinished, and Move and Do are refused until it finished.
func TestRepinBeforeTheMigrationFinished(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin, w, p, grow := growUnderWay(t, e)
		three, _ := shard.NewJump(3)
		// Owners are keys up to a '/': the directory places the fingerprint's probe keys
		// ("rebalance/fingerprint/N") all alike, unlike its rule; it is served all the same.
		d := shard.NewDirectory(three, func(k string) string { o, _, _ := strings.Cut(k, "/"); return o })
		rule, _ := shard.NewJump(3)
		r, err := rebalance.NewRepin("pin", d, rule, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		u := w.users[1] // not moved by the grow
		to := (w.before.Locate(u) + 1) % 3
		if to == w.after.Locate(u) {
			to = (to + 1) % 3
		}
		err = r.Move(ctx, map[string]int{u: to})
		if !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("Repin's Move while the grow is unfinished: %v, want ErrPlacement", err)
		}
		called := false
		err = r.Do(ctx, u, func(int) error { called = true; return nil })
		if !errors.Is(err, rebalance.ErrPlacement) || called {
			t.Errorf("Repin's Do while the grow is unfinished: %v (function called: %v), want ErrPlacement", err, called)
		}
		runAndFinish(t, grow, w.users)
		if err := r.Move(ctx, map[string]int{u: to}); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, d)
	})
}

// TestStaleRouterIsRefused: a process keeps routing by the grow's value after the grow
// finished and the migration back claimed the shards and moved the users back. Its Do
// trusted the placement check of its first call forever, writing by the grow's after
// sharder where the back migration's mover no longer reads. It asks again once
// PlacementRecheck has passed: served the grow, finished, it goes on; once the migration back
// claimed, it is refused, calling no function.
func TestStaleRouterIsRefused(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin, w, p, grow := growUnderWay(t, e)
		a := e.open(t, 2)
		stale, err := rebalance.New("grow", w.before, w.after, a.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		u := w.users[0]
		write := func() error { return stale.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, a, w, u, s) }) }
		if err := write(); err != nil {
			t.Fatal(err)
		}
		runAndFinish(t, grow, w.users)
		time.Sleep(rebalance.PlacementRecheck + 50*time.Millisecond)
		if err := write(); err != nil {
			t.Fatal("the grow finished, served:", err)
		}
		three, _ := shard.NewJump(3)
		two, _ := shard.NewJump(2)
		back, err := rebalance.New("back", three, two, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := back.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(rebalance.PlacementRecheck + 50*time.Millisecond)
		called := false
		err = stale.Do(ctx, u, func(int) error { called = true; return nil })
		if !errors.Is(err, rebalance.ErrPlacement) || called {
			t.Fatalf("the grow's value after the migration back claimed: %v (function called: %v), want ErrPlacement", err, called)
		}
		if err := back.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, two)
	})
}
