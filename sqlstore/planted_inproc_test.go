package sqlstore_test

// A moving user's row written on the user's new shard by something that does not route the
// user there, at each step of the in-process mover's move: an access of another user, who
// stays on that shard, writing the row; a script's INSERT; a script's UPDATE of the copy's
// row. Nothing fences the new shard in the in-process API: the write lands, and must not be
// replaced by the next copy.

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

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// roleHook is probeHook with Count and Sums named by the shard's role in the move
// ("Count@from", "Sums@to", ...).
type roleHook struct {
	*probeHook
	from, to int
}

func (h *roleHook) role(step string, shard int) string {
	switch shard {
	case h.from:
		return step + "@from"
	case h.to:
		return step + "@to"
	}
	return step + "@" + strconv.Itoa(shard)
}

func (h *roleHook) Count(ctx context.Context, owner string, shard int) (int64, error) {
	step := h.role("Count", shard)
	h.at(step, owner, false)
	n, err := h.Store.Count(ctx, owner, shard)
	h.at(step, owner, true)
	return n, err
}

func (h *roleHook) Sums(ctx context.Context, owners []string, shard int) ([]rebalance.Sum, error) {
	owner, step := "", h.role("Sums", shard)
	if len(owners) == 1 {
		owner = owners[0]
	}
	h.at(step, owner, false)
	sums, err := h.Store.Sums(ctx, owners, shard)
	h.at(step, owner, true)
	return sums, err
}

// TestInProcessPlantedOnNewShard writes a row of a moving user X on X's new shard at each
// step of the mover from its Copy to its mark copied (after which the shard serves X), the
// mover going on, or dying right after the write (a new process then runs). Where the
// write makes the copy differ, Run stops (ErrCopyMismatch) and the next Runs refuse
// (ErrStrayRows: the new shard holds what no copy wrote) until the operator brings the
// write to the old shard and clears the new one; Run and Finish then move it with X.
// Before, the next Run's Copy replaced X's rows on the new shard, the write with them, and
// Run and Finish returned nil.
func TestInProcessPlantedOnNewShard(t *testing.T) {
	steps := []struct {
		step  string
		after bool
	}{
		{"Copy", false}, {"Copy", true}, {"Count@from", false}, {"Count@from", true}, {"Count@to", true},
		{"Sums@from", false}, {"Sums@from", true}, {"Sums@to", true}, {"SetMark:copied", true},
	}
	forEngines(t, 1, func(t *testing.T, e *engine) {
		for _, mode := range []rebalance.Mode{rebalance.Async, rebalance.Lazy} {
			if mode == rebalance.Lazy && e.dialect == sqlstore.PostgreSQL {
				continue // the same Copy and comparison as Async: SQLite runs both
			}
			for _, via := range []string{"access", "insert", "update"} {
				for _, dies := range []bool{false, true} {
					for i, s := range steps {
						if e.dialect == sqlstore.PostgreSQL && i != 1 && i != 6 && i != 7 {
							continue // the first write after the copy, and around the last comparison
						}
						name := fmt.Sprintf("%v/%s/dies=%v/%s", mode, via, dies, strings.ReplaceAll(stepName(s.step, s.after), " ", "_"))
						t.Run(name, func(t *testing.T) { plantOnNewShard(t, e.dialect, mode, via, s.step, s.after, dies) })
					}
				}
			}
		}
	})
}

// plantWorld loads 3 users moving from shard 2 of 3 (Jump 3 -> 2), 5 rows each, and returns
// the first, X, with its shards, and a user Z who stays on X's new shard.
func plantWorld(t *testing.T, dialect sqlstore.Dialect) (e *engine, admin *proc, w *world, x string, from, to int, z string) {
	e = newEngine(t, dialect, 3, "", nil)
	admin = e.open(t, 2)
	w = newWorld(t, e, 3, 2)
	var moving []int
	for u := 1; len(moving) < 3; u++ {
		if w.before.Locate(strconv.Itoa(u)) == 2 {
			moving = append(moving, u)
		}
	}
	w.load(t, admin, moving, 5)
	x = w.users[0]
	from, to = w.before.Locate(x), w.after.Locate(x)
	for u := 5000; z == ""; u++ {
		if s := strconv.Itoa(u); w.before.Locate(s) == to && w.after.Locate(s) == to {
			z = s
		}
	}
	return e, admin, w, x, from, to, z
}

func plantOnNewShard(t *testing.T, dialect sqlstore.Dialect, mode rebalance.Mode, via, step string, after, dies bool) {
	ctx := context.Background()
	e, admin, w, x, from, to, z := plantWorld(t, dialect)
	xid, _ := strconv.ParseInt(x, 10, 64)
	newMigration := migrationOf(t, "plant", w, rebalance.Options{Mode: mode})
	p := e.open(t, 4)
	app := newMigration(p.store)

	// The write: a new row of X, or the copy's first row of X changed; id is its key.
	id, text := nextID.Add(1), "planted"
	var acked bool
	write := func() error {
		insert := "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $1, $3, 4)"
		switch via {
		case "access":
			return app.Do(ctx, z, func(s int) error {
				_, err := p.dbs[s].ExecContext(ctx, insert, id, xid, text)
				return err
			})
		case "insert":
			_, err := admin.dbs[to].ExecContext(ctx, insert, id, xid, text)
			return err
		}
		if err := admin.dbs[to].QueryRow("SELECT COALESCE(MIN(id), 0) FROM messages WHERE user_id = $1", xid).Scan(&id); err != nil || id == 0 {
			return fmt.Errorf("no row of X to update (%v)", err) // before the copy: nothing written
		}
		res, err := admin.dbs[to].ExecContext(ctx, "UPDATE messages SET message = $1 WHERE id = $2", text, id)
		if err == nil {
			if n, _ := res.RowsAffected(); n != 1 {
				err = fmt.Errorf("updated %d rows", n)
			}
		}
		return err
	}
	runCtx, die := context.WithCancel(ctx)
	defer die()
	hook := &roleHook{from: from, to: to}
	hook.probeHook = newProbeHook(p.store, step, x, after, func() {
		done := make(chan error, 1)
		go func() { done <- write() }()
		select {
		case err := <-done:
			acked = err == nil
			t.Logf("the write at %s: %v", stepName(step, after), errString(err))
		case <-time.After(5 * time.Second):
			t.Errorf("the write at %s still waits after 5 s", stepName(step, after))
		}
		if dies {
			die()
		}
	})
	mover := newMigration(hook)
	err := mover.Run(runCtx, slices.Values(w.users))
	if !hook.fired {
		t.Fatalf("the hook at %s never fired (Run: %v)", stepName(step, after), err)
	}
	if acked && via != "update" {
		w.ledger[id] = xid
	}
	if dies {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the first Run, stopped by the hook: %v", err)
		}
		mover, err = newMigration(e.open(t, 4).store), nil // the next process
	}
	moveSettling(t, mover, w, admin, xid, from, to, err)
	if acked {
		var got string
		if err := admin.dbs[to].QueryRow("SELECT message FROM messages WHERE id = $1", id).Scan(&got); err != nil || got != text {
			t.Fatalf("the acknowledged write of row %d on shard %d: %q, %v; want %q", id, to, got, err, text)
		}
	}
}

// moveSettling runs mover until Run returns nil, err the first Run's error (nil: none yet),
// settling user's rows once on the first ErrStrayRows, then Finish; and checks every
// acknowledged row of w where the after sharder places it.
func moveSettling(t *testing.T, mover *rebalance.Migration, w *world, admin *proc, user int64, from, to int, err error) {
	t.Helper()
	ctx := context.Background()
	settled := false
	for try := 0; err != nil || try == 0; try++ {
		if err != nil {
			t.Logf("Run: %v", err)
		}
		switch {
		case try == 5:
			t.Fatalf("Run still fails after %d tries", try)
		case errors.Is(err, rebalance.ErrStrayRows) && !settled:
			settle(t, admin, user, from, to)
			settled = true
		case errors.Is(err, rebalance.ErrStrayRows):
			t.Fatalf("Run after the rows were settled: %v", err)
		}
		err = mover.Run(ctx, slices.Values(w.users))
	}
	if err := mover.Finish(ctx, slices.Values(w.users)); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if v := w.verify(t, admin, w.after); v.lost+v.duplicated+v.misplaced != 0 {
		t.Fatalf("after Run and Finish returned nil: %v", v)
	}
}

// TestInProcessWrittenDuringTheCopy writes a row of a moving user X on X's new shard from
// another connection while the mover's Copy runs in its transaction there: after its
// inserts ("copied"), and, in a Copy that replaces a stopped copy of its own, between its
// sum of what the shard holds and its deletion ("held"). On PostgreSQL the write commits at
// once: the Copy finds more rows than it wrote, or deletes more than it summed, and refuses
// (ErrStrayRows), changing nothing. On SQLite the write waits for the Copy's commit, and the
// comparison after it stops the move. Either way the row stays, and moves with X once the
// operator settled it. Before, on PostgreSQL the Copy recorded the row as its own ("copied")
// or deleted it unseen ("held"), and the next Run replaced it.
func TestInProcessWrittenDuringTheCopy(t *testing.T) {
	forEngines(t, 1, func(t *testing.T, e *engine) {
		for _, step := range []string{"copied", "held"} {
			t.Run(step, func(t *testing.T) {
				ctx := context.Background()
				e, admin, w, x, from, to, _ := plantWorld(t, e.dialect)
				xid, _ := strconv.ParseInt(x, 10, 64)
				newMigration := migrationOf(t, "during", w, rebalance.Options{})
				p := e.open(t, 4)
				if step == "held" { // a copy stopped once committed: the next Copy replaces it
					stopAfterCopy(t, newMigration, p.store, w, x)
					p = e.open(t, 4)
				}
				id, done := nextID.Add(1), make(chan struct{})
				var once sync.Once
				var writeErr error
				p.store.OnCopyStep(func(s, owner string) {
					if s != step || owner != x {
						return
					}
					once.Do(func() {
						go func() {
							defer close(done)
							_, writeErr = admin.dbs[to].Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $1, 'during', 4)", id, xid)
						}()
						if e.dialect == sqlstore.PostgreSQL {
							<-done // commits at once: the copy holds no lock it needs
						}
					})
				})
				err := newMigration(p.store).Run(ctx, slices.Values(w.users))
				<-done
				if writeErr != nil {
					t.Fatalf("the write during the copy: %v", writeErr)
				}
				w.ledger[id] = xid
				if e.dialect == sqlstore.PostgreSQL && !errors.Is(err, rebalance.ErrStrayRows) {
					t.Errorf("the Run with a write during its copy: %v, want ErrStrayRows", err)
				}
				p.store.OnCopyStep(nil)
				moveSettling(t, newMigration(p.store), w, admin, xid, from, to, err)
			})
		}
	})
}

// stopAfterCopy runs the Migration newMigration makes over st, and stops it (as a mover that
// dies) right after the Copy of owner committed.
func stopAfterCopy(t *testing.T, newMigration func(rebalance.Store) *rebalance.Migration, st *sqlstore.Store, w *world, owner string) {
	t.Helper()
	runCtx, die := context.WithCancel(context.Background())
	defer die()
	hook := newProbeHook(st, "Copy", owner, true, die)
	if err := newMigration(hook).Run(runCtx, slices.Values(w.users)); !errors.Is(err, context.Canceled) || !hook.fired {
		t.Fatalf("the Run stopped after the copy: %v", err)
	}
}

// migrationOf returns a function that makes the Migration id of w over a Store.
func migrationOf(t *testing.T, id string, w *world, opts rebalance.Options) func(rebalance.Store) *rebalance.Migration {
	return func(st rebalance.Store) *rebalance.Migration {
		m, err := rebalance.New(id, w.before, w.after, st, opts)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// settle is the operator's answer to ErrStrayRows on user's new shard to: the rows there
// that the old shard from lacks or holds otherwise are the application's: they are brought
// to from, which serves the user; then the user's rows on to are deleted.
func settle(t *testing.T, admin *proc, user int64, from, to int) {
	t.Helper()
	rows, err := admin.dbs[to].Query("SELECT id, time, message, sender FROM messages WHERE user_id = $1", user)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id, time, sender int64
		message          string
	}
	var held []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.time, &r.message, &r.sender); err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	for _, r := range held {
		var message string
		switch err := admin.dbs[from].QueryRow("SELECT message FROM messages WHERE id = $1", r.id).Scan(&message); {
		case errors.Is(err, sql.ErrNoRows):
			_, err = admin.dbs[from].Exec("INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)", r.id, user, r.time, r.message, r.sender)
			if err != nil {
				t.Fatal(err)
			}
		case err != nil:
			t.Fatal(err)
		case message != r.message:
			if _, err := admin.dbs[from].Exec("UPDATE messages SET message = $1 WHERE id = $2", r.message, r.id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := admin.dbs[to].Exec("DELETE FROM messages WHERE user_id = $1", user); err != nil {
		t.Fatal(err)
	}
	t.Logf("settled: %d rows of user %d on shard %d brought to shard %d where they differed, then deleted there", len(held), user, to, from)
}

// TestInProcessCopyOverAnOlderBuildsCopy: a copy stopped after its commit, recorded by an
// older build (no sums), is replaced by the next Copy, as that build did.
func TestInProcessCopyOverAnOlderBuildsCopy(t *testing.T) {
	forEngines(t, 1, func(t *testing.T, e *engine) {
		e, admin, w, x, from, to, _ := plantWorld(t, e.dialect)
		m := migrationOf(t, "older", w, rebalance.Options{})
		p := e.open(t, 4)
		stopAfterCopy(t, m, p.store, w, x)
		mustExec(t, p.ctl, "UPDATE rebalance_copying SET sums = NULL")
		mustExec(t, admin.dbs[from], "UPDATE messages SET message = 'changed since the copy' WHERE user_id = "+x)
		moveSettling(t, m(e.open(t, 4).store), w, admin, 0, from, to, nil)
		var n int
		if err := admin.dbs[to].QueryRow("SELECT COUNT(*) FROM messages WHERE message = 'changed since the copy'").Scan(&n); err != nil || n != 5 {
			t.Fatalf("rows changed since the stopped copy on the new shard: %d, %v; want 5", n, err)
		}
	})
}

// TestInProcessCopyOverAnOlderContent: two copies of X stopped after their commits, the
// application changing a row of X on the old shard between them (from text A to B); then a
// write on the new shard, around the library, sets the row back to A (or inserts it again,
// the application having deleted it). The shard's rows then sum to the first copy's: they
// are not a copy, and Run refuses them until the operator settles them. Before, every
// copy's sum stayed recorded: the next Copy took them for the first copy and replaced the
// write with B, and Run and Finish returned nil.
func TestInProcessCopyOverAnOlderContent(t *testing.T) {
	forEngines(t, 1, func(t *testing.T, e *engine) {
		for _, change := range []string{"update", "delete"} {
			t.Run(change, func(t *testing.T) {
				ctx := context.Background()
				e, admin, w, x, from, to, _ := plantWorld(t, e.dialect)
				xid, _ := strconv.ParseInt(x, 10, 64)
				m := migrationOf(t, "older", w, rebalance.Options{})
				var id, at int64
				var text string
				if err := admin.dbs[from].QueryRow("SELECT id, time, message FROM messages WHERE user_id = $1 ORDER BY id LIMIT 1", xid).Scan(&id, &at, &text); err != nil {
					t.Fatal(err)
				}
				stopAfterCopy(t, m, e.open(t, 4).store, w, x)
				change := map[string]string{"update": "UPDATE messages SET message = 'B' WHERE id = $1", "delete": "DELETE FROM messages WHERE id = $1"}[change]
				if err := m(e.open(t, 4).store).Do(ctx, x, func(s int) error {
					_, err := admin.dbs[s].ExecContext(ctx, change, id)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				stopAfterCopy(t, m, e.open(t, 4).store, w, x)
				back, args := "UPDATE messages SET message = $2 WHERE id = $1", []any{id, text}
				if strings.HasPrefix(change, "DELETE") {
					back, args = "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $3, $4, $2, 7)", append(args, xid, at)
				}
				if res, err := admin.dbs[to].Exec(back, args...); err != nil {
					t.Fatal(err)
				} else if n, _ := res.RowsAffected(); n != 1 {
					t.Fatalf("the write around the library changed %d rows", n)
				}
				w.ledger[id] = xid
				moveSettling(t, m(e.open(t, 4).store), w, admin, xid, from, to, nil)
				var got string
				if err := admin.dbs[w.after.Locate(x)].QueryRow("SELECT message FROM messages WHERE id = $1", id).Scan(&got); err != nil || got != text {
					t.Fatalf("row %d, written %q last: %q, %v", id, text, got, err)
				}
			})
		}
	})
}
