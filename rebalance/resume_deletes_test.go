package rebalance

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSharedResumeAfterDeletesOnTheNewShard: a mover stops after it committed owners on their
// new shard, before it deleted their old copies (killed there); meanwhile the application
// deletes a row of a committed owner on its new shard, which has served it since the commit.
// The next mover must delete the stale old copy and finish: fewer rows on the new shard than
// in the old copy is the application's doing, not a lost copy. (examples/rebalance -procs
// -kill with deletes on PostgreSQL hit it: "verify copy (shard 2 -> 7): shard 7 holds 130
// rows of the owner, the old copy on shard 2 holds 131: shard 7 lost rows since the copy",
// on every retry, so the migration could never finish.)
func TestSharedResumeAfterDeletesOnTheNewShard(t *testing.T) {
	w := newSharedWorld(t, 60, 7, 3, 4)
	ctx := context.Background()
	first := w.shared(t, "grow", noDelete{w.store}, SharedOptions{Token: 1})
	require.ErrorIs(t, first.Run(ctx, slices.Values(w.owners)), errCrash)
	committed := committedOwner(t, w)
	app := w.shared(t, "grow", w.store, SharedOptions{FenceWait: time.Millisecond})
	require.NoError(t, app.Do(ctx, committed, func(tx *MemTx, shard int) error {
		require.Equal(t, w.after.Locate(committed), shard, "the new shard serves the owner")
		tx.Delete(0)
		return nil
	}))
	delete(w.acked[committed], 0)
	second := w.shared(t, "grow", w.store, SharedOptions{Token: 2})
	require.NoError(t, second.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, second.Finish(ctx, slices.Values(w.owners)))
	w.check(t, true)
}

// TestSharedResumedDeletionChecksKeptSums: a mover stops after it committed owners on their
// new shard, before it deleted their old copies (at ForgetSums, before the first chunk of
// the store's chunked deletions), and a write goes around an old copy's fence
// (a row's content changed, the count unchanged). The next mover finds the old copy unlike
// the sums its window kept (SumKeeper) and stops with ErrCopyMismatch, deleting nothing of
// it; Verify names it. Untouched old copies are deleted as before.
func TestSharedResumedDeletionChecksKeptSums(t *testing.T) {
	w := newSharedWorld(t, 60, 7, 3, 4)
	ctx := context.Background()
	first := w.shared(t, "grow", noForget{w.store}, SharedOptions{Token: 1})
	require.ErrorIs(t, first.Run(ctx, slices.Values(w.owners)), errCrash)
	committed := committedOwner(t, w)
	a := w.before.Locate(committed)
	w.store.mu.Lock()
	var key int
	for key = range w.store.rows[a][committed] {
		break
	}
	w.store.rows[a][committed][key] = "around the fence"
	w.store.mu.Unlock()
	second := w.shared(t, "grow", w.store, SharedOptions{Token: 2})
	err := second.Run(ctx, slices.Values(w.owners))
	require.ErrorIs(t, err, ErrCopyMismatch)
	require.ErrorContains(t, err, "content differs")
	require.ErrorContains(t, err, committed)
	n, err := w.store.Count(ctx, committed, a)
	require.NoError(t, err)
	require.Positive(t, n, "the old copy with the write around its fence is kept")
	r, err := second.Verify(ctx, slices.Values(w.owners))
	require.NoError(t, err)
	require.Len(t, r.Problems, 1)
	require.Equal(t, committed, r.Problems[0].Owner)
	require.Contains(t, r.Problems[0].What, "differs from the sums its window kept")
}

// noForget stops a mover before its first chunk of old copies, where it would forget their
// kept sums.
type noForget struct{ *MemShared }

func (noForget) ForgetSums(context.Context, string, uint64, []string) error { return errCrash }

// committedOwner returns an owner whose new shard serves it while its old copy is not deleted.
func committedOwner(t *testing.T, w *sharedWorld) string {
	ctx := context.Background()
	for _, o := range w.owners {
		fa, _ := w.store.Fences(ctx, []string{o}, w.before.Locate(o))
		fb, _ := w.store.Fences(ctx, []string{o}, w.after.Locate(o))
		if fa[0].State == Moved && fb[0].State == Serving && len(w.store.where()[o]) == 2 {
			return o
		}
	}
	t.Fatal("no owner committed before the stop")
	return ""
}
