package rebalance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const rowsPerOwner = 4

// world is a store loaded with rows on the before shards, and what was written where.
type world struct {
	before, after shard.Sharder
	owners        []string
	store         *memStore
	rows          map[string]*atomic.Int64 // acknowledged rows per owner
}

func newWorld(t testing.TB, owners, from, to int) *world {
	t.Helper()
	before, err := shard.NewModulo(from)
	require.NoError(t, err)
	after, err := shard.NewModulo(to)
	require.NoError(t, err)
	w := &world{before: before, after: after, store: newMemStore(max(from, to)), rows: map[string]*atomic.Int64{}}
	for i := range owners {
		o := "user" + strconv.Itoa(i)
		w.owners = append(w.owners, o)
		w.rows[o] = &atomic.Int64{}
		for j := range rowsPerOwner {
			w.store.put(before.Locate(o), o, j, fmt.Sprint(o, j))
		}
		w.rows[o].Store(rowsPerOwner)
	}
	return w
}

func (w *world) migration(t *testing.T, id string, store Store, opts Options) *Migration {
	t.Helper()
	m, err := New(id, w.before, w.after, store, opts)
	require.NoError(t, err)
	return m
}

func (w *world) changing() int {
	n := 0
	for _, o := range w.owners {
		if w.before.Locate(o) != w.after.Locate(o) {
			n++
		}
	}
	return n
}

// checkServed checks that m serves every owner all its acknowledged rows.
func (w *world) checkServed(t *testing.T, m *Migration) {
	t.Helper()
	for _, o := range w.owners {
		require.NoError(t, m.Do(context.Background(), o, func(s int) error {
			assert.Equal(t, int(w.rows[o].Load()), w.store.count(s, o), "owner %s served by shard %d", o, s)
			return nil
		}))
	}
}

// checkMoved checks that every owner's rows are all on its after shard and nowhere else.
func (w *world) checkMoved(t *testing.T) {
	t.Helper()
	for _, o := range w.owners {
		s := w.after.Locate(o)
		require.Equal(t, []int{s}, w.store.where(o), "owner %s", o)
		require.Equal(t, int(w.rows[o].Load()), w.store.count(s, o), "owner %s", o)
	}
}

func TestRunMovesEveryOwner(t *testing.T) {
	for _, sizes := range [][2]int{{5, 10}, {10, 5}, {3, 4}} {
		t.Run(fmt.Sprintf("%d->%d", sizes[0], sizes[1]), func(t *testing.T) {
			w := newWorld(t, 300, sizes[0], sizes[1])
			var seen []Progress
			m := w.migration(t, "m1", w.store, Options{Concurrency: 4, Progress: func(p Progress) { seen = append(seen, p) }})
			require.NoError(t, m.Run(context.Background(), slices.Values(w.owners)))
			w.checkMoved(t)
			w.checkServed(t, m)
			n := w.changing()
			require.Len(t, seen, n)
			for i, p := range seen {
				require.Equal(t, Progress{Done: i + 1, Total: n}, p)
			}
			assert.Equal(t, Stats{ByRun: int64(n)}, m.Stats())
			require.NoError(t, m.Finish(context.Background(), slices.Values(w.owners)))
			w.checkServed(t, m)

			// A second Run of the same migration, in a new process, is refused where the
			// store recorded the finish, and finds nothing to do where it did not.
			again := w.migration(t, "m1", w.store, Options{})
			require.ErrorIs(t, again.Run(context.Background(), slices.Values(w.owners)), ErrFinished)
			again = w.migration(t, "m1", struct{ Store }{w.store}, Options{})
			require.NoError(t, again.Run(context.Background(), slices.Values(w.owners)))
			assert.Equal(t, Stats{}, again.Stats())
		})
	}
}

// TestCrashAndResume stops a migration at every step of a move, checks that the owners are
// served correctly in that state, then resumes with a new Migration (a new process) over the
// same store and checks that everything moved once.
func TestCrashAndResume(t *testing.T) {
	for _, mode := range []Mode{Async, Lazy} {
		for _, op := range []string{"copy", "copied", "delete", "done"} {
			for _, when := range []string{"before", "half", "after"} {
				if when == "half" && op != "copy" {
					continue
				}
				t.Run(fmt.Sprintf("%v/%s-%s", mode, when, op), func(t *testing.T) {
					w := newWorld(t, 100, 5, 10)
					ctx := context.Background()
					crashing := &crashStore{memStore: w.store, op: op, when: when, at: 7}
					m := w.migration(t, "grow", crashing, Options{Mode: mode, Concurrency: 3})
					err := m.Run(ctx, slices.Values(w.owners))
					require.ErrorIs(t, err, errCrash)
					require.ErrorContains(t, err, `rebalance: migration "grow": owner "user`)

					resumed := w.migration(t, "grow", w.store, Options{Mode: mode})
					if mode == Async {
						w.checkServed(t, resumed) // the crash left every owner readable
						require.ErrorIs(t, resumed.Finish(ctx, slices.Values(w.owners)), ErrUnfinished)
						require.NoError(t, resumed.Run(ctx, slices.Values(w.owners)))
					} else {
						w.checkServed(t, resumed) // moves every owner on first access
					}
					require.NoError(t, resumed.Finish(ctx, slices.Values(w.owners)))
					w.checkMoved(t)
					// Every owner was moved once: the crashed one by the new process, unless it
					// crashed after its last step.
					st, uncounted := resumed.Stats(), int64(0)
					if op == "done" && when == "after" {
						uncounted = 1
					}
					assert.Equal(t, int64(w.changing()), m.Stats().ByRun+st.ByRun+st.Lazily+uncounted)
				})
			}
		}
	}
}

// TestConcurrentAccess runs writers and readers on every owner while the mover works. A
// reader must see at least the rows acknowledged before it started, and at the end every
// acknowledged row is on its owner's new shard, once.
func TestConcurrentAccess(t *testing.T) {
	for _, mode := range []Mode{Async, Lazy} {
		for _, sizes := range [][2]int{{5, 10}, {10, 5}} {
			t.Run(fmt.Sprintf("%v/%d->%d", mode, sizes[0], sizes[1]), func(t *testing.T) {
				w := newWorld(t, 200, sizes[0], sizes[1])
				ctx := context.Background()
				m := w.migration(t, "m", w.store, Options{Mode: mode, Concurrency: 4, Stripes: 16})
				var (
					stop     atomic.Bool
					wg       sync.WaitGroup
					nextID   atomic.Int64
					failures atomic.Int64
				)
				nextID.Store(rowsPerOwner)
				for g := range 4 {
					wg.Go(func() { // writer
						r := rand.New(rand.NewPCG(uint64(g), 9))
						for !stop.Load() {
							o := w.owners[r.IntN(len(w.owners))]
							id := int(nextID.Add(1))
							require.NoError(t, m.Do(ctx, o, func(s int) error {
								w.store.put(s, o, id, "written")
								return nil
							}))
							w.rows[o].Add(1)
						}
					})
					wg.Go(func() { // reader
						r := rand.New(rand.NewPCG(uint64(g), 10))
						for !stop.Load() {
							o := w.owners[r.IntN(len(w.owners))]
							acked := int(w.rows[o].Load())
							require.NoError(t, m.Do(ctx, o, func(s int) error {
								if got := w.store.count(s, o); got < acked {
									failures.Add(1)
									t.Errorf("owner %s: read %d rows on shard %d, %d were acknowledged", o, got, s, acked)
								}
								return nil
							}))
						}
					})
				}
				require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
				stop.Store(true)
				wg.Wait()
				require.Zero(t, failures.Load())
				require.NoError(t, m.Finish(ctx, slices.Values(w.owners)))
				w.checkMoved(t)
				w.checkServed(t, m)
				if st := m.Stats(); mode == Lazy {
					assert.Equal(t, int64(w.changing()), st.ByRun+st.Lazily)
				} else {
					assert.Equal(t, Stats{ByRun: int64(w.changing())}, st)
				}
			})
		}
	}
}

func TestLazyMovesOnFirstAccess(t *testing.T) {
	w := newWorld(t, 50, 5, 10)
	ctx := context.Background()
	m := w.migration(t, "lazy", w.store, Options{Mode: Lazy})
	touched := 0
	for _, o := range w.owners[:20] {
		require.NoError(t, m.Do(ctx, o, func(s int) error {
			require.Equal(t, w.after.Locate(o), s, "lazy mode serves the new shard")
			return nil
		}))
		if w.before.Locate(o) != w.after.Locate(o) {
			touched++
			require.Equal(t, []int{w.after.Locate(o)}, w.store.where(o))
		}
	}
	assert.Equal(t, Stats{Lazily: int64(touched)}, m.Stats())

	err := m.Finish(ctx, slices.Values(w.owners))
	var left *UnfinishedError
	require.ErrorAs(t, err, &left)
	require.ErrorIs(t, err, ErrUnfinished)
	assert.Equal(t, w.changing()-touched, left.Left)
	assert.Len(t, left.Owners, 10)
	assert.ErrorContains(t, err, fmt.Sprintf(`rebalance: migration "lazy": %d owners not moved yet`, left.Left))

	require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, m.Finish(ctx, slices.Values(w.owners)))
	w.checkMoved(t)
	assert.ErrorIs(t, m.Run(ctx, slices.Values(w.owners)), ErrFinished)
}

// TestMarksBelongToOneMigration: the Done marks of an earlier migration do not make a new
// one skip its owners.
func TestMarksBelongToOneMigration(t *testing.T) {
	w := newWorld(t, 50, 5, 10)
	ctx := context.Background()
	for _, o := range w.owners {
		require.NoError(t, w.store.SetMark(ctx, "earlier", o, Done))
	}
	m := w.migration(t, "later", w.store, Options{})
	w.checkServed(t, m)
	require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
	w.checkMoved(t)
	assert.Equal(t, int64(w.changing()), m.Stats().ByRun)
}

func TestFinishedReadsNoMark(t *testing.T) {
	w := newWorld(t, 50, 5, 10)
	ctx := context.Background()
	counting := &markCounter{memStore: w.store}
	m := w.migration(t, "m", counting, Options{})
	require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, m.Finish(ctx, slices.Values(w.owners)))
	before := counting.n.Load()
	w.checkServed(t, m)
	assert.Equal(t, before, counting.n.Load())
}

type markCounter struct {
	*memStore
	n atomic.Int64
}

func (c *markCounter) Mark(ctx context.Context, migration, owner string) (Mark, error) {
	c.n.Add(1)
	return c.memStore.Mark(ctx, migration, owner)
}

// badStore returns a mark out of range, or fails to read it.
type badStore struct {
	*memStore
	err error
}

func (b badStore) Mark(context.Context, string, string) (Mark, error) {
	if b.err != nil {
		return 0, b.err
	}
	return Mark(7), nil
}

func TestStoreErrors(t *testing.T) {
	w := newWorld(t, 20, 5, 10)
	ctx := context.Background()
	var o string
	for _, o = range w.owners {
		if w.before.Locate(o) != w.after.Locate(o) {
			break
		}
	}
	called := false
	noCall := func(int) error { called = true; return nil }

	m := w.migration(t, "m", badStore{memStore: w.store}, Options{})
	err := m.Do(ctx, o, noCall)
	assert.ErrorIs(t, err, ErrMark)
	assert.ErrorContains(t, err, `rebalance: migration "m": owner "`+o+`": store returned mark(7)`)
	assert.ErrorIs(t, m.Run(ctx, slices.Values(w.owners)), ErrMark)
	assert.ErrorIs(t, m.Finish(ctx, slices.Values(w.owners)), ErrMark)

	down := errors.New("connection refused")
	m = w.migration(t, "m", badStore{memStore: w.store, err: down}, Options{Mode: Lazy})
	assert.ErrorIs(t, m.Do(ctx, o, noCall), down)
	assert.False(t, called, "fn must not run when the owner's shard is unknown")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	m = w.migration(t, "m", w.store, Options{})
	assert.ErrorIs(t, m.Run(cancelled, slices.Values(w.owners)), context.Canceled)
}

func TestNewRejects(t *testing.T) {
	a, _ := shard.NewModulo(5)
	b, _ := shard.NewModulo(10)
	s := newMemStore(10)
	for name, tc := range map[string]struct {
		id            string
		before, after shard.Sharder
		store         Store
		opts          Options
	}{
		"empty id":         {"", a, b, s, Options{}},
		"nil before":       {"m", nil, b, s, Options{}},
		"nil store":        {"m", a, b, nil, Options{}},
		"same sharder":     {"m", a, a, s, Options{}},
		"unknown mode":     {"m", a, b, s, Options{Mode: 9}},
		"negative movers":  {"m", a, b, s, Options{Concurrency: -1}},
		"negative stripes": {"m", a, b, s, Options{Stripes: -1}},
		"too many movers":  {"m", a, b, s, Options{Concurrency: MaxConcurrency + 1}},
		"maxint movers":    {"m", a, b, s, Options{Concurrency: math.MaxInt}},
		"too many stripes": {"m", a, b, s, Options{Stripes: MaxStripes + 1}},
		"1<<28 stripes":    {"m", a, b, s, Options{Stripes: 1 << 28}},
		"maxint stripes":   {"m", a, b, s, Options{Stripes: math.MaxInt}},
	} {
		_, err := New(tc.id, tc.before, tc.after, tc.store, tc.opts)
		assert.ErrorIs(t, err, ErrConfig, name)
		assert.ErrorContains(t, err, "rebalance: ", name)
	}
	_, err := New("m", tableSharder{0}, tableSharder{0}, s, Options{})
	assert.NoError(t, err, "uncomparable sharders are not compared")
	_, err = New("m", a, b, s, Options{Concurrency: MaxConcurrency, Stripes: MaxStripes})
	assert.NoError(t, err)
}

// crashedCopied crashes a migration right after it marks one owner Copied, before it deletes
// the old copy, and returns that owner with its old and new shard.
func crashedCopied(t *testing.T, w *world) (owner string, from, to int) {
	t.Helper()
	ctx := context.Background()
	crashing := &crashStore{memStore: w.store, op: "copied", when: "after", at: 1}
	m := w.migration(t, "grow", crashing, Options{})
	require.ErrorIs(t, m.Run(ctx, slices.Values(w.owners)), errCrash)
	for _, o := range w.owners {
		if mark, _ := w.store.Mark(ctx, "grow", o); mark == Copied {
			from, to = w.before.Locate(o), w.after.Locate(o)
			require.Equal(t, []int{from, to}, slices.Sorted(slices.Values(w.store.where(o))), "both copies of %s", o)
			return o, from, to
		}
	}
	t.Fatal("no owner marked Copied")
	return
}

// TestLostCopyIsKept: when the new shard loses an owner's rows after the owner was marked
// Copied (its file deleted and recreated empty, its log lost), the resumed move stops with
// an error naming the shard and keeps the old copy, in Run and in Do of either mode.
func TestLostCopyIsKept(t *testing.T) {
	ctx := context.Background()
	for _, lose := range []string{"all", "one"} {
		for _, mode := range []Mode{Async, Lazy} {
			t.Run(fmt.Sprintf("%s-rows/%v", lose, mode), func(t *testing.T) {
				w := newWorld(t, 50, 5, 10)
				o, from, to := crashedCopied(t, w)
				w.store.mu.Lock()
				if lose == "all" {
					w.store.shards[to] = map[string]map[int]string{} // the shard recreated empty
				} else {
					delete(w.store.shards[to][o], 0)
				}
				w.store.mu.Unlock()

				resumed := w.migration(t, "grow", w.store, Options{Mode: mode})
				wantMsg := fmt.Sprintf("shard %d lost rows since the copy: the old copy is kept", to)
				err := resumed.Run(ctx, slices.Values(w.owners))
				require.ErrorIs(t, err, ErrCopyLost)
				require.ErrorContains(t, err, wantMsg)
				called := false
				err = resumed.Do(ctx, o, func(int) error { called = true; return nil })
				require.ErrorIs(t, err, ErrCopyLost)
				assert.False(t, called)
				assert.Equal(t, rowsPerOwner, w.store.count(from, o), "the old copy of %s on shard %d", o, from)
				mark, _ := w.store.Mark(ctx, "grow", o)
				assert.Equal(t, Copied, mark)
			})
		}
	}
}

// lossyStore's Copy reports success but copies one row fewer than the owner has: a copy
// that did not land (a write to a file that was gone, say).
type lossyStore struct{ *memStore }

func (s lossyStore) Copy(ctx context.Context, owner string, from, to int) error {
	if err := s.memStore.Copy(ctx, owner, from, to); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.shards[to][owner], 0)
	return nil
}

// TestCopyMismatchKeepsTheSource: a Copy that loses rows leaves the owner Unmoved, served by
// its old shard with all its rows.
func TestCopyMismatchKeepsTheSource(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 30, 5, 10)
	m := w.migration(t, "grow", lossyStore{w.store}, Options{Concurrency: 2})
	err := m.Run(ctx, slices.Values(w.owners))
	require.ErrorIs(t, err, ErrCopyMismatch)
	require.ErrorContains(t, err, fmt.Sprintf("holds %d rows of the owner, shard", rowsPerOwner-1))
	for _, o := range w.owners {
		mark, _ := w.store.Mark(ctx, "grow", o)
		assert.Equal(t, Unmoved, mark, o)
		assert.Equal(t, rowsPerOwner, w.store.count(w.before.Locate(o), o), o)
	}
	w.checkServed(t, m)
}

// TestCopiedFinishedByDo: in Async mode too, an owner a crash left Copied has its move
// finished by its next Do, before fn runs on the new shard.
func TestCopiedFinishedByDo(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 50, 5, 10)
	o, _, to := crashedCopied(t, w)
	resumed := w.migration(t, "grow", w.store, Options{})
	require.NoError(t, resumed.Do(ctx, o, func(s int) error {
		assert.Equal(t, to, s)
		assert.Equal(t, []int{to}, w.store.where(o), "the old copy is deleted before fn runs")
		return nil
	}))
	assert.Equal(t, Stats{Lazily: 1}, resumed.Stats())
}

func TestNilOwners(t *testing.T) {
	w := newWorld(t, 10, 5, 10)
	m := w.migration(t, "m", w.store, Options{})
	assert.ErrorIs(t, m.Run(context.Background(), nil), ErrConfig)
	assert.ErrorIs(t, m.Finish(context.Background(), nil), ErrConfig)
}

// TestMoversNoMoreThanOwners: a Run with one owner to move and the most movers allowed
// starts one mover, not MaxConcurrency goroutines.
func TestMoversNoMoreThanOwners(t *testing.T) {
	w := newWorld(t, 1, 5, 10)
	for w.before.Locate(w.owners[0]) == w.after.Locate(w.owners[0]) {
		w = newWorld(t, len(w.owners)+1, 5, 10)
		w.owners = w.owners[len(w.owners)-1:]
	}
	base := runtime.NumGoroutine()
	peak := 0
	counting := &goroutineCounter{memStore: w.store, peak: &peak}
	m := w.migration(t, "m", counting, Options{Concurrency: MaxConcurrency})
	require.NoError(t, m.Run(context.Background(), slices.Values(w.owners)))
	assert.LessOrEqual(t, peak-base, 2, "goroutines during the move, beyond the %d before it", base)
}

type goroutineCounter struct {
	*memStore
	peak *int
}

func (g *goroutineCounter) Copy(ctx context.Context, owner string, from, to int) error {
	*g.peak = max(*g.peak, runtime.NumGoroutine())
	return g.memStore.Copy(ctx, owner, from, to)
}

// wrapper is a comparable struct that may hold an uncomparable Sharder: == on two of them
// panics.
type wrapper struct{ s shard.Sharder }

func (w wrapper) Locate(k string) int { return w.s.Locate(k) }
func (w wrapper) Resize(n int) error  { return w.s.Resize(n) }
func (w wrapper) Shards() int         { return w.s.Shards() }

// TestNewSameSharder: New rejects one sharder given twice, however wrapped, and accepts two
// sharders of any type, comparable or not, without panicking.
func TestNewSameSharder(t *testing.T) {
	a, _ := shard.NewModulo(5)
	b, _ := shard.NewModulo(10)
	table := tableSharder{0, 1}
	s := newMemStore(10)
	for name, tc := range map[string]struct {
		before, after shard.Sharder
		same          bool
	}{
		"one pointer":                 {a, a, true},
		"two pointers":                {a, b, false},
		"ByPrefix twice":              {shard.ByPrefix(a), shard.ByPrefix(a), true},
		"ByPrefix of two":             {shard.ByPrefix(a), shard.ByPrefix(b), false},
		"ByHashTag of ByPrefix":       {shard.ByHashTag(shard.ByPrefix(a)), a, true},
		"wrapper of one":              {wrapper{a}, wrapper{a}, true},
		"wrapper of two":              {wrapper{a}, wrapper{b}, false},
		"wrapper of one slice":        {wrapper{table}, wrapper{table}, true},
		"wrapper of two slices":       {wrapper{tableSharder{0}}, wrapper{tableSharder{0, 1}}, false},
		"wrapper of equal slices":     {wrapper{tableSharder{0, 1}}, wrapper{tableSharder{0, 1}}, false},
		"slice and wrapper of it":     {table, wrapper{table}, true},
		"uncomparable and comparable": {table, wrapper{a}, false},
	} {
		var err error
		require.NotPanics(t, func() { _, err = New("m", tc.before, tc.after, s, Options{}) }, name)
		if tc.same {
			assert.ErrorIs(t, err, ErrConfig, name)
			assert.ErrorContains(t, err, "before and after are the same sharder, or wrap the same one", name)
		} else {
			assert.NoError(t, err, name)
		}
	}
}

// summingStore is a memStore that sums by content (a Summer) and whose Copy changes every
// row it writes, as an application trigger firing for the copy's inserts would.
type summingStore struct{ *memStore }

func (s summingStore) Copy(ctx context.Context, owner string, from, to int) error {
	if err := s.memStore.Copy(ctx, owner, from, to); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, row := range s.shards[to][owner] {
		s.shards[to][owner][id] = row + " (stamped by a trigger)"
	}
	return nil
}

func (s summingStore) Sums(_ context.Context, owners []string, shard int) ([]Sum, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sum, len(owners))
	for i, o := range owners {
		rows := s.shards[shard][o]
		out[i] = Sum{Rows: int64(len(rows)), Digest: fmt.Sprint(rows)} // fmt sorts map keys
	}
	return out, nil
}

func (s summingStore) FirstDiff(context.Context, string, int, int) (string, error) { return "0", nil }

// A Migration over a Summer compares the copies by content: a copy whose rows differ from
// the old copy's, with the same count, stops the move with ErrCopyMismatch and deletes
// nothing.
func TestMigrationComparesContent(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 20, 2, 3)
	m := w.migration(t, "content", summingStore{w.store}, Options{})
	require.ErrorIs(t, m.Run(ctx, slices.Values(w.owners)), ErrCopyMismatch)
	for _, o := range w.owners {
		if w.before.Locate(o) != w.after.Locate(o) {
			require.Equal(t, int(w.rows[o].Load()), w.store.count(w.before.Locate(o), o), "the old copy of %s is kept", o)
		}
	}
}
