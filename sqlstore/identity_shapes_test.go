package sqlstore_test

// Tests of what identifies owners and rows (owner values, keys) and of what the new shard
// does to the rows it is given.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// movingOwner returns an owner name that Jump(1) puts on shard 0 and Jump(2) on shard 1.
func movingOwner(prefix string) string {
	two, _ := shard.NewJump(2)
	for i := 0; ; i++ {
		if u := fmt.Sprintf("%s%d", prefix, i); two.Locate(u) == 1 {
			return u
		}
	}
}

// ownedRow is an acknowledged row of a table (k, owner, body).
type ownedRow struct {
	k           int64
	owner, body string
}

// rowsByShard reads every row of table q's (k, owner, body) on each shard.
func rowsByShard(t *testing.T, p *proc, table string) map[int][]ownedRow {
	t.Helper()
	out := map[int][]ownedRow{}
	for s, db := range p.dbs {
		rs, err := db.Query("SELECT k, CAST(owner AS TEXT), body FROM " + table + " ORDER BY k")
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var r ownedRow
			if err := rs.Scan(&r.k, &r.owner, &r.body); err != nil {
				t.Fatal(err)
			}
			out[s] = append(out[s], r)
		}
		rs.Close()
	}
	return out
}

// keyRace is a Store that holds the commit of owner x on shard to (its fence set serving
// there, after its sums) until the first chunk copied from shard other into to has been
// written, and holds that chunk until then: two groups of a Run of Concurrency 2 meeting
// in the order they may meet on their own.
type keyRace struct {
	*sqlstore.Store
	x         string
	to, other int
	atCommit  chan struct{}
	copied    chan struct{}
	once1     sync.Once
	once2     sync.Once
}

func (k *keyRace) SetFence(ctx context.Context, m string, owners []string, shard int, state rebalance.FenceState, tok uint64) error {
	if shard == k.to && state == rebalance.Serving && slices.Contains(owners, k.x) {
		k.once1.Do(func() { close(k.atCommit) })
		select {
		case <-k.copied:
		case <-time.After(10 * time.Second):
		}
	}
	return k.Store.SetFence(ctx, m, owners, shard, state, tok)
}

func (k *keyRace) CopyChunk(ctx context.Context, m string, tok uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	if from == k.other && to == k.to {
		select {
		case <-k.atCommit:
		case <-time.After(10 * time.Second):
		}
		defer k.once2.Do(func() { close(k.copied) })
	}
	return k.Store.CopyChunk(ctx, m, tok, owners, from, to, after, limit)
}

// TestKeysRepeatedAcrossImportingGroups: keys repeat across shards (each shard numbers its
// rows from 1). Shards 0 and 1 each give one owner to the new shard 2: X (shard 0) holds
// keys 1-3, Y (shard 1) holds key 1, and Run moves both groups at once (Concurrency 2). X's
// group copies, fences and compares its sums: equal. Before its commit, Y's chunk reaches
// shard 2, where key 1 is X's, X importing. The copy replaced X's row with Y's (X is not
// served there yet), X was served without its row 1 and its old copy deleted, and Run and
// Finish returned nil. A copy now replaces only rows of the owners written with it: Y's
// move stops with ErrKeyTaken, every row kept.
func TestKeysRepeatedAcrossImportingGroups(t *testing.T) {
	schema := `CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)`
	spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "body"}}
	forSchema(t, 3, schema, []sqlstore.TableSpec{spec}, func(t *testing.T, e *engine) {
		ctx := context.Background()
		two, _ := shard.NewJump(2)
		three, _ := shard.NewJump(3)
		var x, y string
		for i := 0; x == "" || y == ""; i++ {
			o := fmt.Sprintf("owner-%d", i)
			switch {
			case x == "" && two.Locate(o) == 0 && three.Locate(o) == 2:
				x = o
			case y == "" && two.Locate(o) == 1 && three.Locate(o) == 2:
				y = o
			}
		}
		admin := e.open(t, 4)
		want := []ownedRow{{1, x, "x one"}, {2, x, "x two"}, {3, x, "x three"}, {1, y, "y one"}}
		for _, r := range want {
			mustExec(t, admin.dbs[two.Locate(r.owner)], "INSERT INTO notes VALUES ($1, $2, $3)", r.k, r.owner, r.body)
		}
		st := &keyRace{Store: e.open(t, 4).store, x: x, to: 2, other: 1, atCommit: make(chan struct{}), copied: make(chan struct{})}
		m, err := rebalance.NewShared("grow", two, three, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		owners := []string{x, y}
		err = m.Run(ctx, slices.Values(owners))
		if !errors.Is(err, sqlstore.ErrKeyTaken) {
			t.Fatalf("Run: %v, want ErrKeyTaken", err)
		}
		got := rowsByShard(t, admin, "notes")
		for _, r := range want {
			found := false
			for _, rows := range got {
				found = found || slices.Contains(rows, r)
			}
			if !found {
				t.Errorf("row %+v is on no shard (shards hold %+v)", r, got)
			}
		}
	})
}

// TestOwnersWithNULAndEmpty (SQLite, whose text holds NUL bytes and any bytes): owners
// that differ only after a NUL byte, an owner of invalid UTF-8 and the empty owner, some
// moving and some staying. Anything that read an owner as a C string would take two of them
// for one. Every row ends on its owner's shard, once, as written.
func TestOwnersWithNULAndEmpty(t *testing.T) {
	ctx := context.Background()
	schema := `CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)`
	spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "body"}}
	e := newEngine(t, sqlstore.SQLite, 2, schema, []sqlstore.TableSpec{spec})
	one, _ := shard.NewJump(1)
	two, _ := shard.NewJump(2)
	owners := []string{"", "\xff\xfe", "z\x00"}
	for i := 0; len(owners) < 9; i++ {
		owners = append(owners, fmt.Sprintf("z\x00%d", i))
	}
	moving := 0
	for _, o := range owners {
		moving += two.Locate(o)
	}
	if moving == 0 || moving == len(owners) {
		t.Fatalf("want owners that move and owners that stay, %d of %d move", moving, len(owners))
	}
	app := e.open(t, 2)
	appM, err := rebalance.NewShared("grow", one, two, rebalance.SharedStore[*sql.Tx](app.store), rebalance.SharedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []ownedRow
	for i, o := range owners {
		for j := range 3 {
			r := ownedRow{int64(i*10 + j), o, fmt.Sprintf("%q/%d", o, j)}
			if err := appM.Do(ctx, o, func(tx *sql.Tx, _ int) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO notes VALUES ($1, $2, $3)", r.k, r.owner, r.body)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			want = append(want, r)
		}
	}
	m, err := rebalance.NewShared("grow", one, two, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{ChunkRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx, slices.Values(owners)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := m.Finish(ctx, slices.Values(owners)); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	got := rowsByShard(t, app, "notes")
	n := 0
	for _, rows := range got {
		n += len(rows)
	}
	if n != len(want) {
		t.Errorf("%d rows on the shards, want %d", n, len(want))
	}
	for _, r := range want {
		if !slices.Contains(got[two.Locate(r.owner)], r) {
			t.Errorf("row %+v is not on its owner's shard %d", r, two.Locate(r.owner))
		}
	}
}

// TestBlobOwnersRefused (SQLite): an owner written as a blob (a []byte bound by the driver,
// kept as a blob by a TEXT column). The fences found its owner by its text, so a write
// through Do was accepted, but the copy, counts and deletion select an owner's rows by the
// column's equality, which no text meets: Run left the row on the old shard and returned
// nil, and Do no longer found it. Such a write is refused now, fenced or not, and Init
// refuses a table that holds one.
func TestBlobOwnersRefused(t *testing.T) {
	ctx := context.Background()
	schema := `CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)`
	spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "body"}}
	one, _ := shard.NewJump(1)
	two, _ := shard.NewJump(2)
	u := movingOwner("ann-")

	e := newEngine(t, sqlstore.SQLite, 2, schema, []sqlstore.TableSpec{spec})
	app := e.open(t, 2)
	m, err := rebalance.NewShared("grow", one, two, rebalance.SharedStore[*sql.Tx](app.store), rebalance.SharedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"INSERT INTO notes VALUES (1, $1, 'as bytes')", "UPDATE notes SET owner = $1 WHERE k = 2"} {
		mustExec(t, app.dbs[0], "INSERT OR REPLACE INTO notes VALUES (2, 'someone', 'as text')")
		err = m.Do(ctx, u, func(tx *sql.Tx, _ int) error {
			_, err := tx.ExecContext(ctx, q, []byte(u))
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "an owner given as a blob") {
			t.Errorf("%s with the owner as a []byte: %v, want refused: ...an owner given as a blob...", q, err)
		}
	}

	e = newEngine(t, sqlstore.SQLite, 2, schema, []sqlstore.TableSpec{spec})
	db, err := sql.Open(e.driver, e.shards[1])
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "INSERT INTO notes VALUES (1, $1, 'as bytes')", []byte(u))
	db.Close()
	if _, err := e.openErr(2); !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "shard 1: check table notes: a row's owner is the blob x'") {
		t.Fatalf("Init: %v, want ErrSchema: shard 1: ...a row's owner is the blob...", err)
	}
}
