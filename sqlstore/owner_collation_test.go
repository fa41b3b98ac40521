package sqlstore_test

import (
	"errors"
	"strings"
	"testing"

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
		for _, ownerType := range []string{"TEXT", "BIGINT", "VARCHAR(40)"} {
			if _, err := newEngine(t, e.dialect, 1, schema(ownerType), []sqlstore.TableSpec{spec}).openErr(1); err != nil {
				t.Errorf("owner %s: Init: %v", ownerType, err)
			}
		}
	})
}
