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
// the test sees the statements); a row the new shard holds already, with other content (a
// copy run again after a crash), makes the chunk go by INSERT, which replaces it; and a
// table with a value COPY cannot encode (an enum pgx does not know) goes by INSERT. Every
// row ends on the new shard as it is on the old one.
func TestCopyOnPostgres(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name, schema string
		spec         sqlstore.TableSpec
		value        func(id int64) any // the last column's value of row id
		stale        bool               // a row of owner 2 is on the new shard already
		want         [2]string          // the statements that wrote owner 1's and owner 2's rows
	}{
		{"copy", messagesSchema, messages, func(id int64) any { return id * 7 }, false, [2]string{"copy", "copy"}},
		// Owner 2's first chunk holds row 3: it goes by INSERT, the next ones by COPY.
		{"a row there already", messagesSchema, messages, func(id int64) any { return id * 7 }, true, [2]string{"copy", "copy insert"}},
		{"an enum", `CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE TABLE moods (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, mood mood NOT NULL);
CREATE INDEX moods_user_id_id ON moods (user_id, id)`,
			sqlstore.TableSpec{Table: "moods", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "mood"}},
			func(id int64) any { return []string{"happy", "sad"}[id%2] }, false, [2]string{"copy", "copy"}},
		// The driver returns a composite as its text, which a binary COPY cannot take: the
		// first chunk fails, and the table goes by INSERT from then on.
		{"a composite", `CREATE TYPE pair AS (a INT, b INT);
CREATE TABLE pairs (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, p pair NOT NULL);
CREATE INDEX pairs_user_id_id ON pairs (user_id, id)`,
			sqlstore.TableSpec{Table: "pairs", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "p"}},
			func(id int64) any { return "(" + strconv.FormatInt(id, 10) + ",1)" }, false, [2]string{"insert", "insert"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, sqlstore.PostgreSQL, 2, c.schema, []sqlstore.TableSpec{c.spec})
			p := e.open(t, 2)
			tb, cols := c.spec.Table, strings.Join(c.spec.Columns, ", ")
			for _, q := range []string{
				"CREATE TABLE seen (owner BIGINT, query TEXT)",
				`CREATE FUNCTION seen_record() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO seen SELECT DISTINCT user_id, lower(split_part(ltrim(current_query()), ' ', 1)) FROM written;
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
				after, total := []rebalance.Cursor{""}, 0
				for {
					next, n, done, err := p.store.CopyChunk(ctx, "m", tok, []string{owner}, 0, 1, after, 4)
					require.NoError(t, err)
					total, after = total+n, next
					if done {
						break
					}
				}
				require.Equal(t, 15, total, "owner %s", owner)
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
	rs, err := db.Query("SELECT (" + cols + ")::text FROM " + tb + " ORDER BY id")
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
