package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
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
	"github.com/stretchr/testify/require"
)

// A chat's data in three tables linked by foreign keys: a user, the user's messages, and the
// reactions to those messages, all owned by the user.
const chatSchema = `
CREATE TABLE IF NOT EXISTS users (
	id      INTEGER PRIMARY KEY,
	name    TEXT NOT NULL,
	balance BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
	id      BIGINT PRIMARY KEY,
	user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	body    TEXT NOT NULL,
	edits   BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_user_id_id ON messages (user_id, id);
CREATE TABLE IF NOT EXISTS reactions (
	id         BIGINT PRIMARY KEY,
	user_id    INTEGER NOT NULL,
	message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
	emoji      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS reactions_user_id_id ON reactions (user_id, id);
CREATE INDEX IF NOT EXISTS reactions_message_id ON reactions (message_id)`

var (
	usersTable     = sqlstore.TableSpec{Table: "users", Owner: "id", Key: "id", IntOwner: true, Columns: []string{"id", "name", "balance"}}
	messagesTable  = sqlstore.TableSpec{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "body", "edits"}}
	reactionsTable = sqlstore.TableSpec{Table: "reactions", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "message_id", "emoji"}}
	chatTables     = []sqlstore.TableSpec{usersTable, messagesTable, reactionsTable}
)

// chat is the ledger of the chat tables: every row's content as the acknowledged writes
// left it.
type chat struct {
	mu        sync.Mutex
	balance   map[int64]int64    // user -> balance
	messages  map[int64]*chatRow // message ID -> its row
	reactions map[int64]*chatRow // reaction ID -> its row
	writes    int
}

type chatRow struct {
	user, message int64 // the owner; a reaction's message
	edits         int64
	gone          bool
}

// loadChat puts users with messages each, and a reaction to every other message, on their
// shards of s.
func loadChat(t *testing.T, p *proc, s shard.Sharder, users, messages int) *chat {
	c := &chat{balance: map[int64]int64{}, messages: map[int64]*chatRow{}, reactions: map[int64]*chatRow{}}
	for u := range int64(users) {
		tx, err := p.dbs[s.Locate(strconv.FormatInt(u, 10))].Begin()
		if err != nil {
			t.Fatal(err)
		}
		exec := func(q string, args ...any) {
			if _, err := tx.Exec(q, args...); err != nil {
				t.Fatal(err)
			}
		}
		exec("INSERT INTO users VALUES ($1, $2, 0)", u, fmt.Sprint("user ", u))
		c.balance[u] = 0
		for i := range messages {
			id := nextID.Add(1)
			exec("INSERT INTO messages VALUES ($1, $2, 'hello', 0)", id, u)
			c.messages[id] = &chatRow{user: u}
			if i%2 == 0 {
				r := nextID.Add(1)
				exec("INSERT INTO reactions VALUES ($1, $2, $3, '+1')", r, u, id)
				c.reactions[r] = &chatRow{user: u, message: id}
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// live returns the IDs of rows of user that are not gone, sorted.
func live(rows map[int64]*chatRow, user int64) []int64 {
	var out []int64
	for id, r := range rows {
		if r.user == user && !r.gone {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// change runs one random write of user through m, and records it in the ledger once Do
// returned nil. Users are split among the writers, so the ledger knows each user's rows
// exactly.
func (c *chat) change(ctx context.Context, m *rebalance.Shared[*sql.Tx], r *rand.Rand, user int64) error {
	c.mu.Lock()
	msgs, reacts := live(c.messages, user), live(c.reactions, user)
	c.mu.Unlock()
	op := r.IntN(6)
	if len(msgs) == 0 && op != 0 && op != 2 {
		op = 2
	}
	if op == 5 && len(reacts) == 0 {
		op = 3
	}
	var msg, react int64
	switch op {
	case 1, 3, 4:
		msg = msgs[r.IntN(len(msgs))]
	case 5:
		react = reacts[r.IntN(len(reacts))]
	}
	newMsg, newReact := nextID.Add(1), nextID.Add(1)
	var gone []int64 // reactions deleted with their message
	err := m.Do(ctx, strconv.FormatInt(user, 10), func(tx *sql.Tx, _ int) error {
		one := func(q string, args ...any) error {
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return fmt.Errorf("%s %v: %d rows, %v: a row the ledger holds is missing", q, args, n, err)
			}
			return nil
		}
		switch op {
		case 0:
			return one("UPDATE users SET balance = balance + 1 WHERE id = $1", user)
		case 1:
			return one("UPDATE messages SET edits = edits + 1 WHERE id = $1", msg)
		case 2:
			if err := one("INSERT INTO messages VALUES ($1, $2, 'new', 0)", newMsg, user); err != nil {
				return err
			}
			return one("INSERT INTO reactions VALUES ($1, $2, $3, 'new')", newReact, user, newMsg)
		case 3:
			return one("INSERT INTO reactions VALUES ($1, $2, $3, 'more')", newReact, user, msg)
		case 4:
			gone = gone[:0]
			rs, err := tx.QueryContext(ctx, "SELECT id FROM reactions WHERE message_id = $1", msg)
			if err != nil {
				return err
			}
			for rs.Next() {
				var id int64
				if err := rs.Scan(&id); err != nil {
					rs.Close()
					return err
				}
				gone = append(gone, id)
			}
			rs.Close()
			if err := rs.Err(); err != nil {
				return err
			}
			return one("DELETE FROM messages WHERE id = $1", msg) // its reactions cascade
		default:
			return one("DELETE FROM reactions WHERE id = $1", react)
		}
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	switch op {
	case 0:
		c.balance[user]++
	case 1:
		c.messages[msg].edits++
	case 2:
		c.messages[newMsg] = &chatRow{user: user}
		c.reactions[newReact] = &chatRow{user: user, message: newMsg}
	case 3:
		c.reactions[newReact] = &chatRow{user: user, message: msg}
	case 4:
		c.messages[msg].gone = true
		for _, id := range gone {
			c.reactions[id].gone = true
		}
	default:
		c.reactions[react].gone = true
	}
	return nil
}

// traffic runs writers goroutines, each a process of its own (its own pools, Store and
// Shared value of migration), changing the chat tables of their own users (of users) until
// stop is called, which returns their errors.
func (c *chat) traffic(t *testing.T, e *engine, migration string, before, after shard.Sharder, users, writers int, seed uint64) (stop func() error) {
	var (
		wg    sync.WaitGroup
		done  atomic.Bool
		mu    sync.Mutex
		first error
	)
	ctx := context.Background()
	for g := range writers {
		m, err := rebalance.NewShared(migration, before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{FenceWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(g)+1))
			for !done.Load() {
				user := int64(g + writers*r.IntN(users/writers)) // each writer its own users
				if err := c.change(ctx, m, r, user); err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
					return
				}
				time.Sleep(300 * time.Microsecond)
			}
		})
	}
	return func() error {
		done.Store(true)
		wg.Wait()
		return first
	}
}

// chatVerdict counts what the shards hold against the ledger.
type chatVerdict struct {
	rows, lostUpdates, resurrected, lost, duplicated, misplaced, orphans int
}

// check reads every row of the three tables on every shard and compares it with the ledger:
// each row once, on its owner's shard under s, with its acknowledged content.
func (c *chat) check(t *testing.T, p *proc, s shard.Sharder) chatVerdict {
	t.Helper()
	var v chatVerdict
	seen := map[string]bool{}
	scan := func(shard int, q string, row func(key, user, value int64) bool) {
		rs, err := p.dbs[shard].Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		for rs.Next() {
			var key, user, value int64
			if err := rs.Scan(&key, &user, &value); err != nil {
				t.Fatal(err)
			}
			v.rows++
			if s.Locate(strconv.FormatInt(user, 10)) != shard {
				v.misplaced++
			}
			if !row(key, user, value) {
				v.lostUpdates++
			}
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
	}
	once := func(table string, key int64) bool {
		k := fmt.Sprint(table, key)
		if seen[k] {
			v.duplicated++
			return false
		}
		seen[k] = true
		return true
	}
	for i := range p.dbs {
		scan(i, "SELECT id, id, balance FROM users", func(key, _, balance int64) bool {
			return !once("u", key) || balance == c.balance[key]
		})
		scan(i, "SELECT id, user_id, edits FROM messages", func(key, user, edits int64) bool {
			m, ok := c.messages[key]
			switch {
			case !once("m", key):
				return true
			case !ok || m.gone:
				v.resurrected++
				return true
			}
			return m.user == user && m.edits == edits
		})
		scan(i, "SELECT id, user_id, message_id FROM reactions", func(key, user, message int64) bool {
			r, ok := c.reactions[key]
			switch {
			case !once("r", key):
				return true
			case !ok || r.gone:
				v.resurrected++
				return true
			}
			return r.user == user && r.message == message
		})
		var orphans int
		if err := p.dbs[i].QueryRow(`SELECT
			(SELECT COUNT(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = m.user_id)) +
			(SELECT COUNT(*) FROM reactions r WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = r.message_id))`).Scan(&orphans); err != nil {
			t.Fatal(err)
		}
		v.orphans += orphans
	}
	for u := range c.balance {
		if !seen[fmt.Sprint("u", u)] {
			v.lost++
		}
	}
	for prefix, rows := range map[string]map[int64]*chatRow{"m": c.messages, "r": c.reactions} {
		for id, r := range rows {
			if !r.gone && !seen[fmt.Sprint(prefix, id)] {
				v.lost++
			}
		}
	}
	return v
}

// TestManyTablesPerOwner: a user, their messages and the messages' reactions, linked by
// foreign keys (enforced on both engines, cascading deletes), move together under one fence
// per user while writers change all three tables through Shared.Do: balances, edits, new
// messages with a reaction, more reactions, messages deleted with their reactions. Small
// chunks make the copy of a child table meet parents that changed after their own chunk.
// Every row ends once on its owner's new shard with its acknowledged content, no foreign key
// is broken on any shard, and Verify finds nothing.
func TestManyTablesPerOwner(t *testing.T) {
	forSchema(t, 6, chatSchema, chatTables, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(3)
		after, _ := shard.NewJump(6)
		admin := e.open(t, 2)
		const users = 40
		c := loadChat(t, admin, before, users, 12)
		stop := c.traffic(t, e, "grow", before, after, users, 4, 11)
		time.Sleep(50 * time.Millisecond)
		var owners []string
		for u := range users {
			owners = append(owners, strconv.Itoa(u))
		}
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store),
			rebalance.SharedOptions{ChunkRows: 7, Concurrency: 2, Group: 3, Yield: 1})
		if err != nil {
			t.Fatal(err)
		}
		err = m.Run(ctx, slices.Values(owners))
		if err == nil {
			err = m.Finish(ctx, slices.Values(owners))
		}
		time.Sleep(50 * time.Millisecond)
		first := stop()
		if err != nil || first != nil {
			t.Fatalf("mover: %v; writers: %v", err, first)
		}
		v := c.check(t, admin, after)
		t.Logf("%d acknowledged writes during the move; %+v", c.writes, v)
		if c.writes < 50 || v != (chatVerdict{rows: v.rows}) {
			t.Fatalf("after the move: %+v (%d writes)", v, c.writes)
		}
		report, err := m.Verify(ctx, slices.Values(owners))
		if err != nil || len(report.Problems) > 0 || report.Stray > 0 || report.Rows == 0 {
			t.Fatalf("Verify: %+v, %v", report, err)
		}
	})
}

// TestPartitionedTablesWithForeignKeys (PostgreSQL): the chat's messages partitioned by
// their key, referencing users and referenced by reactions. Each partition holds a copy of
// the table's foreign keys (pg_constraint.conparentid), and none of them is a table outside
// the Store: Init takes the tables, the move's sums and deletions find no outside reference,
// and every row ends on its owner's new shard.
func TestPartitionedTablesWithForeignKeys(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	schema := strings.Replace(chatSchema, "edits   BIGINT NOT NULL\n);", "edits   BIGINT NOT NULL\n) PARTITION BY HASH (id);", 1)
	for i := range 2 {
		schema += fmt.Sprintf(";\nCREATE TABLE IF NOT EXISTS messages_%d PARTITION OF messages FOR VALUES WITH (MODULUS 2, REMAINDER %d)", i, i)
	}
	if !strings.Contains(schema, "PARTITION BY") {
		t.Fatal("the schema is not partitioned")
	}
	e := newEngine(t, sqlstore.PostgreSQL, 4, schema, chatTables)
	before, _ := shard.NewJump(2)
	after, _ := shard.NewJump(4)
	admin := e.open(t, 2)
	c := loadChat(t, admin, before, 20, 6)
	var owners []string
	for u := range 20 {
		owners = append(owners, strconv.Itoa(u))
	}
	m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{ChunkRows: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Run(ctx, slices.Values(owners)); err != nil {
		t.Fatal(err)
	}
	if err := m.Finish(ctx, slices.Values(owners)); err != nil {
		t.Fatal(err)
	}
	if v := c.check(t, admin, after); v != (chatVerdict{rows: v.rows}) || v.rows == 0 {
		t.Fatalf("after the move: %+v", v)
	}
}

// TestManyTablesInitRefuses: tables listed in an order their foreign keys contradict, a
// table that references a moved one but is not moved with it, a table missing on one shard
// and a key without a unique index are each refused by Init, naming the table, before
// anything is created on any shard.
func TestManyTablesInitRefuses(t *testing.T) {
	noUniqueKey := messagesTable
	noUniqueKey.Key = "edits"
	for _, tc := range []struct {
		name   string
		tables []sqlstore.TableSpec
		ddl    string // run on shard 1 first
		want   error
		says   string
	}{
		{"child first", []sqlstore.TableSpec{messagesTable, usersTable, reactionsTable}, "", sqlstore.ErrSchema,
			"shard 0: check the tables' references and visibility: table messages references users, which is listed after it"},
		{"child left behind", []sqlstore.TableSpec{usersTable, messagesTable}, "", sqlstore.ErrSchema,
			"shard 0: check the tables' references and visibility: table reactions references messages but is not moved with it"},
		{"missing on one shard", chatTables, "DROP TABLE reactions", sqlstore.ErrMissingTable,
			"shard 1: check: table reactions does not exist"},
		{"no unique key", []sqlstore.TableSpec{usersTable, noUniqueKey, reactionsTable}, "", sqlstore.ErrSchema,
			"shard 0: check table messages: no unique index on the key edits alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forSchema(t, 2, chatSchema, tc.tables, func(t *testing.T, e *engine) {
				if tc.ddl != "" {
					if _, err := openDB(t, e, e.shards[1]).Exec(tc.ddl); err != nil {
						t.Fatal(err)
					}
				}
				_, err := e.openErr(1)
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("got %v, want %v: %s", err, tc.want, tc.says)
				}
				for i, dsn := range e.shards {
					var n int
					q := "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'rebalance%'"
					if e.dialect == sqlstore.PostgreSQL {
						q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE 'rebalance%'"
					}
					if err := openDB(t, e, dsn).QueryRow(q).Scan(&n); err != nil || n != 0 {
						t.Fatalf("shard %d: %d tables of the mover created before Init refused (%v)", i, n, err)
					}
				}
			})
		})
	}
}

// TestFinishRefusesOwnersLeftOut: a user created during the migration writes through Do and
// so has rows on the shard its before sharder gives it; the operator's list of users, made
// before, lacks it. Finish finds the user by listing the owners on every shard, refuses, and
// names it; the user is still served; with it in the list Run moves it and Finish succeeds,
// every acknowledged row in place.
func TestFinishRefusesOwnersLeftOut(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 4)
		w.load(t, admin, span(1, 30), 5)
		listed := slices.Clone(w.users)
		late := w.moving(1000, 1)[0]
		u := strconv.Itoa(late)
		w.users = append(w.users, u)
		w.acked[u] = &atomic.Int64{}
		m := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		for range 3 {
			if err := w.write(ctx, m, u); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Run(ctx, slices.Values(listed)); err != nil {
			t.Fatal(err)
		}
		err := m.Finish(ctx, slices.Values(listed))
		var left *rebalance.UnfinishedError
		if !errors.As(err, &left) || left.Unlisted != 1 || !strings.Contains(err.Error(), fmt.Sprintf("%s (shard %d)", u, w.before.Locate(u))) {
			t.Fatalf("got %v, want an UnfinishedError naming user %s on shard %d", err, u, w.before.Locate(u))
		}
		if err := w.write(ctx, m, u); err != nil {
			t.Fatal("the user left out is not served:", err)
		}
		if err := m.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, w.after)
	})
}

// TestStaleProcessAfterFinish: a process that did not call Finish routes a new user, whose
// shard the migration changes, to the before shard first. Once another process finished the
// migration, that shard refuses it, and the process writes the user's rows where the after
// sharder puts them.
func TestStaleProcessAfterFinish(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 4)
		w.load(t, admin, span(1, 20), 5)
		stale := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		operator := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := operator.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := operator.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		u := strconv.Itoa(w.moving(1000, 1)[0])
		w.users = append(w.users, u)
		w.acked[u] = &atomic.Int64{}
		for _, user := range []string{u, w.users[0]} {
			if err := w.write(ctx, stale, user); err != nil {
				t.Fatal(err)
			}
		}
		w.requireClean(t, admin, w.after)
	})
}

// TestFinishedStaysFinished: a migration finished is never moved again, and a process that
// routes by one is refused once another migration is served, whatever the sharders. Grow 2 ->
// 3, shrink 3 -> 2 and grow again 2 -> 3, each run and finished. Then:
//   - a mover of the first grow, started again (a process that had not heard of its Finish,
//     or after its marks were deleted), is refused (ErrFinished) and changes nothing: the
//     store accepted its claim, and with a user created since in its list, a write of the
//     user's first row on its new shard, between the mover's count and its fence there, was
//     taken for a stopped copy and deleted by the next Run;
//   - a process that still routes by the finished shrink is refused (ErrPlacement): the
//     shards took it for the next migration after the second grow, whose after sharder is
//     the shrink's before, and its writes of a new user landed on one shard while the
//     second grow's landed on another, each process reading its own half.
func TestFinishedStaysFinished(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		grow := newWorld(t, e, 2, 3)
		grow.load(t, admin, span(1, 20), 3)
		run := func(w *world, id string) *rebalance.Shared[*sql.Tx] {
			m := w.shared(t, e.open(t, 2), id, rebalance.SharedOptions{Token: 1})
			if err := m.Run(ctx, slices.Values(w.users)); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			return m
		}
		run(grow, "grow")
		again := grow.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{Token: 2})
		if err := again.Run(ctx, slices.Values(grow.users)); !errors.Is(err, rebalance.ErrFinished) {
			t.Fatalf("grow run again after its Finish: %v, want ErrFinished", err)
		}
		shrink := run(shrinkOf(t, grow), "shrink")
		regrow := run(grow, "regrow")
		mustExec(t, admin.ctl, "DELETE FROM rebalance_marks WHERE migration = 'grow'")
		if err := again.Run(ctx, slices.Values(grow.users)); !errors.Is(err, rebalance.ErrFinished) {
			t.Fatalf("grow run again after regrow, its marks deleted: %v, want ErrFinished", err)
		}
		for _, id := range grow.moving(70_000, 4) {
			u := strconv.Itoa(id)
			grow.users = append(grow.users, u)
			grow.acked[u] = &atomic.Int64{}
			if err := grow.write(ctx, shrink, u); !errors.Is(err, rebalance.ErrPlacement) {
				t.Fatalf("user %s written by a process routing by the finished shrink: %v, want ErrPlacement", u, err)
			}
			if err := grow.write(ctx, regrow, u); err != nil {
				t.Fatal(err)
			}
		}
		grow.requireClean(t, admin, grow.after)
	})
}

// TestFinishedBeforeTheRecord: a migration finished by a version that kept no record of the
// migrations finished (rebalance_finished) stays finished once Init has made the record: the
// placement each database serves finished is the first entry.
func TestFinishedBeforeTheRecord(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 3)
		w.load(t, admin, span(1, 20), 3)
		m := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		require.NoError(t, m.Run(ctx, slices.Values(w.users)))
		require.NoError(t, m.Finish(ctx, slices.Values(w.users)))
		for _, db := range append(admin.dbs, admin.ctl) {
			mustExec(t, db, "DROP TABLE IF EXISTS rebalance_finished")
		}
		again := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{Token: 2})
		if err := again.Run(ctx, slices.Values(w.users)); !errors.Is(err, rebalance.ErrFinished) {
			t.Fatalf("Run after Finish, the record made since: %v, want ErrFinished", err)
		}
		w.requireClean(t, admin, w.after)
	})
}

// slowLister blocks the listing of the owners on shard at until release is closed, after
// telling listing.
type slowLister struct {
	*sqlstore.Store
	at               int
	listing, release chan struct{}
}

func (s *slowLister) Owners(ctx context.Context, shard int) iter.Seq2[string, error] {
	if shard == s.at {
		close(s.listing)
		<-s.release
	}
	return s.Store.Owners(ctx, shard)
}

// newMovingUser returns a user not loaded in w whose shard changes and whose old shard is
// below below.
func newMovingUser(w *world, below int) string {
	for u := 1000; ; u++ {
		if s := strconv.Itoa(u); w.before.Locate(s) != w.after.Locate(s) && w.before.Locate(s) < below {
			return s
		}
	}
}

// TestNewOwnerDuringFinish: while Finish lists the owners of the shards, and after it listed
// a new user's old shard, a process that has not heard of the finish writes that user. The
// write waits for the finish and lands on the user's new shard, where the listing of the
// shards already done cannot miss it.
func TestNewOwnerDuringFinish(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 4)
		w.load(t, admin, span(1, 20), 5)
		fresh := newMovingUser(w, 3)
		st := &slowLister{Store: e.open(t, 2).store, at: 3, listing: make(chan struct{}), release: make(chan struct{})}
		operator, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{FenceWait: 20 * time.Second})
		if err := operator.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		finished := make(chan error, 1)
		go func() { finished <- operator.Finish(ctx, slices.Values(w.users)) }()
		<-st.listing
		w.users = append(w.users, fresh)
		w.acked[fresh] = &atomic.Int64{}
		wrote := make(chan error, 1)
		go func() { wrote <- w.write(ctx, stale, fresh) }()
		time.Sleep(50 * time.Millisecond)
		close(st.release)
		if err := <-finished; err != nil {
			t.Fatal(err)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		w.requireClean(t, admin, w.after)
	})
}

// TestFinishGivingUpEndsOnlyItsOwnRecord: a Finish (a mover deposed while it listed the
// shards) gives up after a second Finish listed a new user's old shard. Giving up ends its
// own record of being finished, not the second's: a process that has not heard of the
// finish waits to write that user rather than write where the second Finish already
// looked, and the write lands on the user's new shard.
func TestFinishGivingUpEndsOnlyItsOwnRecord(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 4)
		w.load(t, admin, span(1, 20), 5)
		fresh := newMovingUser(w, 3)
		finisher := func(at int) (*rebalance.Shared[*sql.Tx], *slowLister) {
			st := &slowLister{Store: e.open(t, 2).store, at: at, listing: make(chan struct{}), release: make(chan struct{})}
			m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{})
			require.NoError(t, err)
			return m, st
		}
		deposed, first := finisher(0)
		current, second := finisher(3)
		stale := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{FenceWait: 20 * time.Second})
		require.NoError(t, current.Run(ctx, slices.Values(w.users)))

		deposedCtx, depose := context.WithCancel(ctx)
		gaveUp := make(chan error, 1)
		go func() { gaveUp <- deposed.Finish(deposedCtx, slices.Values(w.users)) }()
		select {
		case <-first.listing:
		case err := <-gaveUp:
			t.Fatalf("the first Finish ended before it listed shard 0: %v", err)
		}
		finished := make(chan error, 1)
		go func() { finished <- current.Finish(ctx, slices.Values(w.users)) }()
		select {
		case <-second.listing: // shards 0-2 listed: the fresh user has no row there
		case err := <-finished:
			t.Fatalf("the second Finish ended before it listed shard 3: %v", err)
		}
		depose()
		close(first.release)
		require.ErrorIs(t, <-gaveUp, context.Canceled)

		w.users = append(w.users, fresh)
		w.acked[fresh] = &atomic.Int64{}
		wrote := make(chan error, 1)
		go func() { wrote <- w.write(ctx, stale, fresh) }()
		time.Sleep(50 * time.Millisecond)
		close(second.release)
		require.NoError(t, <-finished)
		require.NoError(t, <-wrote)
		w.requireClean(t, admin, w.after)
	})
}

// TestInitRefusesTableLeftBehind: a table with the owner column that the Store does not move
// (sessions, whose rows belong to users) is refused by Init, naming it, before anything is
// created; declared in Options.Unmoved (its rows stay), it is accepted.
func TestInitRefusesTableLeftBehind(t *testing.T) {
	forSchema(t, 2, chatSchema, chatTables, func(t *testing.T, e *engine) {
		if _, err := openDB(t, e, e.shards[1]).Exec("CREATE TABLE sessions (id BIGINT PRIMARY KEY, user_id INTEGER NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		_, err := e.openErr(1)
		want := "shard 1: check the other tables: table sessions has a column user_id, the owner column of messages, but is not moved with it"
		if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want ErrSchema: %s", err, want)
		}
		var n int
		if err := openDB(t, e, e.shards[0]).QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'rebalance_fence'").Scan(&n); e.dialect == sqlstore.PostgreSQL && (err != nil || n != 0) {
			t.Fatalf("Init created the fence table before it refused (%d, %v)", n, err)
		}
		dbs := []*sql.DB{openDB(t, e, e.shards[0]), openDB(t, e, e.shards[1])}
		s, err := sqlstore.New(e.dialect, dbs, dbs[0], chatTables, sqlstore.Options{Unmoved: []string{"sessions"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Init(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// interloper runs between before the n-th write of a mover (counting from 1), and records
// the kind of each write.
type interloper struct {
	*sqlstore.Store
	n, at   int
	kinds   []string
	between func()
}

func (s *interloper) hit(kind string) {
	s.at++
	s.kinds = append(s.kinds, kind)
	if s.at == s.n {
		s.between()
	}
}

func (s *interloper) SetFence(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) error {
	s.hit("fence " + state.String())
	return s.Store.SetFence(ctx, migration, owners, shard, state, token)
}

func (s *interloper) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	s.hit("copy chunk")
	return s.Store.CopyChunk(ctx, migration, token, owners, from, to, after, limit)
}

func (s *interloper) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	s.hit("replay")
	return s.Store.Replay(ctx, migration, token, owners, from, to, limit)
}

func (s *interloper) ClearChanges(ctx context.Context, migration string, token uint64, owners []string, shard int) error {
	s.hit("clear changes")
	return s.Store.ClearChanges(ctx, migration, token, owners, shard)
}

func (s *interloper) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	s.hit("delete chunk")
	return s.Store.DeleteChunk(ctx, migration, token, owners, shard, limit)
}

func (s *interloper) DeleteOwners(ctx context.Context, migration string, token uint64, owners []string, shard int, most int) (int, bool, error) {
	s.hit("delete owners")
	return s.Store.DeleteOwners(ctx, migration, token, owners, shard, most)
}

func (s *interloper) SetMarks(ctx context.Context, migration string, owners []string, m rebalance.Mark, token uint64) error {
	s.hit("marks")
	return s.Store.SetMarks(ctx, migration, owners, m, token)
}

// TestInterlopersBetweenSteps: a chat in three tables moves while, before one write of the
// mover (the first of each run of writes of one kind), the application
// changes every moving user's rows in all three tables and a mover of a newer election epoch
// takes the migration over and moves everything. The first mover then goes on: it is
// refused, and every acknowledged change is in place, once, with no broken foreign key.
func TestInterlopersBetweenSteps(t *testing.T) {
	forSchema(t, 3, chatSchema, chatTables, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(2)
		after, _ := shard.NewJump(3)
		opts := func(epoch uint64) rebalance.SharedOptions {
			return rebalance.SharedOptions{Token: epoch, ChunkRows: 5, Group: 3, FenceWait: time.Millisecond}
		}
		// A dry run counts the writes and their kinds.
		probe := &interloper{Store: e.open(t, 2).store, between: func() {}}
		loadChat(t, e.open(t, 2), before, 8, 3)
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](probe), opts(1))
		if err != nil {
			t.Fatal(err)
		}
		var owners []string
		for u := range 8 {
			owners = append(owners, strconv.Itoa(u))
		}
		if err := m.Run(ctx, slices.Values(owners)); err != nil {
			t.Fatal(err)
		}
		var steps []int
		for n := 1; n <= probe.at; n++ {
			if n == 1 || probe.kinds[n-1] != probe.kinds[n-2] {
				steps = append(steps, n)
			}
		}
		for _, n := range steps {
			f := e.fresh(t)
			admin := f.open(t, 2)
			c := loadChat(t, admin, before, 8, 3)
			app, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](f.open(t, 2).store), opts(0))
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(n), 3))
			act := func() {
				for _, o := range owners {
					u, _ := strconv.ParseInt(o, 10, 64)
					if before.Locate(o) == after.Locate(o) {
						continue
					}
					for range 3 {
						if err := c.change(ctx, app, r, u); err != nil && !errors.Is(err, rebalance.ErrFenced) {
							t.Errorf("step %d (%s): %v", n, probe.kinds[n-1], err) // on the mover's goroutine: no FailNow
						}
					}
				}
			}
			st := &interloper{Store: f.open(t, 2).store, n: n}
			st.between = func() {
				act()
				newer, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](f.open(t, 2).store), opts(2))
				if err == nil {
					err = newer.Run(ctx, slices.Values(owners))
				}
				if err != nil {
					t.Errorf("the newer mover, before write %d (%s): %v", n, probe.kinds[n-1], err)
				}
				act()
			}
			old, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](st), opts(1))
			if err != nil {
				t.Fatal(err)
			}
			if err := old.Run(ctx, slices.Values(owners)); t.Failed() || !errors.Is(err, rebalance.ErrFenced) {
				t.Fatalf("write %d (%s): the replaced mover got %v, want ErrFenced", n, probe.kinds[n-1], err)
			}
			if v := c.check(t, admin, after); v != (chatVerdict{rows: v.rows}) {
				t.Fatalf("write %d (%s): %+v", n, probe.kinds[n-1], v)
			}
		}
		t.Logf("the application and a newer mover acted before %d of the mover's %d writes", len(steps), probe.at)
	})
}
