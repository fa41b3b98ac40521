package sqlstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// routerEnv, when set, makes the test binary a process that routes by an in-process
// Migration (see TestInProcessMigrationOfTwoProcesses): its value is a childConfig in JSON.
const routerEnv = "SQLSTORE_TEST_ROUTER"

// routerMain inserts messages of random users and updates its own, in 4 goroutines, through
// a rebalance.New of its own (with Repin, a rebalance.NewRepin whose rule is the after
// sharder, of as many shards as the before one), and appends each acknowledged write to the
// ledger ("id user text", one write(2) a line), until it is killed. An UPDATE counts as acknowledged when it
// returns no error, as for an application that does not look at the rows it changed. It
// prints "wrote" at its first acknowledged write and at the first after a refusal, and
// "refused" at the first ErrOtherProcess or ErrPlacement after a write (or at its start).
func routerMain() int {
	c, p, ledger, err := openChild(routerEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "router:", err)
		return 2
	}
	before, _ := shard.NewJump(c.From)
	after, _ := shard.NewJump(c.To)
	var do func(owner string, fn func(shard int) error) error
	if c.Repin {
		r, err := rebalance.NewRepin(c.Migration, shard.NewDirectory(before, nil), after, p.store, rebalance.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "router:", err)
			return 2
		}
		do = func(owner string, fn func(int) error) error { return r.Do(context.Background(), owner, fn) }
	} else {
		m, err := rebalance.New(c.Migration, before, after, p.store, rebalance.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "router:", err)
			return 2
		}
		do = func(owner string, fn func(int) error) error { return m.Do(context.Background(), owner, fn) }
	}
	var (
		ids   atomic.Int64
		mu    sync.Mutex // guards the ledger, state and stdout
		state string
	)
	say := func(s string) {
		if state != s {
			state = s
			fmt.Println(s)
		}
	}
	ids.Store(c.IDBase)
	ctx := context.Background()
	for g := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(c.IDBase), uint64(g)))
			type message struct{ id, user int64 }
			var mine []message
			for n := 0; ; n++ {
				var msg message
				text := "from a router"
				query := "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, 3)"
				if len(mine) > 0 && r.IntN(2) == 0 {
					msg = mine[r.IntN(len(mine))]
					text = "updated " + strconv.Itoa(n)
					query = "UPDATE messages SET message = $4 WHERE id = $1 AND user_id = $2 AND time = $3"
				} else {
					msg.id = ids.Add(1)
					msg.user, _ = strconv.ParseInt(c.Users[r.IntN(len(c.Users))], 10, 64)
				}
				err := do(strconv.FormatInt(msg.user, 10), func(s int) error {
					_, err := p.dbs[s].ExecContext(ctx, query, msg.id, msg.user, msg.id, text)
					return err
				})
				mu.Lock()
				switch {
				case errors.Is(err, rebalance.ErrOtherProcess) || errors.Is(err, rebalance.ErrPlacement):
					say("refused")
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					continue
				case err != nil:
					fmt.Fprintln(os.Stderr, "router: write:", err)
					os.Exit(3)
				}
				if _, err := fmt.Fprintf(ledger, "%d %d %s\n", msg.id, msg.user, text); err != nil {
					fmt.Fprintln(os.Stderr, "router: ledger:", err)
					os.Exit(3)
				}
				say("wrote")
				mu.Unlock()
				if !slices.Contains(mine, msg) {
					mine = append(mine, msg)
				}
			}
		}()
	}
	select {}
}

// router is a routerMain process under test.
type router struct {
	cmd   *exec.Cmd
	lines chan string
}

func startRouter(t *testing.T, e *engine, w *world, migration string, repin bool, ledger string, n int) *router {
	cmd, out := startChild(t, routerEnv, childConfig{Dialect: e.dialect, Shards: e.shards, Control: e.control,
		From: w.before.Shards(), To: w.after.Shards(), Migration: migration, Repin: repin, Users: w.users, Ledger: ledger, IDBase: int64(n) << 40})
	r := &router{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			r.lines <- s.Text()
		}
		close(r.lines)
	}()
	t.Cleanup(r.kill)
	return r
}

// await waits for the router to print want, and fails the test if it prints anything else
// first, or nothing for 30 s.
func (r *router) await(t *testing.T, want string) {
	t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok || line != want {
			t.Fatalf("router printed %q (open: %v), want %q", line, ok, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("router printed nothing for 30 s, want %q", want)
	}
}

func (r *router) kill() {
	if r.cmd.ProcessState == nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// TestInProcessMigrationOfTwoProcesses uses one in-process migration from two processes, as
// two replicas of an application would: its locks live in one of them, so a write of the
// other while a mover in the first moves the owner would be lost (an UPDATE after the
// deletion of the old copy changes no row and is acknowledged). The store binds the
// migration to one process at a time: while a router process writes, this process's Run and
// Do are refused (ErrOtherProcess); once it is killed, the mover runs after
// rebalance.ProcessWindow; a second router started while the mover moves is refused until
// Finish, and then writes by the after sharder. Every acknowledged insert and update is
// found, on its user's shard, with its last text.
func TestInProcessMigrationOfTwoProcesses(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, span(1, 40), 20)
		ledger := filepath.Join(t.TempDir(), "ledger")
		var second *router
		var once sync.Once
		m, err := rebalance.New("two", w.before, w.after, e.open(t, 4).store, rebalance.Options{
			Progress: func(rebalance.Progress) {
				once.Do(func() { // the mover waits: its claim holds the migration
					second = startRouter(t, e, w, "two", false, ledger, 2)
					second.await(t, "refused")
				})
			}})
		if err != nil {
			t.Fatal(err)
		}

		first := startRouter(t, e, w, "two", false, ledger, 1)
		first.await(t, "wrote")
		time.Sleep(200 * time.Millisecond) // more writes to check
		err = m.Run(ctx, slices.Values(w.users))
		var pe *rebalance.ProcessError
		if !errors.As(err, &pe) || pe.Moving || pe.Left <= 0 || pe.Left > rebalance.ProcessWindow {
			t.Fatalf("Run while another process routes: %v, want a *ProcessError of a process routing", err)
		}
		t.Logf("Run refused: %v", err)
		if err := m.Do(ctx, w.users[0], func(int) error { return errors.New("ran") }); !errors.Is(err, rebalance.ErrOtherProcess) {
			t.Fatalf("Do while another process routes: %v, want ErrOtherProcess", err)
		}

		first.kill()
		killed := time.Now()
		for {
			err = m.Run(ctx, slices.Values(w.users))
			if !errors.Is(err, rebalance.ErrOtherProcess) || time.Since(killed) > 3*rebalance.ProcessWindow {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("Run once the other process is gone: %v", err)
		}
		if second == nil {
			t.Fatal("Run moved no owner")
		}
		if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		second.await(t, "wrote") // by the after sharder: a finished migration binds nobody
		time.Sleep(50 * time.Millisecond)
		second.kill()

		checkRouted(t, w, admin, ledger, w.after, 2)
	})
}

// TestRepinOfTwoProcesses: a Repin's batch moves owners in-process too. While a process that
// routes by the directory of a Repin of the same ID writes, this process's Move is refused
// (ErrOtherProcess) before its batch claims: that process's last check of the shards may be
// a second old, and its write after the batch deleted an old copy would be lost. Once it is
// killed, the Move goes through after rebalance.ProcessWindow; a second router started during
// the batch is refused. Every acknowledged write is found where the pinned directory places
// its user, with its last text.
func TestRepinOfTwoProcesses(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 3)
		w.load(t, admin, span(1, 30), 20)
		ledger := filepath.Join(t.TempDir(), "ledger")
		pins := map[string]int{}
		for _, u := range w.users[:6] {
			pins[u] = (w.before.Locate(u) + 1) % 3
		}
		fallback, _ := shard.NewJump(3)
		rule, _ := shard.NewJump(3)
		d := shard.NewDirectory(fallback, nil)
		var second *router
		var once sync.Once
		r, err := rebalance.NewRepin("pins", d, rule, e.open(t, 4).store, rebalance.Options{
			Progress: func(rebalance.Progress) {
				once.Do(func() {
					second = startRouter(t, e, w, "pins", true, ledger, 2)
					second.await(t, "refused")
				})
			}})
		if err != nil {
			t.Fatal(err)
		}
		first := startRouter(t, e, w, "pins", true, ledger, 1)
		first.await(t, "wrote")
		time.Sleep(200 * time.Millisecond) // more writes to check
		if err := r.Move(ctx, pins); !errors.Is(err, rebalance.ErrOtherProcess) {
			t.Fatalf("Move while another process routes by the directory: %v, want ErrOtherProcess", err)
		}
		first.kill()
		killed := time.Now()
		for {
			err = r.Move(ctx, pins)
			if !errors.Is(err, rebalance.ErrOtherProcess) || time.Since(killed) > 3*rebalance.ProcessWindow {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("Move once the other process is gone: %v", err)
		}
		if second == nil {
			t.Fatal("the batch moved no owner")
		}
		second.kill()
		checkRouted(t, w, admin, ledger, d, 2)
	})
}

// checkRouted reads the ledger of routers processes killed and checks the world against it:
// every acknowledged message once, where s places its user, with its last acknowledged text.
func checkRouted(t *testing.T, w *world, admin *proc, ledger string, s shard.Sharder, routers int) {
	t.Helper()
	data, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	last := map[int64]string{}
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
		id, err1 := strconv.ParseInt(f[0], 10, 64)
		uid, err2 := strconv.ParseInt(f[1], 10, 64)
		if len(f) != 3 || err1 != nil || err2 != nil || !strings.HasSuffix(line, "\n") {
			t.Fatalf("ledger line %q", line)
		}
		w.ledger[id], last[id] = uid, f[2]
	}
	v := w.requireClean(t, admin, s)
	// A router killed while it updated may have committed a later text than its ledger
	// says: one update a goroutine at most. An update lost leaves an earlier text.
	version := func(text string) int {
		n, err := strconv.Atoi(strings.TrimPrefix(text, "updated "))
		if err != nil {
			return -1
		}
		return n
	}
	changed, unacked := 0, 0
	for id, want := range last {
		uid := strconv.FormatInt(w.ledger[id], 10)
		var got string
		err := admin.dbs[s.Locate(uid)].QueryRow("SELECT message FROM messages WHERE id = $1", id).Scan(&got)
		switch {
		case err != nil || version(got) < version(want):
			t.Errorf("message %d of user %s: %q, %v; its last acknowledged write made it %q", id, uid, got, err, want)
		case got != want:
			unacked++
		}
		if want != "from a router" {
			changed++
		}
	}
	if unacked > 4*routers {
		t.Errorf("%d messages hold a text written after their last acknowledged write: more than the 4 goroutines of each router killed could", unacked)
	}
	t.Logf("%d messages written by the routers, %d of them last updated, %d later than acknowledged by a router killed as it updated; %v",
		len(last), changed, unacked, v)
}
