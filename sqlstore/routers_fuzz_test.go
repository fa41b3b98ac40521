package sqlstore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
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

// FuzzInProcessRouters decodes its bytes into a sequence of operations of the
// application and of the operator over the in-process movers (Migration, and Repin once a
// migration finished) on SQLite: writes through Do that succeed, fail or panic after
// writing, or whose context is cancelled; Runs that stop after k store calls; Finish,
// twice; new values of the same ID, a restarted process; a migration back; Repin Move,
// Unpin and Drain, and the application's own Repin value of the operator's ID; and application writes, a twin Run or a Move by a Repin of another ID started from
// inside a mover's store call. It
// models every acknowledged write and checks, after each mover call that returned nil and
// at the end (once driven to a known state), every shard by SQL: each acknowledged row
// present once, on the shard the layout names, with its last acknowledged value;
// acknowledged deletes absent; writes of unknown outcome never duplicated nor misplaced.
func FuzzInProcessRouters(f *testing.F) {
	// Each seed is a list of operations, each its code (see play) and its arguments.
	for _, seed := range [][][]byte{
		{{0, 0, 0}, {1, 1, 0}, {2, 2, 0}, {3, 0}, {4, 0, 0}, {5, 0}, {3, 2}},                                                // writes, a Run, Finish
		{{4, 3, 0}, {6, 0}, {7}, {0, 4, 0}, {4, 0, 0}, {5, 0}, {5, 0}},                                                      // a crash, a new value resumes; Finish twice
		{{13, 2, 0, 4}, {4, 0, 0}, {13, 5, 1, 3}, {4, 7, 0}, {4, 0, 0}, {5, 0}},                                             // writes while the mover moves
		{{0, 1, 1}, {0, 2, 2}, {2, 3, 3}, {1, 4, 4}, {4, 5, 0}, {8}, {0, 5, 0}, {4, 0, 0}},                                  // failed writes, a restart
		{{4, 0, 0}, {5, 0}, {9}, {0, 0, 0}, {14, 3}, {4, 0, 0}, {5, 0}, {3, 0}},                                             // grow, then back with a twin
		{{4, 0, 0}, {5, 0}, {10}, {11, 8, 0}, {11, 82, 5}, {11, 0, 0}, {12, 1, 1, 0}},                                       // Repin Move, a crash, Drain
		{{4, 0, 0}, {5, 0}, {10}, {13, 3, 0, 5}, {12, 0, 0, 0}, {13, 1, 0, 1}, {12, 1, 2, 9}, {3, 5}},                       // Drain while owners are created
		{{0, 5, 0}, {4, 1, 1}, {5, 1}, {4, 0, 0}, {5, 0}},                                                                   // an owner left out of the list
		{{3, 0}, {6, 0}, {4, 0, 1}, {5, 1}, {0, 4, 0}, {3, 4}},                                                              // a new owner after another value finished
		{{6, 3}, {7}, {1, 0, 9}, {0, 2, 29}, {3, 0}, {4, 0, 0}, {5, 0}},                                                     // a Lazy value, Do cancelled at its store calls
		{{4, 5, 0}, {2, 0, 0}, {2, 1, 0}},                                                                                   // a crash before the mark Copied, then the owner's rows deleted
		{{4, 3, 0}, {9}, {0, 0, 0}, {1, 1, 0}, {4, 0, 0}, {5, 0}, {3, 0}},                                                   // back before the grow finished: refused until it is
		{{4, 3, 0}, {10}, {11, 8, 0}, {0, 0, 0}, {12, 1, 1, 0}, {3, 0}},                                                     // a Repin before the grow finished: refused until it is
		{{4, 0, 0}, {5, 0}, {10}, {15, 3, 9}, {11, 8, 0}, {15, 6, 1}, {12, 1, 1, 0}},                                        // a rival Repin started during a Move, then a Drain
		{{4, 1, 0}, {10}, {11, 164, 4}},                                                                                     // a Repin before the grow moved anything pins an owner where its rule places it: refused
		{{4, 0, 0}, {5, 0}, {10}, {11, 72, 0}, {10}, {16, 72, 5}, {16, 72, 0}, {0, 2, 0}},                                   // pin an owner; a new Repin unpins it, crashing, then again
		{{4, 1, 0}, {10}, {16, 0, 0}},                                                                                       // an Unpin of an owner without an entry before the grow moved anything: refused
		{{4, 0, 0}, {5, 0}, {10}, {7}, {0, 2, 0}, {13, 4, 0, 2}, {11, 8, 0}, {0, 4, 0}, {13, 4, 0, 4}, {11, 16, 0}, {3, 2}}, // the application's own Repin value writes during Moves
	} {
		f.Add(slices.Concat(seed...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := newRouterWorld(t)
		// A hang is a finding too (a lock that is never released): report it with the
		// operations and every goroutine rather than wait for the test's timeout.
		hang := time.AfterFunc(2*time.Minute, func() {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			panic(fmt.Sprintf("operations still running after 2 minutes:\n  %s\n%s", strings.Join(w.log, "\n  "), buf))
		})
		defer hang.Stop()
		w.play(data)
		w.settle()
		w.checkAll("the end", w.final(), nil, true)
	})
}

// The owners' layouts: a grow from two shards to three, and back.
const routerShards = 3

// routerRow is what the model knows of one row: whether it may be present, whether it may be
// absent, and the values it may hold.
type routerRow struct {
	owner           string
	present, absent bool
	vals            map[string]bool
}

// routerMig is one in-process migration: the application's value and the mover's.
type routerMig struct {
	id            string
	before, after shard.Sharder
	app, mover    *rebalance.Migration
	finished      bool // a Finish returned nil
}

// routerStore counts the store calls of the mover's Migration and, at a chosen call, runs a
// hook (an application write, a twin) or cancels the mover's context: a crash there.
type routerStore struct {
	*sqlstore.Store
	calls  atomic.Int64
	at     atomic.Int64 // the call that cancels, 0 for none
	hookAt atomic.Int64 // the call that runs hook, 0 for none
	mover  atomic.Bool  // whether a mover call runs: hooks run only then, and are joined after it
	cancel atomic.Pointer[context.CancelFunc]
	hook   atomic.Pointer[func()]
}

func (s *routerStore) step() {
	n := s.calls.Add(1)
	if n == s.hookAt.Load() && s.mover.Load() {
		if h := s.hook.Load(); h != nil {
			(*h)()
		}
	}
	if n == s.at.Load() {
		if c := s.cancel.Load(); c != nil {
			(*c)()
		}
	}
}

func (s *routerStore) Copy(ctx context.Context, owner string, from, to int) error {
	s.step()
	return s.Store.Copy(ctx, owner, from, to)
}

func (s *routerStore) Count(ctx context.Context, owner string, shard int) (int64, error) {
	s.step()
	return s.Store.Count(ctx, owner, shard)
}

func (s *routerStore) Delete(ctx context.Context, owner string, shard int) error {
	s.step()
	return s.Store.Delete(ctx, owner, shard)
}

func (s *routerStore) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	s.step()
	return s.Store.DeleteChecked(ctx, migration, owner, shard)
}

func (s *routerStore) KeepOldSum(ctx context.Context, migration, owner string, shard int, sum rebalance.Sum) error {
	s.step()
	return s.Store.KeepOldSum(ctx, migration, owner, shard, sum)
}

func (s *routerStore) Mark(ctx context.Context, migration, owner string) (rebalance.Mark, error) {
	s.step()
	return s.Store.Mark(ctx, migration, owner)
}

func (s *routerStore) SetMark(ctx context.Context, migration, owner string, m rebalance.Mark) error {
	s.step()
	return s.Store.SetMark(ctx, migration, owner, m)
}

type routerWorld struct {
	t      *testing.T
	e      *engine
	admin  *proc // reads the shards for the checks
	p      *proc // the current process
	st     *routerStore
	owners []string
	rows   map[int64]*routerRow
	ids    []int64 // rows in creation order, for the operations to pick
	log    []string

	cur   *routerMig
	prev  *routerMig // the migration before cur, if back started before it finished
	migs  int
	d     *shard.Directory // once a Repin started: the layout
	r     *rebalance.Repin
	appR  atomic.Pointer[rebalance.Repin] // the application's own value of r's ID, if it made one
	pins  int
	dirty bool // a Move or Drain failed: its batch is pending

	rivals     int         // Repins of other IDs started from a hook
	rivalMoved atomic.Bool // one of them returned nil: a finding

	bg     sync.WaitGroup // the application's writes and twins started from a hook
	bgMu   sync.Mutex     // guards the model while they run
	bgErrs []error
}

func newRouterWorld(t *testing.T) *routerWorld {
	e := newSQLite(t, routerShards)
	w := &routerWorld{t: t, e: e, admin: e.open(t, 2), rows: map[int64]*routerRow{}}
	w.p = e.open(t, 4)
	w.st = &routerStore{Store: w.p.store}
	before, _ := shard.NewJump(2)
	after, _ := shard.NewJump(3)
	// Three owners the grow moves and three it leaves; the first four hold two rows each.
	var moving, staying []string
	for u := 1; len(moving) < 3 || len(staying) < 3; u++ {
		o := strconv.Itoa(u)
		if before.Locate(o) != after.Locate(o) {
			if len(moving) < 3 {
				moving = append(moving, o)
			}
		} else if len(staying) < 3 {
			staying = append(staying, o)
		}
	}
	w.owners = []string{moving[0], staying[0], moving[1], staying[1], moving[2], staying[2]}
	for _, o := range w.owners[:4] {
		for k := range 2 {
			id := nextID.Add(1)
			w.exec(w.admin, before.Locate(o), "INSERT INTO messages (id, user_id, time, message, sender) VALUES (?, ?, ?, ?, ?)",
				id, o, id, fmt.Sprint("v0-", k), 7)
			w.rows[id] = &routerRow{owner: o, present: true, vals: map[string]bool{fmt.Sprint("v0-", k): true}}
			w.ids = append(w.ids, id)
		}
	}
	w.cur = w.newMig(before, after)
	return w
}

func (w *routerWorld) exec(p *proc, s int, q string, args ...any) {
	w.t.Helper()
	if _, err := p.dbs[s].Exec(q, args...); err != nil {
		w.t.Fatal(err)
	}
}

func (w *routerWorld) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

func (w *routerWorld) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%s\noperations:\n  %s", fmt.Sprintf(format, args...), strings.Join(w.log, "\n  "))
}

// newMig starts a migration of a new ID from before to after: the configuration names it.
func (w *routerWorld) newMig(before, after shard.Sharder) *routerMig {
	w.migs++
	m := &routerMig{id: fmt.Sprint("mig", w.migs), before: before, after: after}
	m.app = w.value(m)
	m.mover = m.app
	return m
}

func (w *routerWorld) value(m *routerMig) *rebalance.Migration {
	return w.valueWith(m, rebalance.Options{})
}

func (w *routerWorld) valueWith(m *routerMig, opts rebalance.Options) *rebalance.Migration {
	v, err := rebalance.New(m.id, m.before, m.after, w.st, opts)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

// do runs fn through the application's router: the Repin once one started, else the
// migration's application value.
func (w *routerWorld) do(ctx context.Context, owner string, fn func(int) error) error {
	if r := w.appR.Load(); r != nil {
		err := r.Do(ctx, owner, fn)
		if errors.Is(err, rebalance.ErrPlacement) {
			w.appR.CompareAndSwap(r, nil) // the application reloads: it uses the operator's value
		}
		return err
	}
	if w.r != nil {
		return w.r.Do(ctx, owner, fn)
	}
	return w.cur.app.Do(ctx, owner, fn)
}

// final is the layout every row must end on.
func (w *routerWorld) final() shard.Sharder {
	if w.d != nil {
		return w.d
	}
	return w.cur.after
}

// routerBytes hands out the fuzz bytes, zeros once they run out.
type routerBytes struct {
	b []byte
	i int
}

func (r *routerBytes) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

const routerOpsMax = 16

func (w *routerWorld) play(data []byte) {
	r := &routerBytes{b: data}
	for n := 0; n < routerOpsMax && r.i < len(data); n++ {
		switch op := r.next() % 17; op {
		case 0, 1, 2:
			w.write(op, r.next(), r.next(), nil)
		case 3:
			w.read(w.owners[r.next()%len(w.owners)])
		case 4:
			w.run(r.next(), r.next())
		case 5:
			w.finish(r.next())
		case 6:
			// A new value: Lazy (its Do moves the owner first) for odd a, and Run moving
			// two owners at once for a&2 (the order of their store calls then varies).
			if a := r.next(); w.r == nil {
				opts := rebalance.Options{Mode: rebalance.Mode(a & 1), Concurrency: 1 + (a>>1)&1}
				w.cur.mover = w.valueWith(w.cur, opts)
				w.logf("new mover value of %s, %v, concurrency %d", w.cur.id, opts.Mode, opts.Concurrency)
			}
		case 7:
			if w.r == nil {
				w.cur.app = w.cur.mover
				w.logf("the application uses the mover's value of %s", w.cur.id)
			} else {
				w.appRepin()
			}
		case 8:
			w.restart()
		case 9:
			w.back()
		case 10:
			w.startRepin()
		case 11:
			w.move(r.next(), r.next(), false)
		case 12:
			w.drain(r.next(), r.next(), r.next())
		case 13:
			w.arm(r.next(), r.next(), r.next())
		case 14:
			w.armTwin(r.next())
		case 15:
			w.armRival(r.next(), r.next())
		case 16:
			w.move(r.next(), r.next(), true)
		}
	}
}

// Outcomes of a write: acknowledged, fn errs after writing, fn panics after writing, the
// context is cancelled inside fn before it writes, the context is cancelled before Do or
// at one of its store calls.
const (
	wOK = iota
	wErr
	wPanic
	wCancelInside
	wCancelBefore
)

var errRouterApp = errors.New("the application fails after writing")

// write inserts (kind 0) a row of the owner a picks, updates (1) or deletes (2) the row a
// picks, through Do, with the outcome b picks; it updates the model by Do's error. in, if
// not nil, collects the error of a write run from a hook.
func (w *routerWorld) write(kind, a, b int, in *[]error) {
	outcome := b % 5
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	switch {
	case outcome == wCancelBefore && in == nil && b/5%2 == 1:
		// Cancelled at a store call of Do itself (the mark, a Lazy move): in its middle.
		ctx, cancel = w.crashAt(1 + b/10%6)
		defer cancel()
	case outcome == wCancelBefore:
		cancel()
	}
	var (
		id    int64
		owner string
		val   = fmt.Sprint("v", nextID.Add(1))
		q     string
		args  []any
	)
	w.bgMu.Lock()
	switch {
	case kind == 0 || len(w.ids) == 0:
		kind = 0
		owner = w.owners[a%len(w.owners)]
		id = nextID.Add(1)
		q, args = "INSERT INTO messages (id, user_id, time, message, sender) VALUES (?, ?, ?, ?, ?)", []any{id, owner, id, val, 1}
	case kind == 1:
		id = w.ids[a%len(w.ids)]
		owner = w.rows[id].owner
		q, args = "UPDATE messages SET message = ? WHERE id = ? AND user_id = ?", []any{val, id, owner}
	default:
		id = w.ids[a%len(w.ids)]
		owner = w.rows[id].owner
		q, args = "DELETE FROM messages WHERE id = ? AND user_id = ?", []any{id, owner}
	}
	if kind == 0 {
		w.rows[id] = &routerRow{owner: owner, absent: true, vals: map[string]bool{}}
		w.ids = append(w.ids, id)
	}
	w.bgMu.Unlock()
	p := w.p
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("recovered: %v", v)
			}
		}()
		err = w.do(ctx, owner, func(s int) error {
			if outcome == wCancelInside {
				cancel()
			}
			if _, err := p.dbs[s].ExecContext(ctx, q, args...); err != nil {
				return err
			}
			switch outcome {
			case wErr:
				return errRouterApp
			case wPanic:
				panic("the application panics after writing")
			}
			return nil
		})
	}()
	w.bgMu.Lock()
	defer w.bgMu.Unlock()
	row := w.rows[id]
	acked := err == nil
	switch kind {
	case 0:
		row.present = true
		row.absent = !acked
		row.vals[val] = true
	case 1:
		if acked {
			clear(row.vals)
		}
		row.vals[val] = true
	case 2:
		row.absent = true
		row.present = row.present && !acked
	}
	what := []string{"insert", "update", "delete"}[kind]
	w.logf("%s row %d of owner %s, outcome %d: %v", what, id, owner, outcome, err)
	if in != nil {
		*in = append(*in, err)
	}
}

// read reads owner's rows through Do and checks them against the model.
func (w *routerWorld) read(owner string) {
	type got struct {
		id  int64
		val string
	}
	var rows []got
	at := -1
	p := w.p
	err := w.do(context.Background(), owner, func(s int) error {
		at = s
		rs, err := p.dbs[s].Query("SELECT id, message FROM messages WHERE user_id = ?", owner)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var g got
			if err := rs.Scan(&g.id, &g.val); err != nil {
				return err
			}
			rows = append(rows, g)
		}
		return rs.Err()
	})
	w.logf("read owner %s on shard %d: %d rows, %v", owner, at, len(rows), err)
	if err != nil {
		return
	}
	seen := map[int64]bool{}
	for _, g := range rows {
		m := w.rows[g.id]
		switch {
		case m == nil || m.owner != owner:
			w.fatalf("read of owner %s on shard %d: row %d is not the owner's", owner, at, g.id)
		case !m.present:
			w.fatalf("read of owner %s on shard %d: row %d was deleted", owner, at, g.id)
		case !m.vals[g.val]:
			w.fatalf("read of owner %s on shard %d: row %d holds %q, want one of %v", owner, at, g.id, g.val, m.vals)
		}
		seen[g.id] = true
	}
	for _, id := range w.ids {
		if m := w.rows[id]; m.owner == owner && !m.absent && !seen[id] {
			w.fatalf("read of owner %s on shard %d: acknowledged row %d is missing", owner, at, id)
		}
	}
}

// listed is the owners given to a mover: all six, or (odd b) the four loaded first.
func (w *routerWorld) listed(b int) []string {
	if b%2 == 1 {
		return w.owners[:4]
	}
	return w.owners
}

// crashAt makes the mover's context end at store call k from now (never if k is 0), and
// returns it with its cancel.
func (w *routerWorld) crashAt(k int) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	w.st.cancel.Store(&cancel)
	w.st.calls.Store(0)
	w.st.at.Store(int64(k))
	return ctx, cancel
}

// settled waits for whatever a hook started and disarms the store.
func (w *routerWorld) settled() {
	w.bg.Wait()
	if w.rivalMoved.Load() {
		w.fatalf("a Repin of another ID, started while the Repin's mover call ran, moved an owner (Move returned nil)")
	}
	w.st.mover.Store(false)
	w.st.at.Store(0)
	w.st.hookAt.Store(0)
	w.st.hook.Store(nil)
	for _, err := range w.bgErrs {
		w.logf("  from a hook: %v", err)
	}
	w.bgErrs = nil
}

// arm makes the next mover call run, at its store call k+1, a write of the application
// (kind, a) in a goroutine of its own, as a request served while the mover works.
func (w *routerWorld) arm(k, kind, a int) {
	w.st.hookAt.Store(int64(k%12 + 1))
	h := func() {
		w.bg.Go(func() { w.write(kind%3, a, wOK, &w.bgErrs) })
	}
	w.st.hook.Store(&h)
	w.logf("arm a write (%d, %d) at store call %d of the next mover call", kind%3, a, k%12+1)
}

// appRepin makes the application route through a Repin value of its own, of the
// operator's ID and over the same Store, over a directory loaded with the operator's
// entries, until a refusal makes it reload (use the operator's value).
func (w *routerWorld) appRepin() {
	d := shard.NewDirectory(w.newRule(), nil)
	if err := d.Load(w.d.Entries()); err != nil {
		w.t.Fatal(err)
	}
	r, err := rebalance.NewRepin(fmt.Sprint("pin", w.pins), d, w.newRule(), w.st, rebalance.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.appR.Store(r)
	w.logf("the application makes a Repin value of its own of pin%d", w.pins)
}

// armTwin makes the next mover call start, at its store call k+1, a Run of a second value
// of the current migration: the mover started twice by mistake. Over a MoverLock it is
// refused while the first runs; whatever it returns, nothing may be lost.
func (w *routerWorld) armTwin(k int) {
	if w.r != nil {
		return
	}
	m := w.cur
	twin := w.value(m)
	owners := w.owners
	h := func() {
		w.bg.Go(func() {
			err := twin.Run(context.Background(), slices.Values(owners))
			w.bgMu.Lock()
			w.bgErrs = append(w.bgErrs, fmt.Errorf("twin Run: %w", routerErrOrNil(err)))
			w.bgMu.Unlock()
		})
	}
	w.st.hookAt.Store(int64(k%12 + 1))
	w.st.hook.Store(&h)
	w.logf("arm a twin Run of %s at store call %d of the next mover call", m.id, k%12+1)
}

// armRival makes the next mover call start, at its store call k+1, a Move by a Repin of
// another ID, over a directory loaded with the Repin's entries, of the owner a picks to
// another shard: a second operator's mistake. While a mover call of the Repin runs, the
// shards serve a batch of it unfinished, or, once it finished, a directory with pins the
// rival's lacks: the rival must be refused, or the owner's rows would end where one of the
// two directories does not look.
func (w *routerWorld) armRival(k, a int) {
	if w.r == nil {
		return
	}
	d := shard.NewDirectory(w.newRule(), nil)
	if err := d.Load(w.d.Entries()); err != nil {
		w.t.Fatal(err)
	}
	o := w.owners[a%len(w.owners)]
	pins := map[string]int{o: (d.Locate(o) + 1 + a/8%(d.Shards()-1)) % d.Shards()}
	w.rivals++
	r, err := rebalance.NewRepin(fmt.Sprint("rival", w.rivals), d, w.newRule(), w.p.store, rebalance.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	h := func() {
		w.bg.Go(func() {
			err := r.Move(context.Background(), pins)
			w.rivalMoved.CompareAndSwap(false, err == nil)
			w.bgMu.Lock()
			w.bgErrs = append(w.bgErrs, fmt.Errorf("rival Move %v: %w", pins, routerErrOrNil(err)))
			w.bgMu.Unlock()
		})
	}
	w.st.hookAt.Store(int64(k%12 + 1))
	w.st.hook.Store(&h)
	w.logf("arm a rival Repin's Move %v at store call %d of the next mover call", pins, k%12+1)
}

var errRouterNil = errors.New("nil")

func routerErrOrNil(err error) error { return cmp.Or(err, errRouterNil) }

func (w *routerWorld) run(k, b int) {
	if w.r != nil {
		return
	}
	k %= 24 // 0: to the end
	ctx, cancel := w.crashAt(k)
	defer cancel()
	w.st.mover.Store(true)
	owners := w.listed(b)
	err := w.cur.mover.Run(ctx, slices.Values(owners))
	w.settled()
	w.logf("Run %s of %d owners, crash at store call %d: %v", w.cur.id, len(owners), k, err)
	if err == nil {
		w.checkOwners("Run returned nil", w.cur.after, owners)
	}
}

func (w *routerWorld) finish(b int) {
	if w.r != nil {
		return
	}
	owners := w.listed(b)
	ctx, cancel := w.crashAt(0)
	defer cancel()
	w.st.mover.Store(true)
	err := w.cur.mover.Finish(ctx, slices.Values(owners))
	w.settled()
	w.logf("Finish %s of %d owners: %v", w.cur.id, len(owners), err)
	if err == nil {
		w.cur.finished = true
		w.checkAll("Finish returned nil", w.cur.after, nil, false)
	}
}

// restart is a restart of the process: new pools, a new Store, new values of the migration
// (or of the Repin, which first moves its pending batch again, as NewRepin says).
func (w *routerWorld) restart() {
	if w.r != nil && w.dirty {
		return // NewRepin wants the pending batch moved again before serving: not modelled
	}
	w.p = w.e.open(w.t, 4)
	w.st = &routerStore{Store: w.p.store}
	w.appR.Store(nil)
	if w.r != nil {
		w.pins++
		r, err := rebalance.NewRepin(fmt.Sprint("pin", w.pins), w.d, w.newRule(), w.st, rebalance.Options{})
		if err != nil {
			w.t.Fatal(err)
		}
		w.r = r
		w.logf("restart: new process, new Repin pin%d", w.pins)
		return
	}
	w.cur.app = w.value(w.cur)
	w.cur.mover = w.cur.app
	w.logf("restart: new process, new value of %s", w.cur.id)
}

// back starts the migration back, from the current after to the current before, once the
// current one finished.
func (w *routerWorld) back() {
	if w.r != nil || w.prev != nil && !w.prev.finished {
		return
	}
	before, _ := shard.NewJump(w.cur.after.Shards())
	after, _ := shard.NewJump(w.cur.before.Shards())
	if !w.cur.finished {
		// Before the current one finished: its claim makes the shards refuse the back
		// migration's accesses and mover until it is. (Before any claim, nothing tells a
		// plan whose before sharder is not where the data is: its writes land where no
		// mover reads, and its copies stop at ErrStrayRows.)
		next := rebalance.PlacementOf(fmt.Sprint("mig", w.migs+1), before, after)
		if !errors.Is(w.p.store.CheckPlacement(context.Background(), next), rebalance.ErrPlacement) {
			return
		}
		w.prev = w.cur
	}
	w.cur = w.newMig(before, after)
	w.logf("start %s back: %d -> %d shards", w.cur.id, before.Shards(), after.Shards())
}

func (w *routerWorld) newRule() shard.Sharder {
	rule, err := shard.NewJump(w.cur.after.Shards())
	if err != nil {
		w.t.Fatal(err)
	}
	return rule
}

// startRepin routes by a directory over the finished migration's after layout from now
// on, through a Repin of a new ID (and a new Repin of a new ID over the same directory
// once one started, so that owners can move again).
func (w *routerWorld) startRepin() {
	if w.dirty || w.r != nil && !w.cur.finished {
		return
	}
	if !w.cur.finished {
		// Before the migration finished: its claim makes the shards refuse the Repin's
		// batches and accesses until settle finishes it (before any claim, as for the
		// migration back, nothing tells where the owners are).
		pin := rebalance.PlacementOf(fmt.Sprint("pin", w.pins+1), w.newRule(), w.newRule())
		if !errors.Is(w.p.store.CheckPlacement(context.Background(), pin), rebalance.ErrPlacement) {
			return
		}
	}
	if w.d == nil {
		w.d = shard.NewDirectory(w.newRule(), nil)
	}
	w.pins++
	r, err := rebalance.NewRepin(fmt.Sprint("pin", w.pins), w.d, w.newRule(), w.st, rebalance.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.r = r
	w.appR.Store(nil)
	w.logf("start Repin pin%d over %d shards", w.pins, w.d.Shards())
}

// move moves the owner a picks, and a second one for a&64, to shards a picks, or, with
// unpin, removes their entries (moving them back to the rule's shard).
func (w *routerWorld) move(a, k int, unpin bool) {
	if w.r == nil {
		return
	}
	pins := map[string]int{w.owners[a%len(w.owners)]: (a / 8) % routerShards}
	if a&64 != 0 {
		pins[w.owners[(a/3)%len(w.owners)]] = (a / 16) % routerShards
	}
	k %= 24
	ctx, cancel := w.crashAt(k)
	defer cancel()
	w.st.mover.Store(true)
	var err error
	if unpin {
		err = w.r.Unpin(ctx, slices.Collect(maps.Keys(pins))...)
	} else {
		err = w.r.Move(ctx, pins)
	}
	w.settled()
	w.logf("Move %v (unpin %v), crash at store call %d: %v", pins, unpin, k, err)
	if err != nil {
		if !errors.Is(err, rebalance.ErrConfig) && !errors.Is(err, shard.ErrShard) && !errors.Is(err, shard.ErrDirectory) {
			w.dirty = true
		}
		return
	}
	w.dirty = false
	w.checkOwners("Move returned nil", w.d, slices.Collect(func(yield func(string) bool) {
		for o := range pins {
			if !yield(o) {
				return
			}
		}
	}))
}

func (w *routerWorld) drain(a, batch, k int) {
	if w.r == nil {
		return
	}
	n := w.d.Shards()
	from := a % n
	to := func(o string) int { return (from + 1 + int(o[len(o)-1])%(n-1)) % n }
	k %= 24
	ctx, cancel := w.crashAt(k)
	defer cancel()
	w.st.mover.Store(true)
	err := w.r.Drain(ctx, from, slices.Values(w.owners), batch%3+1, to)
	w.settled()
	w.logf("Drain shard %d in batches of %d, crash at store call %d: %v", from, batch%3+1, k, err)
	if err != nil {
		if !errors.Is(err, rebalance.ErrConfig) && !errors.Is(err, rebalance.ErrUnfinished) {
			w.dirty = true
		}
		return
	}
	w.dirty = false
	w.checkAll("Drain returned nil", w.d, nil, false)
	var left int
	if err := w.admin.dbs[from].QueryRow("SELECT COUNT(*) FROM messages").Scan(&left); err != nil {
		w.t.Fatal(err)
	}
	if left != 0 {
		w.fatalf("Drain of shard %d returned nil: it holds %d rows", from, left)
	}
}

// settle drives the world to a known state: the pending batch of the Repin moved, or the
// current migration run to its end by a fresh value and finished.
func (w *routerWorld) settle() {
	ctx := context.Background()
	defer func() {
		if w.r != nil && w.dirty {
			if err := w.r.Move(ctx, nil); err != nil {
				w.fatalf("the pending batch: Move: %v", err)
			}
			w.logf("settle: the pending batch moved")
		}
	}()
	for _, mig := range []*routerMig{w.prev, w.cur} {
		if mig == nil || mig.finished {
			continue
		}
		m := w.value(mig)
		if err := m.Run(ctx, slices.Values(w.owners)); err != nil {
			w.fatalf("settle: Run %s with a fresh value: %v", mig.id, err)
		}
		if err := m.Finish(ctx, slices.Values(w.owners)); err != nil {
			w.fatalf("settle: Finish %s with a fresh value: %v", mig.id, err)
		}
		mig.finished = true
		w.logf("settle: %s run and finished by a fresh value", mig.id)
	}
}

// checkOwners checks the rows of owners: each acknowledged row once, on the shard layout
// gives its owner, with a value it may hold; nothing of them elsewhere.
func (w *routerWorld) checkOwners(when string, layout shard.Sharder, owners []string) {
	w.checkAll(when, layout, owners, false)
}

// checkAll reads every shard and checks the rows of owners (every owner if nil) against
// the model and layout. With all it also requires that no shard holds a row the model does
// not know.
func (w *routerWorld) checkAll(when string, layout shard.Sharder, owners []string, all bool) {
	w.t.Helper()
	in := map[string]bool{}
	for _, o := range owners {
		in[o] = true
	}
	checked := func(o string) bool { return owners == nil || in[o] }
	seen := map[int64]int{}
	for s, db := range w.admin.dbs {
		rs, err := db.Query("SELECT id, user_id, message FROM messages")
		if err != nil {
			w.t.Fatal(err)
		}
		for rs.Next() {
			var id int64
			var owner int64
			var val string
			if err := rs.Scan(&id, &owner, &val); err != nil {
				w.t.Fatal(err)
			}
			o := strconv.FormatInt(owner, 10)
			if !checked(o) {
				continue
			}
			m := w.rows[id]
			switch {
			case m == nil:
				if all {
					w.fatalf("%s: shard %d holds row %d of owner %s, never written", when, s, id, o)
				}
			case !m.present:
				w.fatalf("%s: shard %d holds row %d of owner %s, deleted (acknowledged)", when, s, id, o)
			case layout.Locate(o) != s:
				w.fatalf("%s: shard %d holds row %d of owner %s, whose shard is %d: misplaced", when, s, id, o, layout.Locate(o))
			case !m.vals[val]:
				w.fatalf("%s: shard %d holds row %d of owner %s with %q, want one of %v", when, s, id, o, val, m.vals)
			}
			if seen[id]++; seen[id] > 1 {
				w.fatalf("%s: row %d of owner %s is on more than one shard (now %d)", when, id, o, s)
			}
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			w.t.Fatal(err)
		}
	}
	for _, id := range w.ids {
		if m := w.rows[id]; checked(m.owner) && !m.absent && seen[id] == 0 {
			w.fatalf("%s: acknowledged row %d of owner %s (shard %d) is lost", when, id, m.owner, layout.Locate(m.owner))
		}
	}
}
