package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

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
