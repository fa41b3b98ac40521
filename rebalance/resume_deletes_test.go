package rebalance

import (
	"context"
	"slices"
	"strconv"
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
// new shard, before it deleted their old copies (at the deletion of a run of them, or before
// the first chunk of a bigger one, where it would replace the kept sums with a count), and a
// write goes around an old copy's fence (a row's content changed, the count unchanged). The
// next mover finds the old copy unlike the sums its window kept (SumKeeper) and stops with
// ErrCopyMismatch, deleting nothing of it; Verify names it. Untouched old copies are deleted
// as before.
func TestSharedResumedDeletionChecksKeptSums(t *testing.T) {
	for _, deleteRows := range []int{0, 3} { // the owners' 7 rows in one deletion, or chunks
		w := newSharedWorld(t, 60, 7, 3, 4)
		ctx := context.Background()
		var stop SharedStore[*MemTx] = noDelete{w.store}
		if deleteRows > 0 {
			stop = beforeChunks{w.store}
		}
		first := w.shared(t, "grow", stop, SharedOptions{Token: 1, DeleteRows: deleteRows})
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
		second := w.shared(t, "grow", w.store, SharedOptions{Token: 2, DeleteRows: deleteRows})
		err := second.Run(ctx, slices.Values(w.owners))
		require.ErrorIs(t, err, ErrCopyMismatch)
		require.ErrorContains(t, err, "content differs")
		require.ErrorContains(t, err, committed)
		requireOldCopyKept(t, w, second, committed, 7, "differs from the sums kept of it")
	}
}

// requireOldCopyKept checks that owner's old copy, of rows rows with a write around its
// fence, is kept, and that m's Verify names it, saying problem.
func requireOldCopyKept(t *testing.T, w *sharedWorld, m *Shared[*MemTx], owner string, rows int64, problem string) {
	t.Helper()
	ctx := context.Background()
	n, err := w.store.Count(ctx, owner, w.before.Locate(owner))
	require.NoError(t, err)
	require.Equal(t, rows, n, "the old copy, with the write around its fence")
	r, err := m.Verify(ctx, slices.Values(w.owners))
	require.NoError(t, err)
	require.Len(t, r.Problems, 1)
	require.Equal(t, owner, r.Problems[0].Owner)
	require.Contains(t, r.Problems[0].What, problem)
}

// TestSharedResumedChunksBoundedByTheCount: a mover stops part way through the deletion of an
// old copy in chunks, and a write around its fence adds a row to what is left of it. The next
// mover finds more rows than were left when the deletion last counted them and stops with
// ErrCopyMismatch, deleting none of them; Verify names the old copy. Without the write, the
// next mover deletes the rest and finishes.
func TestSharedResumedChunksBoundedByTheCount(t *testing.T) {
	for _, around := range []bool{false, true} {
		w, committed, a := stoppedInChunks(t)
		ctx := context.Background()
		n, err := w.store.Count(ctx, committed, a)
		require.NoError(t, err)
		require.Equal(t, int64(4), n, "one chunk of 3 rows deleted, 4 left")
		if around {
			w.store.mu.Lock()
			w.store.rows[a][committed][100] = "around the fence"
			w.store.mu.Unlock()
		}
		second := w.shared(t, "grow", w.store, SharedOptions{Token: 2, DeleteRows: 3})
		err = second.Run(ctx, slices.Values(w.owners))
		if !around {
			require.NoError(t, err)
			require.NoError(t, second.Finish(ctx, slices.Values(w.owners)))
			w.check(t, true)
			continue
		}
		require.ErrorIs(t, err, ErrCopyMismatch)
		require.ErrorContains(t, err, committed)
		requireOldCopyKept(t, w, second, committed, 5, "(4 rows then, 5 now)")
	}
}

// TestSharedChunksStopAtARowMore: a write around the fence adds a row to an old copy while
// its deletion in chunks runs. The deletion takes no more rows than the window counted, finds
// a row left and stops with ErrCopyMismatch rather than end as if the copy were all gone.
func TestSharedChunksStopAtARowMore(t *testing.T) {
	w := newSharedWorld(t, 60, 7, 3, 4)
	ctx := context.Background()
	d := &aroundAChunk{MemShared: w.store}
	m := w.shared(t, "grow", d, SharedOptions{Token: 1, DeleteRows: 3})
	err := m.Run(ctx, slices.Values(w.owners))
	require.ErrorIs(t, err, ErrCopyMismatch)
	require.ErrorContains(t, err, "still holds 1 rows of owner "+strconv.Quote(d.owner))
	n, err := w.store.Count(ctx, d.owner, d.shard)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

// beforeChunks stops a mover before the first chunk of an old copy's deletion, where it
// would replace the window's kept sums with the count of the rows left.
type beforeChunks struct{ *MemShared }

func (s beforeChunks) KeepSums(ctx context.Context, migration string, token uint64, owners []string, shard int, sums []Sum) error {
	if len(sums) == 1 && sums[0].Digest == "" {
		return errCrash
	}
	return s.MemShared.KeepSums(ctx, migration, token, owners, shard, sums)
}

// afterChunks stops a mover at the chunk of a deletion that follows the first n.
type afterChunks struct {
	*MemShared
	n int
}

func (s *afterChunks) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	if s.n == 0 {
		return 0, errCrash
	}
	s.n--
	return s.MemShared.DeleteChunk(ctx, migration, token, owners, shard, limit)
}

// aroundAChunk adds a row to the first old copy it deletes in chunks, after its first chunk,
// as a write around its fence would.
type aroundAChunk struct {
	*MemShared
	owner string
	shard int
}

func (s *aroundAChunk) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	n, err := s.MemShared.DeleteChunk(ctx, migration, token, owners, shard, limit)
	if err == nil && s.owner == "" && len(owners) == 1 {
		if f, _ := s.Fences(ctx, owners, shard); f[0].State == Moved {
			s.owner, s.shard = owners[0], shard
			s.mu.Lock()
			s.rows[shard][owners[0]][100] = "around the fence"
			s.mu.Unlock()
		}
	}
	return n, err
}

// stoppedInChunks returns a world of owners of 7 rows whose first mover (token 1) stopped
// after the first chunk of 3 rows of an old copy's deletion, the owner of that copy, and its
// old shard.
func stoppedInChunks(t *testing.T) (w *sharedWorld, owner string, a int) {
	w = newSharedWorld(t, 60, 7, 3, 4)
	first := w.shared(t, "grow", &afterChunks{MemShared: w.store, n: 1}, SharedOptions{Token: 1, DeleteRows: 3})
	require.ErrorIs(t, first.Run(context.Background(), slices.Values(w.owners)), errCrash)
	for _, o := range w.owners {
		if n := len(w.store.rows[w.before.Locate(o)][o]); n > 0 && n < 7 && len(w.store.where()[o]) == 2 {
			return w, o, w.before.Locate(o)
		}
	}
	t.Fatal("no old copy part deleted")
	return nil, "", 0
}

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

// TestSharedVerifyDuringChunks: Verify runs while a mover deletes an old copy in chunks,
// which keeps a smaller count of the rows left before each chunk. A chunk between Verify's
// reads of the kept sums and of the old copy made it report a write around the fence that
// nobody made; wherever the chunk falls, it reports none.
func TestSharedVerifyDuringChunks(t *testing.T) {
	for at := range 2 { // the chunk at Verify's first read of the kept sums, or its second
		w, committed, a := stoppedInChunks(t)
		ctx := context.Background()
		chunk := func() { // the mover's next chunk, and the count it keeps before the one after
			n, err := w.store.DeleteChunk(ctx, "grow", 1, []string{committed}, a, 3)
			require.NoError(t, err)
			require.NoError(t, w.store.KeepSums(ctx, "grow", 1, []string{committed}, a, []Sum{{Rows: int64(4 - n)}}))
		}
		v := w.shared(t, "grow", &chunkAtRead{MemShared: w.store, owner: committed, at: at, chunk: chunk}, SharedOptions{Token: 1})
		r, err := v.Verify(ctx, slices.Values(w.owners))
		require.NoError(t, err)
		require.Empty(t, r.Problems, "the chunk at read %d", at)
	}
}

// chunkAtRead runs chunk at its at-th read of owner's kept sums.
type chunkAtRead struct {
	*MemShared
	owner     string
	at, reads int
	chunk     func()
}

func (s *chunkAtRead) KeptSums(ctx context.Context, migration string, owners []string, shard int) ([]Sum, []bool, error) {
	if slices.Contains(owners, s.owner) {
		if s.reads == s.at {
			s.chunk()
		}
		s.reads++
	}
	return s.MemShared.KeptSums(ctx, migration, owners, shard)
}
