package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// Tables keyed by text and by bytes, owned by text: the cursors of a copy and the bounds of
// a deletion carry those values back to the engine.
var (
	notesTable = sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "body"}}
	blobsTable = sqlstore.TableSpec{Table: "blobs", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "v"}}
)

func keysSchema(d sqlstore.Dialect) string {
	blob := "BLOB"
	if d == sqlstore.PostgreSQL {
		blob = "BYTEA"
	}
	return `
CREATE TABLE IF NOT EXISTS notes (k TEXT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k);
CREATE TABLE IF NOT EXISTS blobs (k ` + blob + ` PRIMARY KEY, owner TEXT NOT NULL, v BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS blobs_owner_k ON blobs (owner, k)`
}

// TestTextAndByteKeys: owners whose rows are keyed by text (in mixed case, with accents, so
// that a linguistic order differs from the bytes') and by bytes (with 0x00 and 0xff) move
// 2 -> 3 shards and back in chunks of 3 rows and deletions of 2, so that every owner is cut
// mid-way by the copy and by the deletion. Every row ends on its owner's shard, once, as it
// was, and Verify finds nothing.
func TestTextAndByteKeys(t *testing.T) {
	for _, d := range []sqlstore.Dialect{sqlstore.SQLite, sqlstore.PostgreSQL} {
		t.Run(d.String(), func(t *testing.T) {
			if d == sqlstore.PostgreSQL && pg == nil {
				t.Skip("PostgreSQL not available: " + pgWhy)
			}
			ctx := context.Background()
			e := newEngine(t, d, 3, keysSchema(d), []sqlstore.TableSpec{notesTable, blobsTable})
			p := e.open(t, 4)
			two, _ := shard.NewJump(2)
			three, _ := shard.NewJump(3)
			want := map[string]string{} // "table/owner/key" -> the row's content
			var owners []string
			words := []string{"a", "B", "é", "Z", "ä", "b", "A", "zz", "É", "0"}
			for i := range 30 {
				o := fmt.Sprintf("owner-%d", i)
				owners = append(owners, o)
				db := p.dbs[two.Locate(o)]
				for j := range i % 9 {
					k := fmt.Sprintf("%s/%s%d", o, words[(i+j)%len(words)], j)
					mustExec(t, db, "INSERT INTO notes VALUES ($1, $2, $3)", k, o, "note "+k)
					want["notes/"+o+"/"+k] = "note " + k
					b := []byte{byte(j * 37), 0, byte(255 - j), byte(i)}
					mustExec(t, db, "INSERT INTO blobs VALUES ($1, $2, $3)", b, o, int64(i*100+j))
					want[fmt.Sprintf("blobs/%s/%x", o, b)] = fmt.Sprint(i*100 + j)
				}
			}
			for i, step := range [][2]shard.Sharder{{two, three}, {three, two}} {
				id := fmt.Sprintf("keys%d", i)
				m, err := rebalance.NewShared(id, step[0], step[1], rebalance.SharedStore[*sql.Tx](p.store),
					rebalance.SharedOptions{Token: 1, ChunkRows: 3, DeleteRows: 2, Group: 4, Concurrency: 2})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Run(ctx, slices.Values(owners)); err != nil {
					t.Fatal(err)
				}
				if st := m.Stats(); st.Moved == 0 {
					t.Fatalf("step %d moved no owner", i)
				}
				rep, err := m.Verify(ctx, slices.Values(owners))
				if err != nil || len(rep.Problems) > 0 || rep.Stray > 0 {
					t.Fatalf("step %d: Verify: %+v, %v", i, rep, err)
				}
				got := map[string]string{}
				for s, db := range p.dbs {
					for _, q := range []string{"SELECT 'notes', owner, k, body FROM notes", "SELECT 'blobs', owner, k, v FROM blobs"} {
						rs, err := db.Query(q)
						if err != nil {
							t.Fatal(err)
						}
						for rs.Next() {
							var tb, o, v string
							var k []byte
							if err := rs.Scan(&tb, &o, &k, &v); err != nil {
								t.Fatal(err)
							}
							if where := step[1].Locate(o); where != s {
								t.Errorf("step %d: a row of %s in %s on shard %d, its owner's shard is %d", i, o, tb, s, where)
							}
							key := string(k)
							if tb == "blobs" {
								key = fmt.Sprintf("%x", k)
							}
							name := tb + "/" + o + "/" + key
							if _, twice := got[name]; twice {
								t.Errorf("step %d: %s twice", i, name)
							}
							got[name] = v
						}
						if err := rs.Close(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if !maps.Equal(got, want) {
					t.Fatalf("step %d: %d rows, want %d as loaded", i, len(got), len(want))
				}
				if err := m.Finish(ctx, slices.Values(owners)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}
