package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
				admin, w, u, a, b := oneMovingUser(t, e)
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
// writes a moving user's rows on the old shard, before the move fences the user, while it
// copies the user, or (its snapshot older than the fences) after the window, and commits
// only later. Every write that commits reaches the new shard: the move waits for the writer
// (the copy, the replay and the window's sums see only committed rows, so without the wait
// the new shard served the user without the write, and the deletion of the old copy took
// the write with it, an update, or left it behind where nobody reads, an insert, while Run
// returned nil), or the writer fails and nothing was acknowledged.
func TestWriteThatSpansTheWindow(t *testing.T) {
	const insert, update = "INSERT INTO messages (id, user_id, time, message, sender) VALUES (900000001, $1, 0, 'late', 0)",
		"UPDATE messages SET message = 'late' WHERE user_id = $1"
	for _, tc := range []struct {
		name, write string
		when        string // "before" the move, "during" the copy, "after" the window
		snapshot    bool   // the writer reads first (REPEATABLE READ on PostgreSQL), so its snapshot predates the fences
		rows, late  int    // the user's rows on the new shard at the end if the write commits, and of them written late
	}{
		{name: "insert before the fence", write: insert, when: "before", rows: 21, late: 1},
		{name: "update before the fence", write: update, when: "before", rows: 20, late: 20},
		{name: "insert during the copy", write: insert, when: "during", rows: 21, late: 1},
		{name: "update during the copy", write: update, when: "during", rows: 20, late: 20},
		{name: "insert during the copy, older snapshot", write: insert, when: "during", snapshot: true, rows: 21, late: 1},
		{name: "insert after the window, older snapshot", write: insert, when: "after", snapshot: true, rows: 21, late: 1},
		{name: "update after the window, older snapshot", write: update, when: "after", snapshot: true, rows: 20, late: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				ctx := context.Background()
				admin, w, u, a, b := oneMovingUser(t, e)
				var opts *sql.TxOptions
				if tc.snapshot && e.dialect == sqlstore.PostgreSQL {
					opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
				}
				tx, err := admin.dbs[a].BeginTx(ctx, opts)
				require.NoError(t, err)
				defer tx.Rollback()
				if tc.snapshot {
					var n int
					require.NoError(t, tx.QueryRow("SELECT COUNT(*) FROM messages").Scan(&n))
				}
				wrote := make(chan error, 1)
				write := func() {
					_, err := tx.Exec(tc.write, u)
					wrote <- err
				}
				var st rebalance.SharedStore[*sql.Tx] = e.open(t, 2).store
				switch tc.when {
				case "before":
					write()
				case "during":
					st = &lateChange{SharedStore: st, between: write}
				case "after":
					st = &beforeDeletion{SharedStore: st, before: write}
				}
				m, err := rebalance.NewShared("grow", w.before, w.after, st, rebalance.SharedOptions{})
				require.NoError(t, err)
				done := make(chan error, 1)
				go func() { done <- m.Run(ctx, slices.Values(w.users)) }()
				var werr error
				select {
				case werr = <-wrote:
				case err := <-done:
					t.Fatalf("Run returned %v before the writer wrote", err)
				}
				// The writer commits once Run has returned, or has waited a second (for it).
				var runErr error
				returned := false
				if werr == nil {
					select {
					case runErr = <-done:
						returned = true
					case <-time.After(time.Second):
					}
					werr = tx.Commit()
				} else {
					tx.Rollback()
				}
				if !returned {
					runErr = <-done
				}
				require.NoError(t, runErr)
				want := [2]int{20, 0}
				if werr == nil {
					want = [2]int{tc.rows, tc.late}
				}
				t.Logf("the writer: %v", werr)
				var rows, late int
				require.NoError(t, admin.dbs[b].QueryRow("SELECT COUNT(*), COALESCE(SUM(CASE WHEN message = 'late' THEN 1 ELSE 0 END), 0) FROM messages WHERE user_id = $1", u).Scan(&rows, &late))
				require.Equal(t, want, [2]int{rows, late}, "the new shard's rows of the user, and of them written late (the writer: %v)", werr)
				n, err := admin.store.Count(ctx, u, a)
				require.NoError(t, err)
				require.Zero(t, n, "rows of the user left on the old shard")
			})
		})
	}
}

// TestCaptureSwitchedOff: the guard and the change capture are the triggers of each moved
// table, and a write that does not fire them goes unseen by the replay and unrefused by a
// moved owner's fence, so the deletion of the old copy takes it. A writer as a replica (a
// logical replication's apply, a session with session_replication_role = replica) fired
// none on PostgreSQL: the triggers fire ALWAYS now. A table whose triggers are gone
// (dropped, or the table created again) or disabled stops the move: in its window, the old
// shard serving the owner again; after it, before the deletion takes a row the guard let
// through.
func TestCaptureSwitchedOff(t *testing.T) {
	off := func(e *engine) string {
		if e.dialect == sqlstore.PostgreSQL {
			return "ALTER TABLE messages DISABLE TRIGGER rebalance_changes_messages"
		}
		return "DROP TRIGGER rebalance_changes_messages_update"
	}
	for _, tc := range []struct {
		name   string
		pgOnly bool
	}{{name: "replica writer after the window", pgOnly: true}, {name: "off during the copy"}, {name: "off after the window"}} {
		t.Run(tc.name, func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				if tc.pgOnly && e.dialect == sqlstore.SQLite {
					t.Skip("SQLite has no replica role")
				}
				ctx := context.Background()
				admin, w, u, a, _ := oneMovingUser(t, e)
				var late error
				write := func() {
					tx, err := admin.dbs[a].Begin()
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					if tc.pgOnly {
						if _, err := tx.Exec("SET LOCAL session_replication_role = replica"); err != nil {
							t.Fatal(err)
						}
					}
					if _, late = tx.Exec("UPDATE messages SET message = 'late' WHERE user_id = $1", u); late == nil {
						late = tx.Commit()
					}
				}
				var st rebalance.SharedStore[*sql.Tx]
				switch tc.name {
				case "replica writer after the window":
					st = &beforeDeletion{SharedStore: e.open(t, 2).store, before: write}
				case "off during the copy":
					st = &lateChange{SharedStore: e.open(t, 2).store, between: func() { mustExec(t, admin.dbs[a], off(e)) }}
				default:
					st = &beforeDeletion{SharedStore: e.open(t, 2).store, before: func() { mustExec(t, admin.dbs[a], off(e)); write() }}
				}
				m, err := rebalance.NewShared("grow", w.before, w.after, st, rebalance.SharedOptions{})
				if err != nil {
					t.Fatal(err)
				}
				err = m.Run(ctx, slices.Values(w.users))
				if tc.pgOnly {
					if err != nil {
						t.Fatal(err)
					}
					if late == nil || !strings.Contains(late.Error(), "not served here") {
						t.Errorf("the replica's write after the window: %v, want refused: ...not served here...", late)
					}
					w.requireClean(t, admin, w.after)
					return
				}
				if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "change capture of table messages is missing or switched off") {
					t.Fatalf("Run: %v, want ErrSchema: ...change capture of table messages is missing or switched off...", err)
				}
				fences, ferr := admin.store.Fences(ctx, []string{u}, a)
				if ferr != nil {
					t.Fatal(ferr)
				}
				if tc.name == "off during the copy" {
					if !servesAgain(fences[0]) {
						t.Errorf("the old shard's fence: %v, want serving again", fences[0].State)
					}
				} else if late != nil {
					t.Errorf("the write after the window with the guard off: %v", late)
				}
				// The old copy is whole, with the late write if any.
				if n, err := admin.store.Count(ctx, u, a); err != nil || n != 20 {
					t.Errorf("old shard holds %d of the user's 20 rows (%v)", n, err)
				}
				if n := len(texts(t, admin.dbs[a], fmt.Sprintf("SELECT message FROM messages WHERE user_id = %s AND message = 'late'", u))); tc.name == "off after the window" && n != 20 {
					t.Errorf("old shard holds %d rows of the late write, want 20", n)
				}
				// Init puts the capture back as it was.
				e.open(t, 1)
				q := "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'rebalance_changes_messages%' ORDER BY 1"
				want := []string{"rebalance_changes_messages_delete", "rebalance_changes_messages_insert", "rebalance_changes_messages_update"}
				if e.dialect == sqlstore.PostgreSQL {
					q, want = "SELECT tgname::text || ' ' || tgenabled::text FROM pg_trigger WHERE tgname LIKE 'rebalance_changes_messages%'", []string{"rebalance_changes_messages A"}
				}
				if got := texts(t, admin.dbs[a], q); !slices.Equal(got, want) {
					t.Errorf("after Init the old shard's capture triggers are %q, want %q", got, want)
				}
			})
		})
	}
}

// TestWriterLeftOpen (PostgreSQL): a session that wrote a moving user's rows around the
// library and stays idle in its transaction holds the user's stripe, and the mover's window
// waited for it for as long as it stayed open, the user served by no shard; a prepared
// transaction (PREPARE TRANSACTION) keeps the stripe after its session ends. The wait now
// ends after Options.WriterWait with ErrWritersOpen naming the session, and the old shard
// serves the user again; once the transaction commits, the next Run moves the user with its
// write.
func TestWriterLeftOpen(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	for _, prepared := range []bool{false, true} {
		t.Run(map[bool]string{false: "idle in transaction", true: "prepared"}[prepared], func(t *testing.T) {
			ctx := context.Background()
			e := newPostgres(t, 2)
			e.opts.WriterWait = 300 * time.Millisecond
			admin, w, u, a, b := oneMovingUser(t, e)
			var writer *sql.Conn
			var pid int
			end := func(how string) { // COMMIT or ROLLBACK
				if writer == nil {
					return
				}
				var err error
				if prepared {
					_, err = admin.dbs[a].Exec(how + " PREPARED 'left-open'")
				} else {
					_, err = writer.ExecContext(ctx, how)
				}
				writer.Close()
				writer = nil
				require.NoError(t, err)
			}
			t.Cleanup(func() { end("ROLLBACK") })
			st := &lateChange{SharedStore: e.open(t, 2).store, between: func() {
				var err error
				writer, err = admin.dbs[a].Conn(ctx)
				require.NoError(t, err)
				require.NoError(t, writer.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid))
				for _, q := range []string{"BEGIN", fmt.Sprintf("UPDATE messages SET message = 'open' WHERE user_id = %s", u)} {
					_, err := writer.ExecContext(ctx, q)
					require.NoError(t, err)
				}
				if prepared {
					_, err := writer.ExecContext(ctx, "PREPARE TRANSACTION 'left-open'")
					require.NoError(t, err)
				}
			}}
			m, err := rebalance.NewShared("grow", w.before, w.after, st, rebalance.SharedOptions{})
			require.NoError(t, err)
			err = m.Run(ctx, slices.Values(w.users))
			named := fmt.Sprintf("pid %d (", pid)
			if prepared {
				named = "a prepared transaction"
			}
			if !errors.Is(err, sqlstore.ErrWritersOpen) || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), "serves the owners again") {
				t.Fatalf("Run: %v, want ErrWritersOpen naming %s, the old shard serving again", err, named)
			}
			if !prepared && !strings.Contains(err.Error(), "idle in transaction") {
				t.Errorf("Run: %v, want the session's state: idle in transaction", err)
			}
			fences, err := admin.store.Fences(ctx, []string{u}, a)
			if err != nil || !servesAgain(fences[0]) {
				t.Fatalf("the old shard's fence: %v (%v), want serving", fences, err)
			}
			end("COMMIT")
			require.NoError(t, m.Run(ctx, slices.Values(w.users)))
			w.requireClean(t, admin, w.after)
			if got := texts(t, admin.dbs[b], fmt.Sprintf("SELECT message FROM messages WHERE user_id = %s AND message = 'open'", u)); len(got) != 20 {
				t.Errorf("the new shard holds %d of the transaction's 20 updated rows", len(got))
			}
		})
	}
}

// TestWriteAroundTheFence: a write that passes the old shard's guard after the window (the
// guard bypassed as the mover bypasses it for its own writes; a trigger disabled and enabled
// again) lands on an old copy that the window's sums counted and no replay will look at. The
// deletion of the old copy took it with the rest, and Run returned nil. Now a deletion that
// finds more rows than the window counted (whole, in its transaction; in chunks, by a count
// before the first) deletes nothing and stops with ErrCopyMismatch.
func TestWriteAroundTheFence(t *testing.T) {
	// Deleted whole (20 rows fit in a deletion), or in chunks of 5 after a count.
	for _, deleteRows := range []int{0, 5} {
		t.Run(fmt.Sprintf("delete=%d", deleteRows), func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				ctx := context.Background()
				admin, w, u, a, b := oneMovingUser(t, e)
				var werr error
				st := &afterCommit{SharedStore: e.open(t, 2).store, shard: b, after: func() {
					werr = execAsMover(e.dialect, admin.dbs[a], fmt.Sprintf("INSERT INTO messages (id, user_id, time, message, sender) SELECT MAX(id) + 1000000, %s, 0, 'around', 0 FROM messages", u))
				}}
				m, err := rebalance.NewShared("grow", w.before, w.after, st, rebalance.SharedOptions{DeleteRows: deleteRows})
				require.NoError(t, err)
				err = m.Run(ctx, slices.Values(w.users))
				require.NoError(t, werr)
				if !errors.Is(err, rebalance.ErrCopyMismatch) || !strings.Contains(err.Error(), "than the window counted (20)") {
					t.Fatalf("Run: %v, want ErrCopyMismatch: ...than the window counted (20)...", err)
				}
				if n, err := admin.store.Count(ctx, u, a); err != nil || n != 21 {
					t.Errorf("the old shard holds %d of the user's 20 rows and the write around the fence (%v), want 21", n, err)
				}
			})
		})
	}
}

// afterCommit runs after once the first time a fence on shard is set serving: the commit
// of a move to it.
type afterCommit struct {
	rebalance.SharedStore[*sql.Tx]
	shard int
	once  sync.Once
	after func()
}

func (c *afterCommit) SetFence(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) error {
	err := c.SharedStore.SetFence(ctx, migration, owners, shard, state, token)
	if err == nil && shard == c.shard && state == rebalance.Serving {
		c.once.Do(c.after)
	}
	return err
}

func (c *afterCommit) DeleteOwners(ctx context.Context, migration string, token uint64, owners []string, shard int, most int) (int, bool, error) {
	return c.SharedStore.(rebalance.OwnersDeleter).DeleteOwners(ctx, migration, token, owners, shard, most)
}

// TestWriteAroundTheFenceResumed: a Run stops between the commit on the new shard and the
// deletion of the old copy, or part way through its deletion in chunks, and a write goes
// around the old copy's fence before the next Run: an UPDATE, which leaves the count as the
// window found it, or an INSERT into what the chunks left. The next Run deleted the old copy
// with the write while it returned nil. Now the window keeps its sums on the old shard
// (rebalance.SumKeeper), replaced by the count of the rows left before each chunk, and a
// resumed deletion compares the old copy with them first: the Run stops with
// ErrCopyMismatch, deleting nothing, until the kept sums are deleted by hand. Untouched, the
// old copy goes as before, also where the first Run stopped after a chunk of it.
func TestWriteAroundTheFenceResumed(t *testing.T) {
	const update = "UPDATE messages SET message = 'around' WHERE id = (SELECT MIN(id) FROM messages WHERE user_id = %s)"
	const insert = "INSERT INTO messages (id, user_id, time, message, sender) SELECT MAX(id) + 1000000, %s, 0, 'around', 0 FROM messages"
	for _, c := range []struct {
		name        string
		around      string // the write, if any
		deleteRows  int    // 5: the user's 20 rows in chunks
		callsBefore int    // steps of the deletion (the count of the rows left kept, then a chunk, ...) done before the stop
		want        string // the error, and Verify's rows then and now
		left        int    // rows on the old shard after the refusal
	}{
		{name: "untouched"},
		{name: "around", around: update, want: "content differs", left: 20},
		{name: "around-before-the-chunks", around: update, deleteRows: 5, want: "content differs", left: 20},
		{name: "stopped-mid-deletion", deleteRows: 5, callsBefore: 2},
		{name: "around-mid-deletion", around: insert, deleteRows: 5, callsBefore: 3, want: "deletion in chunks left 15", left: 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				ctx := context.Background()
				admin, w, u, a, b := oneMovingUser(t, e)
				mover := e.open(t, 2)
				stopped := errors.New("stopped in the deletion")
				opts := rebalance.SharedOptions{DeleteRows: c.deleteRows}
				m, err := rebalance.NewShared("grow", w.before, w.after, &failDeletion{SharedStore: mover.store, err: stopped, after: c.callsBefore}, opts)
				require.NoError(t, err)
				require.ErrorIs(t, m.Run(ctx, slices.Values(w.users)), stopped)
				if fences, err := admin.store.Fences(ctx, []string{u}, b); err != nil || fences[0].State != rebalance.Serving {
					t.Fatalf("the new shard's fence: %v (%v), want serving", fences, err)
				}
				if c.around != "" {
					require.NoError(t, execAsMover(e.dialect, admin.dbs[a], fmt.Sprintf(c.around, u)))
				}
				m, err = rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](mover.store), opts)
				require.NoError(t, err)
				err = m.Run(ctx, slices.Values(w.users))
				// The Done marks delete the kept sums: none is left after the migration.
				noneKept := func() {
					if got := texts(t, admin.ctl, "SELECT owner FROM rebalance_kept"); len(got) != 0 {
						t.Errorf("sums still kept of %q", got)
					}
				}
				if c.around == "" {
					require.NoError(t, err)
					w.requireClean(t, admin, w.after)
					noneKept()
					return
				}
				if !errors.Is(err, rebalance.ErrCopyMismatch) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Run: %v, want ErrCopyMismatch: ...%s...", err, c.want)
				}
				if got := texts(t, admin.dbs[a], fmt.Sprintf("SELECT message FROM messages WHERE user_id = %s", u)); len(got) != c.left || !slices.Contains(got, "around") {
					t.Fatalf("the old shard holds %d rows of the user (the write around the fence among them: %v), want %d with it", len(got), slices.Contains(got, "around"), c.left)
				}
				// Verify names it too.
				r, err := m.Verify(ctx, slices.Values(w.users))
				require.NoError(t, err)
				then := fmt.Sprintf("(%d rows then, %d now)", min(c.left, 20-5*(c.callsBefore/2)), c.left)
				if len(r.Problems) != 1 || r.Problems[0].Owner != u || !strings.Contains(r.Problems[0].What, "differs from the sums kept of it "+then) {
					t.Errorf("Verify: %+v, want the old copy changed since its sums were kept %s", r.Problems, then)
				}
				// Settled by hand: the kept sums deleted, the next Run deletes the old copy.
				mustExec(t, admin.ctl, "DELETE FROM rebalance_kept WHERE owner = '"+u+"'")
				require.NoError(t, m.Run(ctx, slices.Values(w.users)))
				w.requireClean(t, admin, w.after)
				noneKept()
			})
		})
	}
}

// failDeletion fails the step of a deletion (of rows, or the count of the rows left kept
// before a chunk) that follows after of them, with err.
type failDeletion struct {
	rebalance.SharedStore[*sql.Tx]
	err   error
	after int
	calls atomic.Int64
}

func (f *failDeletion) fail() error {
	if f.calls.Add(1) == int64(f.after)+1 {
		return f.err
	}
	return nil
}

func (f *failDeletion) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	if err := f.fail(); err != nil {
		return 0, err
	}
	return f.SharedStore.DeleteChunk(ctx, migration, token, owners, shard, limit)
}

func (f *failDeletion) DeleteOwners(ctx context.Context, migration string, token uint64, owners []string, shard int, most int) (int, bool, error) {
	if err := f.fail(); err != nil {
		return 0, false, err
	}
	return f.SharedStore.(rebalance.OwnersDeleter).DeleteOwners(ctx, migration, token, owners, shard, most)
}

func (f *failDeletion) KeepSums(ctx context.Context, migration string, token uint64, owners []string, shard int, sums []rebalance.Sum) error {
	if len(sums) == 1 && sums[0].Digest == "" { // the rows left, kept before each chunk
		if err := f.fail(); err != nil {
			return err
		}
	}
	return f.SharedStore.(rebalance.SumKeeper).KeepSums(ctx, migration, token, owners, shard, sums)
}

func (f *failDeletion) KeptSums(ctx context.Context, migration string, owners []string, shard int) ([]rebalance.Sum, []bool, error) {
	return f.SharedStore.(rebalance.SumKeeper).KeptSums(ctx, migration, owners, shard)
}

// servesAgain says whether f is an old shard's fence after a move stopped in its window: it
// serves the owner again, fenced exporting by the migration (it records the owner's changes,
// and the next Run knows the rows on the new shard for a copy of its own).
func servesAgain(f rebalance.Fence) bool {
	return f.State == rebalance.Exporting && f.Migration != ""
}
