package rebalance

// The copy of a Shared migration, while the old shard serves the owners: its change capture
// on, the rows in chunks, then the changes recorded meanwhile replayed.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// copyAll copies owners' rows from a to b while a serves them. It first fences a
// exporting, so that every change of the owners' rows from then on is recorded there (and
// clears what a stopped copy recorded), then copies in chunks: sizes, if not nil, are the
// owners' row counts on a, and owners that fit in one chunk together are copied together (a
// chunk cut short in the middle of an owner reads the rest of its owners again). Then it
// replays the changes recorded meanwhile, so that the window after the fence replays only
// what arrives during the catch-up.
func (m *mover[Tx]) copyAll(ctx context.Context, owners []string, a, b int, sizes []int64) error {
	if err := m.store.SetFence(ctx, m.id, owners, a, Exporting, m.token); err != nil {
		return fmt.Errorf("fence old shard exporting: %w", err)
	}
	// What a stopped copy recorded: this copy reads every row after the clear.
	if err := m.store.ClearChanges(ctx, m.id, m.token, owners, a); err != nil {
		return fmt.Errorf("clear changes recorded on shard %d: %w", a, err)
	}
	for first := 0; first < len(owners); {
		last, rows := first+1, int64(0)
		if sizes != nil {
			limit := int64(m.chunkRows(ctx, a, b))
			for rows = sizes[first]; last < len(owners) && rows+sizes[last] <= limit; last++ {
				rows += sizes[last]
			}
		} else {
			last = len(owners)
		}
		if err := m.copyChunks(ctx, owners[first:last], a, b); err != nil {
			return err
		}
		first = last
	}
	return m.replay(ctx, owners, a, b)
}

// copyChunks copies the rows of owners from a to b chunk by chunk, a chunk holding up to
// chunkRows rows of all the owners.
func (m *mover[Tx]) copyChunks(ctx context.Context, owners []string, a, b int) error {
	after := make([]Cursor, len(owners))
	for {
		limit := m.chunkRows(ctx, a, b)
		began := time.Now()
		next, n, done, err := m.store.CopyChunk(ctx, m.id, m.token, owners, a, b, after, limit)
		m.took(limit, time.Since(began))
		switch {
		case err != nil:
			return err
		case len(next) != len(owners):
			return fmt.Errorf("store returned %d cursors for %d owners", len(next), len(owners))
		}
		m.rows.Add(int64(n))
		copy(after, next)
		if done {
			return nil
		}
		if n == 0 {
			return errors.New("store copied no row after the cursors and said more are left")
		}
		if err := m.yield(ctx, began); err != nil {
			return err
		}
	}
}

// replay applies on b the changes of owners recorded on a, ChunkRows at a time, until a
// batch comes short: in the window, when none is left.
func (m *mover[Tx]) replay(ctx context.Context, owners []string, a, b int) error {
	for {
		began := time.Now()
		n, err := m.store.Replay(ctx, m.id, m.token, owners, a, b, m.opts.ChunkRows)
		if err != nil {
			return fmt.Errorf("replay changes recorded on shard %d: %w", a, err)
		}
		m.rows.Add(int64(n))
		if n < m.opts.ChunkRows {
			return nil
		}
		if err := m.yield(ctx, began); err != nil {
			return err
		}
	}
}

// yield waits Yield times as long as the chunk begun at began took, unless the exclusive
// window of the mover's group is open (a chunk after the fence, in ctx: see Run).
func (m *mover[Tx]) yield(ctx context.Context, began time.Time) error {
	if m.opts.Yield == 0 || ctx.Value(inWindow{}) != nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(m.opts.Yield * float64(time.Since(began)))):
		return nil
	}
}

// inWindow marks the context of the steps between a group's fence and its commit.
type inWindow struct{}
