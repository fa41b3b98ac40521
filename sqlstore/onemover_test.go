package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// These tests start movers the way operators and networks do by mistake, on SQLite and
// PostgreSQL: two at once with the default options, an old one that wakes up after a newer
// one committed, and two in-process Migrations of one ID. Each ends with every acknowledged
// row found once, on its owner's shard.

// TestTwoMoversAtOnce: two movers with the default options (election epoch 0), each a
// process of its own, started at once while the application writes and reads: one runs, the
// other is refused with an error that names it, and nothing is lost.
func TestTwoMoversAtOnce(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		for trial := range 3 {
			id := fmt.Sprintf("grow%d", trial)
			admin := e.open(t, 2)
			w := newWorld(t, e, 2, 4)
			w.load(t, admin, span(1000*trial+1, 40), 30)
			stop := w.traffic(t, id, 2, time.Millisecond)
			movers := []*rebalance.Shared[*sql.Tx]{
				w.shared(t, e.open(t, 2), id, rebalance.SharedOptions{Mover: "mover-a", ChunkRows: 7}),
				w.shared(t, e.open(t, 2), id, rebalance.SharedOptions{Mover: "mover-b", ChunkRows: 7}),
			}
			errs := make([]error, 2)
			var start, ran sync.WaitGroup
			start.Add(1)
			for i, m := range movers {
				ran.Go(func() {
					start.Wait()
					errs[i] = m.Run(context.Background(), slices.Values(w.users))
				})
			}
			start.Done()
			ran.Wait()
			if _, err := stop(); err != nil {
				t.Fatal(err)
			}
			refused := 0
			for i, err := range errs {
				if err == nil {
					continue
				}
				var me *rebalance.MoverError
				if !errors.As(err, &me) || !strings.Contains(err.Error(), "a mover already runs it: mover-"+"ab"[1-i:2-i]) {
					t.Fatalf("trial %d: mover %d: %v, want a MoverError naming the other", trial, i, err)
				}
				refused++
			}
			if refused != 1 {
				t.Fatalf("trial %d: %d movers refused, want 1: %v", trial, refused, errs)
			}
			if err := movers[0].Finish(context.Background(), slices.Values(w.users)); err != nil {
				t.Fatal(err)
			}
			v := w.requireClean(t, admin, w.after)
			t.Logf("trial %d: %v", trial, v)
			clearWorld(t, w, admin, id)
		}
	})
}

// clearWorld moves w's users back to w.before (finishing migration id+"-back", so that the
// next migration starts where the data is) and deletes every message, for the next case.
func clearWorld(t *testing.T, w *world, p *proc, id string) {
	t.Helper()
	moveBack(t, w, p, id+"-back")
	for _, db := range p.dbs {
		if _, err := db.Exec("DELETE FROM messages"); err != nil {
			t.Fatal(err)
		}
	}
}

// frozenStore stops every call of one mover's store once it has fenced an old shard moved,
// until thawed: a stalled machine (a long GC pause, a VM migrated) stops every goroutine of
// the process, its lease renewals among them.
type frozenStore struct {
	*sqlstore.Store
	mu     sync.Mutex
	frozen chan struct{} // closed by thaw
	hit    chan struct{} // closed when it froze
	done   bool
}

func newFrozenStore(s *sqlstore.Store) *frozenStore {
	return &frozenStore{Store: s, frozen: make(chan struct{}), hit: make(chan struct{})}
}

func (f *frozenStore) wait() {
	f.mu.Lock()
	froze := f.done
	f.mu.Unlock()
	if froze {
		<-f.frozen
	}
}

func (f *frozenStore) Renew(ctx context.Context, migration string, token uint64, lease time.Duration) error {
	f.wait()
	return f.Store.Renew(ctx, migration, token, lease)
}

func (f *frozenStore) SetFence(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) error {
	f.wait()
	err := f.Store.SetFence(ctx, migration, owners, shard, state, token)
	f.mu.Lock()
	if state == rebalance.Moved && !f.done {
		f.done = true
		close(f.hit)
	}
	f.mu.Unlock()
	return err
}

func (f *frozenStore) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	f.wait()
	return f.Store.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
}

func (f *frozenStore) Counts(ctx context.Context, owners []string, shard int) ([]int64, error) {
	f.wait()
	return f.Store.Counts(ctx, owners, shard)
}

// TestReplacedMoverChangesNothing: mover X fences its group's old shard moved and stalls;
// mover Y takes the migration over (a newer election epoch at once, or the same epoch once
// X's lease ran out), moves everything, deletes the old copies and finishes, and the
// application writes to the new shards; X wakes up and finds counts that differ, and would
// copy the owners' empty old shards over their new ones. Every write it tries is refused,
// and nothing is lost.
func TestReplacedMoverChangesNothing(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		for _, tc := range []struct {
			name   string
			x, y   rebalance.SharedOptions
			expiry time.Duration
		}{
			{"newer epoch", rebalance.SharedOptions{Token: 1, Mover: "x"}, rebalance.SharedOptions{Token: 2, Mover: "y"}, 0},
			{"same epoch", rebalance.SharedOptions{Mover: "x", Lease: 300 * time.Millisecond}, rebalance.SharedOptions{Mover: "y"}, 400 * time.Millisecond},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				id := "grow-" + strings.ReplaceAll(tc.name, " ", "-")
				admin := e.open(t, 2)
				w := newWorld(t, e, 2, 3)
				w.load(t, admin, w.moving(1, 6), 51)
				fx := newFrozenStore(e.open(t, 2).store)
				x, err := rebalance.NewShared(id, w.before, w.after, rebalance.SharedStore[*sql.Tx](fx), tc.x)
				if err != nil {
					t.Fatal(err)
				}
				errX := make(chan error, 1)
				go func() { errX <- x.Run(ctx, slices.Values(w.users)) }()
				select {
				case <-fx.hit:
				case err := <-errX:
					t.Fatalf("mover x ended before its fence: %v", err)
				}
				time.Sleep(tc.expiry)
				y := w.shared(t, e.open(t, 2), id, tc.y)
				if err := y.Run(ctx, slices.Values(w.users)); err != nil {
					t.Fatal(err)
				}
				if err := y.Finish(ctx, slices.Values(w.users)); err != nil {
					t.Fatal(err)
				}
				for _, u := range w.users {
					if err := w.write(ctx, y, u); err != nil {
						t.Fatal(err)
					}
				}
				w.requireClean(t, admin, w.after)
				close(fx.frozen)
				err = <-errX
				if !isFenced(err) || !strings.Contains(err.Error(), "another mover took over") {
					t.Fatalf("the replaced mover: %v, want ErrFenced", err)
				}
				v := w.requireClean(t, admin, w.after)
				t.Logf("replaced mover: %v; %v", err, v)
				clearWorld(t, w, admin, id)
			})
		}
	})
}

// plainStore hides everything of a Store but rebalance.Store: a Migration over it claims
// nothing, so two of one ID can run at once.
type plainStore struct{ rebalance.Store }

// TestMigrationTwins: two Migrations of one ID (the mover started twice). Over the
// sqlstore (a MoverLock) the second Run is refused while the first runs. Over a store
// without claims, forced to the worst interleaving of two processes (both read the owner
// unmoved, the second's Copy after the first deleted the old copy) Copy refuses to copy a
// source that is gone; and run at once 100 times in one process, no row is lost.
func TestMigrationTwins(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 1, 2)
		users := w.moving(1, 8)
		w.load(t, admin, users, 4)

		t.Run("claimed", func(t *testing.T) {
			p := e.open(t, 2)
			hold := &holdCopy{Store: p.store, at: make(chan struct{}), release: make(chan struct{})}
			first, err := rebalance.New("claimed", w.before, w.after, hold, rebalance.Options{Mover: "first"})
			if err != nil {
				t.Fatal(err)
			}
			second, err := rebalance.New("claimed", w.before, w.after, e.open(t, 2).store, rebalance.Options{Mover: "second"})
			if err != nil {
				t.Fatal(err)
			}
			errFirst := make(chan error, 1)
			go func() { errFirst <- first.Run(ctx, slices.Values(w.users)) }()
			<-hold.at
			err = second.Run(ctx, slices.Values(w.users))
			if !errors.Is(err, rebalance.ErrMoverRunning) || !strings.Contains(err.Error(), "a mover already runs it: first") {
				t.Fatalf("second Run: %v, want ErrMoverRunning naming the first", err)
			}
			close(hold.release)
			if err := <-errFirst; err != nil {
				t.Fatal(err)
			}
			w.requireClean(t, admin, w.after)
			if err := first.Finish(ctx, slices.Values(w.users)); err != nil {
				t.Fatal(err) // the shards serve it until it is finished
			}
			back := shrinkOf(t, w)
			m, err := rebalance.New("claimed-back", back.before, back.after, p.store, rebalance.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Run(ctx, slices.Values(w.users)); err != nil {
				t.Fatal(err)
			}
			w.requireClean(t, admin, w.before)
		})

		t.Run("forced", func(t *testing.T) {
			// Migrations of one ID in one process share their locks and never interleave;
			// the test plays the twin of another process: it reads the owner Unmoved before
			// the first copies, and copies after the first deleted the old copy.
			u := w.users[0]
			st := &twinOrder{Store: e.open(t, 2).store, secondRead: make(chan struct{}), firstDeleted: make(chan struct{})}
			a, err := rebalance.New("forced", w.before, w.after, plainStore{st}, rebalance.Options{})
			if err != nil {
				t.Fatal(err)
			}
			errA := make(chan error, 1)
			go func() { errA <- a.Run(ctx, slices.Values([]string{u})) }()
			if mark, err := st.Mark(ctx, "forced", u); err != nil || mark != rebalance.Unmoved {
				t.Fatalf("the twin read %v (%v), want unmoved", mark, err)
			}
			for copies := 0; copies == 0; time.Sleep(time.Millisecond) { // the first copies first
				st.mu.Lock()
				copies = st.copies
				st.mu.Unlock()
			}
			if err := st.Copy(ctx, u, w.before.Locate(u), w.after.Locate(u)); !errors.Is(err, rebalance.ErrSourceEmpty) {
				t.Fatalf("the twin's Copy after the first deleted the old copy: %v, want ErrSourceEmpty", err)
			}
			if err := <-errA; err != nil {
				t.Fatal(err)
			}
			b, err := rebalance.New("forced", w.before, w.after, plainStore{st}, rebalance.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Run(ctx, slices.Values([]string{u})); err != nil {
				t.Fatal(err)
			}
			if st.refused.Load() == 0 {
				t.Fatal("the second Copy was not refused: the interleaving was not forced")
			}
			n, err := admin.store.Count(ctx, u, w.after.Locate(u))
			if err != nil || n != w.acked[u].Load() {
				t.Fatalf("user %s: %d rows on its new shard (%v), want %d", u, n, err, w.acked[u].Load())
			}
			w.users = w.users[1:]
			back := shrinkOf(t, w)
			m, err := rebalance.New("forced-back", back.before, back.after, plainStore{admin.store}, rebalance.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Run(ctx, slices.Values([]string{u})); err != nil {
				t.Fatal(err)
			}
			w.users = append(w.users, u)
			w.requireClean(t, admin, w.before)
		})

		t.Run("random", func(t *testing.T) {
			p, q := e.open(t, 2), e.open(t, 2)
			back := shrinkOf(t, w)
			for trial := range 100 {
				id := "random" + strconv.Itoa(trial)
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for i, s := range []*sqlstore.Store{p.store, q.store} {
					m, err := rebalance.New(id, w.before, w.after, plainStore{s}, rebalance.Options{Concurrency: 2})
					if err != nil {
						t.Fatal(err)
					}
					wg.Go(func() { errs[i] = m.Run(ctx, slices.Values(w.users)) })
				}
				wg.Wait()
				for _, err := range errs {
					// A twin may stop on a copy that does not match its source, with nothing
					// deleted: a retry ends the move. No error may hide a loss.
					if err != nil && !errors.Is(err, rebalance.ErrCopyMismatch) {
						t.Fatalf("trial %d: %v", trial, err)
					}
				}
				m, err := rebalance.New(id, w.before, w.after, plainStore{p.store}, rebalance.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Run(ctx, slices.Values(w.users)); err != nil {
					t.Fatalf("trial %d: the retry: %v", trial, err)
				}
				if v := w.verify(t, admin, w.after); v.lost+v.duplicated+v.misplaced != 0 {
					t.Fatalf("trial %d: %v (%v)", trial, v, errs)
				}
				mb, err := rebalance.New(id+"-back", back.before, back.after, plainStore{p.store}, rebalance.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := mb.Run(ctx, slices.Values(w.users)); err != nil {
					t.Fatal(err)
				}
			}
			w.requireClean(t, admin, w.before)
		})
	})
}

// holdCopy holds the first Copy until release is closed, after closing at.
type holdCopy struct {
	*sqlstore.Store
	at, release chan struct{}
	once        sync.Once
}

func (h *holdCopy) Copy(ctx context.Context, owner string, from, to int) error {
	h.once.Do(func() { close(h.at); <-h.release })
	return h.Store.Copy(ctx, owner, from, to)
}

// twinOrder forces two Migrations of one owner to the worst order: the second reads the
// owner's mark (Unmoved) before the first copies, and copies after the first deleted the old
// copy.
type twinOrder struct {
	*sqlstore.Store
	marks, copies            int
	mu                       sync.Mutex
	secondRead, firstDeleted chan struct{}
	refused                  atomicInt
}

type atomicInt struct {
	mu sync.Mutex
	n  int
}

func (a *atomicInt) Add(d int) { a.mu.Lock(); a.n += d; a.mu.Unlock() }
func (a *atomicInt) Load() int { a.mu.Lock(); defer a.mu.Unlock(); return a.n }

func (s *twinOrder) Mark(ctx context.Context, migration, owner string) (rebalance.Mark, error) {
	m, err := s.Store.Mark(ctx, migration, owner)
	s.mu.Lock()
	s.marks++
	if s.marks == 2 {
		close(s.secondRead)
	}
	s.mu.Unlock()
	return m, err
}

func (s *twinOrder) Copy(ctx context.Context, owner string, from, to int) error {
	s.mu.Lock()
	s.copies++
	n := s.copies
	s.mu.Unlock()
	switch n {
	case 1:
		<-s.secondRead
	case 2:
		<-s.firstDeleted
	}
	err := s.Store.Copy(ctx, owner, from, to)
	if errors.Is(err, rebalance.ErrSourceEmpty) {
		s.refused.Add(1)
	}
	return err
}

func (s *twinOrder) Delete(ctx context.Context, owner string, shard int) error {
	return s.deleted(s.Store.Delete(ctx, owner, shard))
}

func (s *twinOrder) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	return s.deleted(s.Store.DeleteChecked(ctx, migration, owner, shard))
}

// deleted lets the second twin go on once the first deleted an old copy.
func (s *twinOrder) deleted(err error) error {
	select {
	case <-s.firstDeleted:
	default:
		close(s.firstDeleted)
	}
	return err
}

// TestWrongPlacementRefused: a process routing by sharders the shards do not serve writes an
// owner onto a shard that never held it and has no fence for it: the shard refuses, and
// nothing is written there.
func TestWrongPlacementRefused(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, span(1, 30), 2)
		m := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		// The same migration ID, routed by 4 shards rather than 3.
		four, _ := shard.NewJump(4)
		four2, _ := shard.NewJump(4)
		wrong, err := rebalance.NewShared("grow", four, four2, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refused := 0
		for _, u := range w.users {
			s := four.Locate(u)
			if s == w.before.Locate(u) || s == w.after.Locate(u) {
				continue
			}
			err := wrong.Do(ctx, u, func(tx *sql.Tx, _ int) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO messages VALUES ($1, $2, 0, 'stranded', 0)", nextID.Add(1), u)
				return err
			})
			var pe *rebalance.PlacementError
			if !errors.As(err, &pe) || pe.Shard != s || pe.Served != m.Placement() {
				t.Fatalf("user %s routed to shard %d by a wrong placement: %v, want a PlacementError", u, s, err)
			}
			refused++
		}
		if refused == 0 {
			t.Fatal("no user routed to a shard that never held it")
		}
		w.requireClean(t, admin, w.after)
	})
}

// TestTwoMigrationsAtOnce: two movers of two different migrations that both start where the
// last one ended (grow to 4 and grow to 5 after 2 -> 3), started at once: the control
// database lets one claim the shards and refuses the other before it claims any, so the one
// that runs is not locked out of half the shards, and nothing is lost.
func TestTwoMigrationsAtOnce(t *testing.T) {
	forEngines(t, 5, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, span(1, 40), 5)
		first := w.shared(t, e.open(t, 2), "grow-2-3", rebalance.SharedOptions{})
		if err := first.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := first.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		three, _ := shard.NewJump(3)
		var movers []*rebalance.Shared[*sql.Tx]
		var afters []shard.Sharder
		for _, n := range []int{4, 5} {
			after, _ := shard.NewJump(n)
			m, err := rebalance.NewShared(fmt.Sprintf("grow-3-%d", n), three, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			movers, afters = append(movers, m), append(afters, after)
		}
		errs := make([]error, 2)
		var start, ran sync.WaitGroup
		start.Add(1)
		for i, m := range movers {
			ran.Go(func() { start.Wait(); errs[i] = m.Run(ctx, slices.Values(w.users)) })
		}
		start.Done()
		ran.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil:
				won = i
			case !errors.Is(err, rebalance.ErrPlacement):
				t.Fatalf("mover %d: %v, want nil or ErrPlacement", i, err)
			}
		}
		if won < 0 || errs[1-won] == nil {
			t.Fatalf("want one mover refused: %v", errs)
		}
		var pe *rebalance.PlacementError
		if !errors.As(errs[1-won], &pe) || pe.Shard != -1 {
			t.Fatalf("the refusal came from a shard, not the control database: %v", errs[1-won])
		}
		if err := movers[won].Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, afters[won])
		t.Logf("mover %d ran; the other: %v", won, errs[1-won])
	})
}
