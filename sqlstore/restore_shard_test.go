package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// databaseBackup is every row of every table of one database, by table: what a backup
// restores.
type databaseBackup map[string][][]any

func backUpDatabase(t *testing.T, e *engine, db *sql.DB) databaseBackup {
	t.Helper()
	list := "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
	if e.dialect == sqlstore.PostgreSQL {
		list = "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()"
	}
	var tables []string
	rows, err := db.Query(list)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	b := databaseBackup{}
	for _, table := range tables {
		b[table] = tableRows(t, db, table)
	}
	return b
}

// restore puts every table of db back as b holds it, in one transaction: the rebalancing
// tables first, then the data (whose capture triggers then read the fences of the backup),
// then the rebalancing tables again (what the triggers wrote is replaced).
func (b databaseBackup) restore(t *testing.T, db *sql.DB) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	put := func(data bool) {
		for table, rows := range b {
			if strings.HasPrefix(table, "rebalance_") != data {
				putRows(t, tx, table, rows)
			}
		}
	}
	put(false)
	put(true)
	put(false)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// leavingShard returns n users (loaded by the caller) whose before shard is from and whose
// after shard is another.
func (w *world) leavingShard(from, n int) []int {
	var out []int
	for u := 1; len(out) < n; u++ {
		s := strconv.Itoa(u)
		if w.before.Locate(s) == from && w.after.Locate(s) != from {
			out = append(out, u)
		}
	}
	return out
}

// staying returns n users whose before and after shard is s.
func (w *world) staying(s, n int) []int {
	var out []int
	for u := 1; len(out) < n; u++ {
		if k := strconv.Itoa(u); w.before.Locate(k) == s && w.after.Locate(k) == s {
			out = append(out, u)
		}
	}
	return out
}

// countRows returns how many messages of user shard s holds.
func countRows(t *testing.T, p *proc, s int, user string) int {
	t.Helper()
	var n int
	if err := p.dbs[s].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = " + user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestShardRestoredFromBeforeTheClaim: a Shared migration moves users off shard 1 and
// finishes; then shard 1's database is restored from a backup taken before the mover
// claimed (a disaster recovery, or a rollback of the wrong database). It holds no fence,
// placement or finish of the migration, and looks like a shard before a claim: before, it
// accepted and acknowledged every access routed by the before sharder (a process started
// before the claim, or one started since with the before sharder), writes that no reader
// of the finished placement sees. Now the shard's count of changes is below what the
// control database recorded: every access there, the mover and Finish are refused
// (ErrShardBehind) and nothing is written, until the operator accepts the shard.
func TestShardRestoredFromBeforeTheClaim(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, append(w.leavingShard(1, 4), w.leavingShard(0, 2)...), 5)
		w.load(t, admin, w.staying(1, 1), 5)
		stale := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{}) // routes by the before sharder throughout
		idle := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})  // the same, and makes no access until after the restore
		u, staying := w.users[0], w.users[len(w.users)-1]
		if err := w.write(ctx, stale, u); err != nil {
			t.Fatal(err)
		}
		backup := backUpDatabase(t, e, admin.dbs[1])

		mover := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := mover.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := mover.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		// The stale process stays busy with a user that stays on shard 1 (it never learns of
		// the finish), and reads the control database's record in the background.
		for range 3 {
			if err := w.read(ctx, stale, staying); err != nil {
				t.Fatal(err)
			}
			time.Sleep(sqlstore.VersionRefresh)
		}
		backup.restore(t, admin.dbs[1])
		on1 := countRows(t, admin, 1, u)

		fresh := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{}) // started after the restore
		time.Sleep(sqlstore.VersionStale - sqlstore.VersionRefresh)           // the idle process's counts are older than that now
		for name, m := range map[string]*rebalance.Shared[*sql.Tx]{"stale": stale, "idle": idle, "fresh": fresh} {
			if err := w.write(ctx, m, u); !errors.Is(err, sqlstore.ErrShardBehind) {
				t.Errorf("%s process: write of user %s (moved off the restored shard 1): %v, want ErrShardBehind", name, u, err)
			} else {
				t.Logf("%s: %v", name, err)
			}
		}
		if n := countRows(t, admin, 1, u); n != on1 {
			t.Errorf("the restored shard 1 holds %d rows of user %s, %d after the restore: a write landed where no reader looks", n, u, on1)
		}
		if err := mover.Finish(ctx, slices.Values(w.users)); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("Finish again: %v, want ErrShardBehind", err)
		}
		next := w.shared(t, e.open(t, 2), "grow-again", rebalance.SharedOptions{})
		if err := next.Run(ctx, slices.Values(w.users)); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("the next migration's Run: %v, want ErrShardBehind", err)
		}
		// The shards not restored serve as before: a user that never lived on shard 1.
		other := w.users[len(w.users)-2]
		if err := w.write(ctx, fresh, other); err != nil {
			t.Errorf("write of user %s, whose shards were not restored: %v", other, err)
		}

		// The operator accepts the shard: it records the finish again, and refuses the
		// accesses routed by the before sharder as the shard did before the restore; the
		// processes that made them go to the after shard.
		if err := admin.store.AcceptShard(ctx, 1); err != nil {
			t.Fatal(err)
		}
		for name, m := range map[string]*rebalance.Shared[*sql.Tx]{"stale": stale, "idle": idle, "fresh": fresh} {
			if err := w.write(ctx, m, u); err != nil {
				t.Errorf("%s process: write of user %s after AcceptShard: %v", name, u, err)
			}
		}
		if n := countRows(t, admin, 1, u); n != on1 {
			t.Errorf("the accepted shard 1 holds %d rows of user %s, %d after the restore", n, u, on1)
		}
		reader := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := w.read(ctx, reader, u); err != nil {
			t.Errorf("read of user %s after AcceptShard: %v", u, err)
		}
		// The backup's copies of the moved users are named as such, not as owners to move:
		// the operator deletes them, and Finish finishes again.
		var left *rebalance.UnfinishedError
		if err := reader.Finish(ctx, slices.Values(w.users)); !errors.As(err, &left) || left.Unlisted != 0 || left.Returned != 4 {
			t.Errorf("Finish after AcceptShard: %v, want the 4 moved users whose old rows came back", err)
		} else {
			t.Logf("Finish after AcceptShard: %v", err)
		}
		for _, u := range w.leavingShard(1, 4) {
			if _, err := admin.dbs[1].Exec("DELETE FROM messages WHERE user_id = " + strconv.Itoa(u)); err != nil {
				t.Fatal(err)
			}
		}
		if err := reader.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Errorf("Finish after the old copies were deleted: %v", err)
		}
		for _, u := range w.users {
			if err := w.read(ctx, reader, u); err != nil {
				t.Errorf("read of user %s after the old copies were deleted: %v", u, err)
			}
		}
		if err := next.Run(ctx, slices.Values(w.users)); errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("the next migration's Run after AcceptShard: %v", err)
		} else {
			t.Logf("the next migration's Run after AcceptShard: %v", err)
		}
	})
}

// TestShardRestoredWhileMoving: the backup of shard 1 was taken after the mover moved some
// of its users; the mover moves the rest, and the shard is restored. It holds the fences of
// the first users only: before, a resumed Run marked the others done again and returned nil,
// and an access routed by the before sharder wrote the others' rows on shard 1 beside their
// moved ones. Now both are refused (ErrShardBehind).
func TestShardRestoredWhileMoving(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.leavingShard(1, 6), 5)
		mover := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := mover.Run(ctx, slices.Values(w.users[:3])); err != nil {
			t.Fatal(err)
		}
		backup := backUpDatabase(t, e, admin.dbs[1])
		if err := mover.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		backup.restore(t, admin.dbs[1])
		last := w.users[len(w.users)-1] // moved after the backup
		on1 := countRows(t, admin, 1, last)

		fresh := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := w.write(ctx, fresh, last); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("write of user %s, moved after the backup: %v, want ErrShardBehind", last, err)
		}
		if err := mover.Run(ctx, slices.Values(w.users)); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("Run again: %v, want ErrShardBehind", err)
		}
		if n := countRows(t, admin, 1, last); n != on1 {
			t.Errorf("the restored shard 1 holds %d rows of user %s, %d after the restore", n, last, on1)
		}
		// Only shard 1 held the fences of the users moved since the backup: it is not
		// accepted while the migration is under way.
		if err := admin.store.AcceptShard(ctx, 1); !errors.Is(err, rebalance.ErrConfig) || errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("AcceptShard while the migration is under way: %v, want ErrConfig", err)
		}
		if err := w.write(ctx, fresh, last); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("write of user %s after AcceptShard was refused: %v, want ErrShardBehind", last, err)
		}
	})
}

// TestNewShardRestored: the new shard's database is restored from a backup taken before the
// mover claimed, after the migration finished: the moved rows are gone with it (the restore
// lost them, not the mover), and the shard lacks the finish. Before, Finish again returned
// nil without recording it there. Now accesses there, and Finish, are refused
// (ErrShardBehind), so the operator learns of it at once.
func TestNewShardRestored(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.leavingShard(1, 3), 5)
		backup := backUpDatabase(t, e, admin.dbs[2])
		mover := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := mover.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := mover.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		backup.restore(t, admin.dbs[2])
		fresh := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := w.write(ctx, fresh, w.users[0]); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("write of user %s on its restored new shard: %v, want ErrShardBehind", w.users[0], err)
		}
		if err := mover.Finish(ctx, slices.Values(w.users)); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("Finish again: %v, want ErrShardBehind", err)
		}
	})
}

// TestShardRestoredInProcess: the same restore of an old shard under an in-process
// Migration, which routes by the marks and misplaced nothing before either; its Do and Run
// now name the shard too (ErrShardBehind, through CheckPlacement and the claim).
func TestShardRestoredInProcess(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.leavingShard(1, 6), 5)
		p := e.open(t, 2)
		m, err := rebalance.New("grow", w.before, w.after, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(w.users[:3])); err != nil {
			t.Fatal(err)
		}
		backup := backUpDatabase(t, e, admin.dbs[1])
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		backup.restore(t, admin.dbs[1])
		u := w.users[len(w.users)-1]
		err = m.Do(ctx, u, func(s int) error { return fmt.Errorf("routed to shard %d", s) })
		if !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("Do after shard 1 was restored: %v, want ErrShardBehind", err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("Run after shard 1 was restored: %v, want ErrShardBehind", err)
		}
	})
}

// restoringStore is a Store whose first fence change on shard at, after the claim, is
// preceded by a restore of that shard's database.
type restoringStore struct {
	*sqlstore.Store
	t      *testing.T
	at     int
	backup databaseBackup
	db     *sql.DB
	done   bool
}

func (r *restoringStore) SetFence(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) error {
	if shard == r.at && !r.done {
		r.done = true
		r.backup.restore(r.t, r.db)
	}
	return r.Store.SetFence(ctx, migration, owners, shard, state, token)
}

// TestShardRestoredUnderTheMover: shard 1 is restored while the mover runs, after its claim
// and before its first fence change there. The fence change is refused before it commits
// (ErrShardBehind): the restored shard holds no fence the mover set on it.
func TestShardRestoredUnderTheMover(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.leavingShard(1, 4), 5)
		p := e.open(t, 2)
		backup := backUpDatabase(t, e, admin.dbs[1]) // before the claim
		store := &restoringStore{Store: p.store, t: t, at: 1, backup: backup, db: admin.dbs[1]}
		mover, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := mover.Run(ctx, slices.Values(w.users)); !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("Run with shard 1 restored under it: %v, want ErrShardBehind", err)
		}
		var fences int
		if err := admin.dbs[1].QueryRow("SELECT COUNT(*) FROM rebalance_fence").Scan(&fences); err != nil || fences != 0 {
			t.Errorf("the restored shard 1 holds %d fences (%v), want none", fences, err)
		}
	})
}

// TestNewShardRestoredInProcess: an in-process Migration copies its users to shard 2, and
// shard 2's database is then restored from a backup taken after the mover's claim, before its
// copies: the copied rows are gone with it, and the marks route the users there. Each copy
// counts a change: Do names the shard (ErrShardBehind) rather than route a user to a shard
// that lost its rows.
func TestNewShardRestoredInProcess(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.leavingShard(1, 3), 5)
		p := e.open(t, 2)
		var backup databaseBackup
		p.store.OnCopyStep(func(step, owner string) {
			if backup == nil {
				backup = backUpDatabase(t, e, admin.dbs[2]) // the claim committed, this copy not
			}
		})
		m, err := rebalance.New("grow", w.before, w.after, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		backup.restore(t, admin.dbs[2])
		fresh := e.open(t, 2)
		again, err := rebalance.New("grow", w.before, w.after, fresh.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		u := w.users[0]
		err = again.Do(ctx, u, func(s int) error { return fmt.Errorf("routed to shard %d", s) })
		if !errors.Is(err, sqlstore.ErrShardBehind) {
			t.Errorf("Do of user %s after its new shard lost its copy: %v, want ErrShardBehind", u, err)
		}
	})
}
