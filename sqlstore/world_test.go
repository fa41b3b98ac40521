package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
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

// nextID hands out message IDs, unique across the goroutines of this process; a child
// process (the kill test) takes its own range.
var nextID atomic.Int64

// world is a migration's setting: the engine, the sharders, the users, and the ledger of
// acknowledged writes.
type world struct {
	e             *engine
	before, after shard.Sharder
	users         []string
	mu            sync.Mutex
	ledger        map[int64]int64 // acknowledged message ID -> user
	acked         map[string]*atomic.Int64
}

func newWorld(t testing.TB, e *engine, from, to int) *world {
	t.Helper()
	before, err := shard.NewJump(from)
	if err != nil {
		t.Fatal(err)
	}
	after, err := shard.NewJump(to)
	if err != nil {
		t.Fatal(err)
	}
	return &world{e: e, before: before, after: after, ledger: map[int64]int64{}, acked: map[string]*atomic.Int64{}}
}

// span returns the user IDs first, ..., first+n-1.
func span(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}

// moving returns n user IDs from first on whose shard changes.
func (w *world) moving(first, n int) []int {
	var out []int
	for u := first; len(out) < n; u++ {
		if s := strconv.Itoa(u); w.before.Locate(s) != w.after.Locate(s) {
			out = append(out, u)
		}
	}
	return out
}

// load adds users with rows messages each on their before shards.
func (w *world) load(t testing.TB, p *proc, users []int, rows int) {
	t.Helper()
	ctx := context.Background()
	byShard := map[int][][]any{}
	flush := func(s int) {
		tx, err := p.dbs[s].BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		batch := byShard[s]
		for len(batch) > 0 {
			part := batch[:min(len(batch), 1000)]
			batch = batch[len(part):]
			var q strings.Builder
			q.WriteString("INSERT INTO messages (id, user_id, time, message, sender) VALUES ")
			var args []any
			for i, r := range part {
				if i > 0 {
					q.WriteString(", ")
				}
				if w.e.dialect == sqlstore.SQLite { // numbered parameters are slow there: see placeholders
					q.WriteString("(?, ?, ?, ?, ?)")
				} else {
					fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d)", 5*i+1, 5*i+2, 5*i+3, 5*i+4, 5*i+5)
				}
				args = append(args, r...)
			}
			if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		byShard[s] = byShard[s][:0]
	}
	for _, id := range users {
		u := strconv.Itoa(id)
		uid := int64(id)
		w.users = append(w.users, u)
		w.acked[u] = &atomic.Int64{}
		s := w.before.Locate(u)
		for range rows {
			id := nextID.Add(1)
			byShard[s] = append(byShard[s], []any{id, uid, id, "hello " + u, int64(7)})
			w.ledger[id] = uid
			if len(byShard[s]) >= 20_000 {
				flush(s)
			}
		}
		w.acked[u].Add(int64(rows))
	}
	for s := range byShard {
		flush(s)
	}
}

func (w *world) shared(t testing.TB, p *proc, id string, opts rebalance.SharedOptions) *rebalance.Shared[*sql.Tx] {
	t.Helper()
	m, err := rebalance.NewShared(id, w.before, w.after, rebalance.SharedStore[*sql.Tx](p.store), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// write inserts one message of user through m and records it once committed.
func (w *world) write(ctx context.Context, m *rebalance.Shared[*sql.Tx], user string) error {
	id := nextID.Add(1)
	uid, _ := strconv.ParseInt(user, 10, 64)
	err := m.Do(ctx, user, func(tx *sql.Tx, _ int) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, $2, $3, $4, $5)",
			id, uid, time.Now().UnixNano(), "written during the move", int64(1))
		return err
	})
	if err == nil {
		w.mu.Lock()
		w.ledger[id] = uid
		w.mu.Unlock()
		w.acked[user].Add(1)
	}
	return err
}

// read counts user's messages through m and fails if it sees fewer than were acknowledged
// before it started: a read never sees a half-moved owner.
func (w *world) read(ctx context.Context, m *rebalance.Shared[*sql.Tx], user string) error {
	want := w.acked[user].Load()
	uid, _ := strconv.ParseInt(user, 10, 64)
	var n int64
	var at int
	err := m.Do(ctx, user, func(tx *sql.Tx, s int) error {
		at = s
		return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = $1", uid).Scan(&n)
	})
	if err == nil && n < want {
		return fmt.Errorf("user %s: read %d messages on shard %d, %d were acknowledged before the read", user, n, at, want)
	}
	return err
}

// traffic runs writers goroutines, each a process of its own (its own pools, Store and
// Shared), writing and reading random users, pace apart, until stop is called; stop returns
// the first error and the operation count.
func (w *world) traffic(t *testing.T, id string, writers int, pace time.Duration) (stop func() (int64, error)) {
	var (
		done  atomic.Bool
		wg    sync.WaitGroup
		ops   atomic.Int64
		first atomic.Pointer[error]
	)
	for g := range writers {
		p := w.e.open(t, 2)
		m := w.shared(t, p, id, rebalance.SharedOptions{FenceWait: 30 * time.Second})
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			ctx := context.Background()
			for !done.Load() {
				u := w.users[r.IntN(len(w.users))]
				err := w.write(ctx, m, u)
				if err == nil {
					err = w.read(ctx, m, u)
				}
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				ops.Add(2)
				time.Sleep(pace)
			}
		})
	}
	return func() (int64, error) {
		done.Store(true)
		wg.Wait()
		if e := first.Load(); e != nil {
			return ops.Load(), *e
		}
		return ops.Load(), nil
	}
}

// verdict is what a scan of every shard finds against the ledger.
type verdict struct{ rows, lost, duplicated, misplaced, unacked int }

func (v verdict) String() string {
	return fmt.Sprintf("%d rows: %d lost, %d duplicated, %d misplaced (%d committed but not acknowledged)",
		v.rows, v.lost, v.duplicated, v.misplaced, v.unacked)
}

// verify scans every shard: every acknowledged message must be found once, on its user's
// shard under sharder s.
func (w *world) verify(t testing.TB, p *proc, s shard.Sharder) verdict {
	t.Helper()
	seen := map[int64]int{}
	var v verdict
	for i, db := range p.dbs {
		if w.e.dialect == sqlstore.SQLite { // the guard's marker is set only inside the mover's transactions
			var writing int
			if err := db.QueryRow("SELECT COALESCE((SELECT writing FROM rebalance_mover), 0)").Scan(&writing); err != nil || writing != 0 {
				t.Errorf("shard %d: the guard's marker says the mover writes (%d, %v)", i, writing, err)
			}
		}
		rows, err := db.Query("SELECT id, user_id FROM messages")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, uid int64
			if err := rows.Scan(&id, &uid); err != nil {
				t.Fatal(err)
			}
			v.rows++
			if seen[id]++; seen[id] == 2 {
				v.duplicated++
			}
			if s.Locate(strconv.FormatInt(uid, 10)) != i {
				v.misplaced++
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.ledger {
		if seen[id] == 0 {
			v.lost++
		}
	}
	for id := range seen {
		if _, ok := w.ledger[id]; !ok {
			v.unacked++
		}
	}
	return v
}

func (w *world) requireClean(t testing.TB, p *proc, s shard.Sharder) verdict {
	t.Helper()
	v := w.verify(t, p, s)
	if v.lost+v.duplicated+v.misplaced != 0 {
		t.Fatalf("verification: %v", v)
	}
	return v
}

// oneMovingUser loads one user of 20 rows, whom the grow from one shard to two moves, and
// returns a process, the world, the user and its old and new shards.
func oneMovingUser(t testing.TB, e *engine) (admin *proc, w *world, u string, a, b int) {
	admin = e.open(t, 2)
	w = newWorld(t, e, 1, 2)
	w.load(t, admin, w.moving(1, 1), 20)
	u = w.users[0]
	return admin, w, u, w.before.Locate(u), w.after.Locate(u)
}

func isFenced(err error) bool { return errors.Is(err, rebalance.ErrFenced) }
