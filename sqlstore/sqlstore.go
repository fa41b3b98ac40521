// Package sqlstore is a [rebalance.SharedStore] over database/sql, for SQLite
// (modernc.org/sqlite) and PostgreSQL (the pgx stdlib driver): one database per shard, and a
// control database for the marks. It moves the rows of an owner in one table or several (a
// user, their messages and the messages' reactions), with the fences of the package
// rebalance documentation kept on each shard, one per owner for all its tables.
//
// # What holds across processes, and why
//
// Each shard holds a table rebalance_fence (owner, state, migration, token), rebalance_epoch
// (migration, newest token), rebalance_placement (the placement it serves, one row),
// rebalance_finished (the migrations finished there, which no claim takes again and no
// access routes by unless served), rebalance_identity (an ID of its own),
// rebalance_control (the ID of the control database it was first listed with: [Store.Init]
// refuses another, [ErrOtherControl], since two control databases would each issue the
// movers' tokens), rebalance_version (its count of changes to what it serves: see
// behind.go) and on PostgreSQL
// rebalance_stripe (the owners' stripes, which fence changes update: see guard.go); the
// control database holds rebalance_marks (migration, owner, mark), the table
// examples/rebalance already uses, rebalance_kept (the window's sums of old copies not yet
// deleted: see kept.go), rebalance_claim (migration, election epoch, token, mover, lease end, and the process
// bound to an in-process migration and when it last routed: [Store.Claim] and [Store.Bind]
// decide there, in one transaction), rebalance_tables (the tables each
// migration moves, from its first claim: a Store that moves others is refused), its own
// rebalance_epoch, rebalance_placement and rebalance_finished (also of the in-process
// rebalance.Migration: see finished.go), rebalance_copying (the shards [Store.Copy] copied
// an owner to, with the sum of what each copy wrote, until [Store.Delete] deletes its old
// copy), rebalance_shards, the
// shards' IDs by position: [Store.Init] refuses shards listed in another order than before,
// or a database listed twice ([ErrShardOrder]), and rebalance_shard_versions, the newest
// count of changes each shard committed: a shard below it is refused ([ErrShardBehind]).
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
// shard itself refuses, with an error wrapping [rebalance.ErrFenced]. A writer that does not
// go through Access at all (a batch job, an administrator's SQL) cannot write such an owner's
// rows either: the change capture's triggers refuse the statement unless the mover makes it
// (see guard.go).
//
// # The tables
//
// A [TableSpec] names a table, its owner column, a key column that is unique on the table
// (across the shards: keys are how a copy and a replay find a row) and orders an owner's rows
// (the chunks of a copy follow it), and every column to copy. A chunk reads the rows of many
// owners in one statement (a UNION ALL of one range per owner: index the table on (owner,
// key)) and writes them with INSERT ... ON CONFLICT (key) DO UPDATE, many rows per statement,
// so a row copied again replaces its copy. It replaces only a row of the same owner, or of an
// owner the new shard does not serve yet: where keys repeat across the shards (each shard
// numbering its rows by a sequence of its own), a row of an owner the new shard serves keeps
// its key, and the move stops with an error wrapping [ErrKeyTaken] before anything of it is
// written (TestKeysRepeatedAcrossShards). Between two SQLite files in WAL mode the rows do
// not pass through Go: the importing connection ATTACHes the old shard's file and copies
// them with one INSERT ... SELECT of the same ranges (a file it cannot attach, such as one of
// another VFS or with a key, is copied through Go).
//
// The tables of a Store are listed parents first: each after the tables its foreign keys
// reference. A copy takes each owner through them in that order, and a deletion in the
// reverse one, so the old copy is deleted children first. [Store.Init] refuses, before it
// creates anything, tables listed against their foreign keys and a table outside the Store
// that references one of them: deleting an owner's old copy would fail on it, or cascade
// into its rows, which nothing copied. Such a table created during a move stops it: the sums
// before a new shard serves the owners look for one, and so does each deletion of old
// copies, inside its transaction, where none can appear before it ends. Init refuses too an
// owner column that holds two owners equal, by case or trailing spaces: a move of one would
// take the other's rows. Rows that reference each other must belong to one owner: before a
// deletion of old copies deletes a table's rows, it looks for another owner's row, in one of
// the tables, that references them (a reaction by a user who stays, to a message of one who
// moves), and stops with ErrSchema naming it rather than let a cascade take it. Tables that
// belong to an owner without a foreign key are the caller's to list; the Store cannot see
// them.
//
// The application's own triggers on a moved table fire for the mover's writes as for its
// own, the copies and replays on the new shard and the deletions of old copies, unless they
// run as a replica: on PostgreSQL with Options.ReplicaWrites (and the imports of tables that
// reference one another); on SQLite always. One that only records elsewhere logs the
// mover's writes too; one that changes the rows it fires for (a time kept current on
// UPDATE) makes the copy differ, and the move stops with rebalance.ErrCopyMismatch, the old
// shard serving (TestApplicationTriggers); one that deletes rows of a table the Store does
// not move when an owner's rows go would delete them with the old copy: list that table.
//
// # Rows that change during the copy
//
// [Store.Init] puts triggers on each table (rebalance_changes_<table>_insert, _update and
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
// fence (an index probe that finds nothing) and record nothing. On PostgreSQL they fire
// ALWAYS, for a writer as a replica too (a logical replication's apply); a table whose
// triggers are gone or disabled stops a move, in its window and before each deletion of old
// copies, with ErrSchema.
//
// # Connections
//
// Every Access, chunk and fence change is one short transaction on one *sql.DB per shard. Give
// each *sql.DB as many idle connections as the goroutines that use it at once
// (SetMaxIdleConns): database/sql keeps 2 by default and otherwise opens and closes a
// connection for most transactions, which on PostgreSQL costs more than the transaction.
//
// On SQLite every write transaction of a database waits for the one before it, the mover's
// chunks included; reads do not wait (see above). An access that finds the write lock taken
// holds a shared flock(2) of an empty file beside the database, named after it with
// "-rebalance-waiting" (created by the first access that waits), until it ends, and the
// Store's next write transaction on that database waits while one is held, for at most 5 ms:
// so a foreground write during a migration waits for the mover's chunk under way on its
// shard, not for all the chunks the mover writes there in a row. For a foreground p99 nearer
// idle, run the mover in a process of its own (in the application's process its SQLite work
// also takes the Go scheduler's Ps from the foreground) with one mover, small chunks and a
// pause after each (rebalance.SharedOptions{Concurrency: 1, ChunkRows: 200, Group: 4, Yield:
// 1}): BenchmarkLatency measures both.
//
// A Store never creates a shard: [Store.Init] creates the fence tables in databases that
// exist, and refuses a shard whose data table is missing (a lost SQLite file reopened empty, a
// dropped database) with an error that names it. Open SQLite files with mode=rw once they
// exist.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

// TableSpec describes a table whose rows move with their owner. For the messages table of
// examples/rebalance:
//
//	sqlstore.TableSpec{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true,
//		Columns: []string{"id", "user_id", "time", "message", "sender"}}
type TableSpec struct {
	// Table is the table's name.
	Table string
	// Owner is the column that holds the owner: text, an integer, or (PostgreSQL) a uuid.
	// Owners are given to the Store as the column prints them: 7, not "007"; a uuid in
	// lowercase (ErrOwnerForm).
	Owner string
	// Key is a column unique on the table (its primary key) that orders an owner's rows. It
	// may be Owner itself, in a table of one row per owner (users, keyed by user ID). A move
	// needs its values unique across the shards too (UUIDs, or IDs from one source): a key
	// that a row of another owner holds on the new shard stops the move (ErrKeyTaken).
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
	// Unmoved names tables that have a column of the name of a moved table's owner column
	// (user_id) but whose rows stay where they are: reference data kept on every shard, a
	// shard's own log. Init refuses any other such table that the Store does not move.
	Unmoved []string
	// ReplicaWrites (PostgreSQL) runs the mover's writes, its copies and replays on the new
	// shard and its deletions of old copies, with session_replication_role = replica: the
	// application's triggers on the moved tables do not fire for them, nor do foreign key
	// checks and actions. It needs a superuser, or GRANT SET ON PARAMETER
	// session_replication_role. Without it, a trigger that changes the rows it fires for (a
	// time kept current on UPDATE) makes the copy of a row updated during the move differ,
	// and the move stops. Tables that reference one another are imported so whatever it
	// says. SQLite cannot turn triggers off for one connection: New refuses it there.
	ReplicaWrites bool
	// WriterWait (PostgreSQL) bounds how long a fence change waits, after its commit, for
	// the transactions under way that wrote a row of one of its owners around the library
	// (or of another owner of the same stripe: see guard.go) and are still open. Past it the
	// change fails with ErrWritersOpen naming them; in a move's window the old shard then
	// serves the owners again, and the next Run tries again. Zero means 5 s; at most
	// MaxWriterWait.
	WriterWait time.Duration
}

// MaxWriterWait bounds Options.WriterWait.
const MaxWriterWait = time.Hour

// ErrWritersOpen reports a fence change that gave up waiting for open transactions that
// wrote rows of its owners' stripes (see Options.WriterWait): a session idle in a
// transaction, or a long batch job.
var ErrWritersOpen = errors.New("transactions that wrote the owners' rows still open")

// Store implements rebalance.SharedStore[*sql.Tx] over one *sql.DB per shard and a control
// *sql.DB (which may be one of the shards). It is safe for concurrent use, and any number of
// Stores in any number of processes may share the databases.
type Store struct {
	dialect Dialect
	shards  []*sql.DB
	control *sql.DB
	tables  []*table // parents first
	names   []string
	// foreignKeys says some of the tables reference others (Init finds out): the mover's
	// writes on the new shard then skip the checks (see Init).
	foreignKeys   bool
	replicaWrites bool                      // Options.ReplicaWrites
	writerWait    time.Duration             // Options.WriterWait
	unmoved       []string                  // Options.Unmoved
	controlID     atomic.Pointer[string]    // the control database's identity, once Init read it
	files         sync.Map                  // SQLite: shard index -> its database file, "" if none (see fileOf)
	plainCopies   bool                      // copy by reading rows into Go and INSERTing them, even where ATTACH or COPY could (tests)
	copyStep      func(step, owner string)  // called by Copy in its transaction: "held" before its deletion, "copied" after its inserts (tests)
	noCopy        []atomic.Bool             // PostgreSQL: by table, its rows go by INSERT, not COPY (see writeRows)
	noRaw         []atomic.Bool             // PostgreSQL: by table, its rows go through Go, not passed through (see copyRaw)
	exactDelete   []atomic.Bool             // by table, its rows are not deleted by address alone (see deleteKeys)
	turns         map[*sql.DB]chan struct{} // SQLite: each database's turn to write (see writeTurn)
	unreferenced  sync.Map                  // SQLite: shard index -> knownRefs, what outsideRefs found
	chunkBytes    int                       // a chunk read into the mover's memory ends past this many bytes
	replayRound   func(bytes int)           // tests: told what each round of a Replay read into memory
	pgShape       string                    // PostgreSQL: what checkReferences refuses besides foreign keys
	outward       []reference               // foreign keys of moved tables, whose referenced rows a shard must hold (Init)
	movedTables   string                    // PostgreSQL: the tables' names, comma-separated (a regclass[] literal)
	uncaptured    string                    // checkCapture's statement
	ids           atomic.Pointer[[]string]  // the shards' identities, by position, once Init read them
	versions      versions                  // the shards' counts of changes, as the control database recorded them
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MaxTables bounds the tables of one Store.
const MaxTables = 64

// New returns a Store over shards (shard i is shards[i]) and control, for tables: one or
// more tables whose rows of an owner move together, under one fence per owner, each
// referenced table before the tables that reference it (users, then their messages, then
// the messages' reactions). A copy writes them in that order and a deletion in the reverse
// one. It does no I/O: call Init before use. Bad arguments are errors wrapping
// rebalance.ErrConfig.
func New(dialect Dialect, shards []*sql.DB, control *sql.DB, tables []TableSpec, opts Options) (*Store, error) {
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
	case len(tables) == 0 || len(tables) > MaxTables:
		return nil, bad("%d tables: want 1 to %d", len(tables), MaxTables)
	case opts.ReplicaWrites && dialect == SQLite:
		return nil, bad("ReplicaWrites on SQLite, which cannot turn triggers off for one connection")
	case opts.WriterWait < 0 || opts.WriterWait > MaxWriterWait:
		return nil, bad("WriterWait %v: want 0 to %v", opts.WriterWait, MaxWriterWait)
	}
	s := &Store{dialect: dialect, shards: shards, control: control, names: opts.ShardNames, unmoved: opts.Unmoved, replicaWrites: opts.ReplicaWrites,
		writerWait: cmp.Or(opts.WriterWait, 5*time.Second), chunkBytes: chunkBytes}
	for i, spec := range tables {
		t, err := newTable(spec, dialect, bad)
		if err != nil {
			return nil, err
		}
		for _, u := range tables[:i] {
			// Change tables and triggers are named after the table, so compare them folded.
			if strings.EqualFold(u.Table, spec.Table) {
				return nil, bad("table %q listed twice", spec.Table)
			}
		}
		s.tables = append(s.tables, t)
	}
	names := make([]string, len(s.tables))
	for i, t := range s.tables {
		names[i] = t.Table
	}
	// A foreign key on pg_constraint that a table outside the Store holds, in any schema (a
	// partition's copy of its table's key does not count).
	outside := fmt.Sprintf("contype = 'f' AND conparentid = 0 AND NOT conrelid = ANY ('{%s}'::regclass[])",
		strings.Join(names, ","))
	s.movedTables = strings.Join(names, ",")
	for _, t := range s.tables {
		t.unreferenced = fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM pg_constraint WHERE %[1]s AND confrelid = '%[2]s'::regclass)
			AND NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = '%[2]s'::regclass AND NOT c.relispartition)
			AND NOT row_security_active('%[2]s'::regclass) AND current_setting('extra_float_digits')::int >= 1
			AND current_setting('DateStyle') LIKE 'ISO%%'`, outside, t.Table)
	}
	// What checkReferences refuses besides foreign keys (shapeError), as (a, b, what).
	s.pgShape = fmt.Sprintf(`SELECT c.relname::text, p.relname::text, 'inherits' FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
			WHERE i.inhparent = ANY ('{%[1]s}'::regclass[]) AND NOT c.relispartition
		UNION ALL SELECT relname::text, '', 'row security' FROM pg_class WHERE oid = ANY ('{%[1]s}'::regclass[]) AND row_security_active(oid)
		UNION ALL SELECT current_setting('extra_float_digits'), '', 'float digits' WHERE current_setting('extra_float_digits')::int < 1
		UNION ALL SELECT current_setting('DateStyle'), '', 'date style' WHERE current_setting('DateStyle') NOT LIKE 'ISO%%'
		`, strings.Join(names, ","))
	s.uncaptured = uncaptured(dialect, s.tables)
	s.noCopy = make([]atomic.Bool, len(s.tables))
	s.noRaw = make([]atomic.Bool, len(s.tables))
	s.exactDelete = make([]atomic.Bool, len(s.tables))
	s.versions.known = make([]atomic.Int64, len(shards))
	s.versions.recorded = make([]atomic.Int64, len(shards))
	s.turns = map[*sql.DB]chan struct{}{}
	for _, db := range append([]*sql.DB{control}, shards...) {
		if s.turns[db] == nil {
			s.turns[db] = make(chan struct{}, 1)
		}
	}
	if s.names == nil {
		s.names = make([]string, len(shards))
		for i := range s.names {
			s.names[i] = "shard " + strconv.Itoa(i)
		}
	}
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
	finished  INTEGER NOT NULL,
	in_process INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS rebalance_finished (
	migration TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS rebalance_deleted (
	migration TEXT NOT NULL,
	owner     TEXT NOT NULL,
	PRIMARY KEY (migration, owner)
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
CREATE TABLE IF NOT EXISTS rebalance_kept (
	migration TEXT NOT NULL,
	owner     TEXT NOT NULL,
	row_count BIGINT NOT NULL,
	digest    TEXT NOT NULL,
	PRIMARY KEY (migration, owner)
);
CREATE TABLE IF NOT EXISTS rebalance_tables (
	migration TEXT PRIMARY KEY,
	tables    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rebalance_claim (
	migration TEXT PRIMARY KEY,
	election  BIGINT NOT NULL,
	token     BIGINT NOT NULL,
	mover     TEXT NOT NULL,
	expires   BIGINT NOT NULL,
	process   TEXT NOT NULL DEFAULT '',
	routed    BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS rebalance_placement (
	id        INTEGER PRIMARY KEY,
	migration TEXT NOT NULL,
	before_fp BIGINT NOT NULL,
	after_fp  BIGINT NOT NULL,
	finished  INTEGER NOT NULL,
	in_process INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS rebalance_finished (
	migration TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS rebalance_copying (
	owner TEXT NOT NULL,
	shard INTEGER NOT NULL,
	sums  TEXT,
	PRIMARY KEY (owner, shard)
)`

// recordFinished adds the migration finished that a database serves, if any, to those it
// remembers: one finished before rebalance_finished existed.
const recordFinished = "INSERT INTO rebalance_finished (migration) SELECT migration FROM rebalance_placement WHERE finished = 1 ON CONFLICT (migration) DO NOTHING"

// pgStripes is the table of the owners' stripes on a PostgreSQL shard, one row each (see
// stripeNS): a fence change updates its owners' stripes, and a capture trigger in a
// transaction that reads by one snapshot (REPEATABLE READ, SERIALIZABLE) locks its owner's
// stripe FOR SHARE, which fails if a fence change committed after that snapshot, which the
// trigger's read of the fence would not see.
var pgStripes = []string{
	"CREATE TABLE IF NOT EXISTS rebalance_stripe (stripe INTEGER PRIMARY KEY, changes BIGINT NOT NULL)",
	fmt.Sprintf("INSERT INTO rebalance_stripe (stripe, changes) SELECT s, 0 FROM generate_series(0, %d) AS s ON CONFLICT (stripe) DO NOTHING", stripes-1),
}

// pgFunctions are the PostgreSQL functions of a shard: each does in one round trip what
// would otherwise take several, which matters in the exclusive window of a move and in every
// access. A plpgsql function declared VOLATILE runs each of its statements on a snapshot
// taken when the statement starts (READ COMMITTED), so a read after a lock sees every change
// committed before the lock was granted, as two statements of a transaction would.
//
// rebalance_enter took no ar (Arriving) before: its old signature is dropped first, so that a
// database set up by an older build keeps no overload that accepts accesses without it.
var pgFunctions = []string{
	`DROP FUNCTION IF EXISTS rebalance_enter(integer, integer, text, text, bigint, bigint, integer, integer)`, `
CREATE OR REPLACE FUNCTION rebalance_enter(ns integer, k integer, o text, pm text, pb bigint, pa bigint, lv integer, ar integer, pns integer) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE st integer;
BEGIN
	-- Held until the caller's transaction ends: a fence change of o waits for it, and for
	-- a Leaving access a change to "being finished" does.
	PERFORM pg_advisory_xact_lock_shared(ns, k);
	IF lv = 1 THEN
		PERFORM pg_advisory_xact_lock_shared(pns, 0);
	END IF;
	IF ` + fmt.Sprintf(refusesPlacement, "pm", "pb", "pa", "lv", "ar", "0") + ` THEN
		RETURN -1; -- the shard serves another placement
	END IF;
	SELECT state INTO st FROM rebalance_fence WHERE owner = o;
	IF lv = 1 AND st IS NULL AND EXISTS (SELECT 1 FROM rebalance_placement WHERE finished > 1) THEN
		RETURN -2; -- being finished: an owner without a fence waits
	END IF;
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
	owners text[], st integer, m text, tok bigint, pns integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE
	newest bigint;
	fin integer;
BEGIN
	-- The migration's token lock shared (a claim takes it exclusive), then the owners
	-- exclusive in the order of keys (sorted by the caller: no deadlock between two changes),
	-- one statement for all: unnest yields them in that order.
	PERFORM pg_advisory_xact_lock_shared(epoch_ns, mkey);
	PERFORM pg_advisory_xact_lock(ns, k) FROM unnest(keys) AS k;
` + pgNewestToken + `
	IF st <> 0 THEN
		-- Not while a Finish lists the owners (it holds the placement lock exclusive to
		-- record that), nor once it finished: see fenceWhileFinishing.
		PERFORM pg_advisory_xact_lock_shared(pns, 0);
		SELECT max(finished) INTO fin FROM rebalance_placement WHERE migration = m;
		IF fin = 1 THEN
			RETURN -3;
		ELSIF fin > 1 THEN
			RETURN -2;
		END IF;
	END IF;
	IF st = 0 THEN
		DELETE FROM rebalance_fence WHERE owner = ANY(owners);
	ELSE
		INSERT INTO rebalance_fence (owner, state, migration, token)
			SELECT o, st, m, tok FROM unnest(owners) AS o
			ON CONFLICT (owner) DO UPDATE SET state = excluded.state, migration = excluded.migration, token = excluded.token;
		-- A writer whose snapshot is older than this change fails on its stripe's row (pgStripes).
		UPDATE rebalance_stripe SET changes = changes + 1 WHERE stripe IN (SELECT ` + stripeOf("o") + ` FROM unnest(owners) AS o);
	END IF;
	` + bumpVersion + `;
	RETURN newest;
END
$f$`}

// pgNewestToken is the part of a plpgsql function (with newest, m and tok) that records tok
// as the migration's newest token, or returns the newer one it finds, changing nothing.
const pgNewestToken = `	SELECT token INTO newest FROM rebalance_epoch WHERE migration = m;
	IF newest IS NULL OR newest < tok THEN
		INSERT INTO rebalance_epoch (migration, token) VALUES (m, tok)
			ON CONFLICT (migration) DO UPDATE SET token = GREATEST(rebalance_epoch.token, excluded.token)
			RETURNING token INTO newest;
	END IF;
	IF newest > tok THEN
		RETURN newest; -- a newer mover claimed the migration: nothing changes
	END IF;`

// pgControlFunctions are the PostgreSQL functions of the control database, as pgFunctions.
var pgControlFunctions = []string{`
CREATE OR REPLACE FUNCTION rebalance_keep_sums(epoch_ns integer, mkey integer, m text, tok bigint,
	owners text[], row_counts bigint[], digests text[]) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $f$
DECLARE
	newest bigint;
BEGIN
	PERFORM pg_advisory_xact_lock_shared(epoch_ns, mkey);
` + pgNewestToken + `
	INSERT INTO rebalance_kept (migration, owner, row_count, digest)
		SELECT DISTINCT ON (o) m, o, r, d FROM unnest(owners, row_counts, digests) AS x(o, r, d)
		ON CONFLICT (migration, owner) DO UPDATE SET row_count = excluded.row_count, digest = excluded.digest;
	RETURN newest;
END
$f$`}

// ErrMissingTable reports a shard without the data table: a shard lost and recreated empty,
// or a wrong database. Init refuses to use it rather than take it for an empty shard.
var ErrMissingTable = errors.New("data table missing")

// Init checks every shard: each table exists, has its columns, a unique index on its key
// and an index that leads with (owner, key), an owner column that compares owners exactly,
// tables that reference others come after them, no table outside the Store references one
// of them (the deletion of an owner's old copy would fail, or cascade into rows never
// copied), and the change capture's names are free. Only then does it create, where
// missing, the fence, epoch and marks tables, the PostgreSQL functions and the change
// capture, and last it checks the shards' identities against their recorded positions. A
// table missing on a shard is an error wrapping ErrMissingTable, any other misfit one
// wrapping ErrSchema, a shard list out of order ErrShardOrder. It is idempotent; every
// process calls it once before use.
//
// Foreign keys among the tables are allowed. A chunk may copy a child row whose parent
// changed after the parent's chunk was copied (its change is replayed later), so the
// mover's writes on the shard that imports the owners skip the foreign key checks: on
// SQLite it writes on a connection with PRAGMA foreign_keys off, on PostgreSQL with
// session_replication_role set to replica for its transaction, which needs a superuser or
// (PostgreSQL 15) GRANT SET ON PARAMETER session_replication_role TO the mover's role. The
// new shard serves the owners only once their rows there equal the old shard's, which met
// the constraints.
func (s *Store) Init(ctx context.Context) error {
	// The columns that are integers on every shard: Sums hashes their values, not their text.
	integer := make([][]bool, len(s.tables))
	for ti, t := range s.tables {
		integer[ti] = make([]bool, len(t.Columns))
		for ci := range t.Columns {
			integer[ti][ci] = s.dialect == PostgreSQL
		}
	}
	forms := make([]ownerForm, len(s.tables))
	always := make([][]string, len(s.tables))           // by table, its identity columns GENERATED ALWAYS on any shard
	types := make([][]map[string]string, len(s.tables)) // by table, then shard
	for ti, t := range s.tables {
		t.setTypes(nil) // read again
		types[ti] = make([]map[string]string, len(s.shards))
	}
	// Every shard checked before anything is created on any.
	for i, db := range s.shards {
		if err := s.checkReadsAsStored(ctx, db); err != nil {
			return s.wrap(i, "check how the driver reads values", err)
		}
		for ti, t := range s.tables {
			ok, err := s.hasTable(ctx, db, t.Table)
			if err != nil {
				return s.wrap(i, "look for table "+t.Table, err)
			}
			if !ok {
				return s.wrap(i, "check", fmt.Errorf("table %s does not exist: the shard was lost or is the wrong database; refusing to use it as an empty shard: %w", t.Table, ErrMissingTable))
			}
			types[ti][i], err = s.checkColumns(ctx, db, t, i)
			if err == nil {
				err = s.checkTable(ctx, db, t)
			}
			if err != nil {
				return s.wrap(i, "check table "+t.Table, err)
			}
			form, err := s.checkOwnerColumn(ctx, db, t)
			if err == nil && i > 0 && !form.sameAs(forms[ti]) {
				err = fmt.Errorf("the owner column %s is %s here and %s on %s: owners cannot print alike on both: %w", t.Owner, form.typ, forms[ti].typ, s.names[0], ErrSchema)
			}
			if err == nil && i > 0 {
				err = s.alikeTypes(t, types[ti][i], types[ti][0])
			}
			if err != nil {
				return s.wrap(i, "check table "+t.Table, err)
			}
			forms[ti] = form
			if s.dialect == PostgreSQL {
				ints, err := queryStrings(ctx, db, `SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1)
					AND attnum > 0 AND NOT attisdropped AND atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)`, t.Table)
				if err != nil {
					return s.wrap(i, "read the integer columns of table "+t.Table, err)
				}
				for ci, c := range t.Columns {
					integer[ti][ci] = integer[ti][ci] && slices.Contains(ints, c)
				}
				ids, err := queryStrings(ctx, db, `SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1)
					AND attnum > 0 AND NOT attisdropped AND attidentity = 'a'`, t.Table)
				if err != nil {
					return s.wrap(i, "read the identity columns of table "+t.Table, err)
				}
				always[ti] = append(always[ti], ids...)
			}
		}
		refs, err := s.checkReferences(ctx, db)
		if err != nil {
			return s.wrap(i, "check the tables' references and visibility", err)
		}
		s.foreignKeys = s.foreignKeys || slices.ContainsFunc(refs, func(r reference) bool { return r.parent != nil && r.child != r.parent })
		for _, r := range refs {
			if !slices.Contains(s.outward, r) {
				s.outward = append(s.outward, r)
			}
		}
		if err := s.checkLeftBehind(ctx, db); err != nil {
			return s.wrap(i, "check the other tables", err)
		}
	}
	for ti, t := range s.tables {
		t.setRowHash(integer[ti])
		t.form = forms[ti]
		t.setTypes(types[ti])
		t.setInsertTail(always[ti])
	}
	for i, db := range s.shards {
		if err := s.execAll(ctx, db, append(strings.Split(shardSchema, ";"), recordFinished, versionSchema, versionRow)); err != nil {
			return s.wrap(i, "create fence tables", err)
		}
		if err := s.addColumns(ctx, db, shardColumns); err != nil {
			return s.wrap(i, "add the columns of this build to the fence tables", err)
		}
		if s.dialect == SQLite {
			if err := s.execAll(ctx, db, strings.Split(sqliteMarker, ";")); err != nil {
				return s.wrap(i, "create the mover's marker", err)
			}
		}
		if s.dialect == PostgreSQL {
			if err := s.execAll(ctx, db, pgStripes); err != nil {
				return s.wrap(i, "create the stripes", err)
			}
			if err := s.execAll(ctx, db, pgFunctions); err != nil {
				return s.wrap(i, "create fence functions", err)
			}
		}
		for _, t := range s.tables {
			if err := s.createCapture(ctx, db, t); err != nil {
				return s.wrap(i, "create the change capture of table "+t.Table, err)
			}
		}
	}
	if err := s.execAll(ctx, s.control, append(strings.Split(controlSchema, ";"), recordFinished, controlVersionSchema)); err != nil {
		return fmt.Errorf("sqlstore: control database: create marks tables: %w", err)
	}
	if err := s.addColumns(ctx, s.control, controlColumns); err != nil {
		return fmt.Errorf("sqlstore: control database: add the columns of this build to the marks tables: %w", err)
	}
	if s.dialect == PostgreSQL {
		if err := s.execAll(ctx, s.control, pgControlFunctions); err != nil {
			return fmt.Errorf("sqlstore: control database: create functions: %w", err)
		}
	}
	return s.checkIdentities(ctx)
}

// checkReadsAsStored refuses, on SQLite, a driver that reads a text shaped like a time as a
// time (modernc.org/sqlite's _texttotime): a row a copy or a replay reads into Go would be
// written back as the driver prints times ("2024-01-01" as "2024-01-01 00:00:00 +0000
// UTC"), and the sums, which read both copies alike, would not tell.
func (s *Store) checkReadsAsStored(ctx context.Context, db *sql.DB) error {
	if s.dialect != SQLite {
		return nil
	}
	var v any
	if err := db.QueryRowContext(ctx, "SELECT +'2024-01-01 10:00:00'").Scan(&v); err != nil {
		return err
	}
	switch v.(type) {
	case string, []byte:
		return nil
	}
	return fmt.Errorf("the driver reads the text '2024-01-01 10:00:00' as a %T: a copy would write such texts back in another form; open the shards without the option that turns texts into times (_texttotime): %w", v, rebalance.ErrConfig)
}

// ErrSchema reports a shard whose tables do not fit the TableSpecs: a column one names is
// missing, an index is missing, the tables are listed in an order their foreign keys
// contradict, a table outside the Store references one of them, or a name the change
// capture needs is taken.
var ErrSchema = errors.New("tables do not fit the TableSpecs")

// ErrOwnerForm reports an owner not given as its owner column prints the owner's value ("007"
// or "+7" for the integer 7, a uuid in capitals): the column's equality would select the
// owner's rows by it, but no fence, change capture or guard would find them under it. It
// wraps rebalance.ErrConfig.
var ErrOwnerForm = fmt.Errorf("owner not as its column prints it (%w)", rebalance.ErrConfig)

// checkOwners returns an error wrapping ErrOwnerForm if an owner is not as every table's
// owner column prints it.
func (s *Store) checkOwners(owners ...string) error {
	for _, t := range s.tables {
		for _, o := range owners {
			if err := t.form.check(o); err != nil {
				return fmt.Errorf("sqlstore: table %s: %w", t.Table, err)
			}
		}
	}
	return nil
}

// ErrKeyTaken reports a row of a moving owner whose key a row of another owner holds on the
// new shard: keys repeat across the shards (each numbers its rows by a sequence of its own,
// say), so a key does not find one row. The copy stops rather than write over the other
// owner's row; the old shard serves the moving owner again.
var ErrKeyTaken = errors.New("key held by another owner on the new shard")

// checkTable checks db's table t against its TableSpec: every column, a unique index on the
// key (a copy writes INSERT ... ON CONFLICT (key)), an index that leads with (owner, key)
// (without one every chunk, count and sum scans the shard), and the capture's names.
func (s *Store) checkTable(ctx context.Context, db *sql.DB, t *table) error {
	n, o, k := t.Table, t.Owner, t.Key
	// Each index as its leading column names and whether it is unique; on SQLite an
	// INTEGER PRIMARY KEY is the table's rowid and has no index of its own.
	type index struct {
		first, second string
		unique        bool
		columns       int
	}
	var indexes []index
	var q string
	if s.dialect == PostgreSQL {
		q = `SELECT a.attname, COALESCE(b.attname, ''), i.indisunique, i.indnkeyatts FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			LEFT JOIN pg_attribute b ON b.attrelid = i.indrelid AND b.attnum = i.indkey[1]
			WHERE i.indrelid = to_regclass($1)`
	} else {
		q = `SELECT (SELECT name FROM pragma_index_info(l.name) WHERE seqno = 0),
			COALESCE((SELECT name FROM pragma_index_info(l.name) WHERE seqno = 1), ''), l."unique",
			(SELECT COUNT(*) FROM pragma_index_info(l.name))
			FROM pragma_index_list($1) l
			UNION ALL SELECT name, '', 1, 1 FROM pragma_table_info($1)
			WHERE pk = 1 AND lower(type) = 'integer' AND (SELECT COUNT(*) FROM pragma_table_info($1) WHERE pk > 0) = 1`
	}
	rows, err := db.QueryContext(ctx, q, n)
	if err != nil {
		return err
	}
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.first, &ix.second, &ix.unique, &ix.columns); err != nil {
			rows.Close()
			return err
		}
		indexes = append(indexes, ix)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if !slices.ContainsFunc(indexes, func(ix index) bool { return ix.unique && ix.columns == 1 && ix.first == k }) {
		return fmt.Errorf("no unique index on the key %s alone: keys are how a copy and a replay find a row; make it the primary key: %w", k, ErrSchema)
	}
	leads := func(ix index) bool { return ix.first == o && (ix.second == k || o == k) }
	if !slices.ContainsFunc(indexes, leads) {
		return fmt.Errorf("no index leads with (%s, %s): every chunk, count and sum of a move would scan the table; create one (CREATE INDEX ON %s (%s, %s)): %w", o, k, n, o, k, ErrSchema)
	}
	if s.dialect == SQLite {
		// Blobs sort after every text and number: the index on (owner, key) finds one at once.
		var blob string
		err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT hex(%s) FROM %s WHERE %s >= x'' LIMIT 1", o, n, o)).Scan(&blob)
		if err == nil {
			return fmt.Errorf("a row's owner is the blob x'%s': the rows of an owner are selected by its text, which a blob never equals, so a move would leave the row behind; store owners as text (UPDATE %s SET %s = CAST(%s AS TEXT) WHERE typeof(%s) = 'blob'): %w", excerpt(blob), n, o, o, o, ErrSchema)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var def string
		if err := db.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = $1 COLLATE NOCASE", n).Scan(&def); err != nil {
			return err
		}
		if strings.Contains(strings.Join(strings.Fields(strings.ToUpper(def)), " "), "ON CONFLICT REPLACE") {
			return fmt.Errorf("table %s declares a constraint ON CONFLICT REPLACE: a row copied in that breaks it would delete the row in its way, another owner's, unseen; declare it without (a conflict then stops the move): %w", n, ErrSchema)
		}
	}
	// The capture's triggers: one of these names on another table is not ours (on
	// PostgreSQL, but for the copies of a partitioned table's trigger on its partitions).
	q = "SELECT tbl_name FROM sqlite_master WHERE type = 'trigger' AND name LIKE $1 AND tbl_name <> $2"
	if s.dialect == PostgreSQL {
		q = "SELECT c.relname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid WHERE g.tgname LIKE $1 AND g.tgparentid = 0 AND c.relname <> $2"
	}
	taken, err := queryStrings(ctx, db, q, t.changes()+"%", n)
	if err != nil {
		return err
	}
	if len(taken) > 0 {
		return fmt.Errorf("a trigger named %s... exists on table %s: the change capture of %s needs the name: %w", t.changes(), taken[0], n, ErrSchema)
	}
	return nil
}

// checkOwnerColumn refuses an owner column whose equality holds two distinct owners equal,
// and returns the form its values print in. The sharder places "ann" and "ANN" apart, but a
// move of one would select, copy and delete the other's rows too, and its shard would serve
// it without them. On PostgreSQL that is a nondeterministic collation, citext, or
// character(n) (blind to trailing spaces), from the catalog; on SQLite, which keeps no
// column's collation in a catalog, the column's own comparison is tried on a value of it (a
// subquery's column keeps its collation) against texts that differ only by case or a
// trailing space. The form is what ownerForm says; a column of another type, whose text
// form need not be the owner that selects its rows, is refused.
func (s *Store) checkOwnerColumn(ctx context.Context, db *sql.DB, t *table) (ownerForm, error) {
	var loose string
	var form ownerForm
	if s.dialect == PostgreSQL {
		var base string
		var deterministic bool
		err := db.QueryRowContext(ctx, `SELECT b.typname, COALESCE(c.collisdeterministic, true) FROM pg_attribute a
			JOIN pg_type ty ON ty.oid = a.atttypid
			JOIN pg_type b ON b.oid = CASE WHEN ty.typtype = 'd' THEN ty.typbasetype ELSE ty.oid END
			LEFT JOIN pg_collation c ON c.oid = a.attcollation
			WHERE a.attrelid = to_regclass($1) AND a.attname = $2`, t.Table, t.Owner).Scan(&base, &deterministic)
		if err != nil {
			return form, fmt.Errorf("read the type of the owner column %s: %w", t.Owner, err)
		}
		form.typ = base
		switch {
		case !deterministic:
			loose = "by a nondeterministic collation"
		case base == "citext":
			loose = "as citext, ignoring case"
		case base == "bpchar":
			loose = "as character(n), ignoring trailing spaces"
		case base == "int2":
			form.bits = 16
		case base == "int4":
			form.bits = 32
		case base == "int8":
			form.bits = 64
		case base == "uuid":
			form.uuid = true
		case base != "text" && base != "varchar":
			return form, fmt.Errorf("the owner column %s is of type %s, whose values need not print as the owners that select them (1.0 and 1 are one numeric; a bytea prints in hex); make it text, varchar, an integer or uuid: %w", t.Owner, base, ErrSchema)
		}
	} else {
		var declared string
		var caseBlind, spaceBlind bool
		err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT (SELECT upper(type) FROM pragma_table_info($1) WHERE name = $2 COLLATE NOCASE), x = 'A', x = 'a '
			FROM (SELECT %s AS x FROM %s WHERE 0 UNION ALL SELECT 'a')`, t.Owner, t.Table), t.Table, t.Owner).Scan(&declared, &caseBlind, &spaceBlind)
		if err != nil {
			return form, fmt.Errorf("compare values of the owner column %s: %w", t.Owner, err)
		}
		// SQLite's affinity rules, in their order (https://sqlite.org/datatype3.html, 3.1).
		form.typ = cmp.Or(declared, "of no declared type")
		switch {
		case caseBlind:
			loose = "ignoring case (COLLATE NOCASE)"
		case spaceBlind:
			loose = "ignoring trailing spaces (COLLATE RTRIM)"
		case strings.Contains(declared, "INT"):
			form.bits = 64
		case strings.Contains(declared, "CHAR"), strings.Contains(declared, "CLOB"), strings.Contains(declared, "TEXT"):
		default:
			return form, fmt.Errorf("the owner column %s is %s: a value that is not text need not print as the owner that selects it (1.0 and 1 compare equal, a blob never equals a text); declare it TEXT or INTEGER: %w", t.Owner, form.typ, ErrSchema)
		}
	}
	if t.IntOwner && form.bits == 0 {
		return form, fmt.Errorf("the TableSpec says IntOwner, but the owner column %s is %s: owners \"7\" and \"007\" would both select the integer 7, and a move of one would take the other's rows; declare the column an integer, or unset IntOwner: %w", t.Owner, form.typ, ErrSchema)
	}
	if loose != "" {
		return form, fmt.Errorf("the owner column %s compares %s: owners the sharder places apart (\"ann\" and \"ANN\") would be one to a move, which would take both owners' rows; make it compare exactly (text of a deterministic collation, an integer, a uuid): %w", t.Owner, loose, ErrSchema)
	}
	return form, nil
}

// pgColumnType describes, in a statement on pg_attribute, a column's type as checkColumns
// and the sums' check (table.sameColumns) compare it: its name, and for a domain (or an
// array of one) the type it is over, for a composite type its fields, by alikeTypes' classes
// (a number, text) where they have one, and its collation unless the database's default
// (oid 100). Two shards whose types share a
// name but differ beneath (a domain over float8 on one, over real on the other) then
// differ, and so does a column whose collation changed since Init (an owner column made
// case-insensitive during a move would make two owners one to the copy and the sums).
const pgColumnType = `format_type(atttypid, atttypmod) || COALESCE((SELECT CASE e.typtype
		WHEN 'd' THEN ' over ' || format_type(e.typbasetype, e.typtypmod)
		WHEN 'c' THEN ' of (' || (SELECT string_agg(f.attname || ' ' || CASE
				WHEN f.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'numeric'::regtype) THEN 'a number'
				WHEN f.atttypid IN ('text'::regtype, 'varchar'::regtype) THEN 'text'
				ELSE format_type(f.atttypid, f.atttypmod) END, ', ' ORDER BY f.attnum)
			FROM pg_attribute f WHERE f.attrelid = e.typrelid AND f.attnum > 0 AND NOT f.attisdropped) || ')'
		END FROM pg_type ty JOIN pg_type e ON e.oid = CASE WHEN ty.typcategory = 'A' THEN ty.typelem ELSE ty.oid END
		WHERE ty.oid = atttypid), '') || CASE WHEN attcollation NOT IN (0, 100) THEN ' collate ' || attcollation::regcollation::text ELSE '' END`

// localTypes are PostgreSQL types whose values name something of the database they are in
// (a large object, a table, a function, a row's place): a copy carries the number, and on
// the new shard it names another object or none.
var localTypes = []string{"oid", "tid", "xid", "xid8", "cid", "regclass", "regcollation", "regconfig", "regdictionary",
	"regnamespace", "regoper", "regoperator", "regproc", "regprocedure", "regrole", "regtype"}

// pgCopiedColumns selects, in pg_attribute, the columns a copy carries: every column but
// the system, dropped and generated ones (checkColumns, and the sums' check: table.sameColumns).
const pgCopiedColumns = "attnum > 0 AND NOT attisdropped AND attgenerated = ''"

// checkColumns checks that db's table t, on shard, has the columns of its TableSpec and no
// other but generated ones (a column the copy does not carry would be left behind, its
// values lost), each of the type Init found there, and returns their types by name.
func (s *Store) checkColumns(ctx context.Context, db querier, t *table, shard int) (map[string]string, error) {
	// pragma_table_info leaves out generated columns, which a copy cannot write.
	q := "SELECT name, type FROM pragma_table_info($1)"
	if s.dialect == PostgreSQL {
		q = "SELECT attname, " + pgColumnType + " FROM pg_attribute WHERE attrelid = to_regclass($1) AND " + pgCopiedColumns
	}
	rows, err := db.QueryContext(ctx, q, t.Table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var have []string
	types := map[string]string{}
	for rows.Next() {
		var c, typ string
		if err := rows.Scan(&c, &typ); err != nil {
			return nil, err
		}
		have, types[c] = append(have, c), typ
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, c := range t.Columns {
		if !slices.Contains(have, c) {
			return nil, fmt.Errorf("no column %s (the table has %q): %w", c, excerptList(have), ErrSchema)
		}
	}
	for _, c := range have {
		if !slices.Contains(t.Columns, c) {
			return nil, fmt.Errorf("column %s is not in the TableSpec's Columns: a copy would leave its values behind; list every column: %w", c, ErrSchema)
		}
		if s.dialect != PostgreSQL {
			continue
		}
		for part := range strings.SplitSeq(types[c], " over ") { // a domain's name, then its base
			if slices.Contains(localTypes, strings.TrimSuffix(part, "[]")) {
				return nil, fmt.Errorf("column %s is of type %s, whose values name something of this database only (a large object, a table, a type): a copy would carry the number, which names another thing or nothing on the new shard; keep the thing itself in the rows (bytea, text): %w", c, types[c], ErrSchema)
			}
		}
	}
	if shard < len(t.types) && t.types[shard] != nil {
		for _, c := range t.Columns {
			if types[c] != t.types[shard][c] {
				return nil, fmt.Errorf("column %s is %s here, %s when Init checked the shards: a copy might convert its values unseen; Init again to move it: %w", c, types[c], t.types[shard][c], ErrSchema)
			}
		}
	}
	return types, nil
}

// alikeTypes returns an error wrapping ErrSchema if a column of t is of a type in types that
// the other shard's type (want, the first shard's) could convert its values into unseen:
// float8 into real, text into a padded char(n), whose texts the sums compare alike. Numbers
// (integers of any width, numeric of any precision) go into each other exactly, or fail (out
// of range), or change their text (9.5 into 10), which the sums see; texts (text, varchar of
// any length) go exactly or fail (too long): those may differ. SQLite converts by a
// column's affinity: the affinities are compared.
func (s *Store) alikeTypes(t *table, types, want map[string]string) error {
	class := func(typ string) string {
		if s.dialect == SQLite {
			return sqliteAffinity(typ)
		}
		typ, collation, _ := strings.Cut(typ, " collate ") // a collation other than the default
		switch {
		case typ == "smallint" || typ == "integer" || typ == "bigint" || strings.HasPrefix(typ, "numeric"):
			typ = "a number"
		case typ == "text" || strings.HasPrefix(typ, "character varying"):
			typ = "text"
		}
		return typ + " " + collation
	}
	for _, c := range t.Columns {
		if class(types[c]) != class(want[c]) {
			return fmt.Errorf("column %s is %s here and %s on %s: a copy between them would change its values unseen; give it one type on every shard: %w", c, types[c], want[c], s.names[0], ErrSchema)
		}
	}
	return nil
}

// sqliteAffinity is the affinity SQLite gives a column declared of type typ (its rules, in
// order: https://www.sqlite.org/datatype3.html#determination_of_column_affinity).
func sqliteAffinity(typ string) string {
	u := strings.ToUpper(typ)
	switch {
	case strings.Contains(u, "INT"):
		return "INTEGER"
	case strings.Contains(u, "CHAR"), strings.Contains(u, "CLOB"), strings.Contains(u, "TEXT"):
		return "TEXT"
	case strings.Contains(u, "BLOB"), u == "":
		return "BLOB"
	case strings.Contains(u, "REAL"), strings.Contains(u, "FLOA"), strings.Contains(u, "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}

// reference is a foreign key from one of the Store's tables (child) to one of them (parent,
// maybe child itself): the child's columns from reference the parent's columns to.
type reference struct {
	child, parent *table // parent nil: a table the Store does not move, named outside
	outside       string // that table's name
	from, to      string // column lists, comma separated
}

// checkReferences reads the foreign keys of db that touch the Store's tables and returns
// those among them. A table that references one listed after it, or a table not among them
// that references one of them, is an error wrapping ErrSchema.
func (s *Store) checkReferences(ctx context.Context, db querier) ([]reference, error) {
	// Every foreign key of the database: (referencing, referenced, their columns in order).
	// SQLite's pragma names no referenced columns for a key on the parent's primary key.
	q := `SELECT m.name, f."table", group_concat(f."from", ',' ORDER BY f.seq), group_concat(COALESCE(f."to", p.name), ',' ORDER BY f.seq), ''
		FROM sqlite_master m, pragma_foreign_key_list(m.name) f
		LEFT JOIN pragma_table_info(f."table") p ON f."to" IS NULL AND p.pk = f.seq + 1
		WHERE m.type = 'table' GROUP BY m.name, f.id ORDER BY m.name, f.id`
	if s.dialect == PostgreSQL {
		// With them, in the same round trip, what checkShape refuses (its fifth column).
		q = `SELECT child, parent, f, t, shape FROM (
			SELECT c.conrelid::regclass::text AS child, c.confrelid::regclass::text AS parent,
				(SELECT string_agg(a.attname, ',' ORDER BY k.i) FROM unnest(c.conkey) WITH ORDINALITY AS k(n, i)
					JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n) AS f,
				(SELECT string_agg(a.attname, ',' ORDER BY k.i) FROM unnest(c.confkey) WITH ORDINALITY AS k(n, i)
					JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n) AS t,
				'' AS shape, c.oid::bigint AS ord
				FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
				WHERE c.contype = 'f' AND c.conparentid = 0
					AND (n.nspname = current_schema() OR c.confrelid = ANY ('{` + s.movedTables + `}'::regclass[]))
			UNION ALL SELECT a, b, NULL, NULL, what, 0 FROM (` + s.pgShape + `) AS shape (a, b, what)
			) AS x ORDER BY ord` // not a partition's copy of its table's key
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	at := func(name string) int {
		return slices.IndexFunc(s.tables, func(t *table) bool { return strings.EqualFold(t.Table, name) })
	}
	var refs []reference
	for rows.Next() {
		var child, parent, shape string
		var from, to sql.NullString
		if err := rows.Scan(&child, &parent, &from, &to, &shape); err != nil {
			return nil, err
		}
		c, p := at(child), at(parent)
		switch {
		case shape != "":
			return nil, shapeError(child, parent, shape)
		case p < 0 && c >= 0:
			refs = append(refs, reference{child: s.tables[c], outside: parent, from: from.String, to: to.String})
		case p < 0:
		case c < 0:
			return nil, outsideReference(child, parent)
		case c < p:
			return nil, fmt.Errorf("table %s references %s, which is listed after it: list each table after the tables it references: %w", child, parent, ErrSchema)
		default:
			refs = append(refs, reference{child: s.tables[c], parent: s.tables[p], from: from.String, to: to.String})
		}
	}
	return refs, rows.Err()
}

// shapeError is the error of what checkReferences refuses, on PostgreSQL, besides foreign
// keys (pgShape): what would let a move see the Store's tables otherwise than they are: a
// table that inherits from one of them (not a partition: its rows are selected, copied into
// the parent and deleted with the parent's), row-level security that hides rows from the
// connection's role (a move would copy, compare and delete only what it sees, and leave the
// rest on the old shard), and extra_float_digits below 1 (floats that reach Go as text, in
// arrays or points, come rounded, and the sums hash the same rounded text on both shards),
// and a DateStyle that does not print dates as ISO 8601 (dates in arrays or ranges reach Go
// as text: 04/03/2024 printed day first is read month first where DateStyle says MDY, and
// prints as 04/03/2024 there too). The sums check the same in their statement
// (table.unreferenced).
func shapeError(a, b, what string) error {
	switch what {
	case "date style":
		return fmt.Errorf("DateStyle is %q on this connection: dates read as text print in an order another shard may read otherwise (04/03/2024), and no sum would tell; set its output to ISO (ALTER ROLE ... SET DateStyle = 'ISO, MDY'): %w", a, rebalance.ErrConfig)
	case "inherits":
		return fmt.Errorf("table %s inherits from %s: a move's copy, sums and deletion of %s would take its rows as the parent's; move it as a table of its own, or give it no parent: %w", a, b, b, ErrSchema)
	case "row security":
		return fmt.Errorf("row-level security hides rows of table %s from this connection's role: a move would copy, compare and delete only the rows it sees and leave the rest behind; connect as a role with BYPASSRLS: %w", a, ErrSchema)
	}
	return fmt.Errorf("extra_float_digits is %s on this connection: floats read as text come rounded under it, so a copy would change them and no sum would tell; set it to 1 (the default) or more: %w", a, rebalance.ErrConfig)
}

// outsideReference is the error of table child, which the Store does not move, referencing
// parent, which it does.
func outsideReference(child, parent string) error {
	return fmt.Errorf("table %s references %s but is not moved with it: moving %s would leave its rows behind or delete them with the old copy; add %s to the tables: %w", child, parent, parent, child, ErrSchema)
}

// outsideRefs returns an error wrapping ErrSchema naming a table outside the Store that
// references one of its tables on shard, through q: deleting an owner's old copy there
// would delete its rows in that table too (ON DELETE CASCADE), which nothing copied, or
// fail. Init refuses such a table (checkReferences); this finds one created since, in the
// sums before a new shard serves the owners, and in each deletion of old copies after its
// DELETEs, where none can appear until the deletion ends: a foreign key's creation waits for
// the deletion's lock on the table it references (PostgreSQL) or for the write lock the
// deletion holds (SQLite). It is checkReferences, so it also refuses tables that reference
// one listed after them; SQLite's answer holds until its schema_version changes.
func (s *Store) outsideRefs(ctx context.Context, q querier, shard int) error {
	_, err := s.references(ctx, q, shard)
	return err
}

// references is outsideRefs that also returns the foreign keys among the Store's tables.
func (s *Store) references(ctx context.Context, q querier, shard int) ([]reference, error) {
	var version int64
	if s.dialect == SQLite {
		if err := q.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&version); err != nil {
			return nil, err
		}
		if v, ok := s.unreferenced.Load(shard); ok && v.(knownRefs).version == version {
			return v.(knownRefs).refs, nil
		}
	}
	refs, err := s.checkReferences(ctx, q)
	if err != nil {
		return nil, err
	}
	if s.dialect == SQLite {
		s.unreferenced.Store(shard, knownRefs{version, refs})
	}
	return refs, nil
}

// knownRefs is what outsideRefs found on a SQLite shard at a schema_version.
type knownRefs struct {
	version int64
	refs    []reference
}

// checkCapture returns an error wrapping ErrSchema if a table's change capture on shard is
// missing (the table dropped and created again since Init) or, on PostgreSQL, not enabled
// ALWAYS (ALTER TABLE ... DISABLE TRIGGER): writes of a moving owner's rows there would go
// unseen by the replay and unrefused by the guard.
func (s *Store) checkCapture(ctx context.Context, q querier, shard int) error {
	var t string
	err := q.QueryRowContext(ctx, s.uncaptured).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("the change capture of table %s is missing or switched off (triggers rebalance_changes_%s...: the table created again, or its triggers disabled): no write of a moving owner's rows there is replayed or refused; Init creates it again (where a deletion of old copies stopped on this, compare the owners' rows on both shards first): %w", t, t, ErrSchema)
	}
	return s.wrap(shard, "check the change capture", err)
}

// uncaptured is the statement that names a table of tables whose change capture is missing
// or off (see checkCapture): on PostgreSQL its trigger, which a partition of it has a copy
// of, must be there and enabled ALWAYS, here and on every partition; on SQLite its three.
func uncaptured(dialect Dialect, tables []*table) string {
	var arms []string
	for _, t := range tables {
		triggers := []string{t.changes()}
		if dialect == SQLite {
			triggers = []string{t.changes() + "_insert", t.changes() + "_update", t.changes() + "_delete"}
		}
		for _, c := range triggers {
			arms = append(arms, fmt.Sprintf("SELECT '%s' AS n, '%s' AS c", t.Table, c))
		}
	}
	missing := "NOT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = x.c AND tbl_name = x.n COLLATE NOCASE)"
	if dialect == PostgreSQL {
		missing = `NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(x.n) AND tgname = x.c)
			OR EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = x.c AND tgenabled <> 'A')`
	}
	return fmt.Sprintf("SELECT x.n FROM (%s) AS x WHERE %s LIMIT 1", strings.Join(arms, " UNION ALL "), missing)
}

// querier is what outsideRefs and checkReferences read through: a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// checkLeftBehind refuses a table of db that has a column named as a moved table's owner
// column but is neither moved nor listed in Options.Unmoved: an owner's rows there would
// stay on its old shard, where nobody looks once the owner has moved. A partition is not:
// its rows move with its table's. Where a moved table's owner column is its key (users by
// id), a table whose whole primary key is a column of that name is not either: every table
// may have an id. It reads the catalogs themselves (a table the role may not read is listed
// too) and compares names as the engine does (SQLite's case-insensitively). Init runs it,
// and so does Owners, which Finish and Drain list the shards with: a table created during a
// move is found before the move is called finished.
func (s *Store) checkLeftBehind(ctx context.Context, db *sql.DB) error {
	q := `SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table' AND c.name = $1 COLLATE NOCASE
		AND NOT ($2 AND c.pk = 1 AND (SELECT COUNT(*) FROM pragma_table_info(m.name) k WHERE k.pk > 0) = 1)`
	if s.dialect == PostgreSQL {
		// In every schema: a table of another one (named with it) keeps its rows as well.
		q = `SELECT CASE WHEN n.nspname = current_schema() THEN c.relname::text ELSE n.nspname || '.' || c.relname END
			FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE a.attname = $1 AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p') AND NOT c.relispartition
				AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
				AND NOT ($2 AND EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p' AND k.conkey = ARRAY[a.attnum]))`
	}
	for _, t := range s.tables {
		names, err := queryStrings(ctx, db, q, t.Owner, t.Owner == t.Key)
		if err != nil {
			return err
		}
		for _, n := range names {
			moved := slices.ContainsFunc(s.tables, func(t *table) bool { return strings.EqualFold(t.Table, n) })
			stays := slices.ContainsFunc(s.unmoved, func(u string) bool { return strings.EqualFold(u, n) })
			if !moved && !stays && !strings.HasPrefix(strings.ToLower(n), "rebalance_") {
				return fmt.Errorf("table %s has a column %s, the owner column of %s, but is not moved with it: its rows would stay behind on the old shard; add it to the tables, or to Options.Unmoved if its rows do not move with their owner: %w", n, t.Owner, t.Table, ErrSchema)
			}
		}
	}
	return nil
}

// excerptList quotes at most the first 20 names of a list.
func excerptList(names []string) []string {
	if len(names) > 20 {
		return append(slices.Clip(names[:20]), "...")
	}
	return names
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

// A column added since a table was first created, by the Init of a later build.
type column struct{ table, name, def string }

var (
	// shardColumns are the columns of the shards' fence tables added since.
	shardColumns = []column{{"rebalance_placement", "in_process", "INTEGER NOT NULL DEFAULT 0"}}
	// controlColumns are those of the control database's tables.
	controlColumns = append(shardColumns,
		column{"rebalance_claim", "process", "TEXT NOT NULL DEFAULT ''"},
		column{"rebalance_claim", "routed", "BIGINT NOT NULL DEFAULT 0"},
		column{"rebalance_copying", "sums", "TEXT"})
)

// addColumns adds to the tables an older build created the columns added since. A placement
// an older build recorded reads as a Shared migration's: an in-process migration that build
// left unfinished is refused here (ErrPlacement) until that build finishes it. A claim an
// older build recorded has no process bound. A copy an older build recorded has no sums:
// the next Copy replaces what the shard holds of its owner, as that build did.
func (s *Store) addColumns(ctx context.Context, db *sql.DB, cols []column) error {
	for _, c := range cols {
		// Looked for first: an ALTER TABLE, even one that adds nothing, would wait for every
		// access under way, and every access after it for it.
		has := func() (bool, error) {
			q := "SELECT COUNT(*) FROM pragma_table_info($1) WHERE name = $2"
			if s.dialect == PostgreSQL {
				q = "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2"
			}
			var n int
			err := db.QueryRowContext(ctx, q, c.table, c.name).Scan(&n)
			return n > 0, err
		}
		if ok, err := has(); err != nil {
			return err
		} else if ok {
			continue
		}
		add := "ALTER TABLE " + c.table + " ADD COLUMN " + c.name + " " + c.def
		if s.dialect == PostgreSQL {
			if err := s.execAll(ctx, db, []string{strings.Replace(add, "ADD COLUMN", "ADD COLUMN IF NOT EXISTS", 1)}); err != nil {
				return err
			}
			continue
		}
		if _, err := db.ExecContext(ctx, add); err != nil {
			if ok, _ := has(); !ok { // else added by another process's Init meanwhile
				return err
			}
		}
	}
	return nil
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
