package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"iter"
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

// The schema changing under a move (DDL between two of the mover's steps), and schemas whose
// rows the move would leave behind or take along. Each test states the exact interleaving,
// which lost or stranded an acknowledged write while Run and Finish returned nil, and what
// the code does now.

// beforeReplay runs between, once, before the mover's first Replay: the copy done, the old
// shard still serving. It embeds the Store itself, so that the mover sees every optional
// interface the Store implements (SumKeeper, OwnersDeleter, ...).
type beforeReplay struct {
	*sqlstore.Store
	once    sync.Once
	between func()
}

func (l *beforeReplay) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	l.once.Do(l.between)
	return l.Store.Replay(ctx, migration, token, owners, from, to, limit)
}

// TestNewOwnerTableDuringTheMove: Init refuses a table that has the moved table's owner
// column (user_id) and is not moved ("its rows would stay behind on the old shard"), but
// only at Init: nothing looks again during a move. Sequence: the mover (its Store Init'ed
// before) copies user u from shard a to shard b; before its first replay (the old shard
// still serving u) the application deploys a new table notes (id, user_id, body) on every
// shard and, in an access of u (Shared.Do routes it to shard a), inserts u's note: the
// write is acknowledged. The window checks columns, references, triggers of the moved
// tables only, so Run commits u on shard b and deletes u's messages on a; Finish lists the
// owners of the moved tables only and returns nil. u's note stays on shard a, which no
// router reads for u any more: Do(u) on shard b finds no note.
// That was the code before: Owners, which Finish lists the shards with, looks for such tables
// first, and Finish stops with ErrSchema naming notes.
func TestNewOwnerTableDuringTheMove(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin, w, u, a, b := oneMovingUser(t, e)
		app := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{FenceWait: 30 * time.Second})
		st := &beforeReplay{Store: e.open(t, 2).store, between: func() {
			for _, db := range admin.dbs {
				if _, err := db.Exec("CREATE TABLE notes (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, body TEXT NOT NULL)"); err != nil {
					t.Error(err)
				}
			}
			err := app.Do(ctx, u, func(tx *sql.Tx, s int) error {
				if s != a {
					t.Errorf("access of u on shard %d, want its old shard %d", s, a)
				}
				_, err := tx.ExecContext(ctx, "INSERT INTO notes (id, user_id, body) VALUES (1, $1, 'acknowledged note')", u)
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
		if !movedOrRefused(t, m, w.users) {
			return
		}
		var n, at int
		err = app.Do(ctx, u, func(tx *sql.Tx, s int) error {
			at = s
			return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM notes WHERE user_id = $1", u).Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
		var left int
		if err := admin.dbs[a].QueryRow("SELECT COUNT(*) FROM notes WHERE user_id = $1", u).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("Run and Finish returned nil; u's acknowledged note: %d found by Do on shard %d (want 1, b=%d), %d left on old shard %d where no router reads u", n, at, b, left, a)
		}
	})
}

// TestOwnerColumnNamedInAnotherCase (SQLite): Init's check for tables left behind
// compares column names with '=' (case-sensitive), while SQLite's identifiers are not: a
// table notes (id, User_Id, body) holds user_id under another spelling and is not refused
// (whereas notes (id, user_id, body) is). Sequence: such a table holds an acknowledged
// note of u on shard a (written in u's access), the migration moves u's messages to b,
// Run and Finish return nil; the note stays on a, where no router reads u.
// That was the code before: the names are compared as SQLite does, and Init refuses the table.
func TestOwnerColumnNamedInAnotherCase(t *testing.T) {
	schema := messagesSchema + ";CREATE TABLE IF NOT EXISTS notes (id BIGINT PRIMARY KEY, User_Id BIGINT NOT NULL, body TEXT NOT NULL)"
	e := newEngine(t, sqlstore.SQLite, 2, schema, nil)
	ctx := context.Background()
	admin, err := e.openErr(2)
	if err != nil {
		refused(t, "Init refused the table", err)
		return
	}
	defer admin.close()
	w := newWorld(t, e, 1, 2)
	w.load(t, admin, w.moving(1, 1), 20)
	u := w.users[0]
	a := w.before.Locate(u)
	app := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
	if err := app.Do(ctx, u, func(tx *sql.Tx, _ int) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO notes (id, user_id, body) VALUES (1, $1, 'acknowledged note')", u)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	m := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
	if !movedOrRefused(t, m, w.users) {
		return
	}
	var n int
	if err := app.Do(ctx, u, func(tx *sql.Tx, _ int) error {
		return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM notes WHERE user_id = $1", u).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		var left int
		admin.dbs[a].QueryRow("SELECT COUNT(*) FROM notes WHERE user_id = $1", u).Scan(&left)
		t.Fatalf("Run and Finish returned nil; u's acknowledged note: %d where Do reads u, %d left on old shard %d", n, left, a)
	}
}

// caseTwins returns an owner s that the grow from one shard to two moves (to shard 1) and
// its upper-case twin, which stays on shard 0.
func caseTwins(after shard.Sharder) (moving, staying string) {
	for i := 0; ; i++ {
		s := "user" + strconv.Itoa(i) + "x"
		if after.Locate(s) == 1 && after.Locate(strings.ToUpper(s)) == 0 {
			return s, strings.ToUpper(s)
		}
	}
}

// TestOwnerCollationChangedDuringTheMove (PostgreSQL): the owner column is text of the
// default (deterministic) collation, which Init accepts. Owners "userNx" (moving to shard
// 1; keys 1-10) and "USERNX" (staying on shard 0; keys 11-20) both live on shard 0.
// Sequence: after the mover's first copy chunk (4 of userNx's rows), the application
// changes the owner column's collation on every shard to a case-insensitive
// nondeterministic one (ALTER TABLE notes ALTER COLUMN owner TYPE text COLLATE anycase:
// format_type still says "text", so the window's column check passes). The later chunks
// (owner = 'userNx' AND k > cursor) bring USERNX's 10 rows to shard 1 too; the sums
// (owner IN ('userNx') GROUP BY owner) now group both owners under "userNx" on both
// shards: 20 rows each, equal; the new shard serves userNx and the deletion of the old copy
// (owner IN ('userNx'), bounded by the window's 20) takes USERNX's rows from shard 0, where
// USERNX is still served. Init refuses such a column; nothing after Init looks again. (The
// first Run may stop at the deletion on a plan PostgreSQL cached before the ALTER; the
// test ran again, as after any failed step.)
// That was the code before: the columns' check of each window compares the collation too,
// and the window stops (ErrSchema) with the old shard serving both owners.
func TestOwnerCollationChangedDuringTheMove(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	spec := sqlstore.TableSpec{Table: "notes", Owner: "owner", Key: "k", Columns: []string{"k", "owner", "body"}}
	schema := "CREATE COLLATION IF NOT EXISTS anycase (provider = icu, locale = 'und-u-ks-level2', deterministic = false);" +
		"CREATE TABLE IF NOT EXISTS notes (k BIGINT PRIMARY KEY, owner TEXT NOT NULL, body TEXT NOT NULL);" +
		"CREATE INDEX IF NOT EXISTS notes_owner_k ON notes (owner, k)"
	e := newEngine(t, sqlstore.PostgreSQL, 2, schema, []sqlstore.TableSpec{spec})
	ctx := context.Background()
	before, _ := shard.NewJump(1)
	after, _ := shard.NewJump(2)
	mover, stayer := caseTwins(after)
	admin := e.open(t, 2)
	// The mover's rows first (smaller keys), then the stayer's.
	for k := 1; k <= 10; k++ {
		mustExec(t, admin.dbs[0], "INSERT INTO notes VALUES ($1, $2, 'moving')", k, mover)
	}
	for k := 11; k <= 20; k++ {
		mustExec(t, admin.dbs[0], "INSERT INTO notes VALUES ($1, $2, 'staying')", k, stayer)
	}
	changed := false
	st := &afterChunk{Store: e.open(t, 2).store, between: func() {
		for _, db := range admin.dbs {
			if _, err := db.Exec("ALTER TABLE notes ALTER COLUMN owner TYPE text COLLATE anycase"); err != nil {
				t.Error(err)
			}
		}
		changed = true
	}}
	m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](st), rebalance.SharedOptions{ChunkRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	users := []string{mover, stayer}
	if err := m.Run(ctx, slices.Values(users)); err != nil {
		refused(t, "Run", err)
	} else if err := m.Finish(ctx, slices.Values(users)); err != nil {
		refused(t, "Finish", err)
	}
	if !changed {
		t.Fatal("the collation was not changed during the move")
	}
	var n int
	if err := admin.dbs[0].QueryRow("SELECT COUNT(*) FROM notes WHERE owner = $1 COLLATE \"C\"", stayer).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Fatalf("staying owner %q: %d of its 10 acknowledged rows left on shard 0, where it is served", stayer, n)
	}
}

// afterChunk runs between, once, after the mover's first CopyChunk returned: mid-copy, the
// old shard exporting.
type afterChunk struct {
	*sqlstore.Store
	once    sync.Once
	between func()
}

func (c *afterChunk) CopyChunk(ctx context.Context, m string, tok uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	next, n, done, err := c.Store.CopyChunk(ctx, m, tok, owners, from, to, after, limit)
	if err == nil {
		c.once.Do(c.between)
	}
	return next, n, done, err
}

// rebuildSQLiteTable changes table's definition to def on db by SQLite's documented
// procedure for schema changes ALTER TABLE cannot make (https://sqlite.org/lang_altertable.html,
// "Making Other Kinds Of Table Schema Changes"): in one transaction, create the new table,
// copy the rows, drop the old one, rename, and create again the indexes and triggers the
// old one had, from their saved SQL (the change capture's among them).
func rebuildSQLiteTable(t *testing.T, db *sql.DB, table, def string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.ExecContext(ctx, "ROLLBACK")
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("BEGIN IMMEDIATE")
	rows, err := conn.QueryContext(ctx, "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL", table)
	if err != nil {
		t.Fatal(err)
	}
	var saved []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		saved = append(saved, q)
	}
	rows.Close()
	exec(strings.Replace(def, "CREATE TABLE "+table+" ", "CREATE TABLE new_"+table+" ", 1))
	exec("INSERT INTO new_" + table + " SELECT * FROM " + table)
	exec("DROP TABLE " + table)
	exec("ALTER TABLE new_" + table + " RENAME TO " + table)
	for _, q := range saved {
		exec(q)
	}
	exec("COMMIT")
}

// TestReplaceConstraintAddedAfterInit (SQLite): Init refuses a table that declares a
// constraint ON CONFLICT REPLACE ("a row copied in that breaks it would delete the row in
// its way, another owner's, unseen"), but only at Init: neither Run nor the window looks
// again. messages has a unique slug. Sequence: users c and a live on shard 0; the mover's
// process starts (Init passes); Run moves c to shard 1; c writes there its message of slug
// "hello" (acknowledged; a's message "hello" is on shard 0, so the unique slug holds on each
// shard). The application then changes slug's constraint to UNIQUE ON CONFLICT REPLACE on
// every shard by SQLite's documented table rebuild, which saves and re-creates the table's
// indexes and triggers (the change capture's too, so checkCapture finds them). Run moves a:
// the copy of a's "hello" into shard 1 meets c's "hello", and REPLACE deletes c's row (no
// delete trigger fires for it, nor would the guard refuse it: c is served there). a's sums
// agree; Run and Finish return nil; c's acknowledged message is gone. Without the REPLACE
// the copy fails on the unique slug and the move stops, nothing lost.
// That was the code before: the mover inserts with OR ABORT, which overrides a constraint's
// REPLACE, and the copy fails on the unique slug as it does without it.
func TestReplaceConstraintAddedAfterInit(t *testing.T) {
	const def = "CREATE TABLE messages (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, slug TEXT NOT NULL UNIQUE, body TEXT NOT NULL)"
	schema := strings.Replace(def, "CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1) + ";CREATE INDEX IF NOT EXISTS messages_user_id_id ON messages (user_id, id)"
	spec := sqlstore.TableSpec{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "slug", "body"}}
	e := newEngine(t, sqlstore.SQLite, 2, schema, []sqlstore.TableSpec{spec})
	ctx := context.Background()
	w := newWorld(t, e, 1, 2)
	movers := w.moving(1, 2)
	c, a := strconv.Itoa(movers[0]), strconv.Itoa(movers[1])
	admin := e.open(t, 2)
	mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (1, $1, 'c-first', 'c'), (2, $2, 'hello', 'a')", c, a)
	mover := e.open(t, 2) // Init'ed now
	m := w.shared(t, mover, "grow", rebalance.SharedOptions{})
	if err := m.Run(ctx, slices.Values([]string{c})); err != nil {
		t.Fatal(err)
	}
	app := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
	if err := app.Do(ctx, c, func(tx *sql.Tx, s int) error {
		if s != 1 {
			t.Errorf("c's access on shard %d, want 1", s)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO messages VALUES (3, $1, 'hello', 'acknowledged: c says hello')", c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, db := range admin.dbs {
		rebuildSQLiteTable(t, db, "messages", strings.Replace(def, "UNIQUE", "UNIQUE ON CONFLICT REPLACE", 1))
	}
	errRun := m.Run(ctx, slices.Values([]string{c, a}))
	t.Logf("Run after the rebuild: %v", errRun)
	if errRun == nil {
		t.Error("Run after the rebuild returned nil: the copy of a's message of slug hello met c's on shard 1")
	}
	var n int
	if err := app.Do(ctx, c, func(tx *sql.Tx, _ int) error {
		return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE id = 3").Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("c's acknowledged message 3 (slug hello) is gone from its shard: the copy of a's row of the same slug replaced it")
	}
}

// ddlAroundCopy runs before, then the Store's Copy, then after, once: a schema change that
// reaches the new shard before the copy and the old shard after it.
type ddlAroundCopy struct {
	*sqlstore.Store
	once          sync.Once
	before, after func()
}

func (d *ddlAroundCopy) Copy(ctx context.Context, owner string, from, to int) error {
	first := false
	d.once.Do(func() { first = true })
	if first {
		d.before()
	}
	err := d.Store.Copy(ctx, owner, from, to)
	if first {
		d.after()
	}
	return err
}

// TestInProcessRewriteDuringTheCopy (PostgreSQL, in-process rebalance.New over the
// Store): the application's schema migration rewrites a column's values without changing
// its type (ALTER TABLE messages ALTER COLUMN message TYPE text USING upper(message)),
// shard by shard. Sequence: the migration reaches the new shard b, then the mover's Copy of
// user u reads u's rows on a (not rewritten yet) and writes them on b (after b's rewrite),
// then the migration reaches a (rewriting u's old copy, which is deleted next). Copy checks
// the columns' types (unchanged: text) and the counts (equal), so Run and Finish return
// nil; every row of every shard was rewritten but u's, which b serves with the old values:
// the schema migration's committed change is silently lost for the moved owner. The Shared
// mover's sums see it (ErrCopyMismatch); the in-process Copy compares counts only.
// That was the code before: a Migration over a Summer (the sqlstore) compares the copies by
// content before it marks the owner copied, and stops with ErrCopyMismatch.
func TestInProcessRewriteDuringTheCopy(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	e := newPostgres(t, 2)
	admin := e.open(t, 2)
	w := newWorld(t, e, 1, 2)
	w.load(t, admin, w.moving(1, 1), 4)
	stay := 1
	for w.after.Locate(strconv.Itoa(stay)) != 0 {
		stay++
	}
	w.load(t, admin, []int{stay}, 4)
	u := w.users[0]
	a, b := w.before.Locate(u), w.after.Locate(u)
	const rewrite = "ALTER TABLE messages ALTER COLUMN message TYPE text USING upper(message)"
	p := e.open(t, 2)
	st := &ddlAroundCopy{Store: p.store,
		before: func() { mustExec(t, admin.dbs[b], rewrite) },
		after:  func() { mustExec(t, admin.dbs[a], rewrite) }}
	m, err := rebalance.New("grow", w.before, w.after, st, rebalance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !movedOrRefused(t, m, w.users) {
		return
	}
	w.requireClean(t, admin, w.after)
	var notRewritten int
	for _, db := range admin.dbs {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM messages WHERE message <> upper(message)").Scan(&n); err != nil {
			t.Fatal(err)
		}
		notRewritten += n
	}
	if notRewritten > 0 {
		t.Fatalf("Run and Finish returned nil; the rewrite committed on both shards, yet %d rows (user %s's, on shard %d) hold the values from before it", notRewritten, u, b)
	}
}

// TestChildMovesAwayFromItsParent: the reactions table's owner is the user who reacted,
// so moving user A's reaction references a message of user R, who stays (the mirror of
// TestReferenceAcrossOwners, where the referenced row's owner moves). Sequence: A reacts
// to R's message 10 (ON DELETE CASCADE); Run moves A: the copy writes A's reaction on the
// new shard with the foreign key checks off, the sums compare A's rows only, and nothing
// looks for A's rows that reference another owner's rows; Run and Finish return nil. The
// new shard now holds a reaction whose message is not there (a broken foreign key the
// database would never have accepted). Then R deletes message 10 (acknowledged): on one
// shard its cascade would have taken A's reaction; A's reaction lives on, a delete the
// application committed that did not happen.
// That was the code before: the window looks on the new shard for the moving owners' rows whose
// referenced rows it does not hold, and stops with ErrSchema.
func TestChildMovesAwayFromItsParent(t *testing.T) {
	forSchema(t, 2, chatSchema, chatTables, func(t *testing.T, e *engine) {
		ctx := context.Background()
		before, _ := shard.NewJump(1)
		after, _ := shard.NewJump(2)
		ua, ur := movingAndStaying(after)
		admin := e.open(t, 2)
		mustExec(t, admin.dbs[0], "INSERT INTO users VALUES ("+ua+", 'a', 0), ("+ur+", 'r', 0)")
		mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (10, "+ur+", 'hello', 0)")
		mustExec(t, admin.dbs[0], "INSERT INTO reactions VALUES (20, "+ua+", 10, 'thumbs up')")
		m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		users := []string{ua, ur}
		if !movedOrRefused(t, m, users) {
			return
		}
		if err := m.Do(ctx, ur, func(tx *sql.Tx, _ int) error {
			_, err := tx.ExecContext(ctx, "DELETE FROM messages WHERE id = 10")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var left, orphans int
		if err := m.Do(ctx, ua, func(tx *sql.Tx, _ int) error {
			return tx.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = r.message_id)) FROM reactions r WHERE r.id = 20").Scan(&left, &orphans)
		}); err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Fatalf("Run and Finish returned nil; R's acknowledged delete of message 10 did not cascade: A's reaction 20 lives on its new shard (%d, %d of them referencing no message)", left, orphans)
		}
	})
}

// TestOwnerTableKeyedByOwner: Init refuses a table that has a moved table's owner
// column and is not moved, but checkLeftBehind skips every table whose owner column is its
// key ("every table has an id"): a Store that moves profiles (one row per user, keyed and
// owned by user_id) never looks for other tables with a user_id column. Sequence: settings
// (id, user_id, theme) holds u's acknowledged setting on shard a (written in u's access);
// Init passes; Run moves u's profile to b; Run and Finish return nil; u's setting stays on a,
// where no router reads u.
// That was the code before: a table whose whole primary key is the column is the only one
// passed over, and Init refuses settings.
func TestOwnerTableKeyedByOwner(t *testing.T) {
	schema := "CREATE TABLE IF NOT EXISTS profiles (user_id BIGINT PRIMARY KEY, name TEXT NOT NULL);" +
		"CREATE TABLE IF NOT EXISTS settings (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, theme TEXT NOT NULL)"
	spec := sqlstore.TableSpec{Table: "profiles", Owner: "user_id", Key: "user_id", IntOwner: true, Columns: []string{"user_id", "name"}}
	forSchema(t, 2, schema, []sqlstore.TableSpec{spec}, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin, err := e.openErr(2)
		if err != nil {
			refused(t, "Init refused the settings table", err)
			return
		}
		defer admin.close()
		w := newWorld(t, e, 1, 2)
		u := strconv.Itoa(w.moving(1, 1)[0])
		a := w.before.Locate(u)
		mustExec(t, admin.dbs[a], "INSERT INTO profiles VALUES ($1, 'u')", u)
		app := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if err := app.Do(ctx, u, func(tx *sql.Tx, _ int) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO settings VALUES (1, $1, 'dark')", u)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		m := w.shared(t, e.open(t, 2), "grow", rebalance.SharedOptions{})
		if !movedOrRefused(t, m, []string{u}) {
			return
		}
		var n, at int
		if err := app.Do(ctx, u, func(tx *sql.Tx, s int) error {
			at = s
			return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM settings WHERE user_id = $1", u).Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("Run and Finish returned nil; u's acknowledged setting: %d where Do reads u (shard %d), still on old shard %d", n, at, a)
		}
	})
}

// TestDeleteRuleTakesAnotherOwnersRow (PostgreSQL): the docs' failure table says an
// application trigger on a moved table that fires on DELETE ("a cascade kept by hand that
// deletes the reactions to a message") stops the deletion of the old copy with ErrSchema
// (checkDeleteTriggers). The same cascade kept by a rule (CREATE RULE ... ON DELETE TO
// messages DO ALSO DELETE FROM reactions WHERE message_id = OLD.id) was not looked for.
// Sequence (reactionsGoWithTheirMessage): messages and reactions (owner: the user who
// reacted) are moved, with no foreign key between them (the rule is the cascade, so the
// cross-owner reference check, which reads foreign keys, sees nothing); R (staying)
// reacted to A's message 10; Run moves A, then deletes A's old messages on shard 0, and the
// rule deletes R's reaction there, where R is served. Run and Finish returned nil; R's
// acknowledged reaction was gone.
// That was the code before: the deletion looks for rules on DELETE as for triggers, and
// stops with ErrSchema.
func TestDeleteRuleTakesAnotherOwnersRow(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	reactionsGoWithTheirMessage(t, sqlstore.PostgreSQL,
		"CREATE OR REPLACE RULE reactions_go_with_their_message AS ON DELETE TO messages DO ALSO DELETE FROM reactions WHERE message_id = OLD.id")
}

// TestDeleteTriggerWithAComment (SQLite): checkDeleteTriggers found a SQLite trigger that
// fires on DELETE by the regular expression \bDELETE\s+ON\b over its SQL, so a comment
// between the two words (valid SQL: AFTER DELETE /* tidy */ ON messages) hid it: the
// sequence of TestDeleteRuleTakesAnotherOwnersRow with the cascade kept by such a trigger
// (SQLite fires application triggers for the mover's writes) took R's reaction.
// That was the code before: comments between DELETE and ON are read as blanks, and the deletion
// stops with ErrSchema.
func TestDeleteTriggerWithAComment(t *testing.T) {
	reactionsGoWithTheirMessage(t, sqlstore.SQLite,
		"CREATE TRIGGER IF NOT EXISTS reactions_go_with_their_message AFTER DELETE /* keep reactions tidy */ ON messages BEGIN DELETE FROM reactions WHERE message_id = OLD.id; END")
}

// reactionsGoWithTheirMessage moves user A, whose message 10 staying user R reacted to, with
// cascade (a rule or trigger that deletes a message's reactions) on the shards of dialect,
// and fails t unless the move stops (ErrSchema) or R's reaction stays.
func reactionsGoWithTheirMessage(t *testing.T, dialect sqlstore.Dialect, cascade string) {
	schema := `CREATE TABLE IF NOT EXISTS messages (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS messages_user_id_id ON messages (user_id, id);
CREATE TABLE IF NOT EXISTS reactions (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, message_id BIGINT NOT NULL, emoji TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS reactions_user_id_id ON reactions (user_id, id)`
	tables := []sqlstore.TableSpec{
		{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "body"}},
		{Table: "reactions", Owner: "user_id", Key: "id", IntOwner: true, Columns: []string{"id", "user_id", "message_id", "emoji"}},
	}
	e := newEngine(t, dialect, 2, schema, tables)
	for _, dsn := range e.shards { // one statement: a trigger's body holds a ';'
		if _, err := openDB(t, e, dsn).Exec(cascade); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	before, _ := shard.NewJump(1)
	after, _ := shard.NewJump(2)
	ua, ur := movingAndStaying(after)
	admin := e.open(t, 2)
	mustExec(t, admin.dbs[0], "INSERT INTO messages VALUES (10, "+ua+", 'hello')")
	mustExec(t, admin.dbs[0], "INSERT INTO reactions VALUES (20, "+ur+", 10, 'thumbs up')")
	m, err := rebalance.NewShared("grow", before, after, rebalance.SharedStore[*sql.Tx](e.open(t, 2).store), rebalance.SharedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	users := []string{ua, ur}
	if !movedOrRefused(t, m, users) {
		return
	}
	var n int
	if err := m.Do(ctx, ur, func(tx *sql.Tx, _ int) error {
		return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM reactions WHERE id = 20").Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("Run and Finish returned nil; staying user R's acknowledged reaction 20 is gone from R's shard: the cascade took it with the old copy of A's message")
	}
}

// TestInProcessInsertTrigger (in-process rebalance.New over the Store): the application
// stamps each message's time when it is inserted (a trigger on INSERT, added after the
// user's messages were written). The in-process Copy writes the user's rows on the new
// shard with the application's triggers firing (no ReplicaWrites; SQLite always), so the
// trigger stamps every copied row anew, and Copy compares counts only: Run and Finish
// return nil with every moved row's acknowledged time changed. (The Shared mover's sums
// see this and stop: TestApplicationTriggers.)
// That was the code before: the content comparison stops the move with ErrCopyMismatch.
func TestInProcessInsertTrigger(t *testing.T) {
	forEngines(t, 2, func(t *testing.T, e *engine) {
		admin := e.open(t, 2)
		w := newWorld(t, e, 1, 2)
		w.load(t, admin, w.moving(1, 1), 4) // time = id
		u := w.users[0]
		b := w.after.Locate(u)
		stamp := []string{"CREATE TRIGGER stamp AFTER INSERT ON messages BEGIN UPDATE messages SET time = 42 WHERE id = NEW.id; END"}
		if e.dialect == sqlstore.PostgreSQL {
			stamp = []string{
				"CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.time = 42; RETURN NEW; END $$",
				"CREATE TRIGGER stamp BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION stamp()",
			}
		}
		for _, db := range admin.dbs {
			for _, q := range stamp {
				mustExec(t, db, q)
			}
		}
		m, err := rebalance.New("grow", w.before, w.after, e.open(t, 2).store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !movedOrRefused(t, m, w.users) {
			return
		}
		w.requireClean(t, admin, w.after)
		var changed int
		if err := admin.dbs[b].QueryRow("SELECT COUNT(*) FROM messages WHERE user_id = $1 AND time <> id", u).Scan(&changed); err != nil {
			t.Fatal(err)
		}
		if changed > 0 {
			t.Fatalf("Run and Finish returned nil; %d of user %s's 4 rows have another time on the new shard than the one acknowledged", changed, u)
		}
	})
}

// TestLeftBehindTableHiddenByPrivileges (PostgreSQL): Init's check for tables left
// behind reads information_schema.columns, which lists only the columns of tables the
// connecting role has a privilege on. A mover connecting as a role of its own (least
// privilege: it owns the moved table, nothing on the application's other tables) does not
// see notes (id, user_id, body), and Init passes where the superuser's Init refuses.
// Sequence: u's acknowledged note on shard a; Run (as the mover's role) moves u's messages
// to b; Run and Finish return nil; the note stays on a, where no router reads u.
// That was the code before: the check reads pg_catalog, which lists every table, and Init
// refuses notes for the mover's role too.
func TestLeftBehindTableHiddenByPrivileges(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL not available: " + pgWhy)
	}
	schema := messagesSchema + ";CREATE TABLE IF NOT EXISTS notes (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, body TEXT NOT NULL)"
	e := newEngine(t, sqlstore.PostgreSQL, 2, schema, nil)
	if _, err := e.openErr(1); err == nil || !errors.Is(err, sqlstore.ErrSchema) {
		t.Fatalf("the superuser's Init: %v, want ErrSchema naming notes", err)
	}
	super := openDB(t, e, e.shards[0])
	super.Exec("CREATE ROLE adv_mover LOGIN") // one per server; may exist from an earlier run
	for _, dsn := range e.shards {
		db := openDB(t, e, dsn)
		mustExec(t, db, "GRANT ALL ON SCHEMA public TO adv_mover")
		mustExec(t, db, "ALTER TABLE messages OWNER TO adv_mover")
	}
	f := *e
	f.shards = nil
	for _, dsn := range e.shards {
		f.shards = append(f.shards, strings.Replace(dsn, "postgres://postgres@", "postgres://adv_mover@", 1))
	}
	f.control = f.shards[0]
	mover, err := f.openErr(2)
	if err != nil {
		refused(t, "the mover's role cannot Init", err)
		return
	}
	defer mover.close()
	w := newWorld(t, e, 1, 2)
	w.load(t, mover, w.moving(1, 1), 5)
	u := w.users[0]
	a := w.before.Locate(u)
	mustExec(t, openDB(t, e, e.shards[a]), "INSERT INTO notes VALUES (1, $1, 'acknowledged note')", u)
	m := w.shared(t, mover, "grow", rebalance.SharedOptions{})
	if !movedOrRefused(t, m, w.users) {
		return
	}
	var n int
	b := w.after.Locate(u)
	if err := openDB(t, e, e.shards[b]).QueryRow("SELECT COUNT(*) FROM notes WHERE user_id = $1", u).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("Run and Finish returned nil; u's acknowledged note is not on u's new shard %d: it stays on shard %d, where no router reads u", b, a)
	}
}

// refused fails t unless err is a refusal that names the schema's fault or a copy that
// differs: the move stopped rather than lose or strand a row.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, sqlstore.ErrSchema) && !errors.Is(err, rebalance.ErrCopyMismatch) {
		t.Fatalf("%s: %v, want an error wrapping ErrSchema or ErrCopyMismatch", what, err)
	}
	t.Logf("%s: %v", what, err)
}

// movedOrRefused runs m over owners and finishes it, and reports whether both returned nil;
// else the refusal (see refused) is logged, or t fails on another error.
func movedOrRefused(t *testing.T, m interface {
	Run(context.Context, iter.Seq[string]) error
	Finish(context.Context, iter.Seq[string]) error
}, owners []string) bool {
	t.Helper()
	ctx := context.Background()
	if err := m.Run(ctx, slices.Values(owners)); err != nil {
		refused(t, "Run refused", err)
		return false
	}
	if err := m.Finish(ctx, slices.Values(owners)); err != nil {
		refused(t, "Finish refused", err)
		return false
	}
	return true
}
