package sqlstore_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"testing"

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
