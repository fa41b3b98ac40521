package sqlstore_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// chunkSizes records the rows of each chunk a store copies.
type chunkSizes struct {
	rebalance.SharedStore[*sql.Tx]
	mu    sync.Mutex
	sizes []int
}

func (c *chunkSizes) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	next, n, done, err := c.SharedStore.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
	c.mu.Lock()
	c.sizes = append(c.sizes, n)
	c.mu.Unlock()
	return next, n, done, err
}

// TestWideRowsCutChunks: 30 rows of 100 kB each, in chunks of up to 1000 rows, with what a
// chunk read into memory may hold lowered to 250 kB. Each chunk that passes through the
// mover (PostgreSQL's tuples, or rows through Go on either engine) ends after the row that
// reaches the bytes, 3 rows, rather than hold all 30; every row arrives.
func TestWideRowsCutChunks(t *testing.T) {
	for _, plain := range []bool{false, true} {
		name := map[bool]string{false: "fast", true: "through Go"}[plain]
		t.Run(name, func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				if !plain && e.dialect == sqlstore.SQLite {
					t.Skip("the attached copy holds no rows in Go")
				}
				ctx := context.Background()
				admin := e.open(t, 2)
				w := newWorld(t, e, 1, 2)
				w.load(t, admin, w.moving(1, 1), 30)
				u := w.users[0]
				mustExec(t, admin.dbs[0], "UPDATE messages SET message = $1", strings.Repeat("x", 100_000))
				mover := e.open(t, 2)
				mover.store.SetChunkBytes(250_000)
				mover.store.CopyPlainly(plain)
				st := &chunkSizes{SharedStore: mover.store}
				m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{ChunkRows: 1000})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Run(ctx, slices.Values(w.users)); err != nil {
					t.Fatal(err)
				}
				total := 0
				for _, n := range st.sizes {
					if n > 3 {
						t.Errorf("a chunk of %d rows of 100 kB, want at most 3 (chunks %v)", n, st.sizes)
					}
					total += n
				}
				if total != 30 {
					t.Errorf("chunks copied %d rows, want 30 (%v)", total, st.sizes)
				}
				w.requireClean(t, admin, w.after)
				if n, err := admin.store.Count(ctx, u, 1); err != nil || n != 30 {
					t.Errorf("new shard holds %d of 30 rows (%v)", n, err)
				}
			})
		})
	}
}

// TestWideRowsChangedDuringTheCopy: 30 rows of 100 kB, what a chunk may read into memory
// lowered to 250 kB (as TestWideRowsCutChunks does); after the copy, before the first
// replay, the application rewrites all 30 rows. The replay read every changed row into
// memory at once, 3 MB (at the defaults, a thousand rows of 1 MB rewritten during a move made
// one replay hold 1 GB). Now it goes in rounds of about the bound: 16 rows at most in its
// first batch of keys, then batches sized by the rows read before.
func TestWideRowsChangedDuringTheCopy(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 1, 2)
		w.load(t, admin, w.moving(1, 1), 30)
		u := w.users[0]
		mustExec(t, admin.dbs[0], "UPDATE messages SET message = $1", strings.Repeat("x", 100_000))
		app := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{FenceWait: 30 * time.Second})
		mover := e.open(t, 2)
		mover.store.SetChunkBytes(250_000)
		var mu sync.Mutex
		var rounds []int
		mover.store.OnReplayRound(func(bytes int) {
			mu.Lock()
			rounds = append(rounds, bytes)
			mu.Unlock()
		})
		st := &beforeReplay{Store: mover.store, between: func() {
			if err := app.Do(ctx, u, func(tx *sql.Tx, _ int) error {
				_, err := tx.ExecContext(ctx, "UPDATE messages SET message = $1 WHERE user_id = $2", strings.Repeat("y", 100_000), u)
				return err
			}); err != nil {
				t.Error(err)
			}
		}}
		m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{ChunkRows: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, w.after)
		var sum int
		for i, b := range rounds {
			sum += b
			// The first batch of all reads 16 rows at most; later ones are sized by the rows
			// read before, and end with the row that passes the bound.
			if most := 250_000 + 100_100; i == 0 && b > 16*100_100 || i > 0 && b > most {
				t.Errorf("round %d of the replay read %d kB of rows, with the bound at 250 kB (rounds %v)", i, b/1000, rounds)
			}
		}
		if sum < 30*100_000 {
			t.Errorf("the replay read %d kB in all, want the 30 rows of 100 kB rewritten (rounds %v)", sum/1000, rounds)
		}
		t.Logf("rounds of the replay, bytes: %v", rounds)
	})
}
