package sqlstore_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// childEnv, when set, makes the test binary a writer process (see TestKilledWriterProcess):
// its value is a childConfig in JSON.
const childEnv = "SQLSTORE_TEST_CHILD"

type childConfig struct {
	Dialect   sqlstore.Dialect
	Shards    []string
	Control   string
	From, To  int
	Migration string
	Repin     bool // routerMain: route by a Repin of ID Migration
	Users     []string
	Ledger    string
	IDBase    int64
}

// childMain writes messages of random users through a Shared of its own, in 4 goroutines,
// and appends each acknowledged message to the ledger file (one write(2) per line, so a kill
// leaves whole lines), until it is killed. It prints "ready" after its first write.
func childMain() int {
	c, p, ledger, err := openChild(childEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	before, _ := shard.NewJump(c.From)
	after, _ := shard.NewJump(c.To)
	m, err := rebalance.NewShared(c.Migration, before, after, rebalance.SharedStore[*sql.Tx](p.store), rebalance.SharedOptions{FenceWait: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	var (
		ids   atomic.Int64
		mu    sync.Mutex
		ready sync.Once
	)
	ids.Store(c.IDBase)
	ctx := context.Background()
	for g := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(c.IDBase), uint64(g)))
			for {
				u := c.Users[r.IntN(len(c.Users))]
				uid, _ := strconv.ParseInt(u, 10, 64)
				id := ids.Add(1)
				err := m.Do(ctx, u, func(tx *sql.Tx, _ int) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, 'from a child', 2)",
						id, uid, time.Now().UnixNano())
					return err
				})
				if err != nil {
					fmt.Fprintln(os.Stderr, "child: write:", err)
					os.Exit(3)
				}
				mu.Lock()
				_, err = ledger.WriteString(fmt.Sprintf("%d %d\n", id, uid))
				mu.Unlock()
				if err != nil {
					fmt.Fprintln(os.Stderr, "child: ledger:", err)
					os.Exit(3)
				}
				ready.Do(func() { fmt.Println("ready") })
			}
		}()
	}
	select {}
}

// openChild reads a child process's childConfig from env, opens its Store and its ledger.
func openChild(env string) (childConfig, *proc, *os.File, error) {
	var c childConfig
	if err := json.Unmarshal([]byte(os.Getenv(env)), &c); err != nil {
		return c, nil, nil, err
	}
	e := &engine{dialect: c.Dialect, driver: map[sqlstore.Dialect]string{sqlstore.SQLite: "sqlite", sqlstore.PostgreSQL: "pgx"}[c.Dialect],
		shards: c.Shards, control: c.Control}
	p, err := e.openErr(4)
	if err != nil {
		return c, nil, nil, err
	}
	ledger, err := os.OpenFile(c.Ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	return c, p, ledger, err
}

// startChild starts this test binary as a child process with env set to cfg in JSON (see
// TestMain), and returns it and its standard output.
func startChild(t testing.TB, env string, cfg any) (*exec.Cmd, io.ReadCloser) {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(js))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// TestKilledWriterProcess runs writer processes (this test binary re-executed) while this
// process moves the users, kills the first with SIGKILL in the middle of the move, starts a
// second, kills that one too once the move is over, and checks every acknowledged message of
// every process: nothing lost, duplicated or misplaced.
func TestKilledWriterProcess(t *testing.T) {
	forEngines(t, 5, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 5)
		w.load(t, admin, span(1, 60), 30)
		ledger := filepath.Join(t.TempDir(), "ledger")
		start := func(n int) (*exec.Cmd, func()) {
			cmd, out := startChild(t, childEnv, childConfig{Dialect: e.dialect, Shards: e.shards, Control: e.control, From: 3, To: 5,
				Migration: "kill", Users: w.users, Ledger: ledger, IDBase: int64(n) << 40})
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child %d did not start writing: %q %v", n, line, err)
			}
			return cmd, func() {
				cmd.Process.Signal(syscall.SIGKILL)
				err := cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Errorf("child %d did not die of SIGKILL: %v", n, err)
				}
			}
		}
		_, kill1 := start(1)
		var kill2 func()
		half := make(chan struct{})
		var once sync.Once
		mover := w.shared(t, e.open(t, 4), "kill", rebalance.SharedOptions{Token: 1, Concurrency: 2, ChunkRows: 5,
			Progress: func(p rebalance.Progress) {
				if p.Done >= p.Total/2 {
					once.Do(func() { close(half) })
				}
			}})
		done := make(chan error, 1)
		go func() { done <- mover.Run(ctx, slices.Values(w.users)) }()
		select {
		case <-half:
		case err := <-done:
			done <- err
		}
		kill1() // mid-move, mid-write: the child writes without pause
		_, kill2 = start(2)
		if err := <-done; err != nil {
			kill2()
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		kill2()

		data, err := os.ReadFile(ledger)
		if err != nil {
			t.Fatal(err)
		}
		acked := 0
		for line := range strings.Lines(string(data)) {
			var id, uid int64
			if _, err := fmt.Sscanf(line, "%d %d\n", &id, &uid); err != nil || !strings.HasSuffix(line, "\n") {
				t.Fatalf("ledger line %q: %v", line, err)
			}
			w.ledger[id] = uid
			acked++
		}
		v := w.requireClean(t, admin, w.after)
		t.Logf("2 writer processes killed with SIGKILL (one mid-move): %d of their writes acknowledged; %v", acked, v)
		if acked == 0 {
			t.Fatal("the children acknowledged no write")
		}
	})
}
