package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// TestOwnerColumnThatComparesLoosely: an owner column that holds "ann" equal to "ANN" (or
// "ann " to "ann") makes a move of one owner select, copy and delete the other's rows too,
// though the sharder places it elsewhere: its shard then serves it without them, and Run
// returned nil. Init refuses such a column, saying how it compares; the same table with a
// plain text owner column starts.
func TestOwnerColumnThatComparesLoosely(t *testing.T) {
	forSchema(t, 1, "", nil, func(t *testing.T, e *engine) {
		spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "body"}}
		schema := func(ownerType string) string {
			return "CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner " + ownerType + " NOT NULL, body TEXT NOT NULL);" +
				"CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)"
		}
		loose := map[string]string{"TEXT COLLATE NOCASE": "ignoring case", "TEXT COLLATE RTRIM": "trailing spaces"}
		if e.dialect == sqlstore.PostgreSQL {
			loose = map[string]string{
				`TEXT COLLATE anycase`: "nondeterministic collation",
				"citext":               "citext",
				"CHAR(12)":             "trailing spaces",
			}
		}
		for ownerType, want := range loose {
			s := schema(ownerType)
			if e.dialect == sqlstore.PostgreSQL {
				s = "CREATE EXTENSION IF NOT EXISTS citext;" +
					"CREATE COLLATION IF NOT EXISTS anycase (provider = icu, locale = 'und-u-ks-level2', deterministic = false);" + s
			}
			_, err := newEngine(t, e.dialect, 1, s, []sqlstore.TableSpec{spec}).openErr(1)
			if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "the owner column owner compares") || !strings.Contains(err.Error(), want) {
				t.Errorf("owner %s: Init said %v, want ErrSchema: the owner column owner compares ...%s...", ownerType, err, want)
			}
		}
		// Types whose values need not print as the owners that select them: 1.0 and 1 are
		// one numeric, a bytea prints in hex; SQLite converts a text to a column's REAL or
		// NUMERIC affinity, and a column of no type holds a blob never equal to a text.
		printed := map[string]string{"REAL": "REAL", "NUMERIC": "NUMERIC", "": "of no declared type", "BLOB": "BLOB"}
		if e.dialect == sqlstore.PostgreSQL {
			printed = map[string]string{"NUMERIC": "of type numeric", "BYTEA": "of type bytea", "DATE": "of type date"}
		}
		for ownerType, want := range printed {
			_, err := newEngine(t, e.dialect, 1, schema(ownerType), []sqlstore.TableSpec{spec}).openErr(1)
			if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "the owner column owner is "+want) {
				t.Errorf("owner %s: Init said %v, want ErrSchema: the owner column owner is %s...", ownerType, err, want)
			}
		}
		// A column that prints owners one way on one shard and another way on the next.
		mixed := newEngine(t, e.dialect, 2, schema("TEXT"), []sqlstore.TableSpec{spec})
		db, err := sql.Open(mixed.driver, mixed.shards[1])
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "DROP TABLE notes")
		for q := range strings.SplitSeq(schema("BIGINT"), ";") {
			mustExec(t, db, q)
		}
		db.Close()
		if _, err := mixed.openErr(1); !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "owners cannot print alike") {
			t.Errorf("owner TEXT on one shard, BIGINT on the other: Init said %v, want ErrSchema: ...owners cannot print alike...", err)
		}
		for _, ownerType := range []string{"TEXT", "BIGINT", "VARCHAR(40)"} {
			if _, err := newEngine(t, e.dialect, 1, schema(ownerType), []sqlstore.TableSpec{spec}).openErr(1); err != nil {
				t.Errorf("owner %s: Init: %v", ownerType, err)
			}
		}
	})
}

// TestOwnerAsItsColumnPrintsIt: the fences, the change capture and the guard find a row's
// owner by the owner column's text (7 prints "7"), while the copy and the deletion select
// the owner's rows by the column's equality, which takes "007" for 7 and a uuid in
// capitals for its lowercase self. A move of such an owner copied and deleted its rows, but
// the guard never found the fence of a row: a write around the library on the old shard
// after the window landed on the old copy and was deleted with it, and Run returned nil.
// The Store refuses such an owner before it reads or writes anything (ErrOwnerForm), in a
// move and in an access; the same owner as its column prints it moves, and the late write is
// refused.
func TestOwnerAsItsColumnPrintsIt(t *testing.T) {
	type ownerCase struct {
		typ         string
		bad, good   func(i int) string
		onlyDialect sqlstore.Dialect
	}
	decimal := func(prefix string) func(int) string {
		return func(i int) string { return fmt.Sprintf("%s%d", prefix, i) }
	}
	uuid := func(upper bool) func(int) string {
		return func(i int) string {
			u := fmt.Sprintf("a0eebc99-9c0b-4ef8-bb6d-6bb9bd38%04x", i)
			if upper {
				u = strings.ToUpper(u)
			}
			return u
		}
	}
	for _, tc := range []ownerCase{
		{typ: "BIGINT", bad: decimal("00"), good: decimal("")},
		{typ: "INTEGER", bad: decimal("+"), good: decimal("")},
		{typ: "UUID", bad: uuid(true), good: uuid(false), onlyDialect: sqlstore.PostgreSQL},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "body"}}
			schema := "CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner " + tc.typ + " NOT NULL, body TEXT NOT NULL);" +
				"CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)"
			for _, asPrinted := range []bool{true, false} {
				name := map[bool]string{true: "as printed", false: "otherwise"}[asPrinted]
				t.Run(name, func(t *testing.T) {
					forSchema(t, 2, schema, []sqlstore.TableSpec{spec}, func(t *testing.T, e *engine) {
						if tc.onlyDialect != 0 && e.dialect != tc.onlyDialect {
							t.Skipf("no %s on %v", tc.typ, e.dialect)
						}
						ctx := context.Background()
						one, _ := shard.NewJump(1)
						two, _ := shard.NewJump(2)
						p := e.open(t, 2)
						var u, good string
						for i := 1; ; i++ {
							// One value whose two forms both move.
							if u, good = tc.bad(i), tc.good(i); two.Locate(u) == 1 && two.Locate(good) == 1 {
								break
							}
						}
						if asPrinted {
							u = good
						}
						mustExec(t, p.dbs[0], "INSERT INTO notes VALUES (1, $1, 'first'), (2, $1, 'second')", good)
						var late error
						st := &beforeDeletion{SharedStore: p.store, before: func() {
							_, late = p.dbs[0].Exec("UPDATE notes SET body = 'late' WHERE owner = $1", u)
						}}
						m, err := rebalance.NewShared("grow", one, two, st, rebalance.SharedOptions{})
						if err != nil {
							t.Fatal(err)
						}
						err = m.Run(ctx, slices.Values([]string{u}))
						doErr := m.Do(ctx, u, func(*sql.Tx, int) error { return nil })
						want := []string{"0:first", "0:second"}
						if asPrinted {
							want = []string{"1:first", "1:second"}
							if err != nil || doErr != nil {
								t.Fatalf("owner %s: Run %v, Do %v", u, err, doErr)
							}
							if late == nil || !strings.Contains(late.Error(), "not served here") {
								t.Errorf("owner %s: the write on the old shard after the window: %v, want refused", u, late)
							}
							// Finish lists the owners on each shard (PostgreSQL 15 has no min(uuid),
							// which the listing used).
							for o, err := range p.store.Owners(ctx, 1) {
								if err != nil || o != good {
									t.Fatalf("the owners on shard 1: %q, %v; want %q", o, err, good)
								}
							}
						} else {
							for what, err := range map[string]error{"Run": err, "Do": doErr} {
								if !errors.Is(err, sqlstore.ErrOwnerForm) || !errors.Is(err, rebalance.ErrConfig) || !strings.Contains(err.Error(), fmt.Sprintf("owner %q is not", u)) {
									t.Errorf("owner %s: %s said %v, want ErrOwnerForm naming the owner", u, what, err)
								}
							}
						}
						// The rows, late write or not, are whole on the shard that serves them.
						var rows []string
						for i, db := range p.dbs {
							for _, b := range texts(t, db, "SELECT body FROM notes ORDER BY k") {
								rows = append(rows, fmt.Sprint(i, ":", b))
							}
						}
						if !slices.Equal(rows, want) {
							t.Errorf("owner %s: the shards hold %q, want %q (late write: %v)", u, rows, want, late)
						}
					})
				})
			}
		})
	}
}
