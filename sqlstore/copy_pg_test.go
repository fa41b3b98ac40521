package sqlstore_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// TestCopyOnPostgres: on PostgreSQL CopyChunk writes a chunk by COPY (a statement trigger of
// the test sees the statements), passing the values through in the binary format, enums and
// composites included; a row the new shard holds already, with other content (a copy run
// again after a crash), makes the chunk go by INSERT, which replaces it; and a table with a
// value the other shard does not take in binary (a column wider there) goes through Go, by
// INSERT where pgx's COPY cannot encode it (a composite, which it reads as text). Every row ends on the new shard as it is on the old one.
func TestCopyOnPostgres(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	skipPlainCopies(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, schema string
		spec         sqlstore.TableSpec
		value        func(id int64) any // the last column's value of row id
		stale        bool               // a row of owner 2 is on the new shard already
		want         [2]string          // the statements that wrote owner 1's and owner 2's rows
		onNew        string             // run on the new shard first
	}{
		{"copy", messagesSchema, messages, func(id int64) any { return id * 7 }, false, [2]string{"through", "through"}, ""},
		// Owner 2's first chunk holds row 3: it goes by INSERT, the next ones by COPY.
		{"a row there already", messagesSchema, messages, func(id int64) any { return id * 7 }, true, [2]string{"through", "insert through"}, ""},
		{"an enum", `CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE TABLE moods (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, mood mood NOT NULL);
CREATE INDEX moods_user_id_id ON moods (user_id, id)`,
			sqlstore.TableSpec{Table: "moods", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "mood"}},
			func(id int64) any { return []string{"happy", "sad"}[id%2] }, false, [2]string{"through", "through"}, ""},
		// A composite of built-in types passes through in the binary format.
		{"a composite", `CREATE TYPE pair AS (a INT, b INT);
CREATE TABLE pairs (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, p pair NOT NULL);
CREATE INDEX pairs_user_id_id ON pairs (user_id, id)`,
			sqlstore.TableSpec{Table: "pairs", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "p"}},
			func(id int64) any { return "(" + strconv.FormatInt(id, 10) + ",1)" }, false, [2]string{"through", "through"}, ""},
		// Enums, composites and arrays of them pass through too (the other shard reads an
		// enum's value by its label). An integer column that is wider on the new shard does
		// not: the first chunk's COPY fails there, and the table goes through Go from then
		// on, by pgx's COPY, which writes the values as the new shard's types.
		{"an array of an enum", `CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE TABLE feelings (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, f mood[] NOT NULL);
CREATE INDEX feelings_user_id_id ON feelings (user_id, id)`,
			sqlstore.TableSpec{Table: "feelings", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "f"}},
			func(id int64) any { return "{" + []string{"happy", "sad"}[id%2] + ",happy}" }, false, [2]string{"through", "through"}, ""},
		// A composite of a field wider on the new shard: refused there in binary, and read
		// through Go as its text, which pgx's binary COPY cannot take: by INSERT.
		{"a composite wider on the new shard", `CREATE TYPE pair AS (a INT, b INT);
CREATE TABLE pairs (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, p pair NOT NULL);
CREATE INDEX pairs_user_id_id ON pairs (user_id, id)`,
			sqlstore.TableSpec{Table: "pairs", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "p"}},
			func(id int64) any { return "(" + strconv.FormatInt(id, 10) + ",1)" }, false, [2]string{"insert", "insert"},
			"DROP TABLE pairs; DROP TYPE pair; CREATE TYPE pair AS (a BIGINT, b INT); CREATE TABLE pairs (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, p pair NOT NULL); CREATE INDEX pairs_user_id_id ON pairs (user_id, id)"},
		{"a wider column on the new shard", `CREATE TABLE counts (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, n INT NOT NULL);
CREATE INDEX counts_user_id_id ON counts (user_id, id)`,
			sqlstore.TableSpec{Table: "counts", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "n"}},
			func(id int64) any { return id * 1000 }, false, [2]string{"copy", "copy"}, "ALTER TABLE counts ALTER COLUMN n TYPE BIGINT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, sqlstore.PostgreSQL, 2, c.schema, []sqlstore.TableSpec{c.spec})
			if c.onNew != "" {
				_, err := openDB(t, e, e.shards[1]).Exec(c.onNew)
				require.NoError(t, err)
			}
			p := e.open(t, 2)
			tb, cols := c.spec.Table, strings.Join(c.spec.Columns, ", ")
			for _, q := range []string{
				"CREATE TABLE seen (owner BIGINT, query TEXT)",
				`CREATE FUNCTION seen_record() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	-- passed through (sqlstore's own COPY), through Go (pgx's copy), or by INSERT
	INSERT INTO seen SELECT DISTINCT user_id, CASE
		WHEN ltrim(current_query()) LIKE 'COPY %' THEN 'through'
		WHEN ltrim(current_query()) LIKE 'copy %' THEN 'copy'
		ELSE lower(split_part(ltrim(current_query()), ' ', 1)) END FROM written;
	RETURN NULL;
END
$f$`,
				"CREATE TRIGGER seen AFTER INSERT ON " + tb + " REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION seen_record()",
			} {
				_, err := p.dbs[1].Exec(q)
				require.NoError(t, err)
			}
			row := func(id int64) []any {
				if len(c.spec.Columns) == 3 {
					return []any{id, 1 + id%2, c.value(id)}
				}
				return []any{id, 1 + id%2, id, "m", c.value(id)}
			}
			values := "($1, $2, $3)"
			if len(c.spec.Columns) == 5 {
				values = "($1, $2, $3, $4, $5)"
			}
			for id := int64(1); id <= 30; id++ {
				_, err := p.dbs[0].Exec("INSERT INTO "+tb+" ("+cols+") VALUES "+values, row(id)...)
				require.NoError(t, err)
			}
			if c.stale { // owner 2's row 3 as an earlier copy left it, changed since on the old shard
				_, err := p.dbs[1].Exec("INSERT INTO "+tb+" ("+cols+") VALUES "+values, row(3)...)
				require.NoError(t, err)
				_, err = p.dbs[1].Exec("UPDATE " + tb + " SET time = -1 WHERE id = 3")
				require.NoError(t, err)
			}
			tok, err := p.store.Claim(ctx, rebalance.Claim{Migration: "m", Mover: "test", Lease: time.Minute})
			require.NoError(t, err)
			require.NoError(t, p.store.SetFence(ctx, "m", []string{"1", "2"}, 1, rebalance.Importing, tok))
			for _, owner := range []string{"1", "2"} {
				require.Equal(t, 15, copyOwner(t, p.store, tok, owner, 4), "owner %s", owner)
			}
			require.Equal(t, dump(t, p.dbs[0], tb, cols), dump(t, p.dbs[1], tb, cols))
			var wrote [2]string
			for i, owner := range []int{1, 2} {
				require.NoError(t, p.dbs[1].QueryRow("SELECT string_agg(DISTINCT query, ' ' ORDER BY query) FROM seen WHERE owner = $1", owner).Scan(&wrote[i]))
			}
			require.Equal(t, c.want, wrote)
		})
	}
}

// dump returns the rows of table tb, columns cols, in key order, as text.
func dump(t *testing.T, db *sql.DB, tb, cols string) []string {
	t.Helper()
	return texts(t, db, "SELECT ("+cols+")::text FROM "+tb+" ORDER BY id")
}

// texts returns the one text column of every row of q on db.
func texts(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rs, err := db.Query(q)
	require.NoError(t, err)
	defer rs.Close()
	var out []string
	for rs.Next() {
		var s string
		require.NoError(t, rs.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rs.Err())
	return out
}

// TestPassThroughKeepsValues: a chunk passed through in the binary format writes every value
// as the old shard holds it, to the text: NULLs, numerics with trailing zeros, NaN and -0,
// times with zones, json with its spacing and jsonb, bytes, arrays, uuids, intervals, text
// beyond ASCII. The same rows copied through Go (CopyPlainly) come out the same.
func TestPassThroughKeepsValues(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	skipPlainCopies(t)
	ctx := context.Background()
	const schema = `CREATE TABLE vals (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, n NUMERIC(10,3), f FLOAT8,
	ts TIMESTAMPTZ, j JSON, jb JSONB, b BYTEA, a INT[], u UUID, iv INTERVAL, ok BOOLEAN, s TEXT);
CREATE INDEX vals_user_id_id ON vals (user_id, id)`
	spec := sqlstore.TableSpec{Table: "vals", Owner: "user_id", Key: "id", IntOwner: true,
		Columns: []string{"id", "user_id", "n", "f", "ts", "j", "jb", "b", "a", "u", "iv", "ok", "s"}}
	cols := strings.Join(spec.Columns, ", ")
	for _, plain := range []bool{false, true} {
		e := newEngine(t, sqlstore.PostgreSQL, 2, schema, []sqlstore.TableSpec{spec})
		p := e.open(t, 2)
		p.store.CopyPlainly(plain)
		for _, q := range []string{
			`INSERT INTO vals VALUES (1, 1, 1.500, 'NaN', '2026-11-27 01:02:03.456789+05:30', '{ "a" :  [1, 2.50] }',
				'{"b": 1.50, "a": null}', '\x00ff10', '{1,NULL,3}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
				'1 year 2 mons 3 days 04:05:06.7', true, 'é ☃ 𝄞 ''quoted'' , {}')`,
			`INSERT INTO vals VALUES (2, 1, -0.001, '-0', '-infinity', 'null', '[]', '', '{}', NULL, '-1 day', false, '')`,
			`INSERT INTO vals (id, user_id) VALUES (3, 1)`,
			`INSERT INTO vals VALUES (4, 1, 9999999.999, 1e308, 'infinity', '"x"', '"x"', '\x', '{-2147483648}', '00000000-0000-0000-0000-000000000000', '0', NULL, repeat('x', 10000))`,
		} {
			_, err := p.dbs[0].Exec(q)
			require.NoError(t, err)
		}
		tok, err := p.store.Claim(ctx, rebalance.Claim{Migration: "m", Mover: "test", Lease: time.Minute})
		require.NoError(t, err)
		require.NoError(t, p.store.SetFence(ctx, "m", []string{"1"}, 1, rebalance.Importing, tok))
		require.Equal(t, 4, copyOwner(t, p.store, tok, "1", 3), "plain %v", plain)
		require.Equal(t, dump(t, p.dbs[0], "vals", cols), dump(t, p.dbs[1], "vals", cols), "plain %v", plain)
	}
}
