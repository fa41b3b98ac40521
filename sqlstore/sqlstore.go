// Package sqlstore is a [rebalance.SharedStore] over database/sql, for SQLite
// (modernc.org/sqlite) and PostgreSQL (the pgx stdlib driver): one database per shard, and a
// control database for the marks. It moves the rows of one table, an owner at a time, with the
// fences of the package rebalance documentation kept on each shard.
//
// # What holds across processes, and why
//
// Each shard holds a table rebalance_fence (owner, state, migration, token), rebalance_epoch
// (migration, newest token) and rebalance_placement (the placement it serves, one row); the
// control database holds rebalance_marks (migration, owner, mark), the table
// examples/rebalance already uses, rebalance_claim (migration, election epoch, token, mover,
// lease end: [Store.Claim] decides there, in one transaction) and its own rebalance_epoch.
// The store issues the tokens: each claim one more than the last. Every write of a mover
// (a fence, a chunk, a whole copy, a deletion, a mark) begins its transaction with a check of
// its token against rebalance_epoch and, for rows, of the owners' fences there (on
// PostgreSQL one statement, rebalance_step, under the migration's token lock held shared; a
// claim takes it exclusive, so it waits for the steps under way and every later step of an
// older token is refused). [Store.Access] reads the placement and the owner's fence in the
// transaction that runs the application's statements, and no fence change on that shard
// commits between that read and the access's writes:
//
//   - PostgreSQL: pg_advisory_xact_lock_shared on the shard's own connection, then the fence
//     is read by a statement of its own, so under READ COMMITTED (which Access asks for) it
//     sees every fence committed before the lock was granted; a fence change takes
//     pg_advisory_xact_lock on the same key and so waits for the accesses under way. Both
//     are plpgsql functions that Init creates on each shard (rebalance_enter,
//     rebalance_set_fence): one round trip each, not three or five.
//   - SQLite, in WAL mode: the fence read opens the transaction's snapshot and takes no lock,
//     so reads never wait for the mover. An access that only reads took effect at its
//     snapshot, where the shard served the owner. A write in the transaction takes the
//     database's write lock, which SQLite grants only if nothing committed since the snapshot
//     (else it fails at once with SQLITE_BUSY_SNAPSHOT, or SQLITE_BUSY while another
//     connection writes: https://www.sqlite.org/rescode.html#busy_snapshot), and holds it to
//     the commit; a fence change, itself a write transaction, thus commits before the fence
//     read or after the access, never in between. An access whose write fails so wrote
//     nothing: Access runs it again, with fn called again, from a new snapshot (retrying
//     finely for a while), then with the write lock taken first (an UPDATE of the owner's
//     fence row, which takes it even when no row matches). Set WAL
//     (_pragma=journal_mode(WAL)) and a busy timeout (_pragma=busy_timeout(10000)) in the
//     DSN. (Without WAL it is still safe, as a fence change cannot commit while a reader holds
//     its shared lock, but readers and the mover wait for each other.)
//
// A process that routes by a stale placement, lost its lease or was partitioned away from the
// coordinator still cannot read or write an owner on a shard that no longer serves it: the
// shard itself refuses, with an error wrapping [rebalance.ErrFenced].
//
// # The table
//
// A [TableSpec] names the table, its owner column, a key column that is unique on the table
// (across the shards: keys are how a copy and a replay find a row) and orders an owner's rows
// (the chunks of a copy follow it), and every column to copy. A chunk reads the rows of many
// owners in one statement (a UNION ALL of one range per owner: index the table on (owner,
// key)) and writes them with INSERT ... ON CONFLICT (key) DO UPDATE, many rows per statement,
// so a row copied again replaces its copy.
//
// # Rows that change during the copy
//
// [Store.Init] puts triggers on the table (rebalance_changes_<table>_insert, _update and
// _delete on SQLite, one rebalance_changes_<table> on PostgreSQL) that record, in the
// writing transaction, the key of every row inserted, updated or deleted of an owner whose
// fence on that shard is exporting, in the change table rebalance_changes_<table>. The mover
// fences the old shard exporting before it copies (waiting for the accesses under way, so
// every later write is recorded), replays the changes on the new shard after the copy and
// again after the fence (a changed row that exists on the old shard is written on the new
// one, one that does not is deleted there), then compares the owners' sums on both shards
// ([Store.Sums]: the rows and a digest of their content) before the new shard serves them.
// So an UPDATE or DELETE of a row whose chunk was already copied, and a row committed behind
// the copy's cursor, reach the new shard; a copy that still differs stops the move, naming
// the first key that differs, with the old copy kept and served. This is how
// pt-online-schema-change follows a table it copies; PostgreSQL's logical decoding would
// need wal_level=logical, a replication slot per shard and a decoder, and has no SQLite
// counterpart. While no owner of a shard is moving, the triggers only look up the owner's
// fence (an index probe that finds nothing) and record nothing.
//
// # Connections
//
// Every Access, chunk and fence change is one short transaction on one *sql.DB per shard. Give
// each *sql.DB as many idle connections as the goroutines that use it at once
// (SetMaxIdleConns): database/sql keeps 2 by default and otherwise opens and closes a
// connection for most transactions, which on PostgreSQL costs more than the transaction.
//
// On SQLite every write transaction of a database waits for the one before it, the mover's
// chunks included, so a foreground write during a migration waits for the chunk under way on
// its shard; reads do not wait (see above). For a foreground p99 near idle, run the mover in
// a process of its own (in the application's process its SQLite work also takes the Go
// scheduler's Ps from the foreground) with one mover, small chunks and a pause after each
// (rebalance.SharedOptions{Concurrency: 1, ChunkRows: 200, Group: 4, Yield: 1}):
// BenchmarkLatency measures both.
//
// A Store never creates a shard: [Store.Init] creates the fence tables in databases that
// exist, and refuses a shard whose data table is missing (a lost SQLite file reopened empty, a
// dropped database) with an error that names it. Open SQLite files with mode=rw once they
// exist.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard/rebalance"
)

// Dialect is the SQL engine of every database of a Store.
type Dialect uint8

const (
	// SQLite, through modernc.org/sqlite (driver name "sqlite").
	SQLite Dialect = iota + 1
	// PostgreSQL, through github.com/jackc/pgx/v5/stdlib (driver name "pgx").
	PostgreSQL
)

// String returns "sqlite", "postgresql", or "dialect(n)".
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case PostgreSQL:
		return "postgresql"
	}
	return fmt.Sprintf("dialect(%d)", uint8(d))
}

// TableSpec describes the table whose rows move with their owner. For the messages table of
// examples/rebalance:
//
//	sqlstore.TableSpec{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true,
//		Columns: []string{"id", "user_id", "time", "message", "sender"}}
type TableSpec struct {
	// Table is the table's name.
	Table string
	// Owner is the column that holds the owner; it should be indexed.
	Owner string
	// Key is a column unique on the table (its primary key) that orders an owner's rows.
	Key string
	// Columns are every column a copy carries, Owner and Key among them.
	Columns []string
	// IntOwner says the owner column is an integer: owners are its values in decimal.
	IntOwner bool
}

// Options tune a Store. The zero value is valid.
type Options struct {
	// ShardNames name the shards in errors ("shard 3 (data/shard3.db)"); nil names them by
	// number. If not nil, it must have one name per shard.
	ShardNames []string
}

// Store implements rebalance.SharedStore[*sql.Tx] over one *sql.DB per shard and a control
// *sql.DB (which may be one of the shards). It is safe for concurrent use, and any number of
// Stores in any number of processes may share the databases.
type Store struct {
	dialect Dialect
	shards  []*sql.DB
	control *sql.DB
	table   TableSpec
	names   []string
	ns      int32 // the advisory lock namespace of this table's owners (PostgreSQL)
	key     int   // the index of Key in Columns

	// statements built once from the TableSpec
	selectAfter, selectFirst, count, deleteAll, insertHead, insertTail string
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New returns a Store over shards (shard i is shards[i]) and control, for table. It does no
// I/O: call Init before use. Bad arguments are errors wrapping rebalance.ErrConfig.
func New(dialect Dialect, shards []*sql.DB, control *sql.DB, table TableSpec, opts Options) (*Store, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("sqlstore: "+format+": %w", append(args, rebalance.ErrConfig)...)
	}
	switch {
	case dialect != SQLite && dialect != PostgreSQL:
		return nil, bad("unknown %v", dialect)
	case len(shards) == 0 || control == nil || slices.Contains(shards, nil):
		return nil, bad("no shard, a nil shard or a nil control database")
	case opts.ShardNames != nil && len(opts.ShardNames) != len(shards):
		return nil, bad("%d shard names for %d shards", len(opts.ShardNames), len(shards))
	}
	for _, name := range append([]string{table.Table, table.Owner, table.Key}, table.Columns...) {
		if !identifier.MatchString(name) {
			return nil, bad("table %q: name %q is not a plain SQL identifier", table.Table, name)
		}
	}
	key := slices.Index(table.Columns, table.Key)
	if key < 0 || !slices.Contains(table.Columns, table.Owner) || table.Key == table.Owner {
		return nil, bad("table %q: Columns %q must hold the key %q and the owner %q, two different columns", table.Table, table.Columns, table.Key, table.Owner)
	}
	for i, c := range table.Columns {
		if slices.Contains(table.Columns[:i], c) {
			return nil, bad("table %q: column %q listed twice", table.Table, c)
		}
	}
	names := opts.ShardNames
	if names == nil {
		names = make([]string, len(shards))
		for i := range names {
			names[i] = "shard " + strconv.Itoa(i)
		}
	}
	h := fnv.New32a()
	h.Write([]byte("shardkit/rebalance:" + table.Table))
	s := &Store{dialect: dialect, shards: shards, control: control, table: table, names: names,
		ns: int32(h.Sum32()), key: key}
	cols, t, o, k := strings.Join(table.Columns, ", "), table.Table, table.Owner, table.Key
	s.selectFirst = fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 ORDER BY %s LIMIT $2", cols, t, o, k)
	s.selectAfter = fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 AND %s > $3 ORDER BY %s LIMIT $2", cols, t, o, k, k)
	s.count = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s = $1", t, o)
	s.deleteAll = fmt.Sprintf("DELETE FROM %s WHERE %s = $1", t, o)
	s.insertHead = fmt.Sprintf("INSERT INTO %s (%s) VALUES ", t, cols)
	var set []string
	for _, c := range table.Columns {
		if c != k {
			set = append(set, c+" = excluded."+c)
		}
	}
	s.insertTail = fmt.Sprintf(" ON CONFLICT (%s) DO UPDATE SET %s", k, strings.Join(set, ", "))
	return s, nil
}

// Shards returns how many shards the Store has.
func (s *Store) Shards() int { return len(s.shards) }

// shard returns the database of shard i, or an error if there is none.
func (s *Store) shard(i int) (*sql.DB, error) {
	if i < 0 || i >= len(s.shards) {
		return nil, fmt.Errorf("sqlstore: shard %d out of range [0, %d): %w", i, len(s.shards), rebalance.ErrConfig)
	}
	return s.shards[i], nil
}

// wrap names shard i in err, if not nil.
func (s *Store) wrap(i int, what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sqlstore: %s: %s: %w", s.names[i], what, err)
}

// ownerArg is owner as the owner column's value.
func (s *Store) ownerArg(owner string) (any, error) {
	if !s.table.IntOwner {
		return owner, nil
	}
	n, err := strconv.ParseInt(owner, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: table %s: owner %q is not an integer: %w", s.table.Table, owner, rebalance.ErrConfig)
	}
	return n, nil
}

const shardSchema = `
CREATE TABLE IF NOT EXISTS rebalance_fence (
	owner     TEXT PRIMARY KEY,
	state     INTEGER NOT NULL,
	migration TEXT NOT NULL,
	token     BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS rebalance_epoch (
	migration TEXT PRIMARY KEY,
	token     BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS rebalance_placement (
	id        INTEGER PRIMARY KEY,
	migration TEXT NOT NULL,
	before_fp BIGINT NOT NULL,
	after_fp  BIGINT NOT NULL,
	finished  INTEGER NOT NULL
)`

const controlSchema = `
CREATE TABLE IF NOT EXISTS rebalance_marks (
	migration TEXT NOT NULL,
	owner     TEXT NOT NULL,
	mark      INTEGER NOT NULL,
	PRIMARY KEY (migration, owner)
);
CREATE TABLE IF NOT EXISTS rebalance_epoch (
	migration TEXT PRIMARY KEY,
	token     BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS rebalance_claim (
	migration TEXT PRIMARY KEY,
	election  BIGINT NOT NULL,
	token     BIGINT NOT NULL,
	mover     TEXT NOT NULL,
	expires   BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS rebalance_placement (
	id        INTEGER PRIMARY KEY,
	migration TEXT NOT NULL,
	before_fp BIGINT NOT NULL,
	after_fp  BIGINT NOT NULL,
	finished  INTEGER NOT NULL
)`

// pgFunctions are the PostgreSQL functions of a shard: each does in one round trip what
// would otherwise take several, which matters in the exclusive window of a move and in every
// access. A plpgsql function declared VOLATILE runs each of its statements on a snapshot
// taken when the statement starts (READ COMMITTED), so a read after a lock sees every change
// committed before the lock was granted, as two statements of a transaction would.
var pgFunctions = []string{`
CREATE OR REPLACE FUNCTION rebalance_enter(ns integer, k integer, o text, pm text, pb bigint, pa bigint) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE st integer;
BEGIN
	-- Held until the caller's transaction ends: a fence change of o waits for it.
	PERFORM pg_advisory_xact_lock_shared(ns, k);
	IF EXISTS (SELECT 1 FROM rebalance_placement WHERE ` + fmt.Sprintf(refusesPlacement, "pm", "pb", "pa") + `) THEN
		RETURN -1; -- the shard serves another placement
	END IF;
	SELECT state INTO st FROM rebalance_fence WHERE owner = o;
	RETURN st;
END
$f$`, `
CREATE OR REPLACE FUNCTION rebalance_step(epoch_ns integer, mkey integer, m text, tok bigint, owners text[], states integer[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE
	newest bigint;
	fenced bigint;
	wanted bigint;
BEGIN
	-- The migration's token lock shared until the caller's transaction ends: a claim
	-- waits for the steps under way, and refuses every later step of an older token.
	PERFORM pg_advisory_xact_lock_shared(epoch_ns, mkey);
	-- The mover's own writes need no capture (they go where no owner is exporting): the
	-- capture trigger's WHEN skips them without calling its function for each row.
	PERFORM set_config('rebalance.mover', 'on', true);
	SELECT token INTO newest FROM rebalance_epoch WHERE migration = m;
	IF newest > tok THEN
		RETURN newest;
	END IF;
	SELECT COUNT(*) INTO fenced FROM rebalance_fence WHERE owner = ANY(owners) AND migration = m AND state = ANY(states);
	SELECT COUNT(DISTINCT x) INTO wanted FROM unnest(owners) AS x;
	IF fenced < wanted THEN
		RETURN -1 - fenced;
	END IF;
	RETURN tok;
END
$f$`, `
CREATE OR REPLACE FUNCTION rebalance_set_fence(ns integer, epoch_ns integer, mkey integer, keys integer[],
	owners text[], st integer, m text, tok bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE
	k integer;
	newest bigint;
BEGIN
	-- The migration's token lock shared (a claim takes it exclusive), then the owners
	-- exclusive in the order of keys (sorted by the caller: no deadlock between two changes).
	PERFORM pg_advisory_xact_lock_shared(epoch_ns, mkey);
	FOREACH k IN ARRAY keys LOOP
		PERFORM pg_advisory_xact_lock(ns, k);
	END LOOP;
	SELECT token INTO newest FROM rebalance_epoch WHERE migration = m;
	IF newest IS NULL OR newest < tok THEN
		INSERT INTO rebalance_epoch (migration, token) VALUES (m, tok)
			ON CONFLICT (migration) DO UPDATE SET token = GREATEST(rebalance_epoch.token, excluded.token)
			RETURNING token INTO newest;
	END IF;
	IF newest > tok THEN
		RETURN newest; -- a newer mover claimed the migration: nothing changes
	END IF;
	IF st = 0 THEN
		DELETE FROM rebalance_fence WHERE owner = ANY(owners);
	ELSE
		INSERT INTO rebalance_fence (owner, state, migration, token)
			SELECT o, st, m, tok FROM unnest(owners) AS o
			ON CONFLICT (owner) DO UPDATE SET state = excluded.state, migration = excluded.migration, token = excluded.token;
	END IF;
	RETURN newest;
END
$f$`}

// ErrMissingTable reports a shard without the data table: a shard lost and recreated empty,
// or a wrong database. Init refuses to use it rather than take it for an empty shard.
var ErrMissingTable = errors.New("data table missing")

// Init checks that every shard holds the data table, and creates the fence, epoch and marks
// tables where they are missing. It is idempotent; every process calls it once before use.
func (s *Store) Init(ctx context.Context) error {
	// Every shard checked before anything is created on any.
	for i, db := range s.shards {
		ok, err := s.hasTable(ctx, db, s.table.Table)
		if err != nil {
			return s.wrap(i, "look for table "+s.table.Table, err)
		}
		if !ok {
			return s.wrap(i, "check", fmt.Errorf("table %s does not exist: the shard was lost or is the wrong database; refusing to use it as an empty shard: %w", s.table.Table, ErrMissingTable))
		}
		if err := s.checkTable(ctx, db); err != nil {
			return s.wrap(i, "check table "+s.table.Table, err)
		}
	}
	for i, db := range s.shards {
		if err := s.execAll(ctx, db, strings.Split(shardSchema, ";")); err != nil {
			return s.wrap(i, "create fence tables", err)
		}
		if s.dialect == PostgreSQL {
			if err := s.execAll(ctx, db, pgFunctions); err != nil {
				return s.wrap(i, "create fence functions", err)
			}
		}
		if err := s.createCapture(ctx, db); err != nil {
			return s.wrap(i, "create the change capture of table "+s.table.Table, err)
		}
	}
	if err := s.execAll(ctx, s.control, strings.Split(controlSchema, ";")); err != nil {
		return fmt.Errorf("sqlstore: control database: create marks tables: %w", err)
	}
	return nil
}

// ErrSchema reports a shard whose table does not fit the TableSpec: a column it names is
// missing, no index leads with (owner, key), or a name the change capture needs is taken.
var ErrSchema = errors.New("table does not fit the TableSpec")

// checkTable checks db's table against the TableSpec: every column, an index on (owner,
// key) (without one every chunk, count and sum scans the shard), and the capture's names.
func (s *Store) checkTable(ctx context.Context, db *sql.DB) error {
	t, o, k := s.table.Table, s.table.Owner, s.table.Key
	q := "SELECT name FROM pragma_table_info($1)"
	if s.dialect == PostgreSQL {
		q = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1"
	}
	have, err := queryStrings(ctx, db, q, t)
	if err != nil {
		return err
	}
	for _, c := range s.table.Columns {
		if !slices.Contains(have, c) {
			return fmt.Errorf("no column %s (the table has %q): %w", c, have, ErrSchema)
		}
	}
	var indexed int
	if s.dialect == PostgreSQL {
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			JOIN pg_attribute b ON b.attrelid = i.indrelid AND b.attnum = i.indkey[1]
			WHERE i.indrelid = to_regclass($1) AND a.attname = $2 AND b.attname = $3`, t, o, k).Scan(&indexed)
	} else {
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_index_list($1) l
			WHERE (SELECT name FROM pragma_index_info(l.name) WHERE seqno = 0) = $2
			AND (SELECT name FROM pragma_index_info(l.name) WHERE seqno = 1) = $3`, t, o, k).Scan(&indexed)
	}
	if err != nil {
		return err
	}
	if indexed == 0 {
		return fmt.Errorf("no index leads with (%s, %s): every chunk, count and sum of a move would scan the table; create one (CREATE INDEX ON %s (%s, %s)): %w", o, k, t, o, k, ErrSchema)
	}
	// The capture's triggers: one of these names on another table is not ours.
	q = "SELECT tbl_name FROM sqlite_master WHERE type = 'trigger' AND name LIKE $1 AND tbl_name <> $2"
	if s.dialect == PostgreSQL {
		q = "SELECT c.relname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid WHERE g.tgname LIKE $1 AND c.relname <> $2"
	}
	taken, err := queryStrings(ctx, db, q, s.changes()+"%", t)
	if err != nil {
		return err
	}
	if len(taken) > 0 {
		return fmt.Errorf("a trigger named %s... exists on table %s: the change capture of %s needs the name: %w", s.changes(), taken[0], t, ErrSchema)
	}
	return nil
}

// queryStrings returns the first column of every row of q.
func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *Store) hasTable(ctx context.Context, db *sql.DB, name string) (bool, error) {
	q := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1"
	if s.dialect == PostgreSQL {
		q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
	}
	var n int
	err := db.QueryRowContext(ctx, q, name).Scan(&n)
	return n > 0, err
}

// execAll runs statements one by one (drivers differ on several in one Exec). On PostgreSQL
// they run in one transaction under an advisory lock: every process calls Init when it
// starts, and two CREATE TABLE IF NOT EXISTS of one table at once fail there (a duplicate in
// pg_type), as two CREATE OR REPLACE of one function do ("tuple concurrently updated").
func (s *Store) execAll(ctx context.Context, db *sql.DB, stmts []string) error {
	if s.dialect != PostgreSQL {
		for _, stmt := range stmts {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1, 0)", epochNS); err != nil {
		return err
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return tx.Commit()
}

var _ rebalance.SharedStore[*sql.Tx] = (*Store)(nil)
