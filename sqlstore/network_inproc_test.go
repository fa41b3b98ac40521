package sqlstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// inprocTraffic writes through an in-process Migration's or Repin's Do, as the application
// of the process that moves: inserts, and updates of the messages it wrote, each to a new
// text "v<n>".
type inprocTraffic struct {
	wg       sync.WaitGroup
	done     atomic.Bool
	version  atomic.Int64
	mu       sync.Mutex
	last     map[int64]int64 // message -> its last acknowledged version (0: as inserted)
	user     map[int64]string
	ops      int
	errs     int
	firstErr error
}

// doFunc is the Do of a Migration or a Repin.
type doFunc func(ctx context.Context, owner string, fn func(shard int) error) error

// startInprocTraffic writes with goroutines through do, pace apart, until stop.
func startInprocTraffic(w *world, p *proc, do doFunc, goroutines int, pace time.Duration) *inprocTraffic {
	tr := &inprocTraffic{last: map[int64]int64{}, user: map[int64]string{}}
	for g := range goroutines {
		tr.wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			ctx := context.Background()
			var mine []int64
			for !tr.done.Load() {
				var id, version int64
				var user string
				if len(mine) > 0 && r.IntN(2) == 0 {
					id = mine[r.IntN(len(mine))]
					version = tr.version.Add(1)
					tr.mu.Lock()
					user = tr.user[id]
					tr.mu.Unlock()
				} else {
					id, user = nextID.Add(1), w.users[r.IntN(len(w.users))]
				}
				uid, _ := strconv.ParseInt(user, 10, 64)
				err := do(ctx, user, func(s int) error {
					var err error
					if version == 0 {
						_, err = p.dbs[s].ExecContext(ctx, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $1, 'v0', 4)", id, uid)
					} else {
						_, err = p.dbs[s].ExecContext(ctx, "UPDATE messages SET message = $3 WHERE id = $1 AND user_id = $2", id, uid, "v"+strconv.FormatInt(version, 10))
					}
					return err
				})
				tr.mu.Lock()
				if err != nil {
					tr.errs++
					if tr.firstErr == nil {
						tr.firstErr = err
					}
				} else {
					tr.ops++
					if version == 0 {
						mine = append(mine, id)
						tr.user[id] = user
						w.mu.Lock()
						w.ledger[id] = uid
						w.mu.Unlock()
					}
					tr.last[id] = max(tr.last[id], version)
				}
				tr.mu.Unlock()
				time.Sleep(pace)
			}
		})
	}
	return tr
}

func (tr *inprocTraffic) stop() {
	tr.done.Store(true)
	tr.wg.Wait()
}

// stale counts the messages written by tr whose text on their user's shard under s is older
// than their last acknowledged write (an update lost), or missing.
func (tr *inprocTraffic) stale(t *testing.T, admin *proc, s shard.Sharder) (stale int, first string) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for id, want := range tr.last {
		var text string
		err := admin.dbs[s.Locate(tr.user[id])].QueryRow("SELECT message FROM messages WHERE id = $1", id).Scan(&text)
		got, perr := strconv.ParseInt(text[min(1, len(text)):], 10, 64)
		if err != nil || perr != nil || got < want {
			if stale++; first == "" {
				first = fmt.Sprintf("message %d of user %s: %q (%v), last acknowledged v%d", id, tr.user[id], text, err, want)
			}
		}
	}
	return stale, first
}

// again calls f until it returns nil, up to 3 s (a Lazy Do's claim whose release was lost
// holds for 1 s), and returns the errors it returned.
func again(what string, f func() error) (errs []error, ok bool) {
	for range 30 {
		err := f()
		if err == nil {
			return errs, true
		}
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
		time.Sleep(100 * time.Millisecond)
	}
	return errs, false
}

// TestInProcessAmbiguousCommitAtEveryPoint is TestAmbiguousCommitAtEveryPoint for the
// in-process Migration: each commit point of a Run and Finish (every COMMIT and every
// statement outside a transaction, of the claim, the binding, the copies, the sums kept, the
// marks and the checked deletions) fails once, after its commit landed (the answer lost) or
// before, while the application inserts and updates through Do in the same process (its own
// pools, which do not fail); in Lazy mode the application's Do moves owners too, over the
// mover's failing pools, so its moves fail at those points as well (a write whose Do failed
// is not acknowledged). The mover then runs again, with the same value, until Run returns
// nil, and Finish. Every acknowledged insert must be found once on its user's new shard, and
// every acknowledged update with its text or a later one.
func TestInProcessAmbiguousCommitAtEveryPoint(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e0 *engine) {
		for _, mode := range []rebalance.Mode{rebalance.Async, rebalance.Lazy} {
			t.Run(mode.String(), func(t *testing.T) { ambiguousInProcess(t, e0, mode) })
		}
	})
}

func ambiguousInProcess(t *testing.T, e0 *engine, mode rebalance.Mode) {
	ctx := context.Background()
	opts := rebalance.Options{Mode: mode, Mover: "net", Lease: 2 * time.Second}
	count := func(t *testing.T, after bool) int {
		e, _, w := ambiguitySetup(t, e0)
		f := &faults{record: true}
		store := openFaulty(t, e, 3, f).store
		f.arm(0, after) // after Init's points
		m, err := rebalance.New("count", w.before, w.after, store, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		logPoints(t, f)
		return f.count()
	}
	everyCommitPoint(t, count, func(t *testing.T, n int, after bool) string {
		e, admin, w := ambiguitySetup(t, e0)
		f := &faults{}
		faulty := openFaulty(t, e, 3, f)
		mover, err := rebalance.New("amb", w.before, w.after, faulty.store, opts)
		if err != nil {
			t.Fatal(err)
		}
		appProc := e.open(t, 4)
		appStore := appProc.store
		if mode == rebalance.Lazy {
			appStore = faulty.store
		}
		app, err := rebalance.New("amb", w.before, w.after, appStore, rebalance.Options{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		tr := startInprocTraffic(w, appProc, app.Do, 2, 2*time.Millisecond)
		time.Sleep(5 * time.Millisecond)
		f.arm(n, after)
		users := slices.Values(w.users)
		firstErr := mover.Run(ctx, users)
		var runErrs []error
		ran := firstErr == nil
		if !ran {
			runErrs, ran = again("run", func() error { return mover.Run(ctx, users) })
		}
		finErrs, fin := again("finish", func() error { return mover.Finish(ctx, users) })
		tr.stop()
		hit := f.hitWhat()
		f.arm(0, false)
		if hit == "" {
			return ""
		}
		v := w.verify(t, admin, w.after)
		stale, firstStale := tr.stale(t, admin, w.after)
		report(t, !ran || !fin || (tr.errs > 0 && mode == rebalance.Async) || stale > 0 || v.lost+v.duplicated+v.misplaced != 0,
			"fault at %s (after=%v): first Run: %v; runs again: ok=%v %v; finish: ok=%v %v; traffic: %d writes, %d errors (%v); %d updates stale (%s); %v",
			hit, after, firstErr, ran, runErrs, fin, finErrs, tr.ops, tr.errs, tr.firstErr, stale, firstStale, v)
		return hit
	})
}

// TestRepinAmbiguousCommitAtEveryPoint is TestInProcessAmbiguousCommitAtEveryPoint for a
// Repin, in two plays: a Move of four users, each pinned to the shard after its own; and a
// Drain of shard 2 (of 3) in batches of two, then Resize to 2 shards. The application
// inserts and updates through the same Repin's Do (a Repin is shared by the application and
// the operator in a process, so both go over the failing pools). Each step runs again
// until it returns nil; every acknowledged write must then be found where the directory
// places its user.
func TestRepinAmbiguousCommitAtEveryPoint(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e0 *engine) {
		ctx := context.Background()
		two, _ := shard.NewJump(2)
		type step struct {
			name string
			f    func(r *rebalance.Repin, users []string) error
		}
		plays := []struct {
			name  string
			steps []step
			check func(t *testing.T, d *shard.Directory, w *world)
		}{
			{"move", []step{{"move", func(r *rebalance.Repin, users []string) error { return r.Move(ctx, pinsOf(users)) }}},
				func(t *testing.T, d *shard.Directory, w *world) {
					for u, s := range pinsOf(w.users) {
						if got := d.Locate(u); got != s {
							t.Errorf("user %s: the directory places it on shard %d, pinned to %d", u, got, s)
						}
					}
				}},
			{"drain", []step{
				{"drain", func(r *rebalance.Repin, users []string) error {
					return r.Drain(ctx, 2, slices.Values(users), 2, two.Locate)
				}},
				{"resize", func(r *rebalance.Repin, _ []string) error { return r.Resize(ctx, 2) }}},
				func(t *testing.T, d *shard.Directory, w *world) {
					if d.Shards() != 2 {
						t.Errorf("the directory has %d shards, want 2", d.Shards())
					}
				}},
		}
		for _, play := range plays {
			t.Run(play.name, func(t *testing.T) {
				setup := func(t *testing.T) (*engine, *proc, *world) {
					e := newEngine(t, e0.dialect, 3, "", nil)
					admin := e.open(t, 2)
					w := newWorld(t, e, 3, 3)
					w.load(t, admin, span(1, 5), 9)
					w.load(t, admin, span(200, 1), 30)
					return e, admin, w
				}
				count := func(t *testing.T, after bool) int {
					e, _, w := setup(t)
					f := &faults{record: true}
					store := openFaulty(t, e, 3, f).store
					f.arm(0, after) // after Init's points
					r, _ := newRepin(t, "count", store, 3, nil)
					for _, s := range play.steps {
						if err := s.f(r, w.users); err != nil {
							t.Fatal(err)
						}
					}
					logPoints(t, f)
					return f.count()
				}
				everyCommitPoint(t, count, func(t *testing.T, n int, after bool) string {
					e, admin, w := setup(t)
					f := &faults{}
					r, d := newRepin(t, "amb", openFaulty(t, e, 3, f).store, 3, nil)
					tr := startInprocTraffic(w, e.open(t, 4), r.Do, 2, 2*time.Millisecond)
					time.Sleep(5 * time.Millisecond)
					f.arm(n, after)
					var errs []error
					ok := true
					for _, s := range play.steps {
						if err := s.f(r, w.users); err != nil {
							var more []error
							more, ok = again(s.name, func() error { return s.f(r, w.users) })
							errs = append(append(errs, err), more...)
						}
						if !ok {
							break
						}
					}
					tr.stop()
					hit := f.hitWhat()
					f.arm(0, false)
					if hit == "" {
						return ""
					}
					play.check(t, d, w)
					v := w.verify(t, admin, d)
					stale, firstStale := tr.stale(t, admin, d)
					report(t, !ok || stale > 0 || v.lost+v.duplicated+v.misplaced != 0,
						"fault at %s (after=%v): steps done: %v %v; traffic: %d writes, %d errors (%v); %d updates stale (%s); %v",
						hit, after, ok, errs, tr.ops, tr.errs, tr.firstErr, stale, firstStale, v)
					return hit
				})
			})
		}
	})
}

// pinsOf pins each user of 3 shards to the shard after the one Jump places it on.
func pinsOf(users []string) map[string]int {
	three, _ := shard.NewJump(3)
	pins := map[string]int{}
	for _, u := range users {
		pins[u] = (three.Locate(u) + 1) % 3
	}
	return pins
}
