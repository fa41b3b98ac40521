package sqlstore_test

// Probes of the in-process mover's steps: a Store that embeds *sqlstore.Store and runs an
// interfering action once, right before or after one of its steps, for one owner; the
// operation then goes on, and every acknowledged insert and update is looked for on its
// owner's shard under the final placement.

import (
	"context"
	"errors"
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

// probeHook is a Store that calls fn once, when step (Copy, Count, SetMark:<mark>,
// KeepOldSum, DeleteChecked, Delete, RecordFinished, Mark) is called for owner ("" any
// owner; any owner for RecordFinished), before the real call (after false) or after it.
type probeHook struct {
	*sqlstore.Store
	step  string
	owner string
	after bool
	fn    func()
	once  sync.Once
	fired bool
	mu    sync.Mutex
	armed bool
}

func newProbeHook(st *sqlstore.Store, step, owner string, after bool, fn func()) *probeHook {
	return &probeHook{Store: st, step: step, owner: owner, after: after, fn: fn, armed: true}
}

func (h *probeHook) at(step, owner string, after bool) {
	h.mu.Lock()
	ok := h.armed && step == h.step && after == h.after && (h.owner == "" || owner == "" || owner == h.owner)
	h.mu.Unlock()
	if ok {
		h.once.Do(func() { h.fired = true; h.fn() })
	}
}

func (h *probeHook) arm(on bool) { h.mu.Lock(); h.armed = on; h.mu.Unlock() }

func (h *probeHook) Copy(ctx context.Context, owner string, from, to int) error {
	h.at("Copy", owner, false)
	err := h.Store.Copy(ctx, owner, from, to)
	h.at("Copy", owner, true)
	return err
}

func (h *probeHook) Count(ctx context.Context, owner string, shard int) (int64, error) {
	h.at("Count", owner, false)
	n, err := h.Store.Count(ctx, owner, shard)
	h.at("Count", owner, true)
	return n, err
}

func (h *probeHook) Mark(ctx context.Context, migration, owner string) (rebalance.Mark, error) {
	h.at("Mark", owner, false)
	m, err := h.Store.Mark(ctx, migration, owner)
	h.at("Mark", owner, true)
	return m, err
}

func (h *probeHook) SetMark(ctx context.Context, migration, owner string, m rebalance.Mark) error {
	h.at("SetMark:"+m.String(), owner, false)
	err := h.Store.SetMark(ctx, migration, owner, m)
	h.at("SetMark:"+m.String(), owner, true)
	return err
}

func (h *probeHook) KeepOldSum(ctx context.Context, migration, owner string, shard int, sum rebalance.Sum) error {
	h.at("KeepOldSum", owner, false)
	err := h.Store.KeepOldSum(ctx, migration, owner, shard, sum)
	h.at("KeepOldSum", owner, true)
	return err
}

func (h *probeHook) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	h.at("DeleteChecked", owner, false)
	err := h.Store.DeleteChecked(ctx, migration, owner, shard)
	h.at("DeleteChecked", owner, true)
	return err
}

func (h *probeHook) Delete(ctx context.Context, owner string, shard int) error {
	h.at("Delete", owner, false)
	err := h.Store.Delete(ctx, owner, shard)
	h.at("Delete", owner, true)
	return err
}

func (h *probeHook) RecordFinished(ctx context.Context, migration string) error {
	h.at("RecordFinished", "", false)
	err := h.Store.RecordFinished(ctx, migration)
	h.at("RecordFinished", "", true)
	return err
}

// probeLedger is the acknowledged writes of a probe: each message's user and its last
// acknowledged text.
type probeLedger struct {
	mu   sync.Mutex
	user map[int64]string
	text map[int64]string
	seq  int
}

func newProbeLedger() *probeLedger {
	return &probeLedger{user: map[int64]string{}, text: map[int64]string{}}
}

// insert inserts a new message of user through do and records it once acknowledged.
func (l *probeLedger) insert(ctx context.Context, p *proc, do doFunc, user string) (int64, error) {
	id := nextID.Add(1)
	uid, _ := strconv.ParseInt(user, 10, 64)
	l.mu.Lock()
	l.seq++
	text := "i" + strconv.Itoa(l.seq)
	l.mu.Unlock()
	err := do(ctx, user, func(s int) error {
		_, err := p.dbs[s].ExecContext(ctx, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $1, $3, 4)", id, uid, text)
		return err
	})
	if err == nil {
		l.mu.Lock()
		l.user[id], l.text[id] = user, text
		l.mu.Unlock()
	}
	return id, err
}

// update sets message id's text through do, and records it once acknowledged (the UPDATE
// found its row: a statement that changes no row is not counted as acknowledged, the
// application would see 0 rows affected; it is reported by the returned count).
func (l *probeLedger) update(ctx context.Context, p *proc, do doFunc, id int64) (int64, error) {
	l.mu.Lock()
	user := l.user[id]
	l.seq++
	text := "u" + strconv.Itoa(l.seq)
	l.mu.Unlock()
	uid, _ := strconv.ParseInt(user, 10, 64)
	var n int64
	err := do(ctx, user, func(s int) error {
		r, err := p.dbs[s].ExecContext(ctx, "UPDATE messages SET message = $3 WHERE id = $1 AND user_id = $2", id, uid, text)
		if err == nil {
			n, err = r.RowsAffected()
		}
		return err
	})
	if err == nil {
		l.mu.Lock()
		l.text[id] = text
		l.mu.Unlock()
	}
	return n, err
}

// check returns a description of each acknowledged message not found exactly once, with
// its last acknowledged text, on its user's shard under s.
func (l *probeLedger) check(t *testing.T, admin *proc, s shard.Sharder) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	for id, user := range l.user {
		want := l.text[id]
		where := s.Locate(user)
		var found []string
		for i, db := range admin.dbs {
			var text string
			if err := db.QueryRow("SELECT message FROM messages WHERE id = $1", id).Scan(&text); err == nil {
				found = append(found, "shard "+strconv.Itoa(i)+": "+strconv.Quote(text))
				if i == where && text == want {
					continue
				}
			}
		}
		if len(found) != 1 || found[0] != "shard "+strconv.Itoa(where)+": "+strconv.Quote(want) {
			bad = append(bad, "message "+strconv.FormatInt(id, 10)+" of user "+user+": want "+strconv.Quote(want)+" on shard "+strconv.Itoa(where)+", found "+strconv.Quote("["+strings.Join(found, "; ")+"]"))
		}
	}
	slices.Sort(bad)
	return bad
}

// probeEnv is what an interfering action of a Migration probe may use.
type probeEnv struct {
	t      *testing.T
	ctx    context.Context
	e      *engine
	w      *world
	admin  *proc
	p      *proc // the process's pools
	l      *probeLedger
	u      string // the owner the hook fires for
	from   int    // its old shard
	to     int    // its new shard
	early  int64  // a message of u written through Do before the move
	id     string
	mode   rebalance.Mode
	bg     sync.WaitGroup
	errs   []string
	errsMu sync.Mutex
	users  []string
	// The mover's last Run and its Finish (nil if Run never returned nil).
	runErr, finErr error
}

func (pe *probeEnv) note(what string, err error) {
	pe.errsMu.Lock()
	defer pe.errsMu.Unlock()
	pe.errs = append(pe.errs, what+": "+errString(err))
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// value makes another Migration value of the probe's ID over st.
func (pe *probeEnv) value(st rebalance.Store) *rebalance.Migration {
	m, err := rebalance.New(pe.id, pe.w.before, pe.w.after, st, rebalance.Options{Mode: pe.mode})
	if err != nil {
		pe.t.Fatal(err)
	}
	return m
}

// inBackground runs f in a goroutine and waits for it up to 300 ms (it may wait for the
// owner's lock, held by the move).
func (pe *probeEnv) inBackground(f func()) {
	done := make(chan struct{})
	pe.bg.Go(func() { defer close(done); f() })
	select {
	case <-done:
	case <-time.After(300 * time.Millisecond):
	}
}

// probeMigration moves 4 users (Jump 1 -> 2) with a Migration of mode over a hook at step
// for the first of them, whose action is act; the application writes through its own value
// before. Then Run again until nil (at most 5 times) and Finish; every acknowledged write
// must be on its user's shard under the after sharder if Run and Finish returned nil.
func probeMigration(t *testing.T, e0 *engine, mode rebalance.Mode, step string, after bool, act func(pe *probeEnv)) *probeEnv {
	ctx := context.Background()
	e := newEngine(t, e0.dialect, 2, "", nil) // fresh databases for each probe
	admin := e.open(t, 2)
	w := newWorld(t, e, 1, 2)
	w.load(t, admin, w.moving(1, 4), 5)
	p := e.open(t, 4)
	pe := &probeEnv{t: t, ctx: ctx, e: e, w: w, admin: admin, p: p, l: newProbeLedger(), u: w.users[0], id: "probe", mode: mode, users: w.users}
	pe.from, pe.to = w.before.Locate(pe.u), w.after.Locate(pe.u)
	app := pe.value(p.store)
	var err error
	if mode == rebalance.Async {
		if pe.early, err = pe.l.insert(ctx, p, app.Do, pe.u); err != nil {
			t.Fatal(err)
		}
	} else { // a Lazy Do would move u: write its message directly on the old shard
		pe.early = nextID.Add(1)
		mustExec(t, admin.dbs[pe.from], "INSERT INTO messages (id, user_id, time, message, sender) VALUES ("+strconv.FormatInt(pe.early, 10)+", "+pe.u+", 1, 'i0', 4)")
		pe.l.user[pe.early], pe.l.text[pe.early] = pe.u, "i0"
	}
	hook := newProbeHook(p.store, step, pe.u, after, func() { act(pe) })
	mover := pe.value(hook)
	users := slices.Values(w.users)
	runErr := mover.Run(ctx, users)
	first := runErr
	for i := 0; runErr != nil && i < 5; i++ {
		time.Sleep(100 * time.Millisecond)
		runErr = mover.Run(ctx, users)
	}
	finErr := error(nil)
	if runErr == nil {
		finErr = mover.Finish(ctx, users)
	}
	pe.bg.Wait()
	pe.runErr, pe.finErr = runErr, finErr
	t.Logf("hook fired: %v; first Run: %v; last Run: %v; Finish: %v; actions: %q", hook.fired, first, runErr, finErr, pe.errs)
	if !hook.fired {
		t.Errorf("the hook at %s (after %v) never fired", step, after)
	}
	if runErr != nil || finErr != nil {
		return pe
	}
	if bad := pe.l.check(t, admin, w.after); len(bad) > 0 {
		t.Errorf("Run and Finish returned nil, and %d acknowledged writes are not found once, as last written, on their user's shard: %q", len(bad), bad)
	}
	if v := w.verify(t, admin, w.after); v.lost+v.duplicated+v.misplaced != 0 {
		t.Errorf("loaded rows: %v", v)
	}
	return pe
}

// probeSteps are the steps of an in-process move, before or after each store call.
var probeSteps = []struct {
	step  string
	after bool
}{
	{"Copy", false}, {"Copy", true}, {"Count", true}, {"KeepOldSum", false}, {"KeepOldSum", true},
	{"SetMark:copied", true}, {"DeleteChecked", false}, {"DeleteChecked", true}, {"SetMark:done", false}, {"SetMark:done", true},
}

func stepName(step string, after bool) string {
	if after {
		return "after " + step
	}
	return "before " + step
}

// TestProbeSecondValueWritesAtEachStep: at each step of the move of u, the application
// writes u (an update of a message written before, and an insert) through a second
// Migration value of the same ID in the process: over the same Store value, over another
// Store value of the same databases, and over a wrapper of the Store. It shares the locks
// with the mover, so it waits for the move and writes where u is served afterwards.
func TestProbeSecondValueWritesAtEachStep(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		for _, mode := range []rebalance.Mode{rebalance.Async, rebalance.Lazy} {
			for _, over := range []string{"same store", "other store", "wrapper"} {
				for _, s := range probeSteps {
					t.Run(mode.String()+"/"+over+"/"+stepName(s.step, s.after), func(t *testing.T) {
						probeMigration(t, e, mode, s.step, s.after, func(pe *probeEnv) {
							var st rebalance.Store
							switch over {
							case "same store":
								st = pe.p.store
							case "other store":
								st = pe.e.open(t, 2).store
							default:
								st = &struct{ *sqlstore.Store }{pe.p.store}
							}
							twin := pe.value(st)
							pe.inBackground(func() {
								_, err := pe.l.update(pe.ctx, pe.p, twin.Do, pe.early)
								pe.note("update", err)
								_, err = pe.l.insert(pe.ctx, pe.p, twin.Do, pe.u)
								pe.note("insert", err)
							})
						})
					})
				}
			}
		}
	})
}

// staying returns a user that Jump 1 -> 2 leaves on shard 0, and writes one message of it
// there, recorded in the probe's ledger.
func (pe *probeEnv) staying() (string, int64) {
	for u := 1000; ; u++ {
		s := strconv.Itoa(u)
		if pe.w.after.Locate(s) == 0 {
			id := nextID.Add(1)
			mustExec(pe.t, pe.admin.dbs[0], "INSERT INTO messages (id, user_id, time, message, sender) VALUES ("+strconv.FormatInt(id, 10)+", "+s+", 1, 'stay', 4)")
			pe.l.mu.Lock()
			pe.l.user[id], pe.l.text[id] = s, "stay"
			pe.l.mu.Unlock()
			return s, id
		}
	}
}

// TestProbeFinishFromAnotherValueAtEachStep: at each step of the move of u, a Finish
// through another value of the ID (over the same Store value, or another) runs in the
// background. It must refuse (u not Done) or wait; if the mover's Run and Finish return
// nil, every write is where the after sharder places it, and a write through the other
// value afterwards too.
func TestProbeFinishFromAnotherValueAtEachStep(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		for _, mode := range []rebalance.Mode{rebalance.Async, rebalance.Lazy} {
			for _, over := range []string{"same store", "other store"} {
				for _, s := range probeSteps {
					t.Run(mode.String()+"/"+over+"/"+stepName(s.step, s.after), func(t *testing.T) {
						var other *rebalance.Migration
						pe := probeMigration(t, e, mode, s.step, s.after, func(pe *probeEnv) {
							st := pe.p.store
							if over == "other store" {
								st = pe.e.open(t, 2).store
							}
							other = pe.value(st)
							pe.inBackground(func() {
								pe.note("finish", other.Finish(pe.ctx, slices.Values(pe.users)))
							})
						})
						if other == nil {
							return
						}
						// A write of every user through the other value, afterwards.
						for _, u := range pe.users {
							if _, err := pe.l.insert(pe.ctx, pe.p, other.Do, u); err != nil {
								t.Logf("insert of %s through the other value: %v", u, err)
							}
						}
						if bad := pe.l.check(t, pe.admin, pe.w.after); len(bad) > 0 {
							t.Errorf("%d acknowledged writes not found as written under the after sharder: %q", len(bad), bad)
						}
					})
				}
			}
		}
	})
}

// TestProbeScriptAtEachStep: a script that goes around the library changes u's rows on its
// old shard at each step: gives u's message to a user who stays there (UPDATE ... SET
// user_id), or updates it. The library claims such a write is found (ErrCopyMismatch),
// before the comparison or after; if Run and Finish return nil, the write must be there.
func TestProbeScriptAtEachStep(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		for _, what := range []string{"reassign", "update"} {
			for _, s := range probeSteps {
				t.Run(what+"/"+stepName(s.step, s.after), func(t *testing.T) {
					probeMigration(t, e, rebalance.Async, s.step, s.after, func(pe *probeEnv) {
						v, _ := pe.staying()
						q := "UPDATE messages SET message = 'script' WHERE id = $1"
						args := []any{pe.early}
						if what == "reassign" {
							q = "UPDATE messages SET user_id = $2 WHERE id = $1"
							args = append(args, v)
						}
						r, err := pe.admin.dbs[pe.from].ExecContext(pe.ctx, q, args...)
						var n int64
						if err == nil {
							n, err = r.RowsAffected()
						}
						pe.note("script ("+strconv.FormatInt(n, 10)+" rows)", err)
						if err == nil && n > 0 {
							pe.l.mu.Lock()
							if what == "reassign" {
								pe.l.user[pe.early] = v
							} else {
								pe.l.text[pe.early] = "script"
							}
							pe.l.mu.Unlock()
						}
					})
				})
			}
		}
	})
}

// TestProbeScriptDeletesTheOldCopyAtEachStep: a script that goes around the library deletes
// every row of u on its old shard (an account deleted by an administrator's SQL) at each
// step. The deletion is a write of the old copy: the library claims such a write is found
// (ErrCopyMismatch) whether it came before the comparison or after. If Run and Finish
// return nil, u must hold no row anywhere (the deletion stands); else Run stops with
// ErrCopyMismatch (the rows on the new shard wait for the operator).
func TestProbeScriptDeletesTheOldCopyAtEachStep(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		for _, s := range probeSteps {
			t.Run(stepName(s.step, s.after), func(t *testing.T) {
				var deleted int64
				pe := probeMigration(t, e, rebalance.Async, s.step, s.after, func(pe *probeEnv) {
					r, err := pe.admin.dbs[pe.from].ExecContext(pe.ctx, "DELETE FROM messages WHERE user_id = $1", pe.u)
					if err == nil {
						deleted, err = r.RowsAffected()
					}
					pe.note("script deletes "+strconv.FormatInt(deleted, 10)+" rows", err)
					if err == nil && deleted > 0 { // acknowledged: forget u's messages
						pe.l.mu.Lock()
						for id, o := range pe.l.user {
							if o == pe.u {
								delete(pe.l.user, id)
								delete(pe.l.text, id)
							}
						}
						pe.l.mu.Unlock()
						pe.w.mu.Lock()
						uid, _ := strconv.ParseInt(pe.u, 10, 64)
						for id, o := range pe.w.ledger {
							if o == uid {
								delete(pe.w.ledger, id)
							}
						}
						pe.w.mu.Unlock()
					}
				})
				if deleted == 0 {
					return
				}
				var n int
				for _, db := range pe.admin.dbs {
					var c int
					if err := db.QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1", pe.u).Scan(&c); err != nil {
						t.Fatal(err)
					}
					n += c
				}
				switch {
				case pe.runErr == nil && pe.finErr == nil && n > 0:
					t.Errorf("the script deleted every row of user %s (%d) on its old shard; Run and Finish returned nil, and %d rows of the user are back, on its new shard", pe.u, deleted, n)
				case pe.runErr != nil && !errors.Is(pe.runErr, rebalance.ErrCopyMismatch):
					t.Errorf("Run: %v, want ErrCopyMismatch", pe.runErr)
				}
			})
		}
	})
}

// TestProbeRepinInterleavedAtEachStep: while a Repin's batch pins user u, at each of its
// steps: another goroutine unpins u through the same value; a Repin made again over the
// directory saved before the batch (a restarted admin handler of the process, over the same
// Store value) writes u and moves another user. All of it waits for the batch or is
// refused; every acknowledged write is then on its user's shard under the directory of the
// last batch.
func TestProbeRepinInterleavedAtEachStep(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e0 *engine) {
		for _, s := range probeSteps {
			t.Run(stepName(s.step, s.after), func(t *testing.T) {
				e := newEngine(t, e0.dialect, 3, "", nil)
				ctx := context.Background()
				admin := e.open(t, 2)
				w := newWorld(t, e, 3, 3)
				w.load(t, admin, span(1, 6), 4)
				u, v := w.users[0], w.users[1]
				to := (w.before.Locate(u) + 1) % 3
				p := e.open(t, 4)
				l := newProbeLedger()
				var bg sync.WaitGroup
				var mu sync.Mutex
				var notes []string
				note := func(what string, err error) { mu.Lock(); notes = append(notes, what+": "+errString(err)); mu.Unlock() }
				var op *rebalance.Repin
				var early int64
				var againDir *shard.Directory
				hook := newProbeHook(p.store, s.step, u, s.after, func() {
					bg.Go(func() { note("unpin u", op.Unpin(ctx, u)) })
					again, dir := newRepin(t, "pin3", p.store, 3, nil)
					bg.Go(func() {
						_, err := l.update(ctx, p, again.Do, early)
						note("update u through the restarted value", err)
						_, err = l.insert(ctx, p, again.Do, u)
						note("insert u through the restarted value", err)
						err = again.Move(ctx, map[string]int{v: (w.before.Locate(v) + 1) % 3})
						note("move v through the restarted value", err)
						if err == nil {
							// It may move only from where the last batch left the directory
							// (after the unpin of u): the last batch's, it is where owners are.
							mu.Lock()
							againDir = dir
							mu.Unlock()
						}
					})
					time.Sleep(200 * time.Millisecond)
				})
				var d *shard.Directory
				op, d = newRepin(t, "pin3", hook, 3, nil)
				var err error
				if early, err = l.insert(ctx, p, op.Do, u); err != nil {
					t.Fatal(err)
				}
				moveErr := op.Move(ctx, map[string]int{u: to})
				bg.Wait()
				t.Logf("hook fired: %v; Move: %v; %q", hook.fired, moveErr, notes)
				if moveErr != nil {
					return
				}
				if againDir != nil {
					d = againDir
				}
				if bad := l.check(t, admin, d); len(bad) > 0 {
					t.Errorf("Move returned nil, and %d acknowledged writes are not on their user's shard under the directory: %q", len(bad), bad)
				}
				if vv := w.verify(t, admin, d); vv.lost+vv.duplicated+vv.misplaced != 0 {
					t.Errorf("loaded rows: %v", vv)
				}
			})
		}
	})
}
