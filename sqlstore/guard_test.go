package sqlstore_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// TestWriteOutsideAnAccess: a writer that does not go through the library (a batch job, an
// admin's SQL session, or an access of one user that writes another user's rows) writes a
// moving user's rows where the user is not served: on the old shard after the window (the
// deletion of the old copies would take the write with them, and Run returned nil) or on
// the new shard during the copy. The shard itself refuses the write, in the writer's own
// statement, and the move ends with every row of the user on its new shard.
func TestWriteOutsideAnAccess(t *testing.T) {
	for _, tc := range []struct {
		name, write string
		newShard    bool // during the copy, on the new shard; else after the window, on the old
		noMarker    bool // SQLite: the guard's marker row deleted by hand just before the write
	}{
		{name: "update on the old shard", write: "UPDATE messages SET message = 'late' WHERE user_id = $1"},
		{name: "insert on the old shard", write: "INSERT INTO messages (id, user_id, time, message, sender) SELECT MAX(id) + 1000000, $1, 0, 'late', 0 FROM messages"},
		{name: "delete on the old shard", write: "DELETE FROM messages WHERE user_id = $1"},
		{name: "insert on the new shard", newShard: true, write: "INSERT INTO messages (id, user_id, time, message, sender) VALUES (-1, $1, 0, 'late', 0)"},
		{name: "update on the old shard, no marker row", noMarker: true, write: "UPDATE messages SET message = 'late' WHERE user_id = $1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				ctx := context.Background()
				admin := e.open(t, 2)
				w := newWorld(t, e, 1, 2)
				w.load(t, admin, w.moving(1, 1), 20)
				u := w.users[0]
				a, b := w.before.Locate(u), w.after.Locate(u)
				var werr error
				write := func(shard int) func() {
					return func() {
						if tc.noMarker && e.dialect == sqlstore.SQLite {
							for _, db := range admin.dbs {
								mustExec(t, db, "DELETE FROM rebalance_mover")
							}
						}
						_, werr = admin.dbs[shard].Exec(tc.write, u)
					}
				}
				var st rebalance.SharedStore[*sql.Tx] = &beforeDeletion{SharedStore: e.open(t, 2).store, before: write(a)}
				if tc.newShard {
					st = &lateChange{SharedStore: e.open(t, 2).store, between: write(b)}
				}
				m, err := rebalance.NewShared("grow", w.before, w.after, st, rebalance.SharedOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Run(ctx, slices.Values(w.users)); err != nil {
					t.Fatal(err)
				}
				if werr == nil || !strings.Contains(werr.Error(), "not served here") {
					t.Errorf("the write outside an access: %v, want refused: ...not served here...", werr)
				}
				w.requireClean(t, admin, w.after)
				if n, err := admin.store.Count(ctx, u, b); err != nil || n != 20 {
					t.Errorf("new shard holds %d of the user's 20 rows (%v)", n, err)
				}
			})
		})
	}
}

// execAsMover runs q on db as the mover writes (see TestWriteOutsideAnAccess): for a test
// that stands in for the mover, or for a fault the guard would refuse.
func execAsMover(dialect sqlstore.Dialect, db *sql.DB, q string, args ...any) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	mark, unmark := "UPDATE rebalance_mover SET writing = 1", "UPDATE rebalance_mover SET writing = 0"
	if dialect == sqlstore.PostgreSQL {
		mark, unmark = "SELECT set_config('rebalance.mover', 'on', true)", "SELECT 1"
	}
	for _, s := range []string{mark, q, unmark} {
		var a []any
		if s == q {
			a = args
		}
		if _, err := tx.Exec(s, a...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// TestWriteThatSpansTheWindow: a writer around the library (a batch job's transaction)
// writes a moving user's rows on the old shard, before the move fences the user or while it
// copies the user, and commits only later. The move waits for it: the copy, the replay and
// the window's sums see only committed rows, so without the wait the new shard served the
// user without the write, and the deletion of the old copy took the write with it (an
// update) or left it behind where nobody reads (an insert), while Run returned nil.
func TestWriteThatSpansTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name, write string
		during      bool // while the mover copies: else before it starts
		rows, late  int  // the user's rows on the new shard at the end, and of them written late
	}{
		{name: "insert before the fence", write: "INSERT INTO messages (id, user_id, time, message, sender) VALUES (900000001, $1, 0, 'late', 0)", rows: 21, late: 1},
		{name: "update before the fence", write: "UPDATE messages SET message = 'late' WHERE user_id = $1", rows: 20, late: 20},
		{name: "insert during the copy", during: true, write: "INSERT INTO messages (id, user_id, time, message, sender) VALUES (900000001, $1, 0, 'late', 0)", rows: 21, late: 1},
		{name: "update during the copy", during: true, write: "UPDATE messages SET message = 'late' WHERE user_id = $1", rows: 20, late: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				ctx := context.Background()
				admin := e.open(t, 2)
				w := newWorld(t, e, 1, 2)
				w.load(t, admin, w.moving(1, 1), 20)
				u := w.users[0]
				a, b := w.before.Locate(u), w.after.Locate(u)
				writer := make(chan *sql.Tx, 1)
				begin := func() {
					tx, err := admin.dbs[a].Begin()
					if err == nil {
						if _, err = tx.Exec(tc.write, u); err != nil {
							tx.Rollback()
						}
					}
					if err != nil {
						t.Errorf("the writer: %v", err)
						tx = nil
					}
					writer <- tx
				}
				var st rebalance.SharedStore[*sql.Tx] = e.open(t, 2).store
				if tc.during {
					st = &lateChange{SharedStore: st, between: begin}
				} else {
					begin()
				}
				m, err := rebalance.NewShared("grow", w.before, w.after, st, rebalance.SharedOptions{})
				require.NoError(t, err)
				done := make(chan error, 1)
				go func() { done <- m.Run(ctx, slices.Values(w.users)) }()
				var tx *sql.Tx
				select {
				case tx = <-writer:
				case err := <-done:
					t.Fatalf("Run returned %v before the writer wrote", err)
				}
				if tx == nil {
					t.FailNow()
				}
				// The writer commits once Run has returned, or has waited a second (for it).
				var runErr error
				returned := false
				select {
				case runErr = <-done:
					returned = true
				case <-time.After(time.Second):
				}
				require.NoError(t, tx.Commit())
				if !returned {
					runErr = <-done
				}
				require.NoError(t, runErr)
				var rows, late int
				require.NoError(t, admin.dbs[b].QueryRow("SELECT COUNT(*), COALESCE(SUM(CASE WHEN message = 'late' THEN 1 ELSE 0 END), 0) FROM messages WHERE user_id = $1", u).Scan(&rows, &late))
				require.Equal(t, [2]int{tc.rows, tc.late}, [2]int{rows, late}, "the new shard's rows of the user, and of them written late")
				n, err := admin.store.Count(ctx, u, a)
				require.NoError(t, err)
				require.Zero(t, n, "rows of the user left on the old shard")
			})
		})
	}
}
