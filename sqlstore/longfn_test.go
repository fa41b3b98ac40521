package sqlstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// longEnv, when set, makes the test binary a process that runs one Do of an in-process
// Migration whose function takes longer than rebalance.ProcessWindow (see
// TestInProcessLongFunctionKeepsItsProcessBound): its value is a childConfig in JSON.
const longEnv = "SQLSTORE_TEST_LONG_FN"

// longFnMain runs, through a rebalance.New of its own (or a NewRepin, whose directory
// places the users by the before sharder), a Do of the first user whose function
// prints "started", waits ProcessWindow and 2 s more, then updates every row of the user on
// the shard it was given and prints "updated N".
func longFnMain() int {
	c, p, _, err := openChild(longEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "long fn:", err)
		return 2
	}
	before, _ := shard.NewJump(c.From)
	after, _ := shard.NewJump(c.To)
	var do func(ctx context.Context, owner string, fn func(int) error) error
	if c.Repin {
		r, err := rebalance.NewRepin(c.Migration, shard.NewDirectory(before, nil), after, p.store, rebalance.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "long fn:", err)
			return 2
		}
		do = r.Do
	} else {
		m, err := rebalance.New(c.Migration, before, after, p.store, rebalance.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "long fn:", err)
			return 2
		}
		do = m.Do
	}
	ctx := context.Background()
	uid, _ := strconv.ParseInt(c.Users[0], 10, 64)
	err = do(ctx, c.Users[0], func(s int) error {
		fmt.Println("started")
		time.Sleep(rebalance.ProcessWindow + 2*time.Second)
		res, err := p.dbs[s].ExecContext(ctx, "UPDATE messages SET message = 'long' WHERE user_id = $1", uid)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		fmt.Println("updated", n)
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "long fn:", err)
		return 3
	}
	return 0
}

// TestInProcessLongFunctionKeepsItsProcessBound: another process's Do runs a function on a
// moving user's old shard for longer than rebalance.ProcessWindow, then updates the user's
// rows there, while this process's mover tries to Run every 100 ms. The other process binds
// itself again while its function runs: Run is refused (ErrOtherProcess) until the function
// has returned, and the update moves with the user. Before, the binding lapsed
// ProcessWindow after the Do's placement check: the mover moved the user under the
// function, whose UPDATE then changed no row and was acknowledged.
func TestInProcessLongFunctionKeepsItsProcessBound(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		for _, repin := range []bool{false, true} {
			if repin && e.dialect == sqlstore.PostgreSQL {
				continue // the same binding as the Migration's: SQLite runs both
			}
			t.Run(map[bool]string{false: "migration", true: "repin"}[repin], func(t *testing.T) { longFunction(t, e, repin) })
		}
	})
}

// longFunction is TestInProcessLongFunctionKeepsItsProcessBound's run, the mover a Repin's
// Move (between batches, the other process's Do routes by its directory) if repin.
func longFunction(t *testing.T, e *engine, repin bool) {
	ctx := context.Background()
	e = newEngine(t, e.dialect, 2, "", nil)
	admin := e.open(t, 2)
	w := newWorld(t, e, 1, 2)
	users := w.moving(1, 1)
	if repin { // the directory places the users by Jump(2), where they are
		w, users = newWorld(t, e, 2, 2), []int{1}
	}
	w.load(t, admin, users, 5)
	u := w.users[0]
	uid, _ := strconv.ParseInt(u, 10, 64)
	cmd, out := startChild(t, longEnv, childConfig{Dialect: e.dialect, Shards: e.shards, Control: e.control,
		From: w.before.Shards(), To: w.after.Shards(), Migration: "long", Repin: repin, Users: []string{u}, Ledger: os.DevNull})
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	type line struct {
		text string
		at   time.Time
	}
	lines := make(chan line, 4)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- line{s.Text(), time.Now()}
		}
		close(lines)
	}()
	if l := <-lines; l.text != "started" {
		t.Fatalf("the other process printed %q, want started", l.text)
	}
	store := e.open(t, 4).store
	var move func() error
	to := w.after.Locate(u)
	if repin {
		r, _ := newRepin(t, "long", store, 2, nil)
		to = 1 - w.before.Locate(u)
		move = func() error { return r.Move(ctx, map[string]int{u: to}) }
	} else {
		m := migrationOf(t, "long", w, rebalance.Options{})(store)
		move = func() error {
			if err := m.Run(ctx, slices.Values(w.users)); err != nil {
				return err
			}
			return m.Finish(ctx, slices.Values(w.users))
		}
	}
	refused := 0
	for err := move(); err != nil; err = move() {
		if !errors.Is(err, rebalance.ErrOtherProcess) || refused > 300 {
			t.Fatalf("the move after %d refusals: %v", refused, err)
		}
		refused++
		time.Sleep(100 * time.Millisecond)
	}
	moved := time.Now()
	l := <-lines
	if l.text != "updated 5" || !l.at.Before(moved) {
		t.Fatalf("the other process printed %q at %v, the mover moved by %v (after %d refusals); want updated 5 before",
			l.text, l.at.Format(time.StampMilli), moved.Format(time.StampMilli), refused)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the other process: %v", err)
	}
	var n int
	if err := admin.dbs[to].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1 AND message = 'long'", uid).Scan(&n); err != nil || n != 5 {
		t.Fatalf("rows of user %s updated by the other process on its new shard %d: %d, %v; want 5", u, to, n, err)
	}
	t.Logf("the move refused %d times, until the other process's function returned", refused)
}
