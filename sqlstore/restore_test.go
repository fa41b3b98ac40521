package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// controlBackup is what a backup of the control database holds of the Store's tables: the
// rows of each, by table.
type controlBackup map[string][][]any

// controlTables are the Store's tables in the control database alone. Where the control
// database is also shard 0's (the PostgreSQL tests), the epoch, placement and finish tables
// are that shard's as well, and stay as they are.
func controlTables(e *engine) []string {
	tables := []string{"rebalance_marks", "rebalance_kept", "rebalance_tables", "rebalance_claim", "rebalance_copying"}
	if e.control != e.shards[0] {
		tables = append(tables, "rebalance_epoch", "rebalance_placement", "rebalance_finished")
	}
	return tables
}

func backUpControl(t *testing.T, e *engine, p *proc) controlBackup {
	t.Helper()
	b := controlBackup{}
	for _, table := range controlTables(e) {
		b[table] = tableRows(t, p.ctl, table)
	}
	return b
}

// tableRows returns every row of table in db.
func tableRows(t *testing.T, db *sql.DB, table string) [][]any {
	t.Helper()
	rows, err := db.Query("SELECT * FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	out := [][]any{}
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// putRows replaces every row of table, in tx, with rows.
func putRows(t *testing.T, tx *sql.Tx, table string, rows [][]any) {
	t.Helper()
	if _, err := tx.Exec("DELETE FROM " + table); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		marks := make([]string, len(row))
		for i := range marks {
			marks[i] = fmt.Sprintf("$%d", i+1)
		}
		if _, err := tx.Exec("INSERT INTO "+table+" VALUES ("+strings.Join(marks, ", ")+")", row...); err != nil {
			t.Fatal(err)
		}
	}
}

// restore puts the control database's tables back as b holds them, in one transaction.
func (b controlBackup) restore(t *testing.T, e *engine, p *proc) {
	t.Helper()
	tx, err := p.ctl.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, table := range controlTables(e) {
		putRows(t, tx, table, b[table])
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestControlDatabaseRestoredInProcess: the operator restores the control database from a
// backup taken before an in-process migration moved its owners (a disaster recovery, or a
// rollback of the wrong database). Its marks say Unmoved of owners whose rows are on their
// new shards: a process started then routed them to the shards their rows left, where a
// read found nothing and a write stayed apart from the owner's rows. The shards hold newer
// mover tokens than the restored database issued: Do and Run are refused
// (ErrControlBehind), calling no function and changing nothing.
func TestControlDatabaseRestoredInProcess(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.moving(1, 6), 10)
		backup := backUpControl(t, e, admin)
		m, err := rebalance.New("grow", w.before, w.after, e.open(t, 2).store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		u := w.users[0]
		if err := m.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, admin, w, u, s) }); err != nil {
			t.Fatal(err)
		}
		backup.restore(t, e, admin)

		p := e.open(t, 2) // a process started after the restore
		restarted, err := rebalance.New("grow", w.before, w.after, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = restarted.Do(ctx, u, func(s int) error { return fmt.Errorf("routed to shard %d", s) })
		if !errors.Is(err, sqlstore.ErrControlBehind) {
			t.Errorf("Do after the control database was restored: %v, want ErrControlBehind", err)
		}
		t.Logf("Do: %v", err)
		if err := restarted.Run(ctx, slices.Values(w.users)); !errors.Is(err, sqlstore.ErrControlBehind) {
			t.Errorf("Run after the control database was restored: %v, want ErrControlBehind", err)
		}
		w.requireClean(t, admin, w.after)
	})
}

// TestControlDatabaseRestoredShared: the same restore under a Shared migration, whose
// accesses and mover route by the fences on the shards, and go on. The restored database
// issued tokens up to 1, the shards hold 3: the next claim is issued a token past the shards'
// newest (before, it was issued 2, which the shards refused: a migration no mover could
// claim again; one issued where a shard held exactly it would have shared a token with a
// mover of the lost history). The mover then finishes the migration, nothing lost.
func TestControlDatabaseRestoredShared(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.moving(1, 6), 10)
		mover := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := mover.Run(ctx, slices.Values(w.users[:3])); err != nil {
			t.Fatal(err)
		}
		backup := backUpControl(t, e, admin) // half moved, token 1 issued
		for range 2 {
			if err := mover.Run(ctx, slices.Values(w.users)); err != nil {
				t.Fatal(err)
			}
		}
		backup.restore(t, e, admin)

		again := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		for _, u := range w.users {
			if err := again.Do(ctx, u, func(tx *sql.Tx, s int) error { return insertAcked(ctx, e, admin, w, u, s) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := again.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatalf("Run after the control database was restored: %v", err)
		}
		var newest int64
		if err := admin.dbs[1].QueryRow("SELECT token FROM rebalance_epoch WHERE migration = 'grow'").Scan(&newest); err != nil || newest != 4 {
			t.Errorf("the newest token on shard 1 is %d (%v), want 4: one past the 3 it held", newest, err)
		}
		if err := again.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, w.after)
	})
}
