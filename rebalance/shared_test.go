package rebalance

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedWorld is a MemShared loaded with rows on the before shards, and the rows each owner
// was acknowledged, by key.
type sharedWorld struct {
	before, after shard.Sharder
	owners        []string
	store         *MemShared
	mu            sync.Mutex
	acked         map[string]map[int]string
}

func newSharedWorld(t testing.TB, owners, rows, from, to int) *sharedWorld {
	t.Helper()
	before, err := shard.NewModulo(from)
	require.NoError(t, err)
	after, err := shard.NewModulo(to)
	require.NoError(t, err)
	w := &sharedWorld{before: before, after: after, store: NewMemShared(max(from, to)), acked: map[string]map[int]string{}}
	for i := range owners {
		o := "user" + strconv.Itoa(i)
		w.owners = append(w.owners, o)
		w.acked[o] = map[int]string{}
		s := before.Locate(o)
		w.store.rows[s][o] = map[int]string{}
		for k := range rows {
			w.store.rows[s][o][k] = fmt.Sprint(o, "/", k)
			w.acked[o][k] = fmt.Sprint(o, "/", k)
		}
	}
	return w
}

// oneMoving keeps only the first owner whose shard changes (the others stay, unlisted).
func (w *sharedWorld) oneMoving(t testing.TB) *sharedWorld {
	for _, o := range w.owners {
		if w.before.Locate(o) != w.after.Locate(o) {
			w.owners = []string{o}
			return w
		}
	}
	t.Fatal("no owner changes shard")
	return nil
}

func (w *sharedWorld) shared(t testing.TB, id string, store SharedStore[*MemTx], opts SharedOptions) *Shared[*MemTx] {
	t.Helper()
	m, err := NewShared(id, w.before, w.after, store, opts)
	require.NoError(t, err)
	return m
}

// write adds row key to owner through m and records it once acknowledged.
func (w *sharedWorld) write(ctx context.Context, m *Shared[*MemTx], owner string, key int) error {
	row := fmt.Sprint(owner, "/", key)
	err := m.Do(ctx, owner, func(tx *MemTx, _ int) error {
		tx.Put(key, row)
		return nil
	})
	if err == nil {
		w.mu.Lock()
		w.acked[owner][key] = row
		w.mu.Unlock()
	}
	return err
}

// check finds every acknowledged row once, on the owner's shard (before or after, as
// moved says), and no other row.
func (w *sharedWorld) check(t *testing.T, moved bool) {
	t.Helper()
	where := w.store.where()
	for _, o := range w.owners {
		want := w.before.Locate(o)
		if moved {
			want = w.after.Locate(o)
		}
		require.Equal(t, []int{want}, where[o], "owner %s: shards holding rows", o)
		require.Equal(t, w.acked[o], w.store.rows[want][o], "owner %s: rows", o)
	}
}

func TestSharedMovesEveryOwnerUnderWrites(t *testing.T) {
	for _, sizes := range [][2]int{{5, 10}, {10, 5}} {
		t.Run(fmt.Sprintf("%d->%d", sizes[0], sizes[1]), func(t *testing.T) {
			w := newSharedWorld(t, 200, 25, sizes[0], sizes[1])
			ctx := context.Background()
			var seen atomic.Int64
			mover := w.shared(t, "m1", w.store, SharedOptions{Token: 1, Concurrency: 4, ChunkRows: 7,
				Progress: func(Progress) { seen.Add(1) }})
			var stop atomic.Bool
			var wg sync.WaitGroup
			var writes atomic.Int64
			for g := range 4 {
				app := w.shared(t, "m1", w.store, SharedOptions{}) // another process
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						o := w.owners[(i*7+g*13)%len(w.owners)]
						if err := w.write(ctx, app, o, 1000+g*1_000_000+i); err != nil {
							t.Error(err)
							return
						}
						writes.Add(1)
					}
				})
			}
			require.NoError(t, mover.Run(ctx, slices.Values(w.owners)))
			stop.Store(true)
			wg.Wait()
			w.check(t, true)
			changing := 0
			for _, o := range w.owners {
				if w.before.Locate(o) != w.after.Locate(o) {
					changing++
				}
			}
			assert.Equal(t, int64(changing), seen.Load())
			assert.Equal(t, int64(changing), mover.Stats().Moved)
			require.NoError(t, mover.Finish(ctx, slices.Values(w.owners)))
			t.Logf("%d writes during the move, longest exclusive %v", writes.Load(), mover.Stats().MaxExclusive)
		})
	}
}

// TestSharedOwnersListedTwice: an owner the list names twice is moved once, and Progress
// still reaches the total it counted.
func TestSharedOwnersListedTwice(t *testing.T) {
	w := newSharedWorld(t, 40, 5, 3, 4)
	ctx := context.Background()
	var last Progress
	m := w.shared(t, "m", w.store, SharedOptions{Token: 1, Progress: func(p Progress) { last = p }})
	twice := slices.Concat(w.owners, w.owners)
	require.NoError(t, m.Run(ctx, slices.Values(twice)))
	w.check(t, true)
	require.Equal(t, last.Total, last.Done)
	require.Equal(t, 2*int(m.Stats().Moved), last.Total)
	require.NoError(t, m.Finish(ctx, slices.Values(twice)))
}

// noDelete fails every deletion: a mover that stops after its commits, before it deletes
// the old copies.
type noDelete struct{ *MemShared }

func (noDelete) DeleteChunk(context.Context, string, uint64, []string, int, int) (int, error) {
	return 0, errCrash
}

// deleteLimits records the limit of every deletion.
type deleteLimits struct {
	*MemShared
	mu     sync.Mutex
	limits []int
}

func (d *deleteLimits) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	d.mu.Lock()
	d.limits = append(d.limits, limit)
	d.mu.Unlock()
	return d.MemShared.DeleteChunk(ctx, migration, token, owners, shard, limit)
}

// sizedDeletes is a store that says how many rows a deletion should handle (DeleteSizer).
type sizedDeletes struct {
	*deleteLimits
	rows func(chunkRows int) int
}

func (s sizedDeletes) DeleteRows(chunkRows int) int { return s.rows(chunkRows) }

// TestSharedDeleteRows: old copies go DeleteRows rows a transaction at most (owners that fit
// together in one), copies ChunkRows, and every owner ends with its rows,
// once; without DeleteRows, deletions go as many rows as the store says if it is a
// DeleteSizer (kept within [1, MaxChunkRows]), else ChunkRows.
func TestSharedDeleteRows(t *testing.T) {
	for _, tc := range []struct {
		chunk, del int
		sizer      func(int) int
		want       int
	}{
		{3, 7, nil, 7},
		{3, 0, nil, 3},
		{3, 0, func(c int) int { return 2 * c }, 6},
		{3, 5, func(c int) int { return 2 * c }, 5},
		{3, 0, func(int) int { return 0 }, 1},
		{3, 0, func(int) int { return -4 }, 1},
		{3, 0, func(int) int { return MaxChunkRows + 1 }, MaxChunkRows},
	} {
		w := newSharedWorld(t, 30, 20, 3, 4)
		d := &deleteLimits{MemShared: w.store}
		var store SharedStore[*MemTx] = d
		if tc.sizer != nil {
			store = sizedDeletes{d, tc.sizer}
		}
		m := w.shared(t, "grow", store, SharedOptions{Token: 1, ChunkRows: tc.chunk, DeleteRows: tc.del})
		require.NoError(t, m.Run(context.Background(), slices.Values(w.owners)))
		w.check(t, true)
		require.Equal(t, tc.want, m.opts.DeleteRows, "ChunkRows %d, DeleteRows %d", tc.chunk, tc.del)
		require.NotEmpty(t, d.limits)
		for i, l := range d.limits {
			require.LessOrEqual(t, l, tc.want, "deletion %d, DeleteRows %d", i, tc.want)
		}
		if tc.want < 20 { // every owner has 20 rows: bigger ones go in chunks of DeleteRows
			require.Contains(t, d.limits, tc.want, "DeleteRows %d", tc.want)
		}
	}
}

// wholeDeletes is a store that deletes owners whole (OwnersDeleter), as MemShared's
// DeleteChunk checks, and records each run and its rows; with refuse it says every run has
// more rows than its most.
type wholeDeletes struct {
	*deleteLimits
	refuse bool
	runs   [][]string
	rows   []int
}

func (w *wholeDeletes) DeleteOwners(_ context.Context, migration string, token uint64, owners []string, shard int, most int) (int, bool, error) {
	s := w.MemShared
	if err := s.check(shard); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fenced(migration, token, owners, shard, Importing, Moved); err != nil {
		return 0, false, err
	}
	n := 0
	for _, o := range owners {
		n += len(s.rows[shard][o])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs, w.rows = append(w.runs, slices.Clone(owners)), append(w.rows, n)
	if n > most || w.refuse {
		return 0, false, nil
	}
	for _, o := range owners {
		clear(s.rows[shard][o])
	}
	return n, true, nil
}

// TestSharedDeletesOwnersWhole: where the store can delete owners whole, the old copies of
// owners that fit in DeleteRows together go in runs by the counts the window's sums found
// (never past DeleteRows), an owner bigger than DeleteRows in chunks; a run the store finds too big after all goes in chunks;
// and every owner ends with its rows, once.
func TestSharedDeletesOwnersWhole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		del    int
		refuse bool
	}{
		{"runs", 25, false},
		{"one owner each", 11, false},
		{"refused", 25, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSharedWorld(t, 40, 12, 3, 4)
			big := map[string]bool{}     // more rows than one deletion
			for i, o := range w.owners { // sizes 12, 9, 6, 3 and 12 again; every fifth owner 30
				keep := 12 - 3*(i%4)
				if i%5 == 0 {
					keep = 30
				}
				big[o] = keep > tc.del
				for k := range 30 {
					if k >= keep {
						delete(w.store.rows[w.before.Locate(o)][o], k)
						delete(w.acked[o], k)
					} else {
						w.store.rows[w.before.Locate(o)][o][k] = fmt.Sprint(o, "/", k)
						w.acked[o][k] = fmt.Sprint(o, "/", k)
					}
				}
			}
			d := &wholeDeletes{deleteLimits: &deleteLimits{MemShared: w.store}, refuse: tc.refuse}
			m := w.shared(t, "grow", d, SharedOptions{Token: 1, ChunkRows: 5, DeleteRows: tc.del, Group: 8})
			err := m.Run(context.Background(), slices.Values(w.owners))
			if tc.refuse {
				// A store that says a run holds more rows than the window counted: a write
				// went around the fence; the deletion stops and the old copies stay.
				require.ErrorIs(t, err, ErrCopyMismatch)
				require.ErrorContains(t, err, "than the window counted")
				require.NotEmpty(t, d.runs)
				for _, run := range d.runs { // one per mover at once
					for _, o := range run {
						require.NotEmpty(t, w.store.rows[w.before.Locate(o)][o], "owner %s: old copy deleted", o)
					}
				}
				return
			}
			require.NoError(t, err)
			w.check(t, true)
			require.NotEmpty(t, d.runs)
			whole := map[string]bool{}
			for i, run := range d.runs {
				require.LessOrEqual(t, d.rows[i], tc.del, "run %v", run)
				for _, o := range run {
					require.False(t, big[o], "owner %s went whole, bigger than DeleteRows %d", o, tc.del)
					whole[o] = true
				}
			}
			for _, o := range w.owners {
				if w.before.Locate(o) != w.after.Locate(o) && !big[o] {
					require.True(t, whole[o], "owner %s: not deleted whole", o)
				}
			}
			if tc.del >= 2*12 {
				require.Less(t, len(d.runs), len(whole), "owners that fit together go together")
			}
		})
	}
}

// TestSharedMoveBackAfterAnUnfinishedDeletion: a migration that committed owners on their
// new shards but did not delete their old copies cannot be followed by one that moves them
// back (its claim is refused, nothing changes) until it is resumed and finished; then the
// move back goes with the groups (no owner copied whole in the window), and every owner ends
// with its rows, once.
func TestSharedMoveBackAfterAnUnfinishedDeletion(t *testing.T) {
	w := newSharedWorld(t, 60, 7, 3, 4)
	ctx := context.Background()
	first := w.shared(t, "grow", noDelete{w.store}, SharedOptions{Token: 1})
	require.ErrorIs(t, first.Run(ctx, slices.Values(w.owners)), errCrash)
	var committed []string
	for _, o := range w.owners {
		if f, _ := w.store.Fences(ctx, []string{o}, w.before.Locate(o)); f[0].State == Moved {
			committed = append(committed, o)
			require.NotEmpty(t, w.store.rows[w.before.Locate(o)][o], "owner %s: the old copy is left", o)
		}
	}
	require.GreaterOrEqual(t, len(committed), 2)
	store := &lateShared{MemShared: w.store, late: func() {}}
	back, err := NewShared("shrink", w.after, w.before, SharedStore[*MemTx](store), SharedOptions{Token: 2})
	require.NoError(t, err)
	before := w.store.where()
	err = back.Run(ctx, slices.Values(committed))
	require.ErrorIs(t, err, ErrPlacement)
	require.Contains(t, err.Error(), `finish it before a mover claims migration "shrink"`)
	require.Equal(t, before, w.store.where(), "a refused claim changes nothing")

	grow := w.shared(t, "grow", w.store, SharedOptions{Token: 1})
	require.NoError(t, grow.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, grow.Finish(ctx, slices.Values(w.owners)))
	w.check(t, true)
	require.NoError(t, back.Run(ctx, slices.Values(w.owners)))
	moving := 0
	for _, o := range w.owners {
		if w.before.Locate(o) != w.after.Locate(o) {
			moving++
		}
	}
	require.Equal(t, int64(moving), back.Stats().Moved)
	w.check(t, false)
}

func TestExclusiveQuantile(t *testing.T) {
	var m Shared[*MemTx]
	require.Zero(t, m.Stats().ExclusiveQuantile(0.5), "no window")
	// 1..1000 ms: the q quantile is q × 1000 ms, to within a bucket (9%).
	for i := 1; i <= 1000; i++ {
		m.noteExclusive(time.Duration(i) * time.Millisecond)
	}
	st := m.Stats()
	require.Equal(t, int64(1000), st.Windows)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 1} {
		want := time.Duration(q * float64(time.Second))
		got := st.ExclusiveQuantile(q)
		require.GreaterOrEqual(t, got, want, "q %v", q)
		require.LessOrEqual(t, float64(got), 1.09*float64(want), "q %v", q)
	}
	require.Equal(t, time.Second, st.ExclusiveQuantile(1), "never above the longest")
	require.Zero(t, st.ExclusiveQuantile(0))
	require.Zero(t, st.ExclusiveQuantile(1.5))
	m.noteExclusive(50 * time.Microsecond)
	m.noteExclusive(100 * time.Hour)
	require.Equal(t, 100*time.Hour, m.Stats().ExclusiveQuantile(1))
}

// slowChunks makes every copy chunk take at least 5 ms and records when each began and
// ended, and whether the mover had fenced the old shard (the window) when it began.
type slowChunks struct {
	*MemShared
	mu     sync.Mutex
	calls  [][2]time.Time
	window []bool
	fenced atomic.Bool
}

func (s *slowChunks) SetFence(ctx context.Context, migration string, owners []string, shard int, state FenceState, token uint64) error {
	s.fenced.Store(state == Moved)
	return s.MemShared.SetFence(ctx, migration, owners, shard, state, token)
}

func (s *slowChunks) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) ([]Cursor, int, bool, error) {
	began := time.Now()
	time.Sleep(5 * time.Millisecond)
	next, n, done, err := s.MemShared.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
	s.mu.Lock()
	s.calls = append(s.calls, [2]time.Time{began, time.Now()})
	s.window = append(s.window, s.fenced.Load())
	s.mu.Unlock()
	return next, n, done, err
}

// TestSharedYield: with Yield 2 the mover waits at least twice as long as a chunk took
// before the next chunk of the copy.
func TestSharedYield(t *testing.T) {
	w := newSharedWorld(t, 10, 40, 1, 2).oneMoving(t)
	store := &slowChunks{MemShared: w.store}
	m := w.shared(t, "m", store, SharedOptions{Token: 1, ChunkRows: 10, Yield: 2})
	require.NoError(t, m.Run(context.Background(), slices.Values(w.owners)))
	w.check(t, true)
	copies := 0
	for i := 1; i < len(store.calls); i++ {
		if store.window[i] || store.window[i-1] {
			continue
		}
		copies++
		took := store.calls[i-1][1].Sub(store.calls[i-1][0])
		require.GreaterOrEqual(t, store.calls[i][0].Sub(store.calls[i-1][1]), 2*took, "chunk %d", i)
	}
	require.GreaterOrEqual(t, copies, 3, "40 rows in chunks of 10")
}

// TestSharedCrashAndResume fails the nth write of the mover to the store, for every n up to
// a whole migration, with the write done or not, while writers keep writing; a new Shared
// (another process) then resumes, and nothing is lost, duplicated or misplaced.
func TestSharedCrashAndResume(t *testing.T) {
	for _, after := range []bool{false, true} {
		for n := 1; ; n++ {
			w := newSharedWorld(t, 6, 9, 2, 3)
			ctx := context.Background()
			crash := &crashShared{MemShared: w.store, n: n, after: after}
			first := w.shared(t, "m", crash, SharedOptions{Token: 1, ChunkRows: 4, Batch: 2})
			app := w.shared(t, "m", w.store, SharedOptions{FenceWait: time.Millisecond})
			err := first.Run(ctx, slices.Values(w.owners))
			if err == nil {
				require.Greater(t, n, 20, "a whole migration has more than 20 writes")
				break
			}
			require.ErrorIs(t, err, errCrash)
			// Stopped: every owner is served by one shard, or waits (between fence and commit).
			for i, o := range w.owners {
				if err := w.write(ctx, app, o, 100+n*10+i); err != nil {
					require.ErrorIs(t, err, ErrFenced, "after crash at %s", crash.at)
				}
			}
			second := w.shared(t, "m", w.store, SharedOptions{Token: 2, ChunkRows: 4})
			require.NoError(t, second.Run(ctx, slices.Values(w.owners)), "resume after crash %d at %s", n, crash.at)
			w.check(t, true)
			require.NoError(t, second.Finish(ctx, slices.Values(w.owners)))
			// And the first mover, stale now, is refused.
			crash.n = 0
			err = first.Run(ctx, slices.Values(w.owners))
			var fe *FenceError
			require.ErrorAs(t, err, &fe, "stale mover after crash %d", n)
			require.Equal(t, uint64(1), fe.Token)
			require.Equal(t, uint64(2), fe.Newest)
		}
	}
}

// TestSharedStaleViewIsFenced: a process that still routes by the old placement cannot write
// an owner into the shard it left, nor can it read stale rows there.
func TestSharedStaleViewIsFenced(t *testing.T) {
	w := newSharedWorld(t, 50, 3, 5, 10)
	ctx := context.Background()
	m := w.shared(t, "m", w.store, SharedOptions{Token: 7})
	require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
	moved := 0
	for _, o := range w.owners {
		from := w.before.Locate(o)
		err := w.store.Access(ctx, m.Placement(), o, from, func(tx *MemTx) error {
			tx.Put(99, "stale")
			return nil
		})
		if from == w.after.Locate(o) {
			require.NoError(t, err)
			w.acked[o][99] = "stale"
			continue
		}
		moved++
		var fe *FenceError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, FenceError{Owner: o, Shard: from, State: Moved}, *fe)
		require.ErrorIs(t, err, ErrFenced)
		require.Contains(t, err.Error(), "no longer serves it (moved)")
	}
	require.Positive(t, moved)
	w.check(t, true)

	// A mover of an older token is refused before it changes anything.
	old := w.shared(t, "m", w.store, SharedOptions{Token: 6})
	err := old.Run(ctx, slices.Values(w.owners))
	require.ErrorIs(t, err, ErrFenced)
	require.Contains(t, err.Error(), "stale mover epoch 6 < 7")
}

// TestSharedDoWaitsForTheCommit: while a move is stopped between its fence on the old shard
// and its commit on the new one, Do waits FenceWait and then says so; once a mover resumes, Do
// goes to the new shard.
func TestSharedDoWaitsForTheCommit(t *testing.T) {
	w := newSharedWorld(t, 10, 3, 1, 2).oneMoving(t)
	ctx := context.Background()
	o := w.owners[0]
	a, b := w.before.Locate(o), w.after.Locate(o)
	require.NotEqual(t, a, b)
	require.NoError(t, w.store.SetFence(ctx, "m", []string{o}, b, Importing, 1))
	require.NoError(t, w.store.SetFence(ctx, "m", []string{o}, a, Moved, 1))
	app := w.shared(t, "m", w.store, SharedOptions{FenceWait: 20 * time.Millisecond})
	err := w.write(ctx, app, o, 50)
	require.ErrorIs(t, err, ErrFenced)
	require.Contains(t, err.Error(), "neither serves it")

	done := make(chan error)
	go func() {
		slow := w.shared(t, "m", w.store, SharedOptions{FenceWait: 10 * time.Second})
		done <- w.write(ctx, slow, o, 51)
	}()
	mover := w.shared(t, "m", w.store, SharedOptions{Token: 1})
	require.NoError(t, mover.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, <-done)
	w.check(t, true)
}

// TestSharedCopyMismatch: a store that loses rows in the copy leaves the owner on its old
// shard, served again, with ErrCopyMismatch.
func TestSharedCopyMismatch(t *testing.T) {
	w := newSharedWorld(t, 10, 10, 1, 2).oneMoving(t)
	ctx := context.Background()
	lossy := &lossyShared{MemShared: w.store}
	m := w.shared(t, "m", lossy, SharedOptions{Token: 1, ChunkRows: 3})
	err := m.Run(ctx, slices.Values(w.owners))
	require.ErrorIs(t, err, ErrCopyMismatch)
	o := w.owners[0]
	a, b := w.before.Locate(o), w.after.Locate(o)
	require.Equal(t, w.acked[o], w.store.rows[a][o], "the old shard keeps every row")
	f, err := w.store.Fences(ctx, []string{o, o}, b)
	require.NoError(t, err)
	require.Equal(t, []Fence{{Importing, "m"}, {Importing, "m"}}, f, "the new shard's partial copy is fenced: nobody sees it")
	f, err = w.store.Fences(ctx, []string{o}, a)
	require.NoError(t, err)
	require.Equal(t, []Fence{{Exporting, "m"}}, f, "the old shard serves the owner again, exporting: the copy on the new shard is the mover's")
	require.NoError(t, w.write(ctx, w.shared(t, "m", w.store, SharedOptions{}), o, 77))
	require.Equal(t, w.acked[o], w.store.rows[a][o])
}

// lossyShared drops the last row of every chunk.
type lossyShared struct{ *MemShared }

func (l *lossyShared) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) ([]Cursor, int, bool, error) {
	next, n, done, err := l.MemShared.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
	for i, o := range owners {
		if err == nil && next[i] != after[i] {
			k, _ := strconv.Atoi(string(next[i]))
			l.mu.Lock()
			delete(l.rows[to][o], k)
			l.mu.Unlock()
		}
	}
	return next, n, done, err
}

func TestSharedBadInput(t *testing.T) {
	w := newSharedWorld(t, 1, 1, 2, 3)
	for _, tc := range []struct {
		name string
		opts SharedOptions
		id   string
	}{
		{"empty id", SharedOptions{}, ""},
		{"concurrency", SharedOptions{Concurrency: MaxConcurrency + 1}, "m"},
		{"chunk", SharedOptions{ChunkRows: -1}, "m"},
		{"delete chunk", SharedOptions{DeleteRows: -1}, "m"},
		{"delete chunk above", SharedOptions{DeleteRows: MaxChunkRows + 1}, "m"},
		{"idle chunk", SharedOptions{IdleChunkRows: -1}, "m"},
		{"idle chunk above", SharedOptions{IdleChunkRows: MaxChunkRows + 1}, "m"},
		{"batch", SharedOptions{Batch: MaxBatch + 1}, "m"},
		{"group", SharedOptions{Group: -1}, "m"},
		{"idle group", SharedOptions{IdleGroup: -1}, "m"},
		{"idle group above", SharedOptions{IdleGroup: MaxBatch + 1}, "m"},
		{"wait", SharedOptions{FenceWait: -time.Second}, "m"},
		{"yield", SharedOptions{Yield: -1}, "m"},
		{"yield NaN", SharedOptions{Yield: math.NaN()}, "m"},
		{"yield above", SharedOptions{Yield: MaxYield + 1}, "m"},
	} {
		_, err := NewShared(tc.id, w.before, w.after, SharedStore[*MemTx](w.store), tc.opts)
		require.ErrorIs(t, err, ErrConfig, tc.name)
		require.Contains(t, err.Error(), "rebalance: ", tc.name)
	}
	_, err := NewShared("m", w.before, w.before, SharedStore[*MemTx](w.store), SharedOptions{})
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewShared[*MemTx]("m", w.before, w.after, nil, SharedOptions{})
	require.ErrorIs(t, err, ErrConfig)
	m := w.shared(t, "m", w.store, SharedOptions{})
	require.ErrorIs(t, m.Run(context.Background(), nil), ErrConfig)
	require.ErrorIs(t, m.Finish(context.Background(), nil), ErrConfig)

	// Finish before the moves: an UnfinishedError naming the owner.
	err = m.Finish(context.Background(), slices.Values(w.owners))
	if w.before.Locate(w.owners[0]) != w.after.Locate(w.owners[0]) {
		require.ErrorIs(t, err, ErrUnfinished)
	}
	// A lost shard is an error that names it, and nothing is deleted.
	w2 := newSharedWorld(t, 20, 2, 2, 3)
	w2.store.lost[2] = true
	err = w2.shared(t, "m", w2.store, SharedOptions{}).Run(context.Background(), slices.Values(w2.owners))
	require.Error(t, err)
	require.Contains(t, err.Error(), "shard 2 is gone")
	w2.store.lost[2] = false
	for o, shards := range w2.store.where() {
		require.Len(t, shards, 1, "owner %s", o)
		require.Equal(t, w2.acked[o], w2.store.rows[shards[0]][o], "owner %s", o)
		if w2.after.Locate(o) == 2 {
			require.Equal(t, w2.before.Locate(o), shards[0], "owner %s", o)
		}
	}
	require.False(t, errors.Is(err, ErrFenced))
}

// lateShared runs late during the 3rd chunk copied.
type lateShared struct {
	*MemShared
	chunks int
	late   func()
}

func (l *lateShared) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) ([]Cursor, int, bool, error) {
	if l.chunks++; l.chunks == 3 {
		l.late()
	}
	return l.MemShared.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
}

// TestSharedChangesDuringTheCopy: rows inserted behind the copy's cursor (a key taken before
// a transaction that committed after a later one), rows updated and rows deleted after
// their chunk was copied all reach the new shard: the old shard records them while the
// owner is exporting, and the mover replays them.
func TestSharedChangesDuringTheCopy(t *testing.T) {
	w := newSharedWorld(t, 10, 40, 1, 2).oneMoving(t)
	ctx := context.Background()
	o := w.owners[0]
	app := w.shared(t, "m", w.store, SharedOptions{})
	late := &lateShared{MemShared: w.store, late: func() {
		for _, k := range []int{-5, 3, 38} { // before the first chunk, inside the copied ones
			require.NoError(t, w.write(ctx, app, o, k+1000))
		}
		require.NoError(t, app.Do(ctx, o, func(tx *MemTx, _ int) error {
			tx.Put(1001, "updated after its chunk was copied")
			tx.Delete(1002)
			return nil
		}))
		w.acked[o][1001] = "updated after its chunk was copied"
		delete(w.acked[o], 1002)
	}}
	// The late keys are 995, 1003 and 1038: give the owner keys 1000.. so that they sort
	// among the copied ones.
	rows := map[int]string{}
	for k, v := range w.store.rows[w.before.Locate(o)][o] {
		rows[k+1000] = v
	}
	w.store.rows[w.before.Locate(o)][o] = rows
	w.acked[o] = maps.Clone(rows)
	m := w.shared(t, "m", late, SharedOptions{Token: 1, ChunkRows: 4})
	require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
	w.check(t, true)
	require.Empty(t, w.store.logs[w.before.Locate(o)], "the changes recorded are deleted with the old copy")
}

// TestSharedPlanMismatch: a migration whose before sharder does not say where an owner is
// (it moved in another migration) stops with a clear error and changes nothing.
func TestSharedPlanMismatch(t *testing.T) {
	w := newSharedWorld(t, 30, 3, 1, 2)
	three, err := shard.NewModulo(3)
	require.NoError(t, err)
	for _, o := range w.owners {
		if w.before.Locate(o) != w.after.Locate(o) && three.Locate(o) == 2 {
			w.owners = []string{o}
			break
		}
	}
	require.Len(t, w.owners, 1, "no owner goes 0 -> 1 under 2 shards and to 2 under 3")
	for o := range w.store.rows[0] { // the others' rows would stop Finish: they do not move
		if o != w.owners[0] {
			delete(w.store.rows[0], o)
		}
	}
	w.store = w.store.grow(3)
	ctx := context.Background()
	grow := w.shared(t, "grow", w.store, SharedOptions{Token: 1})
	require.NoError(t, grow.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, grow.Finish(ctx, slices.Values(w.owners)))
	// A stale plan: the owner is on w.after now, the plan says w.before. The shards serve
	// the finished "grow", whose after sharder is not this plan's before: its claim is
	// refused.
	stale, err := NewShared("stale", w.before, three, SharedStore[*MemTx](w.store), SharedOptions{Token: 1})
	require.NoError(t, err)
	err = stale.Run(ctx, slices.Values(w.owners))
	require.ErrorIs(t, err, ErrPlacement)
	require.Contains(t, err.Error(), "the plan does not start where the data is")
	w.check(t, true)
}

// TestSharedRefusesDataOnTheNewShard: an owner whose rows are on the shard the migration
// moves it to, served there, is not cleared as a stopped copy: the plan is wrong.
func TestSharedRefusesDataOnTheNewShard(t *testing.T) {
	w := newSharedWorld(t, 10, 5, 1, 2).oneMoving(t)
	o := w.owners[0]
	a, b := w.before.Locate(o), w.after.Locate(o)
	w.store.rows[b][o], w.store.rows[a][o] = w.store.rows[a][o], nil
	err := w.shared(t, "m", w.store, SharedOptions{Token: 1}).Run(context.Background(), slices.Values(w.owners))
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "the plan does not match where the owner is")
	require.Equal(t, w.acked[o], w.store.rows[b][o])
	f, err := w.store.Fences(context.Background(), []string{o}, b)
	require.NoError(t, err)
	require.Equal(t, Serving, f[0].State)
}

// TestSharedVerify: Verify finds every row where it belongs after a migration, counts the old
// copies a stopped mover left as stray, and names the key of a copy that differs between the
// fence and the commit.
func TestSharedVerify(t *testing.T) {
	w := newSharedWorld(t, 40, 5, 3, 5)
	ctx := context.Background()
	total := int64(0)
	moving := 0
	for _, o := range w.owners {
		if w.before.Locate(o) != w.after.Locate(o) {
			total += int64(len(w.acked[o]))
			moving++
		}
	}
	first := w.shared(t, "grow", noDelete{w.store}, SharedOptions{})
	require.ErrorIs(t, first.Run(ctx, slices.Values(w.owners)), errCrash)
	r, err := first.Verify(ctx, slices.Values(w.owners))
	require.NoError(t, err)
	require.Equal(t, int64(moving), r.Owners)
	require.Equal(t, total, r.Rows)
	require.Positive(t, r.Stray, "old copies not deleted yet")
	require.Empty(t, r.Problems)

	m := w.shared(t, "grow", w.store, SharedOptions{})
	require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, m.Finish(ctx, slices.Values(w.owners)))
	r, err = m.Verify(ctx, slices.Values(w.owners))
	require.NoError(t, err)
	require.Equal(t, Report{Owners: int64(moving), Rows: total}, *r)

	// An owner between its fence and its commit whose copy differs.
	var o string
	for _, x := range w.owners {
		if w.before.Locate(x) != w.after.Locate(x) {
			o = x
			break
		}
	}
	a, b := w.before.Locate(o), w.after.Locate(o)
	w.store.fences[b][o] = Fence{Importing, "grow"}
	w.store.fences[a][o] = Fence{Moved, "grow"}
	w.store.rows[a][o] = maps.Clone(w.store.rows[b][o])
	w.store.rows[b][o][2] = "edited"
	r, err = m.Verify(ctx, slices.Values(w.owners))
	require.NoError(t, err)
	require.Len(t, r.Problems, 1)
	require.Equal(t, Problem{Owner: o, Shard: b, Key: "2", What: r.Problems[0].What}, r.Problems[0])
	require.Contains(t, r.Problems[0].What, "copies differ between the fence and the commit")
	require.Equal(t, int64(len(w.acked[o])), r.Compared)
	require.ErrorIs(t, func() error { _, err := m.Verify(ctx, nil); return err }(), ErrConfig)
}

// failingSums fails the first fail calls of Sums.
type failingSums struct {
	*MemShared
	fail atomic.Int64
}

func (f *failingSums) Sums(ctx context.Context, owners []string, shard int) ([]Sum, error) {
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("the shard could not sum")
	}
	return f.MemShared.Sums(ctx, owners, shard)
}

// TestSharedWindowErrorReopens: an error in the exclusive window (the sums fail) stops the
// move with the old shard serving the owners again, so that the application writes at once
// rather than waiting for the next Run; the next Run copies them anew, and every write is
// in place, for a group and for an owner resumed on its own.
func TestSharedWindowErrorReopens(t *testing.T) {
	for _, group := range []int{1, 8} {
		w := newSharedWorld(t, 8, 10, 1, 2)
		ctx := context.Background()
		st := &failingSums{MemShared: w.store}
		st.fail.Store(1)
		m := w.shared(t, "grow", st, SharedOptions{Group: group})
		err := m.Run(ctx, slices.Values(w.owners))
		require.ErrorContains(t, err, "the shard could not sum", "group %d", group)
		require.ErrorContains(t, err, "shard 0 serves the owners again")
		app := w.shared(t, "grow", w.store, SharedOptions{FenceWait: time.Nanosecond})
		for _, o := range w.owners {
			require.NoError(t, w.write(ctx, app, o, 100), "owner %s, group %d: served by nobody", o, group)
		}
		require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
		require.NoError(t, m.Finish(ctx, slices.Values(w.owners)))
		w.check(t, true)
	}
}

// TestFinishRefusesOwnersLeftOut: an owner created during the migration, and so missing from
// the list the operator gave Run and Finish, has rows on its old shard that nothing moves.
// Finish refuses, naming it and its shard, and the migration stays unfinished (Do still
// finds the owner); with it in the list, Run moves it and Finish succeeds.
func TestFinishRefusesOwnersLeftOut(t *testing.T) {
	t.Run("shared", func(t *testing.T) {
		w := newSharedWorld(t, 20, 4, 2, 3)
		ctx := context.Background()
		listed := w.owners
		var late string
		for i := 100; late == ""; i++ {
			if o := fmt.Sprint("user", i); w.before.Locate(o) != w.after.Locate(o) {
				late = o
			}
		}
		m := w.shared(t, "grow", w.store, SharedOptions{})
		w.acked[late] = map[int]string{}
		require.NoError(t, w.write(ctx, m, late, 1)) // a new user, routed to its before shard
		w.owners = append(slices.Clone(listed), late)
		require.NoError(t, m.Run(ctx, slices.Values(listed)))
		err := m.Finish(ctx, slices.Values(listed))
		var left *UnfinishedError
		require.ErrorAs(t, err, &left)
		require.ErrorIs(t, err, ErrUnfinished)
		require.Equal(t, 1, left.Unlisted)
		require.Equal(t, []string{fmt.Sprintf("%s (shard %d)", late, w.before.Locate(late))}, left.UnlistedOwners)
		require.NoError(t, w.write(ctx, m, late, 2), "the owner is still served where its rows are")
		require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
		require.NoError(t, m.Finish(ctx, slices.Values(w.owners)))
		w.check(t, true)
	})
	t.Run("in-process", func(t *testing.T) {
		before, _ := shard.NewModulo(2)
		after, _ := shard.NewModulo(3)
		st := newMemStore(3)
		var owners []string
		for i := range 20 {
			o := fmt.Sprint("user", i)
			owners = append(owners, o)
			st.put(before.Locate(o), o, 0, o)
		}
		late := ""
		for i := 100; late == ""; i++ {
			if o := fmt.Sprint("user", i); before.Locate(o) != after.Locate(o) {
				late = o
			}
		}
		st.put(before.Locate(late), late, 0, late)
		m, err := New("grow", before, after, st, Options{})
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, m.Run(ctx, slices.Values(owners)))
		err = m.Finish(ctx, slices.Values(owners))
		var left *UnfinishedError
		require.ErrorAs(t, err, &left)
		require.Equal(t, 1, left.Unlisted)
		owners = append(owners, late)
		require.NoError(t, m.Run(ctx, slices.Values(owners)))
		require.NoError(t, m.Finish(ctx, slices.Values(owners)))
	})
}

// TestFinishNamesMovedOwnersWhoseRowsCameBack: rows of an owner the mover moved appear
// again on its old shard (a restore of that shard from a backup taken before the move).
// Finish refuses, and names the owner as moved, not as left out: running the mover again
// does not move a moved owner, so advice to run it would loop. Once the old rows are
// deleted, Finish finishes.
func TestFinishNamesMovedOwnersWhoseRowsCameBack(t *testing.T) {
	before, _ := shard.NewModulo(2)
	after, _ := shard.NewModulo(3)
	st := newMemStore(3)
	var owners []string
	back := ""
	for i := range 20 {
		o := fmt.Sprint("user", i)
		owners = append(owners, o)
		st.put(before.Locate(o), o, 0, o)
		if back == "" && before.Locate(o) != after.Locate(o) {
			back = o
		}
	}
	m, err := New("grow", before, after, st, Options{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, m.Run(ctx, slices.Values(owners)))
	st.put(before.Locate(back), back, 0, back) // the old shard restored

	for range 2 { // the second time after the advice of a Run
		err = m.Finish(ctx, slices.Values(owners))
		var left *UnfinishedError
		require.ErrorAs(t, err, &left)
		require.Equal(t, 0, left.Unlisted, "a moved owner named as left out: %v", err)
		require.Equal(t, 1, left.Returned)
		require.Equal(t, []string{fmt.Sprintf("%s (shard %d)", back, before.Locate(back))}, left.ReturnedOwners)
		require.NotContains(t, err.Error(), "run the mover")
		require.NoError(t, m.Run(ctx, slices.Values(owners)))
	}
	require.NoError(t, st.Delete(ctx, back, before.Locate(back)))
	require.NoError(t, m.Finish(ctx, slices.Values(owners)))
}

// TestStaleProcessAfterFinish: a process that did not call Finish still routes an owner
// whose shard changes to its before shard first. Once another process finished the
// migration, that shard refuses the access even for an owner it never held (a new user),
// and the process routes by the after sharder from then on: the new owner's rows are where
// the after sharder, and every process that finished, will look.
func TestStaleProcessAfterFinish(t *testing.T) {
	w := newSharedWorld(t, 10, 3, 2, 3)
	ctx := context.Background()
	stale := w.shared(t, "grow", w.store, SharedOptions{})
	operator := w.shared(t, "grow", w.store, SharedOptions{})
	require.NoError(t, operator.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, operator.Finish(ctx, slices.Values(w.owners)))
	var fresh string
	for i := 100; fresh == ""; i++ {
		if o := fmt.Sprint("user", i); w.before.Locate(o) != w.after.Locate(o) {
			fresh = o
		}
	}
	w.acked[fresh] = map[int]string{}
	w.owners = append(w.owners, fresh)
	require.NoError(t, w.write(ctx, stale, fresh, 1))
	require.NoError(t, w.write(ctx, stale, w.owners[0], 100))
	w.check(t, true)
	require.ErrorIs(t, stale.Run(ctx, slices.Values(w.owners)), ErrFinished, "the stale process learned of the finish")
}

// slowLister blocks the listing of the owners on shard at until release is closed, after
// telling listing.
type slowLister struct {
	*MemShared
	at               int
	listing, release chan struct{}
}

func (s *slowLister) Owners(ctx context.Context, shard int) iter.Seq2[string, error] {
	if shard == s.at {
		close(s.listing)
		<-s.release
	}
	return s.MemShared.Owners(ctx, shard)
}

// TestNewOwnerDuringFinish: a process that has not heard of the finish writes a new user,
// whose shard the migration changes, while Finish lists the owners of the shards, after it
// listed the user's old shard. The write waits for the finish and lands on the user's new
// shard: without the wait it would land on the old shard after its listing, where nothing
// would find it.
func TestNewOwnerDuringFinish(t *testing.T) {
	w := newSharedWorld(t, 10, 3, 2, 3)
	ctx := context.Background()
	var fresh string
	for i := 100; fresh == ""; i++ {
		if o := fmt.Sprint("user", i); w.before.Locate(o) != w.after.Locate(o) && w.before.Locate(o) < 2 {
			fresh = o
		}
	}
	st := &slowLister{MemShared: w.store, at: 2, listing: make(chan struct{}), release: make(chan struct{})}
	operator := w.shared(t, "grow", st, SharedOptions{})
	stale := w.shared(t, "grow", w.store, SharedOptions{FenceWait: 10 * time.Second})
	require.NoError(t, operator.Run(ctx, slices.Values(w.owners)))
	finished := make(chan error, 1)
	go func() { finished <- operator.Finish(ctx, slices.Values(w.owners)) }()
	<-st.listing // shards 0 and 1 listed
	w.acked[fresh] = map[int]string{}
	w.owners = append(w.owners, fresh)
	wrote := make(chan error, 1)
	go func() { wrote <- w.write(ctx, stale, fresh, 1) }()
	time.Sleep(20 * time.Millisecond)
	close(st.release)
	require.NoError(t, <-finished)
	require.NoError(t, <-wrote)
	w.check(t, true)
}

// slowStore blocks the listing of the owners on shard at until release is closed, after
// telling listing.
type slowStore struct {
	*memStore
	at               int
	listing, release chan struct{}
}

func (s *slowStore) Owners(ctx context.Context, shard int) iter.Seq2[string, error] {
	if shard == s.at {
		close(s.listing)
		<-s.release
	}
	return s.memStore.Owners(ctx, shard)
}

// TestMigrationNewOwnerDuringFinish: an in-process Migration's Do of a new owner, whose shard
// changes, called while Finish lists the owners of the shards (after its old shard), waits
// for the finish and runs on the owner's new shard.
func TestMigrationNewOwnerDuringFinish(t *testing.T) {
	before, _ := shard.NewModulo(2)
	after, _ := shard.NewModulo(3)
	st := &slowStore{memStore: newMemStore(3), at: 2, listing: make(chan struct{}), release: make(chan struct{})}
	var fresh string
	for i := 100; fresh == ""; i++ {
		if o := fmt.Sprint("user", i); before.Locate(o) != after.Locate(o) {
			fresh = o
		}
	}
	m, err := New("grow", before, after, st, Options{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, m.Run(ctx, slices.Values([]string{})))
	finished := make(chan error, 1)
	go func() { finished <- m.Finish(ctx, slices.Values([]string{})) }()
	<-st.listing
	ran := make(chan int, 1)
	go func() {
		m.Do(ctx, fresh, func(s int) error { ran <- s; return nil })
	}()
	time.Sleep(20 * time.Millisecond)
	close(st.release)
	require.NoError(t, <-finished)
	require.Equal(t, after.Locate(fresh), <-ran, "the new owner's shard")
}

// TestOwnerLocks: a group waits for another only if they share an owner (an owner listed
// twice in one group is one lock); groups of random owners locked at once by many movers,
// in any order, never hold an owner twice and never deadlock.
func TestOwnerLocks(t *testing.T) {
	var l ownerLocks
	unlock := l.lock([]string{"b", "a", "a"})
	l.lock([]string{"c", "d"})() // shares none: does not wait
	var released atomic.Bool
	waited, done := make(chan bool), make(chan struct{})
	go func() {
		unlock := l.lock([]string{"e", "b", "a0"}) // a0 first, then b
		waited <- released.Load()
		unlock()
		close(done)
	}()
	for took := false; !took; runtime.Gosched() { // until it holds a0, on its way to b
		l.mu.Lock()
		_, took = l.held["a0"]
		l.mu.Unlock()
	}
	released.Store(true)
	unlock()
	require.True(t, <-waited, "a group that shares owner b took it before the holder let it go")
	<-done
	require.Empty(t, l.held)

	holders := map[string]*atomic.Int32{}
	for i := range 20 {
		holders[strconv.Itoa(i)] = new(atomic.Int32)
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for n := range 200 {
				var group []string
				for i := range 1 + (g+n)%6 {
					group = append(group, strconv.Itoa((g*7+n*3+i*5)%20))
				}
				unlock := l.lock(group)
				for _, o := range slices.Compact(slices.Sorted(slices.Values(group))) {
					if holders[o].Add(1) != 1 {
						t.Errorf("owner %s held twice", o)
					}
				}
				for _, o := range slices.Compact(slices.Sorted(slices.Values(group))) {
					holders[o].Add(-1)
				}
				unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, l.held)
}
