package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/shardkit/shard"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// mutable is the content ledger of a table whose rows change: for each message ID, how many
// acknowledged increments of its sender column it had, and whether an acknowledged delete
// removed it.
type mutable struct {
	mu      sync.Mutex
	incs    map[int64]int64
	deleted map[int64]bool
	updates int64
	deletes int64
}

// changeRows runs writers goroutines that, through their own Shared values of migration id,
// increment the sender of random messages and delete some, until stop is called. A write
// counts once Do returned nil, with what its statement did then.
func (m *mutable) changeRows(t *testing.T, w *world, id string, writers int, ids []int64, owner map[int64]string) (stop func() error) {
	var (
		wg    sync.WaitGroup
		done  = make(chan struct{})
		first error
		once  sync.Once
	)
	for g := range writers {
		p := w.e.open(t, 2)
		sh := w.shared(t, p, id, rebalance.SharedOptions{FenceWait: 30 * time.Second})
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			ctx := context.Background()
			for {
				select {
				case <-done:
					return
				default:
				}
				msg := ids[r.IntN(len(ids))]
				del := r.IntN(10) == 0
				var n int64
				err := sh.Do(ctx, owner[msg], func(tx *sql.Tx, _ int) error {
					q := "UPDATE messages SET sender = sender + 1 WHERE id = $1"
					if del {
						q = "DELETE FROM messages WHERE id = $1"
					}
					res, err := tx.ExecContext(ctx, q, msg)
					if err != nil {
						return err
					}
					n, err = res.RowsAffected()
					return err
				})
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				m.mu.Lock()
				switch {
				case n == 1 && del:
					m.deleted[msg], m.deletes = true, m.deletes+1
				case n == 1:
					m.incs[msg]++
					m.updates++
				}
				m.mu.Unlock()
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	return func() error {
		close(done)
		wg.Wait()
		return first
	}
}

// check reads every message on every shard and counts lost updates (a row whose sender is
// not its load value plus its acknowledged increments) and resurrected deletes.
func (m *mutable) check(t *testing.T, p *proc, base int64) (lostUpdates, resurrected int) {
	t.Helper()
	for _, db := range p.dbs {
		rows, err := db.Query("SELECT id, sender FROM messages")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, sender int64
			if err := rows.Scan(&id, &sender); err != nil {
				t.Fatal(err)
			}
			switch {
			case m.deleted[id]:
				resurrected++
			case sender != base+m.incs[id]:
				lostUpdates++
			}
		}
		rows.Close()
	}
	return lostUpdates, resurrected
}

// TestUpdatesAndDeletesDuringTheMove: while the mover copies users in small chunks, writers
// update rows whose chunks were already copied and delete others, through Shared.Do. Every
// acknowledged update is on the new shard and no deleted row comes back: the old shard
// records the changes while its owners are exporting, and the mover replays them.
func TestUpdatesAndDeletesDuringTheMove(t *testing.T) {
	forEngines(t, 6, func(t *testing.T, e *engine) { updatesAndDeletesDuringTheMove(t, e, false) })
}

// idleShards is a Store whose shards always look idle to the mover (rebalance.AccessMeter),
// whatever the application does, so that its copy chunks grow while rows change under them;
// it counts the chunks above ChunkRows.
type idleShards struct {
	*sqlstore.Store
	grown atomic.Int64
	chunk int
}

func (s *idleShards) Accessing(context.Context, int) (bool, error) { return false, nil }

func (s *idleShards) CopyChunk(ctx context.Context, m string, tok uint64, o []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	if limit > s.chunk {
		s.grown.Add(1)
	}
	return s.Store.CopyChunk(ctx, m, tok, o, from, to, after, limit)
}

// TestUpdatesAndDeletesDuringGrownChunks: the same, with the copy chunks grown to 16 times
// ChunkRows as if nobody used the shards: a bigger chunk loses no change either.
func TestUpdatesAndDeletesDuringGrownChunks(t *testing.T) {
	forEngines(t, 6, func(t *testing.T, e *engine) { updatesAndDeletesDuringTheMove(t, e, true) })
}

func updatesAndDeletesDuringTheMove(t *testing.T, e *engine, grown bool) {
	ctx := context.Background()
	admin := e.open(t, 2)
	w := newWorld(t, e, 3, 6)
	w.load(t, admin, span(1, 60), 100)
	owner := map[int64]string{}
	var ids []int64
	for id, u := range w.ledger {
		ids = append(ids, id)
		owner[id] = strconv.FormatInt(u, 10)
	}
	slices.Sort(ids)
	led := &mutable{incs: map[int64]int64{}, deleted: map[int64]bool{}}
	stop := led.changeRows(t, w, "grow", 4, ids, owner)
	time.Sleep(50 * time.Millisecond)
	opts := rebalance.SharedOptions{ChunkRows: 20, Concurrency: 2, Yield: 1}
	var store rebalance.SharedStore[*sql.Tx] = e.open(t, 2).store
	idle := &idleShards{Store: store.(*sqlstore.Store), chunk: opts.ChunkRows}
	if grown {
		opts.IdleChunkRows, store = 16*opts.ChunkRows, idle
	}
	m, err := rebalance.NewShared("grow", w.before, w.after, store, opts)
	require.NoError(t, err)
	err = m.Run(ctx, slices.Values(w.users))
	time.Sleep(50 * time.Millisecond)
	if serr := stop(); serr != nil {
		t.Fatal(serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
		t.Fatal(err)
	}
	for id := range led.deleted {
		delete(w.ledger, id)
	}
	v := w.requireClean(t, admin, w.after)
	r, err := m.Verify(ctx, slices.Values(w.users))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stray != 0 || len(r.Problems) != 0 || r.Rows == 0 {
		t.Fatalf("Verify after the migration: %+v", r)
	}
	lost, back := led.check(t, admin, 7)
	t.Logf("%d acknowledged updates, %d deletes: %d lost updates, %d resurrected deletes; %v", led.updates, led.deletes, lost, back, v)
	if lost+back != 0 {
		t.Fatalf("%d lost updates, %d resurrected deletes", lost, back)
	}
	if led.updates == 0 || led.deletes == 0 {
		t.Fatal("the writers changed nothing during the move")
	}
	if grown && idle.grown.Load() == 0 {
		t.Fatal("no copy chunk grew")
	}
}

// editB changes one row of the new shard directly, as a stray process writing past the
// fences would, before the mover's first replay: after its chunk was copied.
type editB struct {
	rebalance.SharedStore[*sql.Tx]
	once sync.Once
	edit func()
}

func (e *editB) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	e.once.Do(e.edit)
	return e.SharedStore.Replay(ctx, migration, token, owners, from, to, limit)
}

// TestMismatchStopsTheMove: a row edited on the new shard mid-move makes the sums differ:
// the move stops with ErrCopyMismatch naming the owner, both shards and the key, the old
// shard serves the owner again with every row, and nothing is deleted.
func TestMismatchStopsTheMove(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 1, 2)
		users := w.moving(1, 1)
		w.load(t, admin, users, 30)
		u := w.users[0]
		a, b := w.before.Locate(u), w.after.Locate(u)
		var key int64
		if err := admin.dbs[a].QueryRow("SELECT MIN(id) + 3 FROM messages WHERE user_id = $1", u).Scan(&key); err != nil {
			t.Fatal(err)
		}
		st := &editB{SharedStore: e.open(t, 2).store, edit: func() {
			if err := execAsMover(e.dialect, admin.dbs[b], "UPDATE messages SET message = 'edited on the new shard' WHERE id = $1", key); err != nil {
				t.Error(err)
			}
		}}
		m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{ChunkRows: 7})
		if err != nil {
			t.Fatal(err)
		}
		err = m.Run(ctx, slices.Values(w.users))
		want := fmt.Sprintf("owner %q: verify the copy (shard %d -> %d): shard %d holds 30 rows, shard %d holds 30, and they differ first at key %q", u, a, b, a, b, strconv.FormatInt(key, 10))
		if !errors.Is(err, rebalance.ErrCopyMismatch) || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want ErrCopyMismatch: ...%s...", err, want)
		}
		if f, _ := admin.store.Fences(ctx, []string{u}, a); !servesAgain(f[0]) {
			t.Fatalf("old shard says %v, want serving again", f[0])
		}
		if f, _ := admin.store.Fences(ctx, []string{u}, b); f[0].State != rebalance.Importing {
			t.Fatalf("new shard says %v, want importing: nobody may see its copy", f[0])
		}
		// The application goes on on the old shard, which holds every row.
		if err := w.write(ctx, w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{}), u); err != nil {
			t.Fatal(err)
		}
		if n, err := admin.store.Count(ctx, u, a); err != nil || n != w.acked[u].Load() {
			t.Fatalf("old shard holds %d rows (%v), want %d", n, err, w.acked[u].Load())
		}
	})
}

// lateChange runs between, once, before the mover's first replay.
type lateChange struct {
	rebalance.SharedStore[*sql.Tx]
	once    sync.Once
	between func()
}

func (l *lateChange) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	l.once.Do(l.between)
	return l.SharedStore.Replay(ctx, migration, token, owners, from, to, limit)
}

// TestNullKeyRowChangedDuringTheCopy (SQLite, where a PRIMARY KEY other than INTEGER's takes
// NULL): the application deletes a row of a NULL key after its copy. The capture cannot
// record it (no replay could find the row by its key, and its trigger ignores it rather than
// fail the application's write), so the sums differ: the move stops with ErrCopyMismatch and
// the old shard serves the owner again with every other row. (Unchanged, such a row moves
// between attached files; a copy through Go refuses it, having no cursor to give it.)
func TestNullKeyRowChangedDuringTheCopy(t *testing.T) {
	skipPlainCopies(t)
	ctx := context.Background()
	e := newSQLite(t, 2)
	admin := e.open(t, 2)
	w := newWorld(t, e, 1, 2)
	w.load(t, admin, w.moving(1, 1), 30)
	u := w.users[0]
	a := w.before.Locate(u)
	if _, err := admin.dbs[a].Exec("INSERT INTO messages VALUES (NULL, $1, 0, 'no key', 0)", u); err != nil {
		t.Fatal(err)
	}
	st := &lateChange{SharedStore: e.open(t, 2).store, between: func() {
		if _, err := admin.dbs[a].Exec("DELETE FROM messages WHERE id IS NULL"); err != nil {
			t.Error(err)
		}
	}}
	m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{ChunkRows: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx, slices.Values(w.users)); !errors.Is(err, rebalance.ErrCopyMismatch) {
		t.Fatalf("got %v, want ErrCopyMismatch", err)
	}
	if f, _ := admin.store.Fences(ctx, []string{u}, a); !servesAgain(f[0]) {
		t.Fatalf("old shard says %v, want serving again", f[0])
	}
	if n, err := admin.store.Count(ctx, u, a); err != nil || n != 30 {
		t.Fatalf("old shard holds %d rows (%v), want the 30 with keys", n, err)
	}
}

// TestRowHashIsFNV1a: the hash of Sums on SQLite, written out without allocating, against
// the obvious one by hash/fnv over the same typed encoding, for rows of every kind of value
// the driver gives (and one it does not, hashed by its printed form).
func TestRowHashIsFNV1a(t *testing.T) {
	slow := func(row []any) uint64 {
		h := fnv.New64a()
		num := func(tag byte, v uint64) {
			h.Write([]byte{tag})
			binary.Write(h, binary.LittleEndian, v)
		}
		for _, v := range row {
			switch x := v.(type) {
			case nil:
				h.Write([]byte{0})
			case int64:
				num(1, uint64(x))
			case float64:
				num(2, math.Float64bits(x))
			case string:
				num(3, uint64(len(x)))
				h.Write([]byte(x))
			case []byte:
				num(4, uint64(len(x)))
				h.Write(x)
			case bool:
				h.Write([]byte{5, map[bool]byte{true: 1}[x]})
			case time.Time:
				num(6, uint64(x.UnixNano()))
			default:
				fmt.Fprintf(h, "%T:%v", x, x)
			}
		}
		return h.Sum64()
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	value := func() any {
		switch rnd.IntN(9) {
		case 0:
			return nil
		case 1:
			return rnd.Int64() - rnd.Int64()
		case 2:
			return rnd.NormFloat64() * 1e6
		case 3:
			return strings.Repeat("é\x00'", rnd.IntN(4)) + strconv.Itoa(rnd.IntN(1000))
		case 4:
			return []byte(strconv.Itoa(rnd.IntN(1000)))
		case 5:
			return rnd.IntN(2) == 0
		case 6:
			return time.Unix(rnd.Int64N(1<<40), rnd.Int64N(1e9))
		case 7:
			return int32(rnd.IntN(1000))
		}
		return ""
	}
	for range 2000 {
		row := make([]any, rnd.IntN(7))
		for i := range row {
			row[i] = value()
		}
		if got, want := sqlstore.RowHash(row), slow(row); got != want {
			t.Fatalf("row %#v: hash %x, want %x", row, got, want)
		}
	}
	if sqlstore.RowHash([]any{int64(1)}) == sqlstore.RowHash([]any{"1"}) {
		t.Fatal(`1 and "1" hash alike`)
	}
}

// TestChangeCommittedOutOfOrder (PostgreSQL): a change recorded first commits last (its
// sequence number is taken before another transaction's, which commits first), after the
// mover's catch-up has replayed the later one. The window replays it all the same: the
// changes are taken from the log as they are applied, not read past a position.
func TestChangeCommittedOutOfOrder(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	e := newPostgres(t, 2)
	ctx := context.Background()
	admin := e.open(t, 2)
	w := newWorld(t, e, 1, 2)
	w.load(t, admin, w.moving(1, 1), 20)
	u := w.users[0]
	var first, second int64
	if err := admin.dbs[w.before.Locate(u)].QueryRow("SELECT MIN(id), MAX(id) FROM messages WHERE user_id = $1", u).Scan(&first, &second); err != nil {
		t.Fatal(err)
	}
	app := w.shared(t, e.open(t, 4), "grow", rebalance.SharedOptions{FenceWait: 30 * time.Second})
	update := func(id int64, wait <-chan struct{}, started chan<- struct{}) error {
		return app.Do(ctx, u, func(tx *sql.Tx, _ int) error {
			if _, err := tx.ExecContext(ctx, "UPDATE messages SET message = 'changed' WHERE id = $1", id); err != nil {
				return err
			}
			if started != nil {
				close(started)
				<-wait
			}
			return nil
		})
	}
	slow := make(chan error, 1)
	st := &lateChange{SharedStore: e.open(t, 2).store, between: func() {
		started, release := make(chan struct{}), make(chan struct{})
		go func() { slow <- update(first, release, started) }() // its change is recorded first
		<-started
		if err := update(second, nil, nil); err != nil { // recorded second, committed first
			t.Error(err)
		}
		go func() { time.Sleep(100 * time.Millisecond); close(release) }() // after the catch-up's replay
	}}
	m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx, slices.Values(w.users)); err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	var changed int
	if err := admin.dbs[w.after.Locate(u)].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1 AND message = 'changed'", u).Scan(&changed); err != nil || changed != 2 {
		t.Fatalf("%d changed rows on the new shard (%v), want 2", changed, err)
	}
	w.requireClean(t, admin, w.after)
}

// TestInitRefusesBadTables: a table that does not fit the TableSpec is refused by Init with
// an error naming the shard and what is wrong, before anything is created on any shard: a
// column missing, no index on (owner, key), a trigger of the change capture's name on
// another table, a column the copy would not carry, a column of a type on one shard that
// would change the other's values unseen (float8 copied into real, text into a padded
// char(n): no sum of their text told).
func TestInitRefusesBadTables(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		noOwner := messages
		noOwner.Owner, noOwner.Columns = "owner_id", append(slices.Clone(messages.Columns), "owner_id")
		taken := []string{"CREATE TABLE other (x BIGINT)",
			"CREATE TRIGGER rebalance_changes_messages_insert AFTER INSERT ON other BEGIN SELECT 1; END"}
		if e.dialect == sqlstore.PostgreSQL {
			taken = []string{"CREATE TABLE other (x BIGINT)",
				"CREATE FUNCTION nothing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
				"CREATE TRIGGER rebalance_changes_messages AFTER INSERT ON other FOR EACH ROW EXECUTE FUNCTION nothing()"}
		}
		// The message column of another type on shard 1: a copy would convert its values
		// (SQLite: another affinity; a column of the same affinity is fine, see below).
		otherType := func(typ string) []string {
			return []string{"DROP TABLE messages", strings.Replace(messagesSchema, "message TEXT", "message "+typ, 1)}
		}
		retyped, retypedWant := otherType("INTEGER"), "column message is INTEGER here and TEXT on shard 0"
		if e.dialect == sqlstore.PostgreSQL {
			retyped, retypedWant = otherType("CHAR(100)"), "column message is character(100) here and text on shard 0"
		}
		type badTable struct {
			name  string
			spec  sqlstore.TableSpec
			setup []string
			want  string
		}
		cases := []badTable{
			{"column of another type", messages, retyped, "shard 1: check table messages: " + retypedWant},
			{"no owner column", noOwner, nil, "shard 0: check table messages: no column owner_id"},
			{"no index", messages, []string{"DROP INDEX messages_user_id_id"}, "shard 1: check table messages: no index leads with (user_id, id)"},
			{"trigger name taken", messages, taken, "shard 1: check table messages: a trigger named rebalance_changes_messages... exists on table other"},
			{"column not listed", messages, []string{"ALTER TABLE messages ADD COLUMN note TEXT"}, "shard 1: check table messages: column note is not in the TableSpec's Columns"},
			// Moving owner "002" selected the rows of "2", another owner's, and left its own.
			{"IntOwner over a text column", messages, []string{"DROP TABLE messages", strings.Replace(messagesSchema, "user_id BIGINT", "user_id TEXT", 1)},
				"shard 1: check table messages: the TableSpec says IntOwner, but the owner column user_id is"},
		}
		if e.dialect == sqlstore.SQLite {
			// A copied row that broke it deleted a staying owner's row of the same message.
			cases = append(cases, badTable{"a constraint that replaces", messages, []string{"DROP TABLE messages", strings.Replace(messagesSchema, "message TEXT", "message TEXT UNIQUE ON CONFLICT REPLACE", 1)},
				"shard 1: check table messages: table messages declares a constraint ON CONFLICT REPLACE"})
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				f := e.fresh(t)
				dbs := []*sql.DB{openDB(t, f, f.shards[0]), openDB(t, f, f.shards[1])}
				for _, q := range tc.setup {
					if _, err := dbs[1].Exec(q); err != nil {
						t.Fatal(q, err)
					}
				}
				s, err := sqlstore.New(f.dialect, dbs, dbs[0], []sqlstore.TableSpec{tc.spec}, sqlstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				err = s.Init(ctx)
				if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want ErrSchema: %s", err, tc.want)
				}
				var fences int
				dbs[0].QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'rebalance_fence'").Scan(&fences)
				if e.dialect == sqlstore.SQLite {
					dbs[0].QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = 'rebalance_fence'").Scan(&fences)
				}
				if fences != 0 {
					t.Fatal("Init created tables before it refused")
				}
			})
		}
		// Types whose values go into each other unchanged, or not at all: SQLite's of one
		// affinity; PostgreSQL's texts of any length.
		alike := "CHARACTER(20)"
		if e.dialect == sqlstore.PostgreSQL {
			alike = "VARCHAR(100)"
		}
		f := e.fresh(t)
		dbs := []*sql.DB{openDB(t, f, f.shards[0]), openDB(t, f, f.shards[1])}
		for _, q := range otherType(alike) {
			mustExec(t, dbs[1], q)
		}
		s, err := sqlstore.New(f.dialect, dbs, dbs[0], []sqlstore.TableSpec{messages}, sqlstore.Options{})
		require.NoError(t, err)
		require.NoError(t, s.Init(ctx), "message TEXT on one shard, %s on the other", alike)
	})
}

// fresh returns new databases of e's engine, with its tables.
func (e *engine) fresh(t *testing.T) *engine {
	return newEngine(t, e.dialect, len(e.shards), e.schema, e.tables)
}

func openDB(t *testing.T, e *engine, dsn string) *sql.DB {
	db, err := sql.Open(e.driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestInitUnderWrites: processes start (each calls Init) while others write to the table, the
// first of them creating the change capture: no Init fails (on PostgreSQL, creating the
// trigger while writers held the table and the change table deadlocked), and Init leaves the
// table alone once the capture exists.
func TestInitUnderWrites(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		db := openDB(t, e, e.shards[0])
		var next atomic.Int64
		next.Store(1 << 40)
		stop := make(chan struct{})
		var writers sync.WaitGroup
		for range 3 {
			writers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					tx, err := db.Begin()
					if err != nil {
						t.Error(err)
						return
					}
					id := next.Add(1)
					_, err = tx.Exec("INSERT INTO messages VALUES ($1, 1, 0, 'x', 0)", id)
					if err == nil {
						_, err = tx.Exec("UPDATE messages SET sender = sender + 1 WHERE id = $1", id)
					}
					if err == nil {
						err = tx.Commit()
					} else {
						tx.Rollback()
					}
					if err != nil && !strings.Contains(err.Error(), "locked") && !strings.Contains(err.Error(), "busy") {
						t.Error(err)
						return
					}
				}
			})
		}
		var inits sync.WaitGroup
		for range 6 {
			inits.Go(func() {
				for range 3 {
					p, err := e.openErr(2)
					if err != nil {
						t.Error(err)
						return
					}
					p.close()
				}
			})
		}
		inits.Wait()
		close(stop)
		writers.Wait()
	})
}

// TestInitReplacesOlderTriggers: Init replaces a capture trigger (SQLite) or trigger function
// (PostgreSQL) of an older version, one that recorded changes but did not refuse writes of
// owners the shard does not serve, and leaves the schema alone once they are current. The
// replaced one refuses a deletion of a row of an owner fenced moved, and records one of an
// owner exporting.
func TestInitReplacesOlderTriggers(t *testing.T) {
	forEngines(t, 1, func(t *testing.T, e *engine) {
		db := openDB(t, e, e.shards[0])
		e.open(t, 1).close()
		older := []string{"DROP TRIGGER rebalance_changes_messages_delete", `CREATE TRIGGER rebalance_changes_messages_delete AFTER DELETE ON messages
			WHEN EXISTS (SELECT 1 FROM rebalance_fence WHERE owner = CAST(OLD.user_id AS TEXT) AND state = 3)
			BEGIN INSERT INTO rebalance_changes_messages (owner, row_key) SELECT CAST(OLD.user_id AS TEXT), OLD.id; END`}
		if e.dialect == sqlstore.PostgreSQL {
			older = []string{`CREATE OR REPLACE FUNCTION rebalance_changes_messages_record() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	IF TG_OP <> 'INSERT' AND EXISTS (SELECT 1 FROM rebalance_fence WHERE owner = OLD.user_id::text AND state = 3) THEN
		INSERT INTO rebalance_changes_messages (owner, row_key) VALUES (OLD.user_id::text, OLD.id);
	END IF;
	RETURN NULL;
END
$f$`}
		}
		for _, q := range older {
			mustExec(t, db, q)
		}
		schemaVersion := func() (v string) {
			q := "SELECT md5(prosrc) FROM pg_proc WHERE proname = 'rebalance_changes_messages_record'"
			if e.dialect == sqlstore.SQLite {
				q = "PRAGMA schema_version"
			}
			if err := db.QueryRow(q).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		v := schemaVersion()
		e.open(t, 1).close()
		if got := schemaVersion(); got == v {
			t.Fatal("Init left the older trigger as it was")
		}
		v = schemaVersion()
		e.open(t, 1).close()
		if got := schemaVersion(); got != v {
			t.Fatalf("Init changed the schema (%s -> %s) though the triggers were current", v, got)
		}
		mustExec(t, db, "INSERT INTO messages VALUES (1, 7, 0, 'x', 0)")
		mustExec(t, db, fmt.Sprintf("INSERT INTO rebalance_fence (owner, state, migration, token) VALUES ('7', %d, 'm', 1)", rebalance.Moved))
		if _, err := db.Exec("DELETE FROM messages WHERE id = 1"); err == nil || !strings.Contains(err.Error(), "not served here") {
			t.Fatalf("deleting a row of an owner fenced moved: %v, want refused", err)
		}
		mustExec(t, db, fmt.Sprintf("UPDATE rebalance_fence SET state = %d", rebalance.Exporting))
		mustExec(t, db, "DELETE FROM messages WHERE id = 1")
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM rebalance_changes_messages WHERE owner = '7' AND row_key = 1").Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d changes recorded of the deletion, want 1 (%v)", n, err)
		}
	})
}

// TestRowChangesOwnerDuringTheMove: while user A is copied, the application gives one of A's
// rows to user B, who stays on the old shard, and takes one of B's rows for A. After the
// move the first row is on B's shard only, the second on A's new shard only: a changed row
// that is no longer the mover's owners' is not written on their new shard, and one of
// another owner of that key there is not deleted.
func TestRowChangesOwnerDuringTheMove(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 1, 2) // everyone on shard 0; movers go to shard 1
		a := w.moving(1, 1)[0]
		b := a + 1
		for w.after.Locate(strconv.Itoa(b)) != 0 {
			b++
		}
		w.load(t, admin, []int{a, b}, 20)
		ua, ub := strconv.Itoa(a), strconv.Itoa(b)
		var given, taken int64
		if err := admin.dbs[0].QueryRow("SELECT MIN(id) FROM messages WHERE user_id = $1", a).Scan(&given); err != nil {
			t.Fatal(err)
		}
		if err := admin.dbs[0].QueryRow("SELECT MIN(id) FROM messages WHERE user_id = $1", b).Scan(&taken); err != nil {
			t.Fatal(err)
		}
		app := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{FenceWait: 30 * time.Second})
		st := &lateChange{SharedStore: e.open(t, 2).store, between: func() {
			// Both owners are on shard 0, which serves them both: one transaction moves the rows.
			err := app.Do(ctx, ua, func(tx *sql.Tx, _ int) error {
				if _, err := tx.ExecContext(ctx, "UPDATE messages SET user_id = $1 WHERE id = $2", b, given); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, "UPDATE messages SET user_id = $1 WHERE id = $2", a, taken)
				return err
			})
			if err != nil {
				t.Error(err)
			}
		}}
		m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx, slices.Values([]string{ua, ub})); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id    int64
			owner int
		}{{given, b}, {taken, a}} {
			for s, db := range admin.dbs {
				var n int
				if err := db.QueryRow("SELECT COUNT(*) FROM messages WHERE id = $1", c.id).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{true: 1}[s == w.after.Locate(strconv.Itoa(c.owner))]; n != want {
					t.Errorf("row %d, now user %d's: %d copies on shard %d, want %d", c.id, c.owner, n, s, want)
				}
			}
		}
	})
}

// moveWithLateWrite runs a move of w's users by a mover of its own that, before its first
// replay (the copy done, the old shard still serving), calls before if not nil, then has the
// application run write (its argument: user u) in an access of u; it returns Run's error.
func moveWithLateWrite(t *testing.T, e *engine, w *world, u, write string, before func()) error {
	t.Helper()
	ctx := context.Background()
	app := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{FenceWait: 30 * time.Second})
	st := &lateChange{SharedStore: e.open(t, 2).store, between: func() {
		if before != nil {
			before()
		}
		err := app.Do(ctx, u, func(tx *sql.Tx, _ int) error {
			_, err := tx.ExecContext(ctx, write, u)
			return err
		})
		if err != nil {
			t.Error(err)
		}
	}}
	m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m.Run(ctx, slices.Values(w.users))
}

// TestSchemaChangedDuringTheMove: while the mover copies a user's rows, the application
// changes the schema on every shard and writes the user's rows under it on the old shard:
// it adds a column to messages (the copy does not carry it), or creates a table that
// references messages with ON DELETE CASCADE (nothing copies its rows, and deleting the old
// copy of the user's messages would delete them), or creates a table that inherits from
// messages and writes the user's rows there (PostgreSQL: the copy would carry them into
// messages, the deletion take them), or changes a column's type on the new shard alone
// (PostgreSQL). The move stops in its window with ErrSchema naming the column or
// the table, and the old shard serves the user again with every row and value; a mover whose
// TableSpec lists the column then moves it.
func TestSchemaChangedDuringTheMove(t *testing.T) {
	for _, tc := range []struct {
		name, change, write, want, kept string
		newShardOnly                    bool
	}{
		{"column", "ALTER TABLE messages ADD COLUMN note TEXT",
			"UPDATE messages SET note = 'kept' WHERE user_id = $1",
			"column note is not in the TableSpec's Columns",
			"SELECT COUNT(*) FROM messages WHERE user_id = $1 AND note = 'kept'", false},
		{"table", "CREATE TABLE attachments (id BIGINT PRIMARY KEY, message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE, body TEXT NOT NULL)",
			"INSERT INTO attachments SELECT id, id, 'kept' FROM messages WHERE user_id = $1",
			"table attachments references messages but is not moved with it",
			"SELECT COUNT(*) FROM attachments a JOIN messages m ON m.id = a.message_id WHERE m.user_id = $1", false},
		{"inherits", "CREATE TABLE messages_archive () INHERITS (messages)",
			"INSERT INTO messages_archive SELECT id + 1000000, user_id, time, message, sender FROM messages WHERE user_id = $1",
			"table messages_archive inherits from messages",
			"SELECT COUNT(*) FROM ONLY messages_archive WHERE user_id = $1", false},
		{"type", "ALTER TABLE messages ALTER COLUMN message TYPE VARCHAR(100)",
			"UPDATE messages SET time = time + 1 WHERE user_id = $1",
			"column message is character varying(100) here, text when Init checked the shards",
			"SELECT COUNT(*) FROM messages WHERE user_id = $1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				if (tc.newShardOnly || tc.name == "inherits") && e.dialect == sqlstore.SQLite {
					t.Skip("SQLite changes no column's type and has no inheritance")
				}
				ctx := context.Background()
				admin, w, u, a, b := oneMovingUser(t, e)
				err := moveWithLateWrite(t, e, w, u, tc.write, func() {
					for i, db := range admin.dbs {
						if tc.newShardOnly && i != b {
							continue
						}
						if _, err := db.Exec(tc.change); err != nil {
							t.Error(err)
						}
					}
				})
				if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want ErrSchema: ...%s...", err, tc.want)
				}
				if f, _ := admin.store.Fences(ctx, []string{u}, a); !servesAgain(f[0]) {
					t.Fatalf("old shard says %v, want serving again", f[0])
				}
				kept := func(shard int) (n int) {
					if err := admin.dbs[shard].QueryRow(tc.kept, u).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n
				}
				if n := kept(a); n != 20 {
					t.Fatalf("old shard keeps %d of the 20 rows written under the new schema", n)
				}
				if tc.name != "column" {
					return
				}
				withNote := messages
				withNote.Columns = append(slices.Clone(messages.Columns), "note")
				f := *e
				f.tables = []sqlstore.TableSpec{withNote}
				if err := w.shared(t, f.open(t, 2), "grow", rebalance.SharedOptions{}).Run(ctx, slices.Values(w.users)); err != nil {
					t.Fatal(err)
				}
				if n := kept(b); n != 20 {
					t.Fatalf("new shard holds %d rows with the note, want 20", n)
				}
			})
		})
	}
}

// TestApplicationTriggers: the application keeps a row's time current with a trigger on
// UPDATE, logs deleted rows with another, and updates the user's rows while they are copied.
// The mover's replay writes those rows on the new shard, and the first trigger fires for its
// writes as for the application's (on PostgreSQL without foreign keys among the tables; on
// SQLite always): the copy differs from its source, the move stops with ErrCopyMismatch, and
// the old shard serves the user again with every update. With Options.ReplicaWrites
// (PostgreSQL) neither trigger fires for the mover's writes: the move succeeds with the
// rows as the application left them, and no deletion of the mover's is logged.
func TestApplicationTriggers(t *testing.T) {
	for _, replica := range []bool{false, true} {
		t.Run(fmt.Sprintf("replica=%v", replica), func(t *testing.T) {
			forEngines(t, 2, func(t *testing.T, e *engine) {
				if replica && e.dialect == sqlstore.SQLite {
					if _, err := sqlstore.New(e.dialect, []*sql.DB{openDB(t, e, e.shards[0])}, openDB(t, e, e.shards[0]), []sqlstore.TableSpec{messages}, sqlstore.Options{ReplicaWrites: true}); !errors.Is(err, rebalance.ErrConfig) {
						t.Fatalf("New with ReplicaWrites on SQLite: %v, want ErrConfig", err)
					}
					return
				}
				e.opts.ReplicaWrites = replica
				ctx := context.Background()
				admin, w, u, a, b := oneMovingUser(t, e)
				triggers := []string{
					"CREATE TABLE deleted_log (id BIGINT NOT NULL)",
					"CREATE TRIGGER touch AFTER UPDATE OF message ON messages BEGIN UPDATE messages SET time = time + 1 WHERE id = NEW.id; END",
					"CREATE TRIGGER log AFTER DELETE ON messages BEGIN INSERT INTO deleted_log VALUES (OLD.id); END",
				}
				if e.dialect == sqlstore.PostgreSQL {
					triggers = []string{
						"CREATE TABLE deleted_log (id BIGINT NOT NULL)",
						"CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.time = NEW.time + 1; RETURN NEW; END $$",
						"CREATE TRIGGER touch BEFORE UPDATE ON messages FOR EACH ROW EXECUTE FUNCTION touch()",
						"CREATE FUNCTION log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO deleted_log VALUES (OLD.id); RETURN NULL; END $$",
						"CREATE TRIGGER log AFTER DELETE ON messages FOR EACH ROW EXECUTE FUNCTION log()",
					}
				}
				for _, db := range admin.dbs {
					for _, q := range triggers {
						if _, err := db.Exec(q); err != nil {
							t.Fatal(err)
						}
					}
				}
				err := moveWithLateWrite(t, e, w, u, "UPDATE messages SET message = 'edited' WHERE user_id = $1", nil)
				count := func(shard int, q string) (n int) {
					if err := admin.dbs[shard].QueryRow(q, u).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n
				}
				// The application's update touched each row once: time went up by one.
				const edited = "SELECT COUNT(*) FROM messages WHERE user_id = $1 AND message = 'edited' AND time = id + 1"
				if !replica {
					if !errors.Is(err, rebalance.ErrCopyMismatch) {
						t.Fatalf("got %v, want ErrCopyMismatch", err)
					}
					if f, _ := admin.store.Fences(ctx, []string{u}, a); !servesAgain(f[0]) {
						t.Fatalf("old shard says %v, want serving again", f[0])
					}
					if n := count(a, edited); n != 20 {
						t.Fatalf("old shard holds %d rows as the application left them, want 20", n)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if n := count(b, edited); n != 20 {
					t.Fatalf("new shard holds %d rows as the application left them, want 20", n)
				}
				if n := count(a, "SELECT COUNT(*) FROM deleted_log WHERE $1 <> ''"); n != 0 {
					t.Fatalf("%d of the mover's deletions logged by the application's trigger", n)
				}
			})
		})
	}
}

// beforeDeletion runs before, once, before the mover's first deletion of old copies.
type beforeDeletion struct {
	rebalance.SharedStore[*sql.Tx]
	once   sync.Once
	before func()
}

func (d *beforeDeletion) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	d.once.Do(d.before)
	return d.SharedStore.DeleteChunk(ctx, migration, token, owners, shard, limit)
}

func (d *beforeDeletion) DeleteOwners(ctx context.Context, migration string, token uint64, owners []string, shard int, most int) (int, bool, error) {
	d.once.Do(d.before)
	return d.SharedStore.(rebalance.OwnersDeleter).DeleteOwners(ctx, migration, token, owners, shard, most)
}

// TestTableAddedBeforeTheDeletion: after the sums, just before the old copies are deleted,
// a table that references messages with ON DELETE CASCADE appears on the old shard, with a
// row (another owner's) that references one of the moved user's messages there. The
// deletion finds it inside its transaction and is rolled back: Run fails with ErrSchema
// naming the table, and that row and the message it references are still there.
func TestTableAddedBeforeTheDeletion(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin, w, u, a, _ := oneMovingUser(t, e)
		st := &beforeDeletion{SharedStore: e.open(t, 2).store, before: func() {
			for _, q := range []string{
				"CREATE TABLE attachments (id BIGINT PRIMARY KEY, message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE, body TEXT NOT NULL)",
				"INSERT INTO attachments SELECT 1, MIN(id), 'kept' FROM messages WHERE user_id = " + u,
			} {
				if _, err := admin.dbs[a].Exec(q); err != nil {
					t.Error(err)
				}
			}
		}}
		m, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = m.Run(ctx, slices.Values(w.users))
		if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), "table attachments references messages but is not moved with it") {
			t.Fatalf("got %v, want ErrSchema naming the table", err)
		}
		var n int
		if err := admin.dbs[a].QueryRow("SELECT COUNT(*) FROM attachments a JOIN messages m ON m.id = a.message_id WHERE m.user_id = $1", u).Scan(&n); err != nil || n != 1 {
			t.Fatalf("old shard holds %d attachments with their message (%v), want 1", n, err)
		}
	})
}

// TestSumsTellContentApart: a row that differs between two shards only by the case of a
// value in a case-insensitive column, by an empty text against a NULL, by two values swapped
// between columns, or by a trailing space, makes the owner's sums differ, and on SQLite,
// whose columns may hold any type, also by 1 against '1', by what follows a NUL in a text,
// by the last bit of a real, or by the zone of a DATETIME's text; the same rows make them
// equal.
func TestSumsTellContentApart(t *testing.T) {
	forSchema(t, 2, "", nil, func(t *testing.T, e *engine) {
		schema := `
CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, a TEXT COLLATE NOCASE, b TEXT, c BLOB, d DATETIME);
CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)`
		if e.dialect == sqlstore.PostgreSQL {
			schema = `
CREATE COLLATION IF NOT EXISTS anycase (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, a TEXT COLLATE anycase, b TEXT, c TEXT, d TEXT);
CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)`
		}
		spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "a", "b", "c", "d"}}
		e = newEngine(t, e.dialect, 2, schema, []sqlstore.TableSpec{spec})
		p := e.open(t, 2)
		for _, db := range p.dbs {
			mustExec(t, db, "INSERT INTO notes VALUES (1, 'o', 'Hello', '', 'c', 'd'), (2, 'o', 'x', 'y', 'c', 'd'), (3, 'o', 'z', NULL, 'c', 'd')")
		}
		same := func() bool { t.Helper(); return sameSums(t, p, "o", 3) }
		require.True(t, same(), "the same rows")
		// Each edit: on shard 1, to; then back, as on shard 0.
		type edit struct{ what, to, back string }
		edits := []edit{
			{"case", "UPDATE notes SET a = 'hello' WHERE k = 1", "UPDATE notes SET a = 'Hello' WHERE k = 1"},
			{"empty against NULL", "UPDATE notes SET b = NULL WHERE k = 1", "UPDATE notes SET b = '' WHERE k = 1"},
			{"swapped", "UPDATE notes SET a = 'y', b = 'x' WHERE k = 2", "UPDATE notes SET a = 'x', b = 'y' WHERE k = 2"},
			{"trailing space", "UPDATE notes SET a = 'z ' WHERE k = 3", "UPDATE notes SET a = 'z' WHERE k = 3"},
		}
		if e.dialect == sqlstore.SQLite { // c has no type: values of any
			for _, v := range [][2]string{{"1", "'1'"}, {"1", "1.0"}, {"X'31'", "'1'"}, {"'a' || char(0) || 'b'", "'a' || char(0) || 'c'"}, {"0.3", "0.1 + 0.2"}} {
				edits = append(edits, edit{v[0] + " against " + v[1], "UPDATE notes SET c = " + v[1] + " WHERE k = 1", "UPDATE notes SET c = " + v[0] + " WHERE k = 1"})
			}
			// A driver may read a DATETIME column's text as a time: one instant, two texts.
			edits = append(edits, edit{"one instant in two zones", "UPDATE notes SET d = '2024-01-01 01:00:00+01:00' WHERE k = 1", "UPDATE notes SET d = '2024-01-01 00:00:00+00:00' WHERE k = 1"})
		}
		for _, c := range edits {
			mustExec(t, p.dbs[0], c.back)
			mustExec(t, p.dbs[1], c.back)
			require.True(t, same(), c.what+", before")
			mustExec(t, p.dbs[1], c.to)
			require.False(t, same(), c.what)
			mustExec(t, p.dbs[1], c.back)
			require.True(t, same(), c.what+", undone")
		}
	})
}

// TestValuesReplayedAsStored: values a driver would read as another type (SQLite's
// DATETIME text as a time, written back in the driver's own format) reach the new shard as
// stored, whether copied or replayed: rows changed during the copy keep their values byte
// for byte and their types.
func TestValuesReplayedAsStored(t *testing.T) {
	forSchema(t, 2, "", nil, func(t *testing.T, e *engine) {
		schema := `
CREATE TABLE IF NOT EXISTS events (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, d DATETIME, n TEXT);
CREATE INDEX IF NOT EXISTS events_owner_k ON events (owner, k)`
		raw := "typeof(d) || ':' || hex(d) || '/' || typeof(n) || ':' || hex(n)"
		if e.dialect == sqlstore.PostgreSQL {
			schema = strings.Replace(schema, "DATETIME", "TEXT", 1)
			raw = "d || '/' || n"
		}
		spec := sqlstore.TableSpec{Table: "events", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "d", "n"}}
		e = newEngine(t, e.dialect, 2, schema, []sqlstore.TableSpec{spec})
		p := e.open(t, 2)
		two, _ := shard.NewJump(2)
		one, _ := shard.NewJump(1)
		var owner string
		for i := 0; owner == ""; i++ {
			if o := fmt.Sprintf("owner-%d", i); two.Locate(o) == 1 {
				owner = o
			}
		}
		values := []string{"2024-01-01", "2024-01-01T10:00:00Z", "2024-01-01 01:00:00+01:00", "not a time", "1.50"}
		for i, v := range values {
			mustExec(t, p.dbs[1], "INSERT INTO events VALUES ($1, $2, $3, $4)", i, owner, v, v)
		}
		stored := func(db *sql.DB) []string { return texts(t, db, "SELECT "+raw+" FROM events ORDER BY k") }
		var want []string
		st := &lateChange{SharedStore: p.store, between: func() {
			for i := range values { // changed after the copy: replayed
				v := values[len(values)-1-i]
				mustExec(t, p.dbs[1], "UPDATE events SET d = $1, n = $1 WHERE k = $2", v, i)
			}
			want = stored(p.dbs[1])
		}}
		m, err := rebalance.NewShared("shrink", two, one, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{Token: 1})
		require.NoError(t, err)
		require.NoError(t, m.Run(context.Background(), slices.Values([]string{owner})))
		require.Len(t, want, len(values))
		require.Equal(t, want, stored(p.dbs[0]))
	})
}

// sameSums reports whether owner's sums on shards 0 and 1 agree, each of rows rows.
func sameSums(t *testing.T, p *proc, owner string, rows int64) bool {
	t.Helper()
	var sums [2]rebalance.Sum
	for i := range sums {
		s, err := p.store.Sums(context.Background(), []string{owner}, i)
		require.NoError(t, err)
		require.Equal(t, rows, s[0].Rows, "shard %d", i)
		sums[i] = s[0]
	}
	return sums[0] == sums[1]
}

// TestSumsOfIntegers (PostgreSQL): columns that are integers on every shard are summed by
// value, so an integer and a bigint of one value agree, and a value changed, swapped with
// another column's or NULL against 0 does not; a column that is an integer on one shard
// and numeric on the other is summed by its text there, and agrees too. One that stops
// being an integer after Init fails the sum.
func TestSumsOfIntegers(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	schema := `
CREATE TABLE IF NOT EXISTS counts (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, n INTEGER, m BIGINT, x BIGINT);
CREATE INDEX IF NOT EXISTS counts_owner_k ON counts (owner, k)`
	spec := sqlstore.TableSpec{Table: "counts", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "n", "m", "x"}}
	e := newEngine(t, sqlstore.PostgreSQL, 2, schema, []sqlstore.TableSpec{spec})
	db1 := openDB(t, e, e.shards[1])
	mustExec(t, db1, "ALTER TABLE counts ALTER COLUMN n TYPE BIGINT, ALTER COLUMN x TYPE NUMERIC")
	p := e.open(t, 2)
	ctx := context.Background()
	for _, db := range p.dbs {
		mustExec(t, db, "INSERT INTO counts VALUES (1, 'o', 5, 7, 9), (2, 'o', 0, NULL, 11)")
	}
	same := func() bool { t.Helper(); return sameSums(t, p, "o", 2) }
	require.True(t, same(), "one value as an integer and as a bigint, as a bigint and as a numeric")
	for _, c := range []struct{ what, to, back string }{
		{"a value", "UPDATE counts SET n = 6 WHERE k = 1", "UPDATE counts SET n = 5 WHERE k = 1"},
		{"swapped", "UPDATE counts SET n = 7, m = 5 WHERE k = 1", "UPDATE counts SET n = 5, m = 7 WHERE k = 1"},
		{"NULL against 0", "UPDATE counts SET n = NULL, m = 0 WHERE k = 2", "UPDATE counts SET n = 0, m = NULL WHERE k = 2"},
		{"a numeric", "UPDATE counts SET x = 9.5 WHERE k = 1", "UPDATE counts SET x = 9 WHERE k = 1"},
	} {
		mustExec(t, db1, c.to)
		require.False(t, same(), c.what)
		mustExec(t, db1, c.back)
		require.True(t, same(), c.what+", undone")
	}
	// Summed by value since Init: a column that is no longer an integer fails the sum rather
	// than be compared by another rule.
	mustExec(t, db1, "ALTER TABLE counts ALTER COLUMN n TYPE NUMERIC")
	_, err := p.store.Sums(ctx, []string{"o"}, 1)
	require.Error(t, err)
}

// stopCopy is a SharedStore whose first CopyChunk has the application write a row of each of
// its owners on the old shard, which the change capture records, and then fails: a copy
// stopped with changes recorded. Later chunks count the changes of their owners on the
// old shard before they copy.
type stopCopy struct {
	rebalance.SharedStore[*sql.Tx]
	p       *proc
	stopped atomic.Bool
	write   func(owners []string)
	stale   atomic.Int64 // changes recorded before a later chunk of their owners
}

var errStopCopy = errors.New("copy stopped")

func (s *stopCopy) CopyChunk(ctx context.Context, m string, tok uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	if s.stopped.CompareAndSwap(false, true) {
		s.write(owners)
		return nil, 0, false, errStopCopy
	}
	var n int64
	q := "SELECT COUNT(*) FROM rebalance_changes_messages WHERE owner IN ('" + strings.Join(owners, "', '") + "')"
	if err := s.p.dbs[from].QueryRowContext(ctx, q).Scan(&n); err != nil {
		return nil, 0, false, err
	}
	s.stale.Add(n)
	return s.SharedStore.CopyChunk(ctx, m, tok, owners, from, to, after, limit)
}

// TestStoppedCopyChangesCleared: the changes a stopped copy recorded are gone before the
// owners are copied again (ClearChanges looks for them outside a transaction and finds
// them), and none are left after the move.
func TestStoppedCopyChangesCleared(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		p := e.open(t, 2)
		w := newWorld(t, e, 2, 4)
		w.load(t, p, span(1, 40), 5)
		app := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		s := &stopCopy{SharedStore: p.store, p: p, write: func(owners []string) {
			for _, o := range owners {
				require.NoError(t, w.write(ctx, app, o))
			}
		}}
		recorded := func() (n int64) {
			for _, db := range p.dbs {
				var c int64
				require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM rebalance_changes_messages").Scan(&c))
				n += c
			}
			return n
		}
		mover, err := rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](s), rebalance.SharedOptions{Token: 1, ChunkRows: 7})
		require.NoError(t, err)
		require.ErrorIs(t, mover.Run(ctx, slices.Values(w.users)), errStopCopy)
		require.Positive(t, recorded(), "the stopped copy recorded no change")
		mover, err = rebalance.NewShared("grow", w.before, w.after, rebalance.SharedStore[*sql.Tx](s), rebalance.SharedOptions{Token: 2, ChunkRows: 7})
		require.NoError(t, err)
		require.NoError(t, mover.Run(ctx, slices.Values(w.users)))
		require.Zero(t, s.stale.Load(), "changes of a stopped copy left when its owners were copied again")
		require.Zero(t, recorded(), "changes left after the move")
		w.requireClean(t, p, w.after)
	})
}

// TestFirstDiffByPages: FirstDiff reads an owner a page at a time, and finds the first row of
// the first shard that the second lacks or holds changed, past the first pages, then a row
// only the second holds.
func TestFirstDiffByPages(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		p := e.open(t, 2)
		const n = 3000
		first := nextID.Add(n) - n + 1
		owner := strconv.FormatInt(first, 10)
		for s := range 2 {
			for i := int64(0); i < n; i += 100 {
				var q strings.Builder
				var args []any
				q.WriteString("INSERT INTO messages (id, user_id, time, message, sender) VALUES ")
				for j := range int64(100) {
					if j > 0 {
						q.WriteString(", ")
					}
					fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d)", 5*j+1, 5*j+2, 5*j+3, 5*j+4, 5*j+5)
					args = append(args, first+i+j, first, first+i+j, "hello", int64(7))
				}
				if _, err := p.dbs[s].Exec(q.String(), args...); err != nil {
					t.Fatal(err)
				}
			}
		}
		diff := func(want int64) {
			t.Helper()
			got, err := p.store.FirstDiff(ctx, owner, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if w := strconv.FormatInt(want, 10); want == 0 && got != "" || want != 0 && got != w {
				t.Fatalf("FirstDiff = %q, want %d", got, want)
			}
		}
		exec := func(s int, q string, id int64) {
			t.Helper()
			if err := execAsMover(e.dialect, p.dbs[s], q, id); err != nil {
				t.Fatal(err)
			}
		}
		diff(0)
		exec(1, "UPDATE messages SET message = 'changed' WHERE id = $1", first+2500)
		diff(first + 2500)
		exec(1, "DELETE FROM messages WHERE id = $1", first+1700)
		diff(first + 1700)
		exec(0, "DELETE FROM messages WHERE id = $1", first+1700)
		exec(0, "UPDATE messages SET message = 'changed' WHERE id = $1", first+2500)
		diff(0)
		exec(1, "INSERT INTO messages (id, user_id, time, message, sender) VALUES ($1, "+owner+", 1, 'only here', 7)", first+n)
		diff(first + n)
	})
}
