package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// The application and the mover of one migration use one API: rebalance.NewShared (fences on
// the shards) or rebalance.New (locks in one process). The tests below mix them, as an
// operator who starts the other tool by mistake would.

// grow is these tests' migration "grow", Jump(1) -> Jump(2), and an owner it moves from
// shard 0 to shard 1.
type grow struct {
	before, after shard.Sharder
	owner         string
}

func newGrow() grow {
	g := grow{before: must(shard.NewJump(1)), after: must(shard.NewJump(2))}
	for u := 1; g.owner == ""; u++ {
		if g.after.Locate(strconv.Itoa(u)) == 1 {
			g.owner = strconv.Itoa(u)
		}
	}
	return g
}

// withRow returns g and an admin process, the owner's row 1 ('old') on shard 0.
func withRow(t *testing.T, e *engine) (grow, *proc) {
	g, admin := newGrow(), e.open(t, 2)
	mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (1, "+g.owner+", 1, 'old', 0)")
	return g, admin
}

// shared is a Shared value of the migration over store.
func (g grow) shared(t *testing.T, store *sqlstore.Store, opts rebalance.SharedOptions) *rebalance.Shared[*sql.Tx] {
	m, err := rebalance.NewShared("grow", g.before, g.after, rebalance.SharedStore[*sql.Tx](store), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// inProcess is an in-process Migration of the migration over store.
func (g grow) inProcess(t *testing.T, store rebalance.Store) *rebalance.Migration {
	m, err := rebalance.New("grow", g.before, g.after, store, rebalance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// deleteHook is a Store that calls beforeDelete once, before its first Delete.
type deleteHook struct {
	*sqlstore.Store
	once         sync.Once
	beforeDelete func(owner string, shard int)
}

func (d *deleteHook) Delete(ctx context.Context, owner string, shard int) error {
	d.once.Do(func() { d.beforeDelete(owner, shard) })
	return d.Store.Delete(ctx, owner, shard)
}

func (d *deleteHook) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	d.once.Do(func() { d.beforeDelete(owner, shard) })
	return d.Store.DeleteChecked(ctx, migration, owner, shard)
}

// messageOn reads row 1's message on shard i directly.
func messageOn(t *testing.T, db *sql.DB) string {
	t.Helper()
	var body string
	if err := db.QueryRow("SELECT message FROM messages WHERE id = 1").Scan(&body); err != nil {
		t.Fatalf("read row 1: %v", err)
	}
	return body
}

// TestSharedAppRefusedWhileInProcessMoverMoves: the application routes by Shared migration
// "grow" and the operator runs its mover through the in-process API with the same ID and
// sharders. That mover sets no fences: the application's update on the owner's old shard
// between its copy and its Delete was acknowledged and then deleted with the old copy, while
// Run and Shared.Finish returned nil. The shards now tell the two APIs apart: the update is
// refused (ErrPlacement), and so is the Shared Finish of the in-process migration.
func TestSharedAppRefusedWhileInProcessMoverMoves(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		g, admin := withRow(t, e)
		ua := g.owner
		app := g.shared(t, e.open(t, 4).store, rebalance.SharedOptions{})
		update := func() error {
			return app.Do(ctx, ua, func(tx *sql.Tx, s int) error {
				_, err := tx.ExecContext(ctx, "UPDATE messages SET message = 'new' WHERE id = 1")
				return err
			})
		}
		var updateErr error
		hook := &deleteHook{Store: e.open(t, 4).store, beforeDelete: func(string, int) { updateErr = update() }}
		mover := g.inProcess(t, hook)
		if err := mover.Run(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatalf("in-process Run: %v", err)
		}
		if !errors.Is(updateErr, rebalance.ErrPlacement) {
			t.Fatalf("the Shared application's update during the in-process move: %v, want ErrPlacement", updateErr)
		}
		finisher := g.shared(t, e.open(t, 4).store, rebalance.SharedOptions{})
		if err := finisher.Finish(ctx, slices.Values([]string{ua})); !errors.Is(err, rebalance.ErrPlacement) {
			t.Fatalf("Shared.Finish of an in-process migration: %v, want ErrPlacement", err)
		}
		if err := mover.Finish(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatal(err)
		}
		// Finished, the kind no longer matters: the Shared application reads the owner
		// where the mover put it, and writes there.
		if err := update(); err != nil {
			t.Fatalf("update after the finish: %v", err)
		}
		if got := messageOn(t, admin.dbs[1]); got != "new" {
			t.Errorf("row 1 on shard 1 reads %q, want the update made after the finish", got)
		}
	})
}

// TestInProcessClaimWaitsForSharedAccess: a Shared access of the migration's ID that found
// the shard serving nothing yet is under way (its UPDATE made, not committed) when the
// in-process mover claims. The claim must wait for it: else the copy reads the row without
// the update, and the Delete, which waits for the update's commit, then deletes it (with the
// checked deletion, the move stops there with ErrCopyMismatch instead: loud, but the write
// is on the old shard, which no longer serves the owner).
func TestInProcessClaimWaitsForSharedAccess(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		g, admin := withRow(t, e)
		ua := g.owner
		app := g.shared(t, e.open(t, 4).store, rebalance.SharedOptions{})
		moverStore := e.open(t, 4).store // Init before the access: it waits for open writes
		updated, release := make(chan struct{}), make(chan struct{})
		var releaseOnce sync.Once
		releaseNow := func() { releaseOnce.Do(func() { close(release) }) }
		applied := make(chan error, 1)
		go func() {
			applied <- app.Do(ctx, ua, func(tx *sql.Tx, s int) error {
				if _, err := tx.ExecContext(ctx, "UPDATE messages SET message = 'new' WHERE id = 1"); err != nil {
					return err
				}
				select {
				case <-updated:
				default:
					close(updated)
				}
				<-release
				return nil
			})
		}()
		<-updated
		// Released when the mover is about to delete the old copy (the claim did not wait),
		// or after a while (the claim waits, as it must).
		hook := &deleteHook{Store: moverStore, beforeDelete: func(string, int) { releaseNow() }}
		timer := time.AfterFunc(time.Second, releaseNow)
		defer timer.Stop()
		mover := g.inProcess(t, hook)
		runErr := mover.Run(ctx, slices.Values([]string{ua}))
		if err := <-applied; err != nil {
			t.Fatalf("the update: %v", err)
		}
		if runErr != nil {
			t.Fatalf("in-process Run: %v", runErr)
		}
		if err := mover.Finish(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatal(err)
		}
		if got := messageOn(t, admin.dbs[1]); got != "new" {
			t.Errorf("after Run and Finish returned nil, row 1 on shard 1 reads %q, want the acknowledged update", got)
		}
	})
}

// TestInProcessRefusedWhileSharedMigrationUnfinished: the other way round. While a Shared
// migration is unfinished, an in-process value of its ID may neither route (its Do does
// not wait for the fences), nor move, nor finish it; once it is finished, it routes.
func TestInProcessRefusedWhileSharedMigrationUnfinished(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		g, admin := withRow(t, e)
		ua := g.owner
		shared := g.shared(t, e.open(t, 4).store, rebalance.SharedOptions{})
		if err := shared.Run(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatal(err)
		}
		inproc := g.inProcess(t, e.open(t, 4).store)
		read := func() error {
			return inproc.Do(ctx, ua, func(s int) error {
				if s != 1 {
					t.Errorf("in-process Do routed owner %s to shard %d, want 1", ua, s)
				}
				return nil
			})
		}
		if err := read(); !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("in-process Do under an unfinished Shared migration: %v, want ErrPlacement", err)
		}
		if err := inproc.Run(ctx, slices.Values([]string{ua})); !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("in-process Run of an unfinished Shared migration: %v, want ErrPlacement", err)
		}
		if err := inproc.Finish(ctx, slices.Values([]string{ua})); err == nil {
			t.Errorf("in-process Finish of an unfinished Shared migration returned nil")
		}
		if done, err := admin.store.IsFinished(ctx, "grow"); err != nil || done {
			t.Fatalf("recorded finished: %v (%v)", done, err)
		}
		if err := shared.Finish(ctx, slices.Values([]string{ua})); err != nil {
			t.Fatal(err)
		}
		time.Sleep(rebalance.PlacementRecheck)
		if err := read(); err != nil {
			t.Errorf("in-process Do after the Shared migration finished: %v", err)
		}
	})
}

// TestInitAddsTheColumnsOfThisBuild: Init adds in_process to a rebalance_placement an
// older build created, and reads the placement recorded there as a Shared migration's: its
// Shared accesses go on, an in-process value of its ID is refused. It adds the bound process
// to an older rebalance_claim, whose claims bound none, and the sums to an older
// rebalance_copying, whose copies recorded none.
func TestInitAddsTheColumnsOfThisBuild(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		g := newGrow()
		p := rebalance.PlacementOf("grow", g.before, g.after)
		for _, dsn := range append(slices.Clone(e.shards), e.control) {
			db, err := sql.Open(e.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, `CREATE TABLE IF NOT EXISTS rebalance_placement (id INTEGER PRIMARY KEY,
				migration TEXT NOT NULL, before_fp BIGINT NOT NULL, after_fp BIGINT NOT NULL, finished INTEGER NOT NULL)`)
			mustExec(t, db, "INSERT INTO rebalance_placement VALUES (0, 'grow', "+strconv.FormatInt(int64(p.Before), 10)+", "+strconv.FormatInt(int64(p.After), 10)+", 0) ON CONFLICT (id) DO NOTHING")
			db.Close()
		}
		control, err := sql.Open(e.driver, e.control)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, control, `CREATE TABLE IF NOT EXISTS rebalance_claim (migration TEXT PRIMARY KEY, election BIGINT NOT NULL,
			token BIGINT NOT NULL, mover TEXT NOT NULL, expires BIGINT NOT NULL)`)
		mustExec(t, control, "INSERT INTO rebalance_claim VALUES ('grow', 0, 3, 'an older build', 0)")
		mustExec(t, control, "CREATE TABLE IF NOT EXISTS rebalance_copying (owner TEXT NOT NULL, shard INTEGER NOT NULL, PRIMARY KEY (owner, shard))")
		mustExec(t, control, "INSERT INTO rebalance_copying VALUES ('u', 1) ON CONFLICT (owner, shard) DO NOTHING")
		defer control.Close()
		store := e.open(t, 4).store
		if err := store.Bind(ctx, "grow", "p"); err != nil {
			t.Errorf("bind to a migration an older build claimed: %v", err)
		}
		if err := store.Bind(ctx, "grow", "q"); !errors.Is(err, rebalance.ErrOtherProcess) {
			t.Errorf("bind of a second process: %v, want ErrOtherProcess", err)
		}
		if err := g.shared(t, store, rebalance.SharedOptions{}).Do(ctx, g.owner, func(tx *sql.Tx, s int) error { return nil }); err != nil {
			t.Errorf("Shared access of the placement an older build recorded: %v", err)
		}
		if err := g.inProcess(t, store).Do(ctx, g.owner, func(int) error { return nil }); !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("in-process access of the placement an older build recorded: %v, want ErrPlacement", err)
		}
		e.open(t, 1) // a second Init finds the column
		// A copy an older build recorded has no sums (NULL: whatever it left is its own).
		var sums sql.NullString
		if err := control.QueryRow("SELECT sums FROM rebalance_copying WHERE owner = 'u'").Scan(&sums); err != nil || sums.Valid {
			t.Errorf("the sums of an older build's copy: %v, %v; want NULL", sums, err)
		}
	})
}

// afterCopied calls hook once, after the first owner is marked Copied through it.
type afterCopied struct {
	*sqlstore.Store
	once sync.Once
	hook func()
}

func (a *afterCopied) SetMark(ctx context.Context, migration, owner string, m rebalance.Mark) error {
	err := a.Store.SetMark(ctx, migration, owner, m)
	if err == nil && m == rebalance.Copied {
		a.once.Do(a.hook)
	}
	return err
}

// TestInProcessColumnAddedAfterTheComparison: after the in-process mover compared the
// owner's copies, the application adds a column on the old shard and fills it. The sums
// leave out what the TableSpec does not list: on SQLite, whose sums check the schema before
// they read, the checked deletion took the column's values with the old copy while Run
// returned nil. The deletion now checks the schema in its own transaction, as PostgreSQL's
// sums statement does: ErrSchema, nothing deleted, in that Run and the next.
func TestInProcessColumnAddedAfterTheComparison(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		g, admin := withRow(t, e)
		st := &afterCopied{Store: e.open(t, 2).store, hook: func() {
			mustExec(t, admin.dbs[0], "ALTER TABLE messages ADD COLUMN extra TEXT")
			mustExec(t, admin.dbs[0], "UPDATE messages SET extra = 'kept' WHERE user_id = "+g.owner)
		}}
		m := g.inProcess(t, st)
		for run := range 2 {
			if err := m.Run(ctx, slices.Values([]string{g.owner})); !errors.Is(err, sqlstore.ErrSchema) {
				t.Fatalf("Run %d after a column was added to the old copy: %v, want ErrSchema", run+1, err)
			}
		}
		var n int
		if err := admin.dbs[0].QueryRow("SELECT COUNT(*) FROM messages WHERE extra = 'kept'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("the old copy's rows with the new column filled: %d (%v), want 1", n, err)
		}
	})
}

// TestInProcessOldCopyWrittenAfterTheComparison: the in-process mover compared the owner's
// copies and marked it copied; before it deletes the old copy, something that holds none of
// its locks writes there (a second process routing through the in-process API, by mistake;
// a script). The deletion took that write with the old copy, and Run returned nil. Now the
// deletion sums the old copy in its own transaction against the sum kept at the comparison,
// and stops with ErrCopyMismatch, deleting nothing, in that Run and in every later one, until
// the operator settles the difference and deletes the kept sum.
func TestInProcessOldCopyWrittenAfterTheComparison(t *testing.T) {
	for _, write := range []string{
		"UPDATE messages SET message = 'stray' WHERE id = 1",
		"INSERT INTO messages VALUES (2, %s, 2, 'stray', 0)",
	} {
		forEngines(t, 2, func(t *testing.T, e *engine) {
			ctx := context.Background()
			g, admin := withRow(t, e)
			stray := strings.ReplaceAll(write, "%s", g.owner)
			st := &afterCopied{Store: e.open(t, 2).store, hook: func() { mustExec(t, admin.dbs[0], stray) }}
			m := g.inProcess(t, st)
			if err := m.Run(ctx, slices.Values([]string{g.owner})); !errors.Is(err, rebalance.ErrCopyMismatch) {
				t.Fatalf("Run after %q on the old copy: %v, want ErrCopyMismatch", stray, err)
			}
			// Resumed from the mark: the old copy is still not what was compared (or, with a
			// row more, more than the new shard holds: ErrCopyLost).
			if err := m.Run(ctx, slices.Values([]string{g.owner})); !errors.Is(err, rebalance.ErrCopyMismatch) && !errors.Is(err, rebalance.ErrCopyLost) {
				t.Fatalf("Run resumed after %q on the old copy: %v, want ErrCopyMismatch or ErrCopyLost", stray, err)
			}
			var n int
			if err := admin.dbs[0].QueryRow("SELECT COUNT(*) FROM messages WHERE message = 'stray'").Scan(&n); err != nil || n != 1 {
				t.Fatalf("the stray write on the old copy: %d rows (%v), want it kept", n, err)
			}
			// Settled as the error says: the write is carried to the new shard by hand, and
			// the kept sum deleted; the next Run deletes the old copy.
			rows, err := admin.dbs[0].Query("SELECT id, user_id, time, message, sender FROM messages")
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, admin.dbs[1], "DELETE FROM messages")
			for rows.Next() {
				var id, user, at, sender int64
				var body string
				if err := rows.Scan(&id, &user, &at, &body, &sender); err != nil {
					t.Fatal(err)
				}
				if _, err := admin.dbs[1].Exec("INSERT INTO messages VALUES ($1, $2, $3, $4, $5)", id, user, at, body, sender); err != nil {
					t.Fatal(err)
				}
			}
			rows.Close()
			mustExec(t, admin.ctl, "DELETE FROM rebalance_kept WHERE owner = '"+g.owner+"'")
			if err := m.Run(ctx, slices.Values([]string{g.owner})); err != nil {
				t.Fatalf("Run once settled: %v", err)
			}
			if err := m.Finish(ctx, slices.Values([]string{g.owner})); err != nil {
				t.Fatal(err)
			}
			if err := admin.dbs[1].QueryRow("SELECT COUNT(*) FROM messages WHERE message = 'stray'").Scan(&n); err != nil || n != 1 {
				t.Fatalf("the stray write on the new shard after the move: %d rows (%v), want 1", n, err)
			}
		})
	}
}
