package sqlstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardkit/shard/sqlstore"
)

// TestTablesOfOtherSchemas: Init looks in every schema of a PostgreSQL shard, not only in
// the current one, for a table that references a moved table and for one with a moved
// table's owner column. Before, it saw neither: the deletion of a user's old copy cascaded
// into audit.reads (ON DELETE CASCADE), whose rows nothing copied, and a user's rows in
// audit.events stayed on its old shard, where no router reads them once it has moved, with
// Run and Finish returning nil.
func TestTablesOfOtherSchemas(t *testing.T) {
	for _, c := range []struct{ name, table, want string }{
		{"reference", "audit.reads (id BIGSERIAL PRIMARY KEY, message_id BIGINT NOT NULL REFERENCES public.messages (id) ON DELETE CASCADE, reader TEXT NOT NULL)", "audit.reads references messages"},
		{"owner column", "audit.events (id BIGSERIAL PRIMARY KEY, user_id BIGINT NOT NULL, what TEXT NOT NULL)", "table audit.events has a column user_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				if e.dialect != sqlstore.PostgreSQL {
					t.Skip("schemas are PostgreSQL's")
				}
				admin := e.open(t, 2)
				for _, db := range admin.dbs {
					mustExec(t, db, "CREATE SCHEMA audit")
					mustExec(t, db, "CREATE TABLE "+c.table)
				}
				p, err := e.openErr(2)
				if err == nil {
					p.close()
				}
				if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Init with %s: %v, want ErrSchema saying %q", c.table, err, c.want)
				}
			})
		})
	}
}
