package rebalance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// These tests start movers the way operators and networks do by mistake: two at once with
// the default options, an old one that wakes up after a newer one finished, two in-process
// Migrations of one ID, and a process routing by a placement the shards do not serve.
// Each checks that every acknowledged row is where it belongs, once.

// slowCopy makes every chunk copied take a while, so that a Run lasts long enough for a
// second mover to be started in the middle of it.
type slowCopy struct{ *MemShared }

func (s slowCopy) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) ([]Cursor, int, bool, error) {
	time.Sleep(200 * time.Microsecond)
	return s.MemShared.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
}

// writeUntil writes new rows to random owners through app until stop is closed.
func (w *sharedWorld) writeUntil(t *testing.T, app *Shared[*MemTx], stop <-chan struct{}, next *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := w.owners[rand.IntN(len(w.owners))]
				if err := w.write(context.Background(), app, o, int(next.Add(1))); err != nil && !errors.Is(err, ErrFenced) {
					t.Error(err)
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	return &wg
}

// TestSharedTwoMoversAtOnce: two movers with the default options (election epoch 0)
// started at once while the application writes: one runs, the other is refused with an
// error that names the first, and nothing is lost.
func TestSharedTwoMoversAtOnce(t *testing.T) {
	for trial := range 30 {
		w := newSharedWorld(t, 40, 10, 3, 5)
		ctx := context.Background()
		app := w.shared(t, "grow", w.store, SharedOptions{})
		var next atomic.Int64
		next.Store(1000)
		stop := make(chan struct{})
		writers := w.writeUntil(t, app, stop, &next)
		movers := []*Shared[*MemTx]{
			w.shared(t, "grow", slowCopy{w.store}, SharedOptions{Mover: "mover-a", ChunkRows: 3}),
			w.shared(t, "grow", slowCopy{w.store}, SharedOptions{Mover: "mover-b", ChunkRows: 3}),
		}
		errs := make([]error, 2)
		var start, ran sync.WaitGroup
		start.Add(1)
		for i, m := range movers {
			ran.Go(func() {
				start.Wait()
				errs[i] = m.Run(ctx, slices.Values(w.owners))
			})
		}
		start.Done()
		ran.Wait()
		close(stop)
		writers.Wait()
		refused := 0
		for i, err := range errs {
			if err == nil {
				continue
			}
			refused++
			var me *MoverError
			require.ErrorAs(t, err, &me, "trial %d, mover %d", trial, i)
			require.ErrorIs(t, err, ErrMoverRunning)
			require.Equal(t, movers[1-i].opts.Mover, me.Holder, "the error names the mover that runs")
			require.Contains(t, err.Error(), "a mover already runs it: "+movers[1-i].opts.Mover)
		}
		require.Equal(t, 1, refused, "trial %d: %v", trial, errs)
		require.NoError(t, app.Finish(ctx, slices.Values(w.owners)))
		w.check(t, true)
	}
}

// frozen stops every call of one mover's store while frozen, as a stalled machine (a long
// GC pause, a VM migrated, a laptop lid closed) stops every goroutine of the process, its
// lease renewals among them. pause, if set, is called once after the call it names.
type frozen struct {
	*MemShared
	mu     sync.Mutex
	thawed chan struct{} // nil while not frozen
	after  string        // "fence moved": freeze after the old shard is fenced moved
	hit    chan struct{} // closed when it froze
}

func newFrozen(s *MemShared, after string) *frozen {
	return &frozen{MemShared: s, after: after, hit: make(chan struct{})}
}

func (f *frozen) wait() {
	f.mu.Lock()
	c := f.thawed
	f.mu.Unlock()
	if c != nil {
		<-c
	}
}

func (f *frozen) freezeAfter(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if what == f.after && f.thawed == nil {
		f.thawed, f.after = make(chan struct{}), ""
		close(f.hit)
	}
}

func (f *frozen) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.thawed)
	f.thawed = nil
}

func (f *frozen) Renew(ctx context.Context, migration string, token uint64, lease time.Duration) error {
	f.wait()
	return f.MemShared.Renew(ctx, migration, token, lease)
}

func (f *frozen) SetFence(ctx context.Context, migration string, owners []string, shard int, state FenceState, token uint64) error {
	f.wait()
	err := f.MemShared.SetFence(ctx, migration, owners, shard, state, token)
	f.freezeAfter("fence " + state.String())
	return err
}

func (f *frozen) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) ([]Cursor, int, bool, error) {
	f.wait()
	return f.MemShared.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
}

func (f *frozen) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	f.wait()
	return f.MemShared.Replay(ctx, migration, token, owners, from, to, limit)
}

func (f *frozen) Counts(ctx context.Context, owners []string, shard int) ([]int64, error) {
	f.wait()
	return f.MemShared.Counts(ctx, owners, shard)
}

func (f *frozen) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	f.wait()
	return f.MemShared.DeleteChunk(ctx, migration, token, owners, shard, limit)
}

func (f *frozen) SetMarks(ctx context.Context, migration string, owners []string, m Mark, token uint64) error {
	f.wait()
	return f.MemShared.SetMarks(ctx, migration, owners, m, token)
}

// TestSharedReplacedMoverChangesNothing: mover X fences an old shard moved and stalls; mover Y
// takes the migration over (a newer election epoch at once, or the same epoch once X's lease
// ran out), moves everything and deletes the old copies; X wakes up, finds counts that
// differ, and would copy the owners' empty old shards over their new ones. Every write it
// tries is refused, and nothing is lost.
func TestSharedReplacedMoverChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		x, y   SharedOptions
		expiry time.Duration // how long Y waits for X's lease
	}{
		{"newer epoch", SharedOptions{Token: 1, Mover: "x"}, SharedOptions{Token: 2, Mover: "y"}, 0},
		{"same epoch, lease ran out", SharedOptions{Mover: "x", Lease: 30 * time.Millisecond}, SharedOptions{Mover: "y"}, 40 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, group := range []int{1, 16} {
				w := newSharedWorld(t, 30, 51, 2, 3)
				ctx := context.Background()
				tc.x.Group, tc.y.Group = group, group
				fx := newFrozen(w.store, "fence moved")
				x := w.shared(t, "grow", fx, tc.x)
				errX := make(chan error, 1)
				go func() { errX <- x.Run(ctx, slices.Values(w.owners)) }()
				<-fx.hit
				time.Sleep(tc.expiry)
				y := w.shared(t, "grow", w.store, tc.y)
				require.NoError(t, y.Run(ctx, slices.Values(w.owners)))
				require.NoError(t, y.Finish(ctx, slices.Values(w.owners)))
				w.check(t, true)
				fx.thaw()
				err := <-errX
				require.ErrorIs(t, err, ErrFenced, "group %d", group)
				require.Contains(t, err.Error(), "another mover took over")
				w.check(t, true)
			}
		})
	}
}

// inOtherProcess gives m locks of its own, as a Migration of its ID has in another process,
// and returns it.
func inOtherProcess(m *Migration) *Migration {
	m.locks = &stripeTable{stripes: make([]sync.RWMutex, len(m.locks.stripes))}
	return m
}

// twinStore lets a test order the steps of two Migrations of one ID over one memStore.
type twinStore struct {
	*memStore
	beforeCopy func(run int) // called before each Copy, with the Copy's number from 0
	copies     atomic.Int64
	afterDel   func()
}

func (s *twinStore) Copy(ctx context.Context, owner string, from, to int) error {
	if s.beforeCopy != nil {
		s.beforeCopy(int(s.copies.Add(1) - 1))
	}
	return s.memStore.Copy(ctx, owner, from, to)
}

func (s *twinStore) Delete(ctx context.Context, owner string, shard int) error {
	err := s.memStore.Delete(ctx, owner, shard)
	if s.afterDel != nil {
		s.afterDel()
	}
	return err
}

// markRead is the second twin's view of a twinStore: it calls read with the first mark its
// Migration reads, and beforeCopy before its Copy.
type markRead struct {
	*twinStore
	once       sync.Once
	read       func(Mark)
	beforeCopy func()
}

func (s *markRead) Mark(ctx context.Context, migration, owner string) (Mark, error) {
	m, err := s.twinStore.Mark(ctx, migration, owner)
	s.once.Do(func() { s.read(m) })
	return m, err
}

func (s *markRead) Copy(ctx context.Context, owner string, from, to int) error {
	s.beforeCopy()
	s.copies.Add(1)
	return s.memStore.Copy(ctx, owner, from, to)
}

// TestMigrationTwinsForced: two Migrations of one ID, the second as in another process
// (values in one process share their locks, and one waits for the other's move), both read
// the owner Unmoved, and the second's Copy runs after the first deleted the old copy. The second's Copy finds no row
// on its source and changes nothing (ErrSourceEmpty); the Migration reads the mark again,
// finds it Copied or Done, and carries on from there. Both Runs and Finish succeed with every row in place.
func TestMigrationTwinsForced(t *testing.T) {
	before, _ := shard.NewModulo(1)
	after, _ := shard.NewModulo(2)
	owner := ""
	for i := 0; owner == ""; i++ {
		if o := fmt.Sprint("user", i); after.Locate(o) == 1 {
			owner = o
		}
	}
	st := &twinStore{memStore: newMemStore(2)}
	for k := range 4 {
		st.put(0, owner, k, fmt.Sprint(owner, "/", k))
	}
	firstDeleted, secondRead := make(chan struct{}), make(chan struct{})
	st.beforeCopy = func(int) { <-secondRead } // a's Copy waits until b has read the mark
	var once sync.Once                         // the second Run deletes too when it finds the owner Copied
	st.afterDel = func() { once.Do(func() { close(firstDeleted) }) }
	twin := func(st Store) *Migration {
		m, err := New("grow", before, after, st, Options{})
		require.NoError(t, err)
		return m
	}
	// b reads Unmoved, then lets a copy; its own Copy waits for a's Delete.
	var bMark Mark
	a, b := twin(st), inOtherProcess(twin(&markRead{twinStore: st, read: func(m Mark) {
		bMark = m
		close(secondRead)
	}, beforeCopy: func() { <-firstDeleted }}))
	ctx := context.Background()
	errA := make(chan error, 1)
	go func() { errA <- a.Run(ctx, slices.Values([]string{owner})) }()
	require.NoError(t, b.Run(ctx, slices.Values([]string{owner})))
	require.Equal(t, Unmoved, bMark, "the second twin's first read of the mark")
	require.NoError(t, <-errA)
	require.NoError(t, b.Finish(ctx, slices.Values([]string{owner})))
	require.Equal(t, int64(2), st.copies.Load(), "Copies: the second twin did not copy")
	require.Equal(t, 4, st.count(1, owner), "the owner's rows on its new shard")
	require.Zero(t, st.count(0, owner))
}

// TestMigrationTwinsRandom: two Migrations of one ID run over the same owners at once, 100
// times, the second as in another process, their steps interleaved at random; every owner
// ends with all its rows, once.
func TestMigrationTwinsRandom(t *testing.T) {
	before, _ := shard.NewModulo(3)
	after, _ := shard.NewModulo(5)
	for trial := range 100 {
		st := newMemStore(5)
		var owners []string
		for i := range 20 {
			o := fmt.Sprint("user", i)
			owners = append(owners, o)
			for k := range 4 {
				st.put(before.Locate(o), o, k, fmt.Sprint(o, "/", k))
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			m, err := New("grow", before, after, st, Options{Concurrency: 3})
			require.NoError(t, err)
			if i == 1 {
				inOtherProcess(m)
			}
			wg.Go(func() { errs[i] = m.Run(context.Background(), slices.Values(owners)) })
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "trial %d", trial)
		for _, o := range owners {
			require.Equal(t, []int{after.Locate(o)}, st.where(o), "trial %d, owner %s", trial, o)
			require.Equal(t, 4, st.count(after.Locate(o), o), "trial %d, owner %s", trial, o)
		}
	}
}

// TestMigrationSecondRunRefused: over a Store that is a MoverLock, a second Run of one ID
// while the first runs is refused with a *MoverError naming the first; afterwards it runs.
func TestMigrationSecondRunRefused(t *testing.T) {
	w := newSharedWorld(t, 20, 5, 2, 3)
	ctx := context.Background()
	fx := newFrozen(w.store, "")
	holding := make(chan struct{})
	st := &claimedThenCopy{frozen: fx, claimed: holding}
	first, err := New("grow", w.before, w.after, st, Options{Mover: "first"})
	require.NoError(t, err)
	second, err := New("grow", w.before, w.after, w.store, Options{Mover: "second"})
	require.NoError(t, err)
	release := make(chan struct{})
	st.hold = release
	errFirst := make(chan error, 1)
	go func() { errFirst <- first.Run(ctx, slices.Values(w.owners)) }()
	<-holding
	err = second.Run(ctx, slices.Values(w.owners))
	require.ErrorIs(t, err, ErrMoverRunning)
	require.Contains(t, err.Error(), "a mover already runs it: first")
	close(release)
	require.NoError(t, <-errFirst)
	require.NoError(t, second.Run(ctx, slices.Values(w.owners)), "the first released its claim")
	require.NoError(t, second.Finish(ctx, slices.Values(w.owners)))
	w.check(t, true)
}

// lostRelease is a MemShared whose Release answers an error and releases nothing, as when
// the answer of a release is lost with the connection before the release ran.
type lostRelease struct{ *MemShared }

func (lostRelease) Release(context.Context, string, uint64) error {
	return errors.New("connection reset")
}

// TestMigrationDoClaimHoldsBriefly: the claim a Lazy Do makes before it moves an owner is
// released at once; if that release is lost, a Run is refused only until the claim's short
// lease (PlacementRecheck, not the 10 s of a mover's) runs out.
func TestMigrationDoClaimHoldsBriefly(t *testing.T) {
	w := newSharedWorld(t, 20, 5, 2, 3)
	ctx := context.Background()
	app, err := New("grow", w.before, w.after, lostRelease{w.store}, Options{Mode: Lazy})
	require.NoError(t, err)
	i := slices.IndexFunc(w.owners, func(o string) bool { return w.before.Locate(o) != w.after.Locate(o) })
	require.NoError(t, app.Do(ctx, w.owners[i], func(int) error { return nil }))
	mover, err := New("grow", w.before, w.after, w.store, Options{Mover: "mover"})
	require.NoError(t, err)
	err = mover.Run(ctx, slices.Values(w.owners))
	var me *MoverError
	require.ErrorAs(t, err, &me, "the Do's claim still holds")
	require.LessOrEqual(t, me.Left, PlacementRecheck)
	time.Sleep(me.Left + 10*time.Millisecond)
	require.NoError(t, mover.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, mover.Finish(ctx, slices.Values(w.owners)))
	w.check(t, true)
}

// claimedThenCopy holds the first Copy until hold is closed, after telling claimed.
type claimedThenCopy struct {
	*frozen
	claimed chan struct{}
	hold    chan struct{}
	once    sync.Once
}

func (c *claimedThenCopy) Copy(ctx context.Context, owner string, from, to int) error {
	c.once.Do(func() { close(c.claimed); <-c.hold })
	return c.MemShared.Copy(ctx, owner, from, to)
}

// TestSharedWrongPlacementRefused: a process routing by sharders the shards do not serve
// writes an owner onto a shard that never held it: the shard refuses, although it has no
// fence for that owner, and nothing is stranded there.
func TestSharedWrongPlacementRefused(t *testing.T) {
	w := newSharedWorld(t, 40, 3, 3, 5)
	ctx := context.Background()
	m := w.shared(t, "grow", w.store, SharedOptions{})
	require.NoError(t, m.Run(ctx, slices.Values(w.owners)))
	require.NoError(t, m.Finish(ctx, slices.Values(w.owners)))
	// A process with the same migration ID that routes by a wrong sharder (4 shards, not
	// 5): it goes straight to the shard its sharder names.
	four, _ := shard.NewModulo(4)
	four2, _ := shard.NewModulo(4)
	wrong, err := NewShared("grow", four, four2, SharedStore[*MemTx](w.store), SharedOptions{})
	require.NoError(t, err)
	refused := 0
	for _, o := range w.owners {
		s := four.Locate(o)
		if s == w.after.Locate(o) || s == w.before.Locate(o) {
			continue // a shard that held the owner
		}
		require.Empty(t, w.store.rows[s][o])
		require.Equal(t, Serving, w.store.fences[s][o].State, "no fence for an owner the shard never held")
		err := wrong.Do(ctx, o, func(tx *MemTx, _ int) error { tx.Put(99, "stranded"); return nil })
		var pe *PlacementError
		require.ErrorAs(t, err, &pe, "owner %s on shard %d", o, s)
		require.ErrorIs(t, err, ErrPlacement)
		require.Equal(t, m.Placement(), pe.Served)
		require.Contains(t, err.Error(), "reload it")
		refused++
	}
	require.Positive(t, refused)
	w.check(t, true)
}

// interloper runs between once, just before the nth write of the mover that uses it: a
// newer mover, or the application, acting between two steps of this one.
type interloper struct {
	*MemShared
	mu      sync.Mutex
	n, at   int
	between func()
	what    string
}

func (s *interloper) hit(what string) {
	s.mu.Lock()
	s.at++
	now := s.at == s.n
	if now {
		s.what = what
	}
	s.mu.Unlock()
	if now {
		s.between()
	}
}

func (s *interloper) SetFence(ctx context.Context, migration string, owners []string, shard int, state FenceState, token uint64) error {
	s.hit("fence " + state.String())
	return s.MemShared.SetFence(ctx, migration, owners, shard, state, token)
}

func (s *interloper) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []Cursor, limit int) ([]Cursor, int, bool, error) {
	s.hit("copy chunk")
	return s.MemShared.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
}

func (s *interloper) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	s.hit("replay")
	return s.MemShared.Replay(ctx, migration, token, owners, from, to, limit)
}

func (s *interloper) ClearChanges(ctx context.Context, migration string, token uint64, owners []string, shard int) error {
	s.hit("clear changes")
	return s.MemShared.ClearChanges(ctx, migration, token, owners, shard)
}

func (s *interloper) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	s.hit("delete chunk")
	return s.MemShared.DeleteChunk(ctx, migration, token, owners, shard, limit)
}

func (s *interloper) KeepSums(ctx context.Context, migration string, token uint64, owners []string, shard int, sums []Sum) error {
	s.hit("keep sums")
	return s.MemShared.KeepSums(ctx, migration, token, owners, shard, sums)
}

func (s *interloper) SetMarks(ctx context.Context, migration string, owners []string, m Mark, token uint64) error {
	s.hit("marks")
	return s.MemShared.SetMarks(ctx, migration, owners, m, token)
}

// TestSharedInterlopersAtEveryStep: before each write of a mover in turn, the application
// inserts, updates and deletes rows of owners being moved, and a newer mover takes the
// migration over and moves everything. The first mover then goes on: whatever it tries is
// refused, and every acknowledged change is where it belongs, once.
func TestSharedInterlopersAtEveryStep(t *testing.T) {
	ctx := context.Background()
	count := &interloper{MemShared: newSharedWorld(t, 12, 6, 2, 3).store, between: func() {}}
	probe := newSharedWorld(t, 12, 6, 2, 3)
	count.MemShared = probe.store
	require.NoError(t, probe.shared(t, "grow", count, SharedOptions{Token: 1, ChunkRows: 4, Group: 3}).Run(ctx, slices.Values(probe.owners)))
	steps := count.at
	require.Greater(t, steps, 10)
	for n := 1; n <= steps; n++ {
		w := newSharedWorld(t, 12, 6, 2, 3)
		// An owner between the fence and the commit refuses the application: those writes
		// are not acknowledged.
		app := w.shared(t, "grow", w.store, SharedOptions{FenceWait: time.Millisecond})
		next := 1000
		act := func() {
			for i, o := range w.owners {
				next++
				if err := w.write(ctx, app, o, next); err != nil {
					require.ErrorIs(t, err, ErrFenced)
				}
				k := i % 6
				err := app.Do(ctx, o, func(tx *MemTx, _ int) error {
					if i%2 == 0 {
						tx.Put(k, fmt.Sprint("updated ", next))
					} else {
						tx.Delete(k)
					}
					return nil
				})
				switch {
				case err != nil:
					require.ErrorIs(t, err, ErrFenced)
				case i%2 == 0:
					w.acked[o][k] = fmt.Sprint("updated ", next)
				default:
					delete(w.acked[o], k)
				}
			}
		}
		st := &interloper{MemShared: w.store, n: n}
		st.between = func() {
			act()
			newer := w.shared(t, "grow", w.store, SharedOptions{Token: 2, ChunkRows: 4, Group: 3})
			require.NoError(t, newer.Run(ctx, slices.Values(w.owners)), "the newer mover, before write %d", n)
			act()
		}
		old := w.shared(t, "grow", st, SharedOptions{Token: 1, ChunkRows: 4, Group: 3})
		err := old.Run(ctx, slices.Values(w.owners))
		require.ErrorIs(t, err, ErrFenced, "write %d (%s)", n, st.what)
		w.check(t, true)
	}
	t.Logf("a newer mover and the application acted before each of %d writes", steps)
}
