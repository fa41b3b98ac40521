package rebalance

// The window and after: the changes left replayed, the copy compared by content, and the
// old copies deleted once the new shard serves the owners.

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"
)

// verify runs in the window, a fenced moved and b importing: nothing writes either. It replays
// the changes of owners left recorded on a, then compares the owners' sums on both shards
// and returns those whose copies match. An owner whose copy does not match stays on a,
// served again, its copy on b kept importing; mismatch says which key differs first
// (ErrCopyMismatch).
func (m *mover[Tx]) verify(ctx context.Context, owners []string, a, b int) (commit []string, mismatch, err error) {
	if err := m.replay(ctx, owners, a, b); err != nil {
		return nil, nil, err
	}
	// Both sums at once: they are the part of the window that grows with the owners' rows.
	var sa []Sum
	var errA error
	var summed sync.WaitGroup
	summed.Go(func() { sa, errA = m.store.Sums(ctx, owners, a) })
	sb, err := m.store.Sums(ctx, owners, b)
	summed.Wait()
	switch {
	case errA != nil:
		return nil, nil, fmt.Errorf("sum the rows on shard %d: %w", a, errA)
	case err != nil:
		return nil, nil, fmt.Errorf("sum the rows on shard %d: %w", b, err)
	case len(sa) != len(owners) || len(sb) != len(owners):
		return nil, nil, fmt.Errorf("store returned %d and %d sums for %d owners", len(sa), len(sb), len(owners))
	}
	for i, o := range owners {
		if sa[i] == sb[i] {
			commit = append(commit, o)
			continue
		}
		key, kerr := m.store.FirstDiff(ctx, o, a, b)
		where := fmt.Sprintf("first at key %q", key)
		if kerr != nil {
			where = fmt.Sprintf("(the first key that differs is unknown: %v)", kerr)
		}
		e := fmt.Errorf("rebalance: migration %q: owner %q: verify the copy (shard %d -> %d): shard %d holds %d rows, shard %d holds %d, and they differ %s: nothing deleted, shard %d serves the owner again: %w",
			m.id, o, a, b, a, sa[i].Rows, b, sb[i].Rows, where, a, ErrCopyMismatch)
		if rerr := m.store.SetFence(ctx, m.id, []string{o}, a, Serving, m.token); rerr != nil {
			e = fmt.Errorf("%w (and fence old shard serving again: %w)", e, rerr)
		}
		mismatch = cmp.Or(mismatch, e)
	}
	return commit, mismatch, nil
}

// deleteOld deletes the old copies of owners on shard s, moved away from it, and the changes
// recorded of them there.
func (m *mover[Tx]) deleteOld(ctx context.Context, owners []string, s int) error {
	if err := m.deleteAll(ctx, owners, s); err != nil {
		return err
	}
	return m.store.ClearChanges(ctx, m.id, m.token, owners, s)
}

// deleteAll deletes owners' rows on shard s chunk by chunk, on a shard that does not serve
// them (nothing adds rows there): a chunk short of the limit was the last.
func (m *mover[Tx]) deleteAll(ctx context.Context, owners []string, s int) error {
	for {
		began := time.Now()
		n, err := m.store.DeleteChunk(ctx, m.id, m.token, owners, s, m.opts.ChunkRows)
		if err != nil || n < m.opts.ChunkRows {
			return err
		}
		if err := m.yield(ctx, began); err != nil {
			return err
		}
	}
}
