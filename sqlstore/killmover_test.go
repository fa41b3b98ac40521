package sqlstore_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// TestKilledMoverProcess: the mover runs in a process of its own (this test binary
// re-executed, see moverMain) and is killed with SIGKILL at a random point of the move,
// again and again, while writers of this process insert messages and update the ones they
// inserted, and delete some. Each next mover takes the migration over with a newer election epoch and
// resumes whatever the last one left: a chunk half written, a fence set and nothing copied,
// an owner in its exclusive window, an old copy half deleted. A last one completes the
// move, Finish must return nil, and every acknowledged insert must be found once, on its
// user's new shard, with the text of its last acknowledged update, and no deleted one may
// come back. Every update and deletion must find its row where Do routes it, all through
// the move.
func TestKilledMoverProcess(t *testing.T) {
	forEngines(t, 5, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 5)
		w.load(t, admin, span(1, 60), 30)
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		r := rand.New(rand.NewPCG(seed, 0))

		var (
			stop     atomic.Bool
			writers  sync.WaitGroup
			mu       sync.Mutex
			latest   = map[int64]string{} // acknowledged message ID -> its last acknowledged text
			deleted  = map[int64]bool{}   // acknowledged deletions
			firstErr atomic.Pointer[error]
			ops      atomic.Int64
		)
		fail := func(err error) { firstErr.CompareAndSwap(nil, &err) }
		for g := range 3 {
			m := w.shared(t, e.open(t, 2), "killed", rebalance.SharedOptions{FenceWait: time.Minute})
			writers.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(g)+1))
				var mine []int64 // the IDs this writer inserted, so that it alone updates them
				for n := 0; !stop.Load() && firstErr.Load() == nil; n++ {
					switch op := r.IntN(10); {
					case len(mine) == 0 || op < 5:
						u := w.users[r.IntN(len(w.users))]
						uid, _ := strconv.ParseInt(u, 10, 64)
						id := nextID.Add(1)
						err := m.Do(ctx, u, func(tx *sql.Tx, _ int) error {
							_, err := tx.ExecContext(ctx, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, 0, 'inserted', 1)", id, uid)
							return err
						})
						if err != nil {
							fail(fmt.Errorf("insert of message %d of user %s: %w", id, u, err))
							return
						}
						w.mu.Lock()
						w.ledger[id] = uid
						w.mu.Unlock()
						mu.Lock()
						latest[id] = "inserted"
						mu.Unlock()
						mine = append(mine, id)
					case op < 8:
						id := mine[r.IntN(len(mine))]
						w.mu.Lock()
						u := strconv.FormatInt(w.ledger[id], 10)
						w.mu.Unlock()
						text := fmt.Sprintf("update %d of writer %d", n, g)
						var found int64
						err := m.Do(ctx, u, func(tx *sql.Tx, _ int) error {
							res, err := tx.ExecContext(ctx, "UPDATE messages SET message = $1 WHERE id = $2", text, id)
							if err == nil {
								found, err = res.RowsAffected()
							}
							return err
						})
						if err == nil && found != 1 {
							err = fmt.Errorf("updated %d rows where Do routed user %s", found, u)
						}
						if err != nil {
							fail(fmt.Errorf("update of message %d: %w", id, err))
							return
						}
						mu.Lock()
						latest[id] = text
						mu.Unlock()
					default:
						i := r.IntN(len(mine))
						id := mine[i]
						w.mu.Lock()
						uid := w.ledger[id]
						w.mu.Unlock()
						var found int64
						err := m.Do(ctx, strconv.FormatInt(uid, 10), func(tx *sql.Tx, _ int) error {
							res, err := tx.ExecContext(ctx, "DELETE FROM messages WHERE id = $1", id)
							if err == nil {
								found, err = res.RowsAffected()
							}
							return err
						})
						if err == nil && found != 1 {
							err = fmt.Errorf("deleted %d rows where Do routed user %d", found, uid)
						}
						if err != nil {
							fail(fmt.Errorf("delete of message %d: %w", id, err))
							return
						}
						w.mu.Lock()
						delete(w.ledger, id)
						w.mu.Unlock()
						mu.Lock()
						delete(latest, id)
						deleted[id] = true
						mu.Unlock()
						mine = slices.Delete(mine, i, i+1)
					}
					ops.Add(1)
					time.Sleep(time.Millisecond)
				}
			})
		}

		kills := killMovers(t, e, r, moverConfig{Users: w.users, Migration: "killed", From: 3, To: 5})
		stop.Store(true)
		writers.Wait()
		if err := firstErr.Load(); err != nil {
			t.Fatalf("a writer: %v", *err)
		}
		finisher := w.shared(t, e.open(t, 2), "killed", rebalance.SharedOptions{Token: 100})
		if err := finisher.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatalf("Finish after %d killed movers: %v", kills, err)
		}
		v := w.requireClean(t, admin, w.after)
		texts := map[int64]string{}
		for i, db := range admin.dbs {
			rows, err := db.Query("SELECT id, message FROM messages")
			if err != nil {
				t.Fatalf("shard %d: %v", i, err)
			}
			for rows.Next() {
				var id int64
				var text string
				if err := rows.Scan(&id, &text); err != nil {
					t.Fatal(err)
				}
				texts[id] = text
			}
			rows.Close()
		}
		for id, want := range latest {
			if texts[id] != want {
				t.Errorf("message %d reads %q, want its last acknowledged text %q", id, texts[id], want)
			}
		}
		for id := range deleted {
			if text, ok := texts[id]; ok {
				t.Errorf("message %d, whose deletion was acknowledged, is back (%q)", id, text)
			}
		}
		t.Logf("%d movers killed with SIGKILL; %d inserts, updates and deletions acknowledged (%d messages left, %d deleted); %v", kills, ops.Load(), len(latest), len(deleted), v)
		if kills == 0 || len(latest) == 0 {
			t.Fatalf("%d movers killed, %d messages written: the test tested nothing", kills, len(latest))
		}
	})
}

// killMovers runs movers of c's migration, each a process of its own with a newer election
// epoch, killing each of the first five with SIGKILL after a random number of owners moved
// (0 to 7) and a random time into the next ones' steps, until one completes the move. It
// returns how many it killed.
func killMovers(t *testing.T, e *engine, r *rand.Rand, c moverConfig) (kills int) {
	t.Helper()
	c.Dialect, c.Shards, c.Control, c.Tables = e.dialect, e.shards, e.control, e.tables
	c.Concurrency, c.ChunkRows, c.PrintProgress = 2, 5, true
	for finished := false; !finished; c.Token++ {
		killAt := -1 // after this many owners moved; -1: let it finish
		if c.Token < 5 {
			killAt = r.IntN(8)
		}
		cmd, out := startChild(t, moverEnv, c)
		lines := make(chan string)
		go func() {
			defer close(lines)
			for s := bufio.NewScanner(out); s.Scan(); {
				lines <- s.Text()
			}
		}()
		moved, ended := 0, false
		for !ended && (killAt < 0 || moved < killAt) {
			line, ok := <-lines
			switch {
			case !ok:
				ended = true
			case line == "progress":
				moved++
			}
		}
		if !ended {
			time.Sleep(time.Duration(r.IntN(20_000)) * time.Microsecond) // somewhere in the next owners' steps
			cmd.Process.Signal(syscall.SIGKILL)
		}
		for range lines { // the rest, until the pipe closes
		}
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			finished = true // the move completed before the kill, or in the last round
		case errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled():
			kills++
		default:
			t.Fatalf("mover of election epoch %d: %v", c.Token, err)
		}
	}
	return kills
}

// TestKilledMoverProcessManyTables is TestKilledMoverProcess over the chat tables: a user,
// their messages and the messages' reactions, linked by foreign keys, moved under one fence
// per user while writers change all three (TestManyTablesPerOwner's ledger). Every row must
// end once on its owner's new shard with its acknowledged content, no deleted row come back
// and no foreign key be broken.
func TestKilledMoverProcessManyTables(t *testing.T) {
	forSchema(t, 6, chatSchema, chatTables, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(3)
		after, _ := shard.NewJump(6)
		admin := e.open(t, 2)
		const users = 40
		c := loadChat(t, admin, before, users, 12)
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		stop := c.traffic(t, e, "killed", before, after, users, 4, seed)
		var owners []string
		for u := range users {
			owners = append(owners, strconv.Itoa(u))
		}
		kills := killMovers(t, e, rand.New(rand.NewPCG(seed, 0)), moverConfig{Users: owners, Migration: "killed", From: 3, To: 6})
		if err := stop(); err != nil {
			t.Fatalf("a writer: %v", err)
		}
		m, err := rebalance.NewShared("killed", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{Token: 100})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, slices.Values(owners)); err != nil {
			t.Fatalf("Finish after %d killed movers: %v", kills, err)
		}
		v := c.check(t, admin, after)
		t.Logf("%d movers killed with SIGKILL; %d acknowledged writes; %+v", kills, c.writes, v)
		if kills == 0 || c.writes == 0 || v != (chatVerdict{rows: v.rows}) {
			t.Fatalf("after the move: %+v (%d killed movers, %d writes)", v, kills, c.writes)
		}
	})
}
