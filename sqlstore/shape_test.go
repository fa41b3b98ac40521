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
	"github.com/stretchr/testify/require"
)

// TestInitRefusesHiddenRows: on PostgreSQL, Init refuses what would let a move see a table
// otherwise than it is, naming it. Each of these let a move return nil with rows changed or
// left behind: a table that inherits from a moved one (listed as Unmoved: the move copied
// its rows into the parent on the new shard and deleted them from it on the old one); row
// security that hides rows from the Store's role, the table's owner with FORCE (the move
// saw none of a tenant's rows, and the new shard served the tenant with none); and
// extra_float_digits 0 on a database (an array of floats replayed through Go came rounded
// to 15 digits, and the sums hashed the same rounded text on both shards).
func TestInitRefusesHiddenRows(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	t.Run("inherits", func(t *testing.T) {
		e := newPostgres(t, 2)
		mustExec(t, openDB(t, e, e.shards[1]), "CREATE TABLE messages_archive () INHERITS (messages)")
		e.opts.Unmoved = []string{"messages_archive"}
		_, err := e.openErr(2)
		if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "shard 1: check the tables' references and visibility: table messages_archive inherits from messages") {
			t.Fatalf("Init: %v, want ErrSchema: ...table messages_archive inherits from messages...", err)
		}
	})
	t.Run("row security", func(t *testing.T) {
		const role = "sqlstore_tenant_app"
		e := newPostgres(t, 2)
		admin := openDB(t, e, pg.dsn("postgres"))
		if _, err := admin.Exec("CREATE ROLE " + role + " LOGIN"); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		for i, dsn := range e.shards {
			db := openDB(t, e, dsn)
			mustExec(t, db, "GRANT ALL ON SCHEMA public TO "+role)
			mustExec(t, db, "ALTER TABLE messages OWNER TO "+role)
			if i == 1 { // the tenant pattern: each session sees the rows of the owner it names
				mustExec(t, db, "ALTER TABLE messages ENABLE ROW LEVEL SECURITY")
				mustExec(t, db, "ALTER TABLE messages FORCE ROW LEVEL SECURITY")
				mustExec(t, db, "CREATE POLICY tenant ON messages USING (user_id::text = current_setting('app.user', true))")
			}
			e.shards[i] = strings.Replace(dsn, "postgres://postgres@", "postgres://"+role+"@", 1)
		}
		if e.shards[0] == e.control {
			t.Fatal("the DSN names no user postgres")
		}
		e.control = e.shards[0]
		_, err := e.openErr(2)
		if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "shard 1: check the tables' references and visibility: row-level security hides rows of table messages") {
			t.Fatalf("Init: %v, want ErrSchema: ...row-level security hides rows of table messages...", err)
		}
	})
	t.Run("float digits", func(t *testing.T) {
		e := newPostgres(t, 2)
		name := e.shards[1][strings.LastIndex(e.shards[1], "/")+1 : strings.Index(e.shards[1], "?")]
		mustExec(t, openDB(t, e, pg.dsn("postgres")), "ALTER DATABASE "+name+" SET extra_float_digits = 0")
		_, err := e.openErr(2)
		if !errors.Is(err, rebalance.ErrConfig) || !strings.Contains(err.Error(), "shard 1: check the tables' references and visibility: extra_float_digits is 0 on this connection") {
			t.Fatalf("Init: %v, want ErrConfig: ...extra_float_digits is 0 on this connection...", err)
		}
	})
}

// TestMigrationKeepsItsTables: a migration moves the tables its first Run moved until its
// Finish. A Store that moves another set is refused by Run and Finish (ErrConfig), changing
// nothing: a table added between a stop and the resume was deleted with the old copies
// whose deletion the resume went on with, never copied; one dropped was left on old shards.
func TestMigrationKeepsItsTables(t *testing.T) {
	profiles := sqlstore.TableSpec{Table: "profiles", Owner: "id", Key: "id", IntOwner: true, Columns: []string{"id", "bio"}}
	schema := messagesSchema + ";\nCREATE TABLE IF NOT EXISTS profiles (id BIGINT PRIMARY KEY, bio TEXT NOT NULL)"
	forSchema(t, 3, schema, []sqlstore.TableSpec{messages}, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, span(1, 20), 3)
		first := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		require.NoError(t, first.Run(ctx, slices.Values(w.users)))
		for _, tables := range [][]sqlstore.TableSpec{{profiles, messages}, {profiles}} {
			other := *e
			other.tables = tables
			m := w.shared(t, other.open(t, 2), "grow", rebalance.SharedOptions{})
			for what, err := range map[string]error{"Run": m.Run(ctx, slices.Values(w.users)), "Finish": m.Finish(ctx, slices.Values(w.users))} {
				if !errors.Is(err, rebalance.ErrConfig) || !strings.Contains(err.Error(), `migration "grow" moves tables messages, and this Store moves`) {
					t.Fatalf("%s of tables %v: %v, want ErrConfig: ...moves tables messages, and this Store moves...", what, tables, err)
				}
			}
		}
		require.NoError(t, first.Finish(ctx, slices.Values(w.users)))
		w.requireClean(t, admin, w.after)
	})
}

// TestInitRefusesTextsReadAsTimes (SQLite): a shard opened with modernc.org/sqlite's
// _texttotime, which reads a text shaped like a time as a time, is refused by Init
// (ErrConfig): a row replayed through Go was written back in the driver's own time format
// ("2024-01-01" became "2024-01-01 00:00:00 +0000 UTC"), and the sums, which read both copies
// alike, agreed.
func TestInitRefusesTextsReadAsTimes(t *testing.T) {
	e := newSQLite(t, 2)
	e.shards[1] += "&_texttotime=1"
	_, err := e.openErr(2)
	if !errors.Is(err, rebalance.ErrConfig) || !strings.Contains(err.Error(), "shard 1: check how the driver reads values: the driver reads the text '2024-01-01 10:00:00' as a time.Time") {
		t.Fatalf("Init: %v, want ErrConfig: ...reads the text ... as a time.Time...", err)
	}
}

// TestInitRefusesDatesPrintedOtherwise: a PostgreSQL shard whose DateStyle prints dates day
// first ('SQL, DMY'; initdb takes it from the locale) next to one that reads them month
// first. Dates in arrays reach Go as text, so a row replayed during the copy turned 4 March
// into 3 April, which the new shard printed as 04/03/2024 too: the sums agreed and Run and
// Finish returned nil. Init now refuses a connection whose dates do not print as ISO 8601.
func TestInitRefusesDatesPrintedOtherwise(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	e := newPostgres(t, 2)
	sep := "?"
	if strings.Contains(e.shards[0], "?") {
		sep = "&"
	}
	e.shards[0] += sep + "DateStyle=SQL,DMY" // a run-time parameter of the connection
	_, err := e.openErr(2)
	if !errors.Is(err, rebalance.ErrConfig) || !strings.Contains(err.Error(), `shard 0: check the tables' references and visibility: DateStyle is "SQL, DMY"`) {
		t.Fatalf("Init: %v, want ErrConfig: shard 0: ...DateStyle is \"SQL, DMY\"...", err)
	}
}

// TestInitRefusesTypesACopyChanges (PostgreSQL): a column of a domain of one name over
// double precision on one shard and over real on the other (format_type printed the
// domain's name alike: 0.1 came back as 0.10000000149011612 with sums of texts that
// agreed), a composite type of one name with fields of other types, and a column of a type
// whose values name something of the shard's own (a large object's oid: the owner then read
// another owner's file). Init refuses each.
func TestInitRefusesTypesACopyChanges(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	ctx := context.Background()
	spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "v"}}
	table := func(typ string) string {
		return "CREATE TABLE notes (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, v " + typ + ");\nCREATE INDEX notes_owner_k ON notes (owner, k)"
	}
	for _, c := range []struct {
		name   string
		shards [2]string // each shard's schema
		want   string
	}{
		{"domain over other types", [2]string{"CREATE DOMAIN amount AS double precision;\n" + table("amount"), "CREATE DOMAIN amount AS real;\n" + table("amount")},
			"shard 1: check table notes: column v is amount over real here and amount over double precision on shard 0"},
		{"composite of other fields", [2]string{"CREATE TYPE pair AS (a double precision, b text);\n" + table("pair[]"), "CREATE TYPE pair AS (a real, b text);\n" + table("pair[]")},
			"shard 1: check table notes: column v is pair[] of (a real, b text) here and pair[] of (a double precision, b text) on shard 0"},
		{"large object", [2]string{table("oid"), table("oid")}, "shard 0: check table notes: column v is of type oid, whose values name something of this database only"},
		{"domain over a local type", [2]string{"CREATE DOMAIN lo AS oid;\n" + table("lo"), "CREATE DOMAIN lo AS oid;\n" + table("lo")}, "column v is of type lo over oid"},
		{"regclass array", [2]string{table("regclass[]"), table("regclass[]")}, "column v is of type regclass[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newPostgres(t, 2)
			dbs := []*sql.DB{openDB(t, e, e.shards[0]), openDB(t, e, e.shards[1])}
			for i, schema := range c.shards {
				for q := range strings.SplitSeq(schema, ";\n") {
					if _, err := dbs[i].Exec(q); err != nil {
						t.Fatal(q, err)
					}
				}
			}
			s, err := sqlstore.New(sqlstore.PostgreSQL, dbs, dbs[0], []sqlstore.TableSpec{spec}, sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Init(ctx); !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Init: %v, want ErrSchema: %s", err, c.want)
			}
		})
	}
}

// TestValuesReplayedExactly: rows that change during the copy are replayed through Go, and
// come out as they went in. A column GENERATED ALWAYS AS IDENTITY (PostgreSQL) refuses a
// value without OVERRIDING SYSTEM VALUE, and an UPDATE of it (SQLSTATE 428C9): every move of
// an owner whose rows changed during its copy stopped, the column the key or not. An empty
// blob (SQLite, a blob of no bytes) came back from the driver as a nil []byte and was
// written as NULL: every such move stopped on the sums.
func TestValuesReplayedExactly(t *testing.T) {
	const index = ";\nCREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)"
	for _, c := range []struct {
		name    string
		dialect sqlstore.Dialect
		schema  string
	}{
		{"identity key", sqlstore.PostgreSQL, "CREATE TABLE IF NOT EXISTS notes (k BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, seq BIGINT NOT NULL DEFAULT 0, owner TEXT NOT NULL, body TEXT NOT NULL, extra BYTEA)"},
		{"identity column", sqlstore.PostgreSQL, "CREATE TABLE IF NOT EXISTS notes (k BIGSERIAL PRIMARY KEY, seq BIGINT GENERATED ALWAYS AS IDENTITY, owner TEXT NOT NULL, body TEXT NOT NULL, extra BYTEA)"},
		{"empty blob", sqlstore.SQLite, "CREATE TABLE IF NOT EXISTS notes (k INTEGER PRIMARY KEY, seq INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL, body TEXT NOT NULL, extra BLOB)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.dialect == sqlstore.PostgreSQL && pg == nil {
				t.Skip("PostgreSQL not available: " + pgWhy)
			}
			spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "seq", "owner", "body", "extra"}}
			e := newEngine(t, c.dialect, 2, c.schema+index, []sqlstore.TableSpec{spec})
			p := e.open(t, 2)
			one, err := shard.NewJump(1)
			require.NoError(t, err)
			two, err := shard.NewJump(2)
			require.NoError(t, err)
			owner := "ann"
			for i := 0; two.Locate(owner) != 1; i++ {
				owner = fmt.Sprint("ann", i)
			}
			for i := range 10 {
				mustExec(t, p.dbs[0], "INSERT INTO notes (owner, body, extra) VALUES ($1, $2, $3)", owner, fmt.Sprint("note ", i), []byte{})
			}
			rows := "SELECT k || '/' || seq || '/' || owner || '/' || body || '/' || COALESCE(length(extra), -1) FROM notes ORDER BY k"
			if e.dialect == sqlstore.PostgreSQL {
				rows = strings.Replace(rows, "length(extra)", "octet_length(extra)", 1)
			}
			var want []string
			st := &lateChange{SharedStore: p.store, between: func() {
				mustExec(t, p.dbs[0], "UPDATE notes SET body = body || ' changed' WHERE owner = $1 AND k % 2 = 0", owner)
				want = texts(t, p.dbs[0], rows)
			}}
			m, err := rebalance.NewShared("grow", one, two, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{ChunkRows: 3, IdleChunkRows: 3})
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, m.Run(ctx, slices.Values([]string{owner})))
			require.NoError(t, m.Finish(ctx, slices.Values([]string{owner})))
			require.Len(t, want, 10)
			require.Equal(t, want, texts(t, p.dbs[1], rows))
			require.Empty(t, texts(t, p.dbs[0], rows))
		})
	}
}

// TestDeletionKeptByATrigger: the application's trigger on the old shard keeps rows from
// being deleted (a soft delete: BEFORE DELETE that skips the row). The deletion of the old
// copy deleted none, and Run returned nil and marked the owner done, its old copy left
// behind. Then Run stopped with ErrCopyMismatch, naming the rows left; now a trigger of the
// application's that fires on DELETE stops it before (ErrSchema, naming the trigger: see
// TestDeleteTriggerStopsTheDeletion); once the trigger is gone, the next Run deletes them.
func TestDeletionKeptByATrigger(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin, w, _, a, _ := oneMovingUser(t, e)
		keep := []string{"CREATE TRIGGER keep BEFORE DELETE ON messages BEGIN SELECT RAISE(IGNORE); END"}
		if e.dialect == sqlstore.PostgreSQL {
			keep = []string{"CREATE FUNCTION keep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
				"CREATE TRIGGER keep BEFORE DELETE ON messages FOR EACH ROW EXECUTE FUNCTION keep()"}
		}
		for _, q := range keep {
			mustExec(t, admin.dbs[a], q)
		}
		for _, deleteRows := range []int{0, 5} { // the user's 20 rows whole, or in chunks
			m := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{DeleteRows: deleteRows})
			err := m.Run(ctx, slices.Values(w.users))
			if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "keep, that fires on DELETE") {
				t.Fatalf("DeleteRows %d: Run: %v, want ErrSchema naming the trigger", deleteRows, err)
			}
		}
		mustExec(t, admin.dbs[a], "DROP TRIGGER keep"+map[bool]string{true: " ON messages"}[e.dialect == sqlstore.PostgreSQL])
		require.NoError(t, w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{}).Run(ctx, slices.Values(w.users)))
		w.requireClean(t, admin, w.after)
	})
}

// TestRowSecurityDuringTheMove (PostgreSQL): row security that hides every row of a tenant
// from the Store's role, turned on after Init on the old shard. The sums saw no row of the
// tenant on either shard, no group to check the table in, and agreed: the new shard served
// the tenant with none of its rows. Now the window stops (ErrSchema) and the old shard
// serves the tenant again with every row.
func TestRowSecurityDuringTheMove(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	const role = "sqlstore_tenant_app"
	e := newPostgres(t, 2)
	admin := openDB(t, e, pg.dsn("postgres"))
	if _, err := admin.Exec("CREATE ROLE " + role + " LOGIN"); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	supers := make([]*sql.DB, len(e.shards))
	for i, dsn := range e.shards {
		supers[i] = openDB(t, e, dsn)
		mustExec(t, supers[i], "GRANT ALL ON SCHEMA public TO "+role)
		mustExec(t, supers[i], "ALTER TABLE messages OWNER TO "+role)
		e.shards[i] = strings.Replace(dsn, "postgres://postgres@", "postgres://"+role+"@", 1)
	}
	e.control = e.shards[0]
	p := e.open(t, 2)
	w := newWorld(t, e, 1, 2)
	w.load(t, p, w.moving(1, 1), 20)
	u := w.users[0]
	mustExec(t, supers[0], "ALTER TABLE messages ENABLE ROW LEVEL SECURITY")
	mustExec(t, supers[0], "ALTER TABLE messages FORCE ROW LEVEL SECURITY")
	mustExec(t, supers[0], "CREATE POLICY tenant ON messages USING (user_id::text = current_setting('app.user', true))")
	err := w.shared(t, p, "grow", rebalance.SharedOptions{}).Run(context.Background(), slices.Values(w.users))
	if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "row-level security hides rows of table messages") {
		t.Fatalf("Run: %v, want ErrSchema: ...row-level security hides rows of table messages...", err)
	}
	f, err := p.store.Fences(context.Background(), []string{u}, 1)
	require.NoError(t, err)
	require.NotEqual(t, rebalance.Serving, f[0].State, "the new shard serves the tenant")
	var n int
	require.NoError(t, supers[0].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1", u).Scan(&n))
	require.Equal(t, 20, n, "the tenant's rows on the old shard")
}
