package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// onCopied runs hook once, before the first SetMark of Copied through it once armed: after the
// batch counted an owner's rows on both shards, before it deletes the old copy.
type onCopied struct {
	*sqlstore.Store
	armed atomic.Bool
	hook  func()
}

func (o *onCopied) SetMark(ctx context.Context, migration, owner string, m rebalance.Mark) error {
	if m == rebalance.Copied && o.armed.CompareAndSwap(true, false) {
		o.hook()
	}
	return o.Store.SetMark(ctx, migration, owner, m)
}

// TestTwoRepinValuesOfOneID: one process makes two Repins of one ID over its Store and the
// saved directory, the application's (requests go through its Do) and an admin handler's (which
// pins a hot user with Move). The application's value checked the placement a moment ago.
// Between the batch's count of user u's rows and its deletion of the old copy, a request
// writes a message of u through the application's value: it routed by its own directory,
// outside the batch and its locks, and wrote on u's old shard; the deletion then took the
// acknowledged message. That was the code before: values of one ID in a process share the
// batch under way, so the request waits for u's move and writes on the new shard, and the
// application's value, whose directory lacks the pin, is refused afterwards (ErrPlacement)
// instead of writing where no router reads.
func TestTwoRepinValuesOfOneID(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 6), 4)
		u := w.users[0]
		to := (w.before.Locate(u) + 1) % 3
		p := e.open(t, 2)
		hooked := &onCopied{Store: p.store}
		app, _ := newRepin(t, "pin", hooked, 3, nil)
		op, d := newRepin(t, "pin", hooked, 3, nil)
		if err := app.Do(ctx, w.users[1], func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		wrote := make(chan error, 1)
		hooked.hook = func() {
			go func() {
				wrote <- app.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, p, w, u, s) })
			}()
			select { // the fixed code holds the request until u has moved
			case err := <-wrote:
				wrote <- err
			case <-time.After(300 * time.Millisecond):
			}
		}
		hooked.armed.Store(true)
		if err := op.Move(ctx, map[string]int{u: to}); err != nil {
			t.Fatal("the admin's Move:", err)
		}
		if err := <-wrote; err != nil {
			t.Fatal("the request during the batch:", err)
		}
		if err := app.Do(ctx, u, func(s int) error { return insertAcked(ctx, e, p, w, u, s) }); !errors.Is(err, rebalance.ErrPlacement) {
			t.Errorf("a request through the application's value after the batch, its directory without the pin: %v, want ErrPlacement", err)
		}
		if v := w.verify(t, admin, d); v.lost+v.misplaced != 0 {
			t.Errorf("against the directory pinned (served): %v", v)
		}
	})
}

// inBackgroundFor runs f in a goroutine of wg and waits for it up to 300 ms: inside a
// batch's step, a write that shares the batch waits for it.
func inBackgroundFor(wg *sync.WaitGroup, f func()) {
	done := make(chan struct{})
	wg.Go(func() { defer close(done); f() })
	select {
	case <-done:
	case <-time.After(300 * time.Millisecond):
	}
}

// TestRepinAdminOverAnotherStoreValue: the application routes through a Repin over its
// Store; an admin handler of the same process makes its own Repin of the same ID and the same
// saved directory over another Store value of the same databases (a wrapper that
// instruments it, and a second sqlstore.New), and pins a user. At a step of the batch the
// application (its placement checked a moment ago) updates a message of the user written
// before the move, or inserts one. Both Repins share the batch (the Stores name one
// control database): every write the application had acknowledged is on the user's shard
// under the pinned directory. Before, the application's Repin did not see the batch and
// routed by its directory for up to PlacementRecheck: an UPDATE after the deletion changed
// no row and returned nil, an insert after the finish landed on the old shard.
func TestRepinAdminOverAnotherStoreValue(t *testing.T) {
	for _, c := range []struct {
		name, step     string
		after          bool
		insert, update bool
	}{
		{"update after the deletion", "DeleteChecked", true, false, true},
		{"update and insert after the finish", "RecordFinished", true, true, true},
	} {
		for _, second := range []bool{false, true} {
			name := c.name + map[bool]string{false: ", a wrapper", true: ", a second Store"}[second]
			t.Run(name, func(t *testing.T) {
				forEngines(t, 3, func(t *testing.T, e *engine) {
					ctx := context.Background()
					admin := e.open(t, 2)
					w := newWorld(t, e, 3, 3)
					w.load(t, admin, span(1, 6), 4)
					u := w.users[0]
					to := (w.before.Locate(u) + 1) % 3
					p := e.open(t, 4)
					app, _ := newRepin(t, "pin2", p.store, 3, nil)
					l := newProbeLedger()
					early, err := l.insert(ctx, p, app.Do, u)
					if err != nil {
						t.Fatal(err)
					}
					var bg sync.WaitGroup
					var insErr, updErr error
					var updated int64
					under := p.store
					if second {
						under = e.open(t, 2).store
					}
					hook := newProbeHook(under, c.step, u, c.after, func() {
						inBackgroundFor(&bg, func() {
							if c.update {
								updated, updErr = l.update(ctx, p, app.Do, early)
							}
							if c.insert {
								_, insErr = l.insert(ctx, p, app.Do, u)
							}
						})
					})
					op, d := newRepin(t, "pin2", hook, 3, nil)
					moveErr := op.Move(ctx, map[string]int{u: to})
					bg.Wait()
					t.Logf("Move: %v; during the batch, insert: %v; update: %v (%d rows affected)", moveErr, insErr, updErr, updated)
					if moveErr != nil {
						t.Fatalf("Move: %v", moveErr)
					}
					if bad := l.check(t, admin, d); len(bad) > 0 {
						t.Errorf("the admin's Move returned nil, and %d acknowledged writes are not on their user's shard under the pinned directory: %q", len(bad), bad)
					}
					if v := w.verify(t, admin, d); v.lost+v.duplicated+v.misplaced != 0 {
						t.Errorf("loaded rows: %v", v)
					}
				})
			})
		}
	}
}

// TestRepinResizeAdminOverAnotherStoreValue: as TestRepinAdminOverAnotherStoreValue,
// for Resize: an operator drained shard 2 of 3 and resizes the directory to 2 shards through
// a Repin over another Store value of the process (here a wrapper); right after the resize's
// batch recorded its finish, the application, through its own Repin (its placement checked
// a moment ago), writes the first message of a new user whom its directory of 3 shards
// places on shard 2. Resize returns nil.
func TestRepinResizeAdminOverAnotherStoreValue(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 2)
		w.load(t, admin, span(1, 12), 3)
		p := e.open(t, 4)
		two, _ := shard.NewJump(2)
		// The drain and the save, before the application starts.
		op0, d0 := newRepin(t, "resize2", p.store, 3, nil)
		if err := op0.Drain(ctx, 2, slices.Values(w.users), 4, two.Locate); err != nil {
			t.Fatal(err)
		}
		saved, err := d0.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		load := func(st rebalance.Store) (*rebalance.Repin, *shard.Directory) {
			fallback, _ := shard.NewJump(3)
			rule, _ := shard.NewJump(3)
			d := shard.NewDirectory(fallback, nil)
			if err := d.UnmarshalText(saved); err != nil {
				t.Fatal(err)
			}
			r, err := rebalance.NewRepin("resize2", d, rule, st, rebalance.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return r, d
		}
		app, appDir := load(p.store)
		l := newProbeLedger()
		var newUser string
		for u := 100; ; u++ {
			if s := strconv.Itoa(u); appDir.Locate(s) == 2 {
				newUser = s
				break
			}
		}
		if _, err := l.insert(ctx, p, app.Do, w.users[0]); err != nil {
			t.Fatal(err)
		}
		var insErr error
		var bg sync.WaitGroup
		hook := newProbeHook(p.store, "RecordFinished", "", true, func() {
			inBackgroundFor(&bg, func() { _, insErr = l.insert(ctx, p, app.Do, newUser) })
		})
		op, d := load(hook)
		resizeErr := op.Resize(ctx, 2)
		bg.Wait()
		t.Logf("Resize: %v; the new user's first write after the finish: %v", resizeErr, insErr)
		if resizeErr != nil {
			t.Fatalf("Resize: %v", resizeErr)
		}
		if bad := l.check(t, admin, d); len(bad) > 0 {
			t.Errorf("Resize returned nil, and %d acknowledged writes are not on their user's shard under the resized directory: %q", len(bad), bad)
		}
	})
}

// TestRepinBeforeInit: a Repin over a Store before its Init would key what it shares with the
// ID's other values by the Store value, not the databases (unknown until Init reads them):
// NewRepin refuses it.
func TestRepinBeforeInit(t *testing.T) {
	e := newSQLite(t, 2)
	p := e.open(t, 2)
	st, err := sqlstore.New(sqlstore.SQLite, p.dbs, p.ctl, []sqlstore.TableSpec{messages}, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fallback, _ := shard.NewJump(2)
	rule, _ := shard.NewJump(2)
	_, err = rebalance.NewRepin("pin", shard.NewDirectory(fallback, nil), rule, st, rebalance.Options{})
	if !errors.Is(err, rebalance.ErrConfig) || !strings.Contains(err.Error(), "call Init first") {
		t.Fatalf("NewRepin over a Store before Init: %v; want ErrConfig naming Init", err)
	}
	if err := st.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st.Identity() == "" || st.Identity() != p.store.Identity() {
		t.Fatalf("after Init: identity %q, the other Store's %q: want one, not empty", st.Identity(), p.store.Identity())
	}
	if _, err := rebalance.NewRepin("pin", shard.NewDirectory(fallback, nil), rule, st, rebalance.Options{}); err != nil {
		t.Fatalf("NewRepin after Init: %v", err)
	}
}
