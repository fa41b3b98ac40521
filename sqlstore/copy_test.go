package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// TestCopyChunkAgainstAModel walks CopyChunk over random groups of owners, random starting
// cursors and random limits, and after every call compares what shard 1 holds, the rows
// counted and done with a model of the contract: owner after owner in the order given, each
// owner's rows after its cursor in key order, up to the limit in all. DeleteChunk is checked
// the same way, and DeleteOwners. Every other trial copies plainly (rows read into Go and INSERTed), the others through
// ATTACH on SQLite and by COPY on PostgreSQL.
func TestCopyChunkAgainstAModel(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		p := e.open(t, 2)
		r := rand.New(rand.NewPCG(1, 2))
		// Owners 1..8 of 0..25 rows each on shard 0, their keys interleaved.
		keys := map[string][]int64{}
		var all [][]any
		ids := r.Perm(200)
		for o := 1; o <= 8; o++ {
			u := strconv.Itoa(o)
			for range r.IntN(26) {
				id := int64(ids[len(all)]) + 1
				all = append(all, []any{id, int64(o), id, "m", int64(0)})
				keys[u] = append(keys[u], id)
			}
			slices.Sort(keys[u])
		}
		for _, row := range all {
			_, err := p.dbs[0].Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)", row...)
			require.NoError(t, err)
		}
		// The copies and deletions of a mover: a claim's token, the owners fenced importing.
		tok, err := p.store.Claim(ctx, rebalance.Claim{Migration: "m", Mover: "test", Lease: time.Minute})
		require.NoError(t, err)
		require.NoError(t, p.store.SetFence(ctx, "m", []string{"1", "2", "3", "4", "5", "6", "7", "8"}, 1, rebalance.Importing, tok))
		onShard1 := func() map[string][]int64 {
			rows, err := p.dbs[1].Query("SELECT user_id, id FROM messages ORDER BY id")
			require.NoError(t, err)
			defer rows.Close()
			got := map[string][]int64{}
			for rows.Next() {
				var o, id int64
				require.NoError(t, rows.Scan(&o, &id))
				got[strconv.FormatInt(o, 10)] = append(got[strconv.FormatInt(o, 10)], id)
			}
			require.NoError(t, rows.Err())
			return got
		}
		for trial := range 30 {
			p.store.CopyPlainly(trial%2 == 1)
			require.NoError(t, execAsMover(e.dialect, p.dbs[1], "DELETE FROM messages"))
			var owners []string
			for _, i := range r.Perm(8)[:1+r.IntN(8)] {
				owners = append(owners, strconv.Itoa(i+1))
			}
			// Random starting cursors: copy a first part of some owners, one by one.
			after := make([]rebalance.Cursor, len(owners))
			pos := make([]int, len(owners)) // the model's cursor: how many rows are behind it
			for i, o := range owners {
				if k := r.IntN(len(keys[o]) + 1); k > 0 && r.IntN(2) == 0 {
					next, n, _, err := p.store.CopyChunk(ctx, "m", tok, []string{o}, 0, 1, []rebalance.Cursor{""}, k)
					require.NoError(t, err)
					require.Equal(t, k, n)
					after[i], pos[i] = next[0], k
				}
			}
			want := onShard1()
			for step := 0; ; step++ {
				require.Less(t, step, 300, "trial %d: CopyChunk never said done", trial)
				limit := 1 + r.IntN(20)
				next, n, done, err := p.store.CopyChunk(ctx, "m", tok, owners, 0, 1, after, limit)
				require.NoError(t, err)
				// The model.
				copied := 0
				for i, o := range owners {
					take := min(len(keys[o])-pos[i], limit-copied)
					want[o] = append(want[o], keys[o][pos[i]:pos[i]+take]...)
					pos[i] += take
					copied += take
				}
				for o := range want {
					slices.Sort(want[o])
					if len(want[o]) == 0 {
						delete(want, o)
					}
				}
				require.Equal(t, copied, n, "trial %d step %d: rows copied", trial, step)
				require.Equal(t, copied < limit, done, "trial %d step %d: done", trial, step)
				require.Equal(t, want, onShard1(), "trial %d step %d: shard 1", trial, step)
				after = next
				if done {
					break
				}
			}
			// DeleteChunk takes up to its limit of the owners' rows, and leaves the others.
			gone := owners[:len(owners)/2+1]
			for {
				limit := 1 + r.IntN(30)
				n, err := p.store.DeleteChunk(ctx, "m", tok, gone, 1, limit)
				require.NoError(t, err)
				require.LessOrEqual(t, n, limit)
				if n < limit {
					for _, o := range gone {
						require.Empty(t, onShard1()[o], "trial %d: a chunk short of the limit was the last", trial)
					}
					break
				}
			}
			rest, total := owners[len(owners)/2+1:], 0
			for _, o := range rest {
				require.Equal(t, keys[o], onShard1()[o], "trial %d: owner %s not deleted", trial, o)
				total += len(keys[o])
			}
			// DeleteOwners takes every row of the owners if they are at most its most, else none.
			most := 1 + r.IntN(2*total+1)
			n, whole, err := p.store.DeleteOwners(ctx, "m", tok, rest, 1, most)
			require.NoError(t, err)
			require.Equal(t, total <= most, whole, "trial %d: %d rows, at most %d", trial, total, most)
			for _, o := range rest {
				if whole {
					require.Empty(t, onShard1()[o], "trial %d: owner %s left", trial, o)
				} else {
					require.Equal(t, keys[o], onShard1()[o], "trial %d: owner %s deleted beyond the most", trial, o)
				}
			}
			if whole {
				require.Equal(t, total, n, "trial %d", trial)
			}
		}
		_, _, _, err = p.store.CopyChunk(ctx, "m", tok, []string{"1", "2"}, 0, 1, []rebalance.Cursor{""}, 5)
		require.ErrorIs(t, err, rebalance.ErrConfig, "one cursor for two owners")
	})
}

// TestCopyWhereAttachFails: between two SQLite files a chunk is copied through ATTACH; a
// file the connection cannot attach (here one that does not exist) makes the copy go
// through Go instead, with the same result, and no error.
func TestCopyWhereAttachFails(t *testing.T) {
	skipPlainCopies(t)
	e := newSQLite(t, 2)
	ctx := context.Background()
	p := e.open(t, 2)
	for id := int64(1); id <= 30; id++ {
		_, err := p.dbs[0].Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)", id, 1+id%2, id, "m", 0)
		require.NoError(t, err)
	}
	tok, err := p.store.Claim(ctx, rebalance.Claim{Migration: "m", Mover: "test", Lease: time.Minute})
	require.NoError(t, err)
	require.NoError(t, p.store.SetFence(ctx, "m", []string{"1", "2"}, 1, rebalance.Importing, tok))
	require.Equal(t, 15, copyOwner(t, p.store, tok, "1", 4))
	file := p.store.AttachFile(0, "")
	require.NotEmpty(t, file, "shard 0's file was not found: the copy did not go through ATTACH")
	p.store.AttachFile(0, filepath.Join(t.TempDir(), "no", "such.db"))
	require.Equal(t, 15, copyOwner(t, p.store, tok, "2", 4))
	require.Empty(t, p.store.AttachFile(0, ""), "a failed ATTACH did not turn it off")
	var n int
	require.NoError(t, p.dbs[1].QueryRow("SELECT COUNT(*) FROM messages").Scan(&n))
	require.Equal(t, 30, n)
}

// copyOwner copies owner's rows from shard 0 to shard 1, limit rows a chunk, and returns how
// many it copied.
func copyOwner(t *testing.T, s *sqlstore.Store, tok uint64, owner string, limit int) int {
	t.Helper()
	after, total := []rebalance.Cursor{""}, 0
	for {
		next, n, done, err := s.CopyChunk(context.Background(), "m", tok, []string{owner}, 0, 1, after, limit)
		require.NoError(t, err)
		total, after = total+n, next
		if done {
			return total
		}
	}
}

// unanalyzed returns a PostgreSQL shard whose messages table autovacuum leaves alone, so
// that the rows loaded there have no statistics, as a freshly copied owner's, or skips.
func unanalyzed(t *testing.T) (*proc, *world) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	e := newPostgres(t, 1)
	p := e.open(t, 1)
	_, err := p.dbs[0].Exec("ALTER TABLE messages SET (autovacuum_enabled = false)")
	require.NoError(t, err)
	return p, newWorld(t, e, 1, 1)
}

// TestRangesOnly: each chunk of a copy (by ranges, or whole while the owners have no
// cursor) or a deletion reads about as many rows as it handles, however big the owner, even
// with statistics older than the owner's rows. PostgreSQL then estimates a few dozen rows
// an owner and, left to itself, reads a range through a bitmap of all the owner's index
// entries and sorts them, so every chunk of a big owner cost as much as all its rows: here
// 20000 for a chunk of 100.
func TestRangesOnly(t *testing.T) {
	ctx := context.Background()
	p, w := unanalyzed(t)
	w.load(t, p, span(1, 1), 20000)
	w.load(t, p, span(2, 2), 100)
	const limit = 100
	read, whole, del, readArgs, wholeArgs, delArgs, err := p.store.RangeStatements(0, []string{"1", "2"}, limit)
	require.NoError(t, err)
	actual := regexp.MustCompile(`actual time=[0-9.]+\.\.[0-9.]+ rows=([0-9]+)`)
	for _, c := range []struct {
		what string
		q    string
		args []any
	}{{"copy", read, readArgs}, {"copy whole", whole, wholeArgs}, {"delete", del, delArgs}} {
		plan, err := p.store.ExplainRanges(ctx, 0, c.q, c.args)
		require.NoError(t, err)
		most := 0
		for _, line := range plan {
			if m := actual.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				most = max(most, n)
			}
		}
		require.NotZero(t, most, "%s: no row counts in the plan:\n%s", c.what, strings.Join(plan, "\n"))
		require.LessOrEqual(t, most, 2*limit, "%s: a node of the plan handled more rows than two owners' ranges cut at the limit:\n%s", c.what, strings.Join(plan, "\n"))
	}
}

// TestLookupsUseTheIndex: counting, summing and reading the fences and the marks of a batch
// of owners reads only their entries of an index, where the tables have never been analyzed
// (a new shard's table that a migration fills, the bookkeeping tables it grows): PostgreSQL
// then takes "owner IN (500 owners)" to match nine rows in ten, reads the whole table for
// each batch, and a migration's time grows with the square of its size.
func TestLookupsUseTheIndex(t *testing.T) {
	t.Run("pgx", func(t *testing.T) { lookupsUseTheIndex(t, false) })
	t.Run("another driver", func(t *testing.T) { lookupsUseTheIndex(t, true) })
}

// lookupsUseTheIndex is TestLookupsUseTheIndex through pgx, or through a driver whose
// connections are not pgx's (hidePgx), which byIndex reads through in transactions.
func lookupsUseTheIndex(t *testing.T, hidePgx bool) {
	ctx := context.Background()
	p, w := unanalyzed(t)
	if hidePgx {
		p = openFaulty(t, w.e, 1, &faults{hidePgx: true})
	}
	db := p.dbs[0] // shard 0 holds the control tables too
	for _, table := range []string{"rebalance_fence", "rebalance_marks"} {
		_, err := db.Exec("ALTER TABLE " + table + " SET (autovacuum_enabled = false)")
		require.NoError(t, err)
	}
	const all, asked = 2000, 500
	w.load(t, p, span(1, all), 5)
	require.NoError(t, execAsMover(sqlstore.PostgreSQL, db, fmt.Sprintf(
		"INSERT INTO rebalance_fence (owner, state, migration, token) SELECT g::text, %d, 'm', 1 FROM generate_series(1, %d) AS g", rebalance.Exporting, all)))
	_, err := db.Exec(fmt.Sprintf("INSERT INTO rebalance_marks (migration, owner, mark) SELECT 'm', g::text, %d FROM generate_series(1, %d) AS g", rebalance.Copied, all))
	require.NoError(t, err)

	// scans reads the statistics of the tables: seq_scan, idx_scan and index entries read.
	type counters struct{ seq, idx, entries int64 }
	scans := func() map[string]counters {
		rows, err := db.Query(`SELECT relname, COALESCE(seq_scan, 0), COALESCE(idx_scan, 0), COALESCE(idx_tup_fetch, 0)
			FROM pg_stat_user_tables WHERE relname IN ('messages', 'rebalance_fence', 'rebalance_marks')`)
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]counters{}
		for rows.Next() {
			var name string
			var c counters
			require.NoError(t, rows.Scan(&name, &c.seq, &c.idx, &c.entries))
			out[name] = c
		}
		require.NoError(t, rows.Err())
		return out
	}
	// A server process reports its counts within a second or so of going idle: settled
	// waits until they stop changing.
	settled := func() map[string]counters {
		for last := scans(); ; {
			time.Sleep(1500 * time.Millisecond)
			now := scans()
			if maps.Equal(now, last) {
				return now
			}
			last = now
		}
	}
	before := settled()
	owners := make([]string, 0, asked)
	for i := 1; i <= all; i += all / asked {
		owners = append(owners, strconv.Itoa(i))
	}
	n, err := p.store.Counts(ctx, owners, 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), n[asked-1])
	sums, err := p.store.Sums(ctx, owners, 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), sums[0].Rows)
	fences, err := p.store.Fences(ctx, owners, 0)
	require.NoError(t, err)
	require.Equal(t, rebalance.Exporting, fences[asked-1].State)
	marks, err := p.store.Marks(ctx, "m", owners)
	require.NoError(t, err)
	require.Equal(t, rebalance.Copied, marks[asked-1])

	after := settled()
	d := func(table string) int64 {
		return after[table].seq + after[table].idx - before[table].seq - before[table].idx
	}
	require.True(t, d("messages") >= 2 && d("rebalance_fence") >= 1 && d("rebalance_marks") >= 1, "the statistics did not count the reads: %v, then %v", before, after)
	held := map[string]int64{"messages": 2 * asked * 5, "rebalance_fence": asked, "rebalance_marks": asked} // counts and sums read messages
	for table, c := range after {
		require.Equal(t, before[table].seq, c.seq, "%s: read whole", table)
		require.LessOrEqual(t, c.entries-before[table].entries, held[table], "%s: read more rows than the owners asked hold", table)
	}
}

// deleteLimits is a Store that records the limit of each DeleteChunk and DeleteOwners (its
// most) and what it deleted.
type deleteLimits struct {
	*sqlstore.Store
	mu      sync.Mutex
	limits  []int
	deleted []int
	wholes  int // DeleteOwners that deleted
}

func (d *deleteLimits) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard, limit int) (int, error) {
	n, err := d.Store.DeleteChunk(ctx, migration, token, owners, shard, limit)
	d.mu.Lock()
	d.limits = append(d.limits, limit)
	d.deleted = append(d.deleted, n)
	d.mu.Unlock()
	return n, err
}

func (d *deleteLimits) DeleteOwners(ctx context.Context, migration string, token uint64, owners []string, shard, most int) (int, bool, error) {
	n, whole, err := d.Store.DeleteOwners(ctx, migration, token, owners, shard, most)
	d.mu.Lock()
	d.limits = append(d.limits, most)
	d.deleted = append(d.deleted, n)
	if whole {
		d.wholes++
	}
	d.mu.Unlock()
	return n, whole, err
}

// chunkDeletes hides the Store's whole deletions (rebalance.OwnersDeleter): old copies go
// by DeleteChunk only.
type chunkDeletes struct{ rebalance.SharedStore[*sql.Tx] }

// TestDeleteByAddress: tables whose rows' addresses are not one row each lose their old
// copies in chunks of at most DeleteRows all the same, or owners whole where they fit, and
// every row ends once on its owner's new shard: a PostgreSQL table partitioned by its key (its partitions repeat
// addresses), a SQLite table WITHOUT ROWID (it has none) and a SQLite table with a column
// named _rowid_ (which hides the rowid; here the same value in every row).
func TestDeleteByAddress(t *testing.T) {
	partitioned := strings.Replace(messagesSchema, "sender  BIGINT NOT NULL\n)", "sender  BIGINT NOT NULL\n) PARTITION BY HASH (id)", 1)
	for i := range 4 {
		partitioned += fmt.Sprintf(";\nCREATE TABLE IF NOT EXISTS messages_%d PARTITION OF messages FOR VALUES WITH (MODULUS 4, REMAINDER %d)", i, i)
	}
	withRowidColumn := messages
	withRowidColumn.Columns = append(slices.Clip(messages.Columns), "_rowid_")
	for _, c := range []struct {
		name    string
		dialect sqlstore.Dialect
		schema  string
		tables  []sqlstore.TableSpec
	}{
		{"postgres/partitioned", sqlstore.PostgreSQL, partitioned, nil},
		{"sqlite/without-rowid", sqlstore.SQLite, strings.Replace(messagesSchema, "sender  BIGINT NOT NULL\n)", "sender  BIGINT NOT NULL\n) WITHOUT ROWID", 1), nil},
		{"sqlite/rowid-column", sqlstore.SQLite, strings.Replace(messagesSchema, "sender  BIGINT NOT NULL\n)", "sender  BIGINT NOT NULL,\n\t_rowid_ BIGINT NOT NULL DEFAULT 7\n)", 1), []sqlstore.TableSpec{withRowidColumn}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NotEqual(t, messagesSchema, c.schema)
			if c.dialect == sqlstore.PostgreSQL && pg == nil {
				t.Skip("PostgreSQL not available: " + pgWhy)
			}
			for _, whole := range []bool{false, true} {
				e := newEngine(t, c.dialect, 4, c.schema, c.tables)
				p := e.open(t, 2)
				w := newWorld(t, e, 2, 4)
				w.load(t, p, span(1, 40), 30)
				d := &deleteLimits{Store: p.store}
				var store rebalance.SharedStore[*sql.Tx] = chunkDeletes{d}
				if whole {
					store = d
				}
				// 30 rows a user: in chunks of 13, or with others whole in runs of up to 45.
				deleteRows := 13
				if whole {
					deleteRows = 45
				}
				m, err := rebalance.NewShared("grow", w.before, w.after, store, rebalance.SharedOptions{Token: 1, ChunkRows: 7, DeleteRows: deleteRows})
				require.NoError(t, err)
				require.NoError(t, m.Run(context.Background(), slices.Values(w.users)))
				if whole {
					require.NotZero(t, d.wholes, "no owner deleted whole")
				} else {
					require.Contains(t, d.deleted, 13, "no deletion was cut at its limit")
				}
				for i, n := range d.deleted {
					require.LessOrEqual(t, n, d.limits[i], "deletion %d", i)
				}
				w.requireClean(t, p, w.after)
			}
		})
	}
}

// TestDeleteRowsByEngine: without SharedOptions.DeleteRows, old copies go ten times
// ChunkRows a deletion on PostgreSQL, where no access waits for rows of owners a shard no
// longer serves, and ChunkRows on SQLite, where a deletion holds the file's write lock; every
// row ends once on its owner's new shard.
func TestDeleteRowsByEngine(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		p := e.open(t, 2)
		w := newWorld(t, e, 2, 4)
		w.load(t, p, span(1, 40), 30)
		d := &deleteLimits{Store: p.store}
		m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](d), rebalance.SharedOptions{Token: 1, ChunkRows: 7})
		require.NoError(t, err)
		require.NoError(t, m.Run(context.Background(), slices.Values(w.users)))
		// Each deletion is cut at the limit, or deletes owners whole that fit in it together
		// (bounded by their rows, 30 each: two on PostgreSQL, none on SQLite).
		want := map[sqlstore.Dialect]int{sqlstore.SQLite: 7, sqlstore.PostgreSQL: 70}[e.dialect]
		require.NotEmpty(t, d.limits)
		for _, l := range d.limits {
			require.LessOrEqual(t, l, want)
		}
		require.Greater(t, slices.Max(d.limits), want/2, "deletions as if the limit were below %d", want)
		w.requireClean(t, p, w.after)
	})
}

// TestAccessing: on PostgreSQL an access under way, on any shard of the server, is seen by
// Accessing until it ends; on SQLite, which cannot see other processes, Accessing always
// says true.
func TestAccessing(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		p := e.open(t, 2)
		w := newWorld(t, e, 2, 2)
		w.load(t, p, span(1, 4), 1)
		mover := e.open(t, 2).store
		accessing := func(shard int) bool {
			busy, err := mover.Accessing(ctx, shard)
			require.NoError(t, err)
			return busy
		}
		if e.dialect == sqlstore.SQLite {
			require.True(t, accessing(0))
			return
		}
		require.False(t, accessing(0), "no access under way")
		app := w.shared(t, p, "grow", rebalance.SharedOptions{})
		in, out := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- app.Do(ctx, w.users[0], func(tx *sql.Tx, _ int) error {
				close(in)
				<-out
				return nil
			})
		}()
		<-in
		require.True(t, accessing(0), "an access under way")
		require.True(t, accessing(1), "an access under way on another shard of the server")
		close(out)
		require.NoError(t, <-done)
		require.False(t, accessing(0), "the access ended")
		_, err := mover.Accessing(ctx, 2)
		require.Error(t, err, "a shard out of range")
	})
}

// TestDeleteOwners: a whole deletion is a mover's write like DeleteChunk: it refuses owners
// its migration has not fenced on the shard and a replaced mover's token, deleting nothing,
// and deletes only the owners named.
func TestDeleteOwners(t *testing.T) {
	forEngines(t, 1, func(t *testing.T, e *engine) {
		ctx := context.Background()
		p := e.open(t, 2)
		for id := range 30 {
			_, err := p.dbs[0].Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, 0, 'm', 0)", id, 1+id%3)
			require.NoError(t, err)
		}
		left := func() (n int) {
			require.NoError(t, p.dbs[0].QueryRow("SELECT COUNT(*) FROM messages").Scan(&n))
			return n
		}
		old, err := p.store.Claim(ctx, rebalance.Claim{Migration: "m", Election: 1, Mover: "old", Lease: time.Minute})
		require.NoError(t, err)
		require.NoError(t, p.store.SetFence(ctx, "m", []string{"1", "2"}, 0, rebalance.Moved, old))
		_, _, err = p.store.DeleteOwners(ctx, "m", old, []string{"1", "3"}, 0, 100)
		require.ErrorIs(t, err, rebalance.ErrFenced, "owner 3 is not fenced")
		require.Equal(t, 30, left())
		_, _, err = p.store.DeleteOwners(ctx, "m", old, []string{"1"}, 0, -1)
		require.ErrorIs(t, err, rebalance.ErrConfig)
		// Owners the window counted none of: a row there is one too many.
		n, whole, err := p.store.DeleteOwners(ctx, "m", old, []string{"1"}, 0, 0)
		require.NoError(t, err)
		require.False(t, whole)
		require.Zero(t, n)
		require.Equal(t, 30, left())
		newer, err := p.store.Claim(ctx, rebalance.Claim{Migration: "m", Election: 2, Mover: "new", Lease: time.Minute})
		require.NoError(t, err)
		_, _, err = p.store.DeleteOwners(ctx, "m", old, []string{"1", "2"}, 0, 100)
		require.ErrorIs(t, err, rebalance.ErrFenced, "a replaced mover's token")
		require.Equal(t, 30, left())
		n, whole, err = p.store.DeleteOwners(ctx, "m", newer, []string{"2", "1", "2"}, 0, 20)
		require.NoError(t, err)
		require.True(t, whole)
		require.Equal(t, 20, n)
		var others int
		require.NoError(t, p.dbs[0].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = 3").Scan(&others))
		require.Equal(t, 10, others)
		require.Equal(t, 10, left())
	})
}

// TestDeleteOwnersPlan: on a table PostgreSQL has no statistics of, a plain deletion of a
// tenth of its rows, 100 owners' of 1000, is planned as a read of the whole table (each owner
// taken for half a percent of it); DeleteOwners plans it by the index.
func TestDeleteOwnersPlan(t *testing.T) {
	ctx := context.Background()
	p, w := unanalyzed(t)
	w.load(t, p, span(1, 1000), 20)
	var owners []string
	for o := range 100 {
		owners = append(owners, strconv.Itoa(1+o*10))
	}
	q, args, err := p.store.OwnersDeletion(0, owners)
	require.NoError(t, err)
	seq := func(plan []string) bool {
		return slices.ContainsFunc(plan, func(l string) bool { return strings.Contains(l, "Seq Scan") })
	}
	plan, err := p.store.ExplainDeletion(ctx, 0, q, args, false)
	require.NoError(t, err)
	require.True(t, seq(plan), "PostgreSQL by itself did not read the whole table, so this test shows nothing:\n%s", strings.Join(plan, "\n"))
	plan, err = p.store.ExplainDeletion(ctx, 0, q, args, true)
	require.NoError(t, err)
	require.False(t, seq(plan), "DeleteOwners reads the whole table:\n%s", strings.Join(plan, "\n"))
}

// TestInProcessCopyChecksTheSchema: the schema changes after Init, during an in-process
// Migration (rebalance.New over the Store): a column added on every shard and written
// through Do, or a column of the new shard retyped (bigint to real). Copy carried only the
// TableSpec's columns, or PostgreSQL converted the values by assignment; the counts agreed,
// the old copy was deleted, and Run and Finish returned nil without the values. Copy now
// checks the columns on both shards as each window of the Shared mover does.
func TestInProcessCopyChecksTheSchema(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		for _, c := range []struct {
			name   string
			change func(w *world, u string) (shard int, q string)
			want   string
		}{
			{"column added", func(w *world, u string) (int, string) { return -1, "ALTER TABLE messages ADD COLUMN extra TEXT" },
				"check table messages: column extra is not in the TableSpec's Columns"},
			{"column retyped", func(w *world, u string) (int, string) {
				return w.after.Locate(u), "ALTER TABLE messages ALTER COLUMN time TYPE real"
			}, "check table messages: column time is real here, bigint when Init checked the shards"},
		} {
			t.Run(c.name, func(t *testing.T) {
				if e.dialect == sqlstore.SQLite && c.name == "column retyped" {
					t.Skip("SQLite has no ALTER COLUMN TYPE")
				}
				ctx := context.Background()
				f := e.fresh(t)
				admin := f.open(t, 2)
				w := newWorld(t, f, 1, 2)
				w.load(t, admin, w.moving(1, 1), 4)
				u := w.users[0]
				m, err := rebalance.New("grow", w.before, w.after, admin.store, rebalance.Options{})
				if err != nil {
					t.Fatal(err)
				}
				shard, q := c.change(w, u)
				for i, db := range admin.dbs {
					if shard < 0 || shard == i {
						mustExec(t, db, q)
					}
				}
				err = m.Run(ctx, slices.Values(w.users))
				if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Run: %v, want ErrSchema: %s", err, c.want)
				}
				if n, err := admin.store.Count(ctx, u, w.before.Locate(u)); err != nil || n != 4 {
					t.Fatalf("the old shard holds %d of the owner's 4 rows (%v)", n, err)
				}
			})
		}
	})
}

// TestCopyKeepsStrayRows: on a store no migration has claimed yet, the application routes by
// a migration whose before sharder is not where the data is (3 -> 2 on data laid out for 2
// shards). Its Do writes a user's row on a shard that holds none of the user's rows, and its
// Run then copied that shard over the user's 4 rows, returning nil. The in-process Copy now
// replaces only rows a copy of its own wrote: it refuses with ErrStrayRows, changing nothing.
func TestCopyKeepsStrayRows(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, w.moving(1, 1), 4)
		u := w.users[0] // jump 2 and jump 3 place it apart
		p := e.open(t, 2)
		three, _ := shard.NewJump(3)
		wrong, err := rebalance.New("wrong", three, w.before, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		stray := three.Locate(u)
		if err := wrong.Do(ctx, u, func(s int) error {
			if s != stray {
				t.Fatalf("Do routed user %s to shard %d, want %d", u, s, stray)
			}
			return insertAcked(ctx, e, p, w, u, s)
		}); err != nil {
			t.Fatal(err)
		}
		if err := wrong.Run(ctx, slices.Values(w.users)); !errors.Is(err, rebalance.ErrStrayRows) {
			t.Fatalf("Run of the wrong plan: %v, want ErrStrayRows", err)
		}
		for s, want := range map[int]int64{stray: 1, w.before.Locate(u): 4} {
			if n, err := admin.store.Count(ctx, u, s); err != nil || n != want {
				t.Fatalf("user %s: %d rows on shard %d (%v), want %d", u, n, s, err, want)
			}
		}
	})
}

// TestCopyAgainAfterACrash: a Copy that committed and then crashed before the owner was
// marked copied is copied again over its own rows, whatever the application did on the
// owner's old shard meanwhile: wrote a row, or deleted all of the owner's rows (the copy of
// nothing then empties the stale copy; it stopped at ErrSourceEmpty on every Run, the move
// never finishing). The move finishes with every acknowledged row and no other.
func TestCopyAgainAfterACrash(t *testing.T) {
	for _, deletes := range []bool{false, true} {
		t.Run(map[bool]string{false: "writes", true: "deletes"}[deletes], func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				ctx := context.Background()
				admin := e.open(t, 2)
				w := newWorld(t, e, 1, 2)
				w.load(t, admin, w.moving(1, 2), 3)
				p := e.open(t, 2)
				runCtx, cancel := context.WithCancel(ctx)
				stop := inprocStopAt{&stopAt{Store: p.store, n: 2, after: true, cancel: cancel}} // the claim, then the copy
				m, err := rebalance.New("crashed", w.before, w.after, stop, rebalance.Options{Lease: time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Run(runCtx, slices.Values(w.users)); !errors.Is(err, context.Canceled) || stop.what != "copy" {
					t.Fatalf("Run: %v at %q, want it stopped right after its first copy", err, stop.what)
				}
				u := w.users[0] // its copy crashed; served by its old shard still
				if deletes {
					if _, err := p.dbs[w.before.Locate(u)].ExecContext(ctx, "DELETE FROM messages WHERE user_id = "+u); err != nil {
						t.Fatal(err)
					}
					w.mu.Lock()
					maps.DeleteFunc(w.ledger, func(_, uid int64) bool { return strconv.FormatInt(uid, 10) == u })
					w.mu.Unlock()
				} else if err := insertAcked(ctx, e, p, w, u, w.before.Locate(u)); err != nil {
					t.Fatal(err)
				}
				again, err := rebalance.New("crashed", w.before, w.after, p.store, rebalance.Options{})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond) // the crashed mover's lease
				if err := again.Run(ctx, slices.Values(w.users)); err != nil {
					t.Fatal(err)
				}
				if err := again.Finish(ctx, slices.Values(w.users)); err != nil {
					t.Fatal(err)
				}
				if v := w.requireClean(t, admin, w.after); v.unacked > 0 {
					t.Fatalf("verification: %v", v)
				}
			})
		})
	}
}

// TestListsOfOwnersTakeFewStatements: the lookups of a group of owners (counts, sums,
// fences) prepare one statement a power of two of owners on a connection, not one a number
// of owners, and answer as before. PostgreSQL keeps a prepared statement's plan by its text
// on each connection: with a text a length, a move planned most of its lookups anew.
func TestListsOfOwnersTakeFewStatements(t *testing.T) {
	ctx := context.Background()
	p, w := unanalyzed(t) // one connection
	const most, rows = 40, 3
	w.load(t, p, span(1, most), rows)
	for n := 1; n <= most; n++ {
		var owners []string
		for u := n; u >= 1; u-- { // not in the order the rows were written
			owners = append(owners, strconv.Itoa(u))
		}
		owners = append(owners, "0") // no rows
		counts, err := p.store.Counts(ctx, owners, 0)
		require.NoError(t, err)
		sums, err := p.store.Sums(ctx, owners, 0)
		require.NoError(t, err)
		fences, err := p.store.Fences(ctx, owners, 0)
		require.NoError(t, err)
		for i := range owners {
			want := int64(rows)
			if owners[i] == "0" {
				want = 0
			}
			require.Equal(t, want, counts[i], "owner %s of %d", owners[i], len(owners))
			require.Equal(t, want, sums[i].Rows, "owner %s of %d", owners[i], len(owners))
			require.Equal(t, rebalance.Serving, fences[i].State, "owner %s of %d", owners[i], len(owners))
		}
		alone, err := p.store.Sums(ctx, owners[:1], 0)
		require.NoError(t, err)
		require.Equal(t, alone[0], sums[0], "owner %s's sum alone and in a group of %d", owners[0], len(owners))
	}
	// Lists of 2 to 41 owners: lengths 2, 4, 8, 16, 32 and 64; the sums of one owner too.
	want := map[string]int{"COUNT(*) FROM messages": 6, "SUM(": 7, "FROM rebalance_fence WHERE owner IN": 6}
	texts := map[string]int{}
	rs, err := p.dbs[0].QueryContext(ctx, "SELECT statement FROM pg_prepared_statements")
	require.NoError(t, err)
	defer rs.Close()
	for rs.Next() {
		var q string
		require.NoError(t, rs.Scan(&q))
		for kind := range want {
			if strings.Contains(q, kind) {
				texts[kind]++
			}
		}
	}
	require.NoError(t, rs.Err())
	for kind, n := range want {
		require.Equal(t, n, texts[kind], "statements prepared of %q for lists of 2 to %d owners", kind, most+1)
	}
}
