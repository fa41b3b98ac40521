package sqlstore_test

// FuzzSharedOperations plays a sequence of operations, decoded from the fuzz input, against a
// resize from two shards to three and the migration back, on SQLite (its seeds on PostgreSQL
// too), over two tables per user: the application's inserts (one table, or both in one
// transaction), updates and deletes through Shared.Do, as of the migration in force or of the
// one before (a process with a stale view); movers in processes of their own that run to the
// end, crash at their kth write, carry an older epoch, or run a second time with the same
// one; a mover paused between two of its writes while the application writes, other movers
// run and Finish is called, then let on; Finish anywhere. Each Run and Finish that returns
// nil is checked at once against what it claims; at the end the migrations are run and
// finished in order, and every acknowledged row must be found once, on its owner's shard,
// with its last acknowledged value.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// The users' rows are in two tables: messages, and notes, which nothing links to them.
const opsSchema = messagesSchema + `;
CREATE TABLE IF NOT EXISTS notes (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS notes_user_id_id ON notes (user_id, id)`

var opsTables = []sqlstore.TableSpec{messages, {Table: "notes", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "message"}}}

// absent is the state of a row that is not there.
const absent = "\x00absent"

// opsRow is what the application knows of one row: its owner and the states it may be in
// (one, unless a write of it ended with an error after its statement ran).
type opsRow struct {
	table  string
	user   int64
	states []string
}

type opsWorld struct {
	t      *testing.T
	e      *engine
	admin  *proc
	layout [2]shard.Sharder // jump(2), jump(3)
	ids    [2]string        // grow: layout 0 -> 1; back: 1 -> 0
	// access runs fn in a transaction on the shard that serves user as of migration view.
	access func(ctx context.Context, view int, user string, fn func(*sql.Tx) error) error
	cur    int // the migration in force for the application: 0, or 1 once back is published
	token  uint64
	rows   map[int64]*opsRow
	order  []int64 // rows in the order written, for the fuzz input to pick from
	users  []string
	listed []string // the users the operator lists to Run and Finish
	next   int64    // row IDs
	user   int      // new user IDs
	val    int
	// finished records the migrations a Finish returned nil for.
	finished [2]bool
	bg       *background // a mover paused between two writes, if not nil
}

func newOpsWorld(t *testing.T, e *engine) *opsWorld {
	w := &opsWorld{t: t, e: e, admin: e.open(t, 2), rows: map[int64]*opsRow{}, ids: [2]string{"grow", "back"}, user: 1000}
	for i, n := range []int{2, 3} {
		s, err := shard.NewJump(n)
		if err != nil {
			t.Fatal(err)
		}
		w.layout[i] = s
	}
	app := e.open(t, 2)
	var views [2]*rebalance.Shared[*sql.Tx]
	for i := range views {
		views[i] = w.shared(app, i, rebalance.SharedOptions{FenceWait: 20 * time.Millisecond})
	}
	w.access = func(ctx context.Context, view int, user string, fn func(*sql.Tx) error) error {
		return views[view].Do(ctx, user, func(tx *sql.Tx, _ int) error { return fn(tx) })
	}
	// Four users who move and one who stays, three messages and a note each, on their
	// shards of jump(2).
	for u := 1; len(w.users) < 5; u++ {
		s := strconv.Itoa(u)
		if moves := w.layout[0].Locate(s) != w.layout[1].Locate(s); moves == (len(w.users) < 4) {
			w.users = append(w.users, s)
			for _, table := range []string{"messages", "messages", "messages", "notes"} {
				o := w.insertion(table, s)
				if _, err := w.admin.dbs[w.layout[0].Locate(s)].Exec(o.q, o.args...); err != nil {
					t.Fatal(err)
				}
				w.rows[o.id].states = []string{o.state}
			}
		}
	}
	w.listed = slices.Clone(w.users)
	return w
}

// shared is migration i (0 grow, 1 back) over process p's store.
func (w *opsWorld) shared(p *proc, i int, opts rebalance.SharedOptions) *rebalance.Shared[*sql.Tx] {
	before, after := w.layout[i], w.layout[1-i]
	m, err := rebalance.NewShared(w.ids[i], before, after, rebalance.SharedStore[*sql.Tx](p.store), opts)
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

// mover is migration i in a new process with a new token (or token if not 0), its store
// wrapped by wrap if not nil, its options picked by the token.
func (w *opsWorld) mover(i int, token uint64, wrap func(*proc) rebalance.SharedStore[*sql.Tx]) *rebalance.Shared[*sql.Tx] {
	p := w.e.open(w.t, 2)
	if token == 0 {
		w.token++
		token = w.token
	}
	var store rebalance.SharedStore[*sql.Tx] = p.store
	if wrap != nil {
		store = wrap(p)
	}
	// Movers in turn take other options, as an operator who restarts one might: small
	// chunks and groups, the defaults with two owners at once, or one row at a time.
	opts := []rebalance.SharedOptions{
		{ChunkRows: 2, Batch: 2, Group: 2},
		{Concurrency: 2},
		{ChunkRows: 1, Batch: 1, Group: 1, DeleteRows: 1},
	}[(token-1)%3]
	opts.Token, opts.FenceWait = token, 20*time.Millisecond
	m, err := rebalance.NewShared(w.ids[i], w.layout[i], w.layout[1-i], store, opts)
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

// opsWrite is one statement of a write, on row id, which leaves it in state.
type opsWrite struct {
	id    int64
	state string
	q     string
	args  []any
}

// write runs statements, all on one user's rows, in one transaction through the
// application's view of migration view and updates the model of their rows: to their states
// if acknowledged, to those or the old ones if the outcome is unknown. An update or delete
// that finds no row where its owner is served, for a row that must be there, is a loss the
// application sees.
func (w *opsWorld) write(view int, writes ...opsWrite) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	user := strconv.FormatInt(w.rows[writes[0].id].user, 10)
	ran := false
	n := make([]int64, len(writes))
	err := w.access(ctx, view, user, func(tx *sql.Tx) error {
		ran = true
		for i, o := range writes {
			res, err := tx.ExecContext(ctx, o.q, o.args...)
			if err == nil {
				n[i], err = res.RowsAffected()
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	for i, o := range writes {
		r := w.rows[o.id]
		w.logf("%s (row %d of user %s) through %s: %v", o.q, o.id, user, w.ids[view], err)
		switch {
		case err == nil:
			if n[i] == 0 && !slices.Contains(r.states, absent) {
				return fmt.Errorf("row %d of user %s (%v): %s through %s found no row where the user is served", o.id, user, r.states, o.q, w.ids[view])
			}
			if n[i] == 0 { // an update of a row deleted before
				o.state = absent
			}
			r.states = []string{o.state}
		case ran && !slices.Contains(r.states, o.state):
			r.states = append(r.states, o.state)
		}
	}
	return nil
}

// insertion adds a new row of user in table to the model and returns its insert.
func (w *opsWorld) insertion(table, user string) opsWrite {
	w.next++
	w.val++
	id, msg := w.next, "v"+strconv.Itoa(w.val)
	uid, _ := strconv.ParseInt(user, 10, 64)
	w.rows[id] = &opsRow{table: table, user: uid, states: []string{absent}}
	w.order = append(w.order, id)
	q := "INSERT INTO " + table + " (id, user_id, message) VALUES ($1, $2, $3)"
	if table == "messages" {
		q = "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, 0, $3, 0)"
	}
	return opsWrite{id, msg, q, []any{id, uid, msg}}
}

func (w *opsWorld) update(view int, id int64) error {
	w.val++
	msg := "v" + strconv.Itoa(w.val)
	return w.write(view, opsWrite{id, msg, "UPDATE " + w.rows[id].table + " SET message = $1 WHERE id = $2", []any{msg, id}})
}

func (w *opsWorld) delete(view int, id int64) error {
	return w.write(view, opsWrite{id, absent, "DELETE FROM " + w.rows[id].table + " WHERE id = $1", []any{id}})
}

// appWrite is the application's write of kind 0 to 3: an insert into messages, or into
// messages and notes in one transaction, for a user that exists or a new one (whom the
// operator did not list); an update; a delete.
func (w *opsWorld) appWrite(kind, arg byte, view int) error {
	if kind >= 2 {
		id := w.order[int(arg&0x3f)%len(w.order)]
		if kind == 2 {
			return w.update(view, id)
		}
		return w.delete(view, id)
	}
	user := w.users[int(arg&0x3f)%len(w.users)]
	if arg&0x80 != 0 {
		w.user++
		user = strconv.Itoa(w.user)
		w.users = append(w.users, user)
	}
	if kind == 0 {
		return w.write(view, w.insertion("messages", user))
	}
	return w.write(view, w.insertion("messages", user), w.insertion("notes", user))
}

// check scans every shard: each row of users (all if nil) must be found at most once, on
// its owner's shard under layout, in a state the model allows.
func (w *opsWorld) check(layout shard.Sharder, users []string, what string) {
	w.t.Helper()
	type found struct {
		shard int
		msg   string
	}
	seen := map[int64][]found{}
	for s, db := range w.admin.dbs {
		rows, err := db.Query("SELECT id, message FROM messages UNION ALL SELECT id, message FROM notes")
		if err != nil {
			w.t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			var msg string
			if err := rows.Scan(&id, &msg); err != nil {
				w.t.Fatal(err)
			}
			seen[id] = append(seen[id], found{s, msg})
		}
		if err := rows.Close(); err != nil {
			w.t.Fatal(err)
		}
	}
	for id, at := range seen {
		if w.rows[id] == nil {
			w.t.Fatalf("%s: row %d found on shard %d, which nobody wrote", what, id, at[0].shard)
		}
	}
	for id, r := range w.rows {
		user := strconv.FormatInt(r.user, 10)
		if users != nil && !slices.Contains(users, user) {
			continue
		}
		at := seen[id]
		switch {
		case len(at) > 1:
			w.t.Fatalf("%s: row %d of user %s found %d times: %v", what, id, user, len(at), at)
		case len(at) == 0 && !slices.Contains(r.states, absent):
			w.t.Fatalf("%s: row %d of user %s (%v) lost", what, id, user, r.states)
		case len(at) == 1 && !slices.Contains(r.states, at[0].msg):
			w.t.Fatalf("%s: row %d of user %s reads %q on shard %d, want one of %q", what, id, user, at[0].msg, at[0].shard, r.states)
		case len(at) == 1 && at[0].shard != layout.Locate(user):
			w.t.Fatalf("%s: row %d of user %s on shard %d, its shard is %d", what, id, user, at[0].shard, layout.Locate(user))
		}
	}
}

// run runs m over the listed users and, if it returns nil, checks that they moved.
func (w *opsWorld) run(i int, m *rebalance.Shared[*sql.Tx], ctx context.Context) error {
	listed := slices.Clone(w.listed)
	err := m.Run(ctx, slices.Values(listed))
	w.logf("%s's Run: %v", w.ids[i], err)
	if err == nil {
		w.check(w.layout[1-i], listed, fmt.Sprintf("after %s's Run returned nil", w.ids[i]))
	}
	return err
}

// finish finishes migration i in a new process and, if that returns nil, checks every row.
func (w *opsWorld) finish(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := w.mover(i, 0, nil).Finish(ctx, slices.Values(slices.Clone(w.listed)))
	w.logf("%s's Finish: %v", w.ids[i], err)
	if err == nil {
		w.finished[i] = true
		w.check(w.layout[1-i], nil, fmt.Sprintf("after %s's Finish returned nil", w.ids[i]))
	}
	return err
}

// stepper wraps a store and pauses its mover before a write when the number of writes it
// was let through runs out: a process stopped (a pause of the runtime, SIGSTOP) between two
// of its steps, while the application and other movers act.
type stepper struct {
	stopAt
	paused chan string // what the mover is about to do when it pauses
	resume chan struct{}
}

func newStepper(p *proc, n int) *stepper {
	s := &stepper{paused: make(chan string), resume: make(chan struct{})}
	s.stopAt = stopAt{Store: p.store, n: n}
	s.cancel = func() {
		s.paused <- s.what
		<-s.resume
	}
	return s
}

// background is a mover that runs in a goroutine of its own, paused by its stepper.
type background struct {
	mig    int
	listed []string
	s      *stepper
	done   chan error
}

// start runs migration mig in a new process until its nth write.
func (w *opsWorld) start(mig, n int) {
	b := &background{mig: mig, listed: slices.Clone(w.listed), done: make(chan error, 1)}
	m := w.mover(mig, 0, func(p *proc) rebalance.SharedStore[*sql.Tx] {
		b.s = newStepper(p, n)
		return b.s
	})
	go func() { b.done <- m.Run(context.Background(), slices.Values(b.listed)) }()
	w.bg = b
	w.wait(nil)
}

// advance lets the background mover through n more writes (all if n < 0), while the
// application writes up to traffic rows at once.
func (w *opsWorld) advance(n, traffic int) {
	b := w.bg
	b.s.mu.Lock()
	b.s.n = b.s.stopAt.at + n
	if n < 0 {
		b.s.n = 0
	}
	b.s.mu.Unlock()
	var (
		stop    = make(chan struct{})
		writing sync.WaitGroup
		failed  error
	)
	writing.Go(func() {
		r := rand.New(rand.NewPCG(uint64(n), uint64(len(w.order))))
		for range traffic {
			select {
			case <-stop:
				return
			default:
			}
			if failed = w.random(r); failed != nil {
				return
			}
		}
	})
	b.s.resume <- struct{}{}
	w.wait(func() {
		close(stop)
		writing.Wait()
		if failed != nil {
			w.t.Fatal(failed)
		}
	})
}

// random writes a row picked by r: an insert, an update or a delete.
func (w *opsWorld) random(r *rand.Rand) error {
	id := w.order[r.IntN(len(w.order))]
	switch r.IntN(3) {
	case 0:
		return w.write(w.cur, w.insertion(w.rows[id].table, strconv.FormatInt(w.rows[id].user, 10)))
	case 1:
		return w.update(w.cur, id)
	}
	return w.delete(w.cur, id)
}

// wait waits until the background mover pauses or ends, then calls then (if not nil); if the
// mover ended, its Run's claim is checked.
func (w *opsWorld) wait(then func()) {
	b := w.bg
	select {
	case what := <-b.s.paused:
		w.logf("%s's background mover paused before its %s", w.ids[b.mig], what)
	case err := <-b.done:
		w.bg = nil
		w.logf("%s's background mover's Run: %v", w.ids[b.mig], err)
		if then != nil {
			then()
		}
		if err == nil {
			w.check(w.layout[1-b.mig], b.listed, "after a background mover's Run returned nil")
		}
		return
	case <-time.After(time.Minute):
		w.t.Fatalf("%s's background mover neither paused nor ended in a minute", w.ids[b.mig])
	}
	if then != nil {
		then()
	}
}

func (w *opsWorld) logf(format string, args ...any) {
	if testing.Verbose() {
		w.t.Logf(format, args...)
	}
}

// step plays one operation: kind picks it, arg its details.
func (w *opsWorld) step(kind, arg byte) {
	// The application routes by the migration in force, or by grow's once back is
	// published (a process with a stale view). Movers run that migration too; back's only
	// once grow finished: run first, on a store that serves no migration yet, it would claim
	// the store for a plan that does not start where the data is (its first step then
	// stops: nothing lost, but the store serves back from then on).
	view := w.cur
	if arg&0x40 != 0 {
		view = 0
	}
	mig := 0
	if view == 1 && w.finished[0] {
		mig = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := int(arg&0x1f) + 1
	var err error
	switch kind % 12 {
	case 0, 1, 2, 3:
		err = w.appWrite(kind%12, arg, view)
	case 4: // a mover that crashes at its nth write, before it or right after
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		m := w.mover(mig, 0, func(p *proc) rebalance.SharedStore[*sql.Tx] {
			return &stopAt{Store: p.store, n: n, after: arg&0x80 != 0, cancel: stop}
		})
		_ = w.run(mig, m, sctx)
	case 5: // a mover that runs to the end: a newer one, or one of the background mover's epoch
		token := uint64(0)
		if arg&0x80 != 0 && w.bg != nil {
			token = w.token
		}
		_ = w.run(mig, w.mover(mig, token, nil), ctx)
	case 6:
		_ = w.finish(mig)
	case 7, 10: // a mover in the background, paused before its nth write; or let it on, the
		// application writing meanwhile if the argument says so
		if w.bg == nil {
			w.start(mig, n)
		} else {
			w.advance(n, int(arg>>5&3)*4)
		}
	case 8: // the operator publishes the migration back: the application routes by it
		// (coord's placement record takes a next migration once the one before is done)
		if w.finished[0] {
			w.cur = 1
		}
	case 9: // a mover of an older epoch than the store has seen
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		m := w.mover(mig, 1, func(p *proc) rebalance.SharedStore[*sql.Tx] {
			return &stopAt{Store: p.store, n: n, cancel: stop}
		})
		_ = w.run(mig, m, sctx)
	case 11: // the background mover let on to its end
		if w.bg != nil {
			w.advance(-1, int(arg&0x0f))
		}
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

// settle runs and finishes grow, then back if it was published, and checks every row.
func (w *opsWorld) settle() {
	for w.bg != nil {
		w.advance(-1, 0)
	}
	w.listed = slices.Clone(w.users)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range w.cur + 1 {
		if w.finished[i] {
			continue
		}
		var err error
		for range 3 {
			if err = w.run(i, w.mover(i, 0, nil), ctx); err == nil || errors.Is(err, rebalance.ErrFinished) {
				break
			}
		}
		if err != nil && !errors.Is(err, rebalance.ErrFinished) {
			w.t.Fatalf("settling: %s's Run: %v", w.ids[i], err)
		}
		if err := w.finish(i); err != nil {
			w.t.Fatalf("settling: %s's Finish: %v", w.ids[i], err)
		}
	}
	w.check(w.layout[1-w.cur], nil, "at the end")
}

// sharedOpsSeeds are FuzzSharedOperations' seeds, which TestSharedOperationsOnPostgres
// plays on PostgreSQL too. An operation is two bytes: its kind (mod 12) and its argument.
var sharedOpsSeeds = []string{
	"\x05\x00\x06\x00",                         // grow, finish
	"\x00\x01\x04\x05\x02\x01\x05\x00\x06\x00", // insert, crash at write 6, update, resume, finish
	"\x01\x81\x05\x00\x06\x00",                 // a new user nobody listed, grow, finish
	"\x04\x08\x09\x03\x00\x00\x06\x00",         // crash, an older epoch, insert, finish early
	// A mover paused before its 6th write; the application updates, deletes and
	// inserts; 4 writes further; an update; on to the end; finish.
	"\x07\x05\x02\x00\x03\x01\x00\x00\x0a\x03\x02\x02\x0b\x00\x06\x00",
	// Paused between two copy chunks; updates of rows copied and not copied yet; on.
	"\x07\x06\x02\x00\x02\x01\x02\x03\x02\x04\x02\x06\x02\x07\x02\x09\x02\x0a\x0b\x00\x06\x00",
	"\x07\x08\x05\x00\x06\x00\x02\x01\x0b\x00", // paused; a newer mover runs, finishes; let go
	"\x07\x03\x05\x80\x0b\x00\x06\x00",         // paused; a second mover of its epoch
	"\x07\x0c\x06\x00\x02\x00\x0a\x02\x06\x00", // paused in the copy; Finish early; update
	// Grow and finish; back published; a write by a process still routing by grow;
	// back in the background, paused; writes; on; finish.
	"\x05\x00\x06\x00\x08\x00\x00\x40\x07\x06\x02\x03\x02\x43\x0b\x00\x06\x00",
	// Grow, finish, back published; back runs in the background, paused; a grow mover
	// of an older process; writes of a process still routing by grow; on; finish.
	"\x05\x00\x06\x00\x08\x00\x07\x0a\x04\x00\x00\x42\x02\x41\x0b\x00\x06\x00",
}

func FuzzSharedOperations(f *testing.F) {
	for _, seed := range sharedOpsSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		playOps(newEngine(t, sqlstore.SQLite, 3, opsSchema, opsTables), t, ops)
	})
}

func TestSharedOperationsOnPostgres(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	for i, seed := range sharedOpsSeeds {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			playOps(newEngine(t, sqlstore.PostgreSQL, 3, opsSchema, opsTables), t, []byte(seed))
		})
	}
}

// TestSharedOperationsRandom plays SQLSTORE_OPS random sequences (none if unset) on each
// engine, from SQLSTORE_OPS_SEED (0 if unset): the fuzz's exploration where coverage
// guidance is not needed, and on PostgreSQL. A failing sequence is logged as a seed.
// TestOperationsRandom plays SQLSTORE_OPS random sequences of each operations fuzz target
// (FuzzSharedOperations, FuzzInProcessOperations) on each engine, from seed
// SQLSTORE_OPS_SEED, and names a failing one.
func TestOperationsRandom(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SQLSTORE_OPS"))
	if n <= 0 {
		t.Skip("SQLSTORE_OPS=N plays N random sequences")
	}
	seed, _ := strconv.ParseUint(os.Getenv("SQLSTORE_OPS_SEED"), 10, 64)
	forSchema(t, 3, opsSchema, opsTables, func(t *testing.T, e *engine) {
		for _, target := range []struct {
			name  string
			extra int // bytes before the operations
			play  func(*engine, *testing.T, []byte)
		}{{"shared", 0, playOps}, {"inproc", 1, playInproc}} {
			r := rand.New(rand.NewPCG(seed, 1))
			for i := range n {
				ops := make([]byte, target.extra+2*(2+r.IntN(15)))
				for j := range ops {
					ops[j] = byte(r.UintN(256))
				}
				if !t.Run(target.name+"/"+strconv.Itoa(i), func(t *testing.T) { target.play(e.fresh(t), t, ops) }) {
					t.Fatalf("%s sequence %d: %q", target.name, i, ops)
				}
			}
		}
	})
}

func playOps(e *engine, t *testing.T, ops []byte) {
	ops = ops[:min(len(ops), 32)]
	w := newOpsWorld(t, e)
	for i := 0; i+1 < len(ops); i += 2 {
		w.step(ops[i], ops[i+1])
	}
	w.settle()
}
