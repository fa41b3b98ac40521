package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// lockKey is owner's advisory lock key within fenceNS (PostgreSQL). Two
// owners of one key only wait for each other's fence changes.
func lockKey(owner string) int32 {
	h := fnv.New32a()
	h.Write([]byte(owner))
	return int32(h.Sum32())
}

// writeTurn waits, on SQLite, for this Store's turn to write on shard i (the control
// database if i is -1), and returns what ends the turn: the Store's own write transactions
// on one database run one at a time, and one that waits is woken when the one before it
// ends. Else each would wait in SQLite's busy handler, which sleeps 1, 2, 5, then 10 to 100
// ms between tries, long after the lock is free (with 8 movers, the longest exclusive
// windows halved: see BenchmarkMove). A turn is held only around one transaction, never
// while another is taken, so turns cannot wait for each other in a cycle. Accesses take no
// turn: they must not wait for the mover's writes to read; a turn begins by letting the
// accesses that wait to write the database go first (yieldToWaiting, see handoff.go).
func (s *Store) writeTurn(ctx context.Context, i int) (release func(), err error) {
	if s.dialect != SQLite {
		return func() {}, nil
	}
	db := s.control
	if i >= 0 {
		if db, err = s.shard(i); err != nil {
			return nil, err
		}
	}
	turn := s.turns[db]
	select {
	case turn <- struct{}{}:
		if i >= 0 {
			s.yieldToWaiting(ctx, i)
		}
		return func() { <-turn }, nil
	case <-ctx.Done():
		if i < 0 {
			return nil, fmt.Errorf("sqlstore: control database: wait for the turn to write: %w", ctx.Err())
		}
		return nil, s.wrap(i, "wait for the turn to write", ctx.Err())
	}
}

// begin starts a transaction on shard i: READ COMMITTED on PostgreSQL, so that each
// statement sees what committed before it started (the fence read after the lock).
func (s *Store) begin(ctx context.Context, i int) (*sql.Tx, error) {
	db, err := s.shard(i)
	if err != nil {
		return nil, err
	}
	var opts *sql.TxOptions
	if s.dialect == PostgreSQL {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := db.BeginTx(ctx, opts)
	return tx, s.wrap(i, "begin", err)
}

// Accessing reports whether an access (Access) is under way on shard now; see
// rebalance.AccessMeter. On PostgreSQL an access holds its owner's advisory lock shared
// until it ends, and Accessing looks for one in pg_locks, waiting or granted, in any database
// of the shard's server: they share its processors and disks, which is what bigger chunks
// would take from them. On SQLite it cannot see the accesses of other processes, so it
// always says true (chunks stay ChunkRows).
func (s *Store) Accessing(ctx context.Context, shard int) (bool, error) {
	db, err := s.shard(shard)
	if err != nil || s.dialect == SQLite {
		return true, err
	}
	var busy bool
	err = db.QueryRowContext(ctx, accessingSQL).Scan(&busy)
	return busy, s.wrap(shard, "look for accesses under way", err)
}

// accessingSQL is Accessing's statement, the namespace written in rather than a parameter: a
// statement without parameters is planned once per connection, one with them five times
// before PostgreSQL settles on a plan (a move asks hundreds of times).
var accessingSQL = fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM pg_locks
	WHERE locktype = 'advisory' AND classid::bigint = %d AND objsubid = 2 AND mode = 'ShareLock')`, int64(uint32(fenceNS)))

// Access runs fn in one transaction on shard if shard serves owner, and commits it; see
// rebalance.SharedStore. A refusal is a *rebalance.FenceError; fn's own error is returned as
// it is, after the rollback.
//
// On PostgreSQL the transaction takes owner's advisory lock shared, then reads the fence.
// On SQLite (WAL) it takes no lock at first: its fence read opens a snapshot of the shard,
// and fn runs on that snapshot. If fn only reads, it read a consistent state at which the
// shard served owner, and the access takes effect at the snapshot, whatever fence change
// commits meanwhile. If fn writes, the write succeeds only if nothing committed on the shard
// since the snapshot (SQLite's rule for a read transaction that becomes a write one), and
// the write lock it then holds keeps any fence change out until the commit: the fence fn
// read is still the fence when its rows commit. Otherwise the write fails with SQLITE_BUSY
// (or SQLITE_BUSY_SNAPSHOT) without writing, and Access rolls back and runs the access
// again: from a new snapshot, every 200 µs or sooner for up to 50 ms, then with the write
// lock taken before the fence read (waiting for it under busy_timeout). So on SQLite fn may
// be called more than once, and must return its statements' errors (wrapped with %w or as
// they are): a busy error it hides is not retried, though its write did not happen.
func (s *Store) Access(ctx context.Context, p rebalance.Placement, owner string, shard int, fn func(tx *sql.Tx) error) error {
	if err := s.checkOwners(owner); err != nil {
		return err
	}
	if p.InProcess {
		return fmt.Errorf("sqlstore: Access with the placement of an in-process migration %.64q: Access is the Shared API's: %w", p.Migration, rebalance.ErrConfig)
	}
	switch s.dialect {
	case PostgreSQL:
		return s.access(ctx, p, owner, shard, fn, sharedLock)
	default:
		// A write that finds the lock taken fails at once: try again soon, in steps finer
		// than the busy handler's, for a while (snapshotRetry), then queue for the lock
		// under busy_timeout.
		wait := 50 * time.Microsecond
		var waited func() // marks this access waiting, for the Store's writes to yield (handoff.go)
		defer func() {
			if waited != nil {
				waited()
			}
		}()
		for end := time.Now().Add(snapshotRetry); ; {
			err := s.access(ctx, p, owner, shard, fn, snapshot)
			if !errors.Is(err, errSnapshotStale) {
				return err
			}
			if waited == nil {
				waited = s.waitToWrite(ctx, shard)
			}
			if time.Now().After(end) {
				break
			}
			if sqliteCode(err) == sqliteBusyCode { // the lock is taken (not a newer snapshot)
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
				wait = min(2*wait, snapshotPause)
			}
		}
		return s.access(ctx, p, owner, shard, fn, writeLock)
	}
}

// How long Access on SQLite retries, from new snapshots, a write that could not take the
// write lock, and its longest pause between two tries. SQLite's own busy handler sleeps 1, 2,
// 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms between tries, which is what a write waiting
// behind a mover's chunks spent most of its time in. 200 µs, against 1 ms and against no
// retry (the busy handler at once), gave the lowest write p99 of BenchmarkLatency with 4
// movers in the benchmark's process (37 ms against 72 and 107, one run each).
const (
	snapshotRetry = 50 * time.Millisecond
	snapshotPause = 200 * time.Microsecond
)

// How access holds owner against a fence change while it runs.
const (
	sharedLock = iota // PostgreSQL: owner's advisory lock, shared, before the fence read
	snapshot          // SQLite: none until fn writes (see Access)
	writeLock         // SQLite: the database's write lock, from the fence read on
)

// errSnapshotStale is access's error when, on SQLite, fn or the commit could not write
// because another connection wrote since the access's snapshot or holds the write lock.
var errSnapshotStale = errors.New("snapshot stale for a write")

// access is one attempt of Access, holding owner as hold says.
func (s *Store) access(ctx context.Context, p rebalance.Placement, owner string, shard int, fn func(tx *sql.Tx) error, hold int) error {
	known := s.knownVersion(ctx, shard) // before the transaction: it may read the control database
	tx, err := s.begin(ctx, shard)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	var state sql.NullInt64
	var refused, finishing, version int64
	pm, pb, pa, lv, ar := p.Migration, int64(p.Before), int64(p.After), flag(p.Leaving), flag(p.Arriving)
	// Access is the Shared API's: its placement is never InProcess (Access refuses one).
	refuses := "SELECT CASE WHEN " + fmt.Sprintf(refusesPlacement, "$2", "$3", "$4", "$5", "$6", "0") + " THEN 1 ELSE 0 END"
	const beingFinished = "SELECT COUNT(*) FROM rebalance_placement WHERE finished > 1"
	switch hold {
	case sharedLock:
		// The owner's lock shared, then the placement and its fence, in one round trip
		// (rebalance_enter: -1 when the placement is refused).
		err = tx.QueryRowContext(ctx, "SELECT rebalance_enter($1, $2, $3, $4, $5, $6, $7, $8, $9), "+readVersion, fenceNS, lockKey(owner), owner, pm, pb, pa, lv, ar, placementNS).Scan(&state, &version)
		switch state.Int64 {
		case -1:
			state, refused = sql.NullInt64{}, 1
		case -2:
			state, finishing = sql.NullInt64{}, 1
		}
	case snapshot:
		// The first read of a deferred transaction: it opens the snapshot fn runs on.
		err = tx.QueryRowContext(ctx, "SELECT (SELECT state FROM rebalance_fence WHERE owner = $1), ("+refuses+"), ("+beingFinished+"), "+readVersion, owner, pm, pb, pa, lv, ar).Scan(&state, &refused, &finishing, &version)
	case writeLock:
		// A write first: it takes the write lock now (waiting for it under busy_timeout),
		// so no fence change can commit between this read and the end of the transaction.
		err = tx.QueryRowContext(ctx, "UPDATE rebalance_fence SET state = state WHERE owner = $1 RETURNING state", owner).Scan(&state)
		if err == nil || errors.Is(err, sql.ErrNoRows) {
			err = tx.QueryRowContext(ctx, "SELECT $1, ("+refuses+"), ("+beingFinished+"), "+readVersion, owner, pm, pb, pa, lv, ar).Scan(new(any), &refused, &finishing, &version)
		}
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return s.wrap(shard, fmt.Sprintf("read fence of owner %q", owner), err)
	}
	if err := s.shardBehind(shard, version, known); err != nil {
		return err
	}
	if refused > 0 {
		served, finished, err := s.served(ctx, tx, shard)
		if err != nil {
			return err
		}
		return &rebalance.PlacementError{Shard: shard, Served: served, Wanted: p, Finished: finished}
	}
	if finishing > 0 && p.Leaving && !state.Valid {
		return &rebalance.PlacementError{Shard: shard, Served: p, Wanted: p, Finishing: true}
	}
	if f := rebalance.FenceState(state.Int64); state.Valid && f != rebalance.Serving && f != rebalance.Exporting {
		return &rebalance.FenceError{Owner: owner, Shard: shard, State: f}
	}
	if err := fn(tx); err != nil {
		if hold == snapshot && sqliteBusy(err) {
			return fmt.Errorf("%w: %w", errSnapshotStale, err)
		}
		return err
	}
	err = tx.Commit()
	if hold == snapshot && sqliteBusy(err) {
		return fmt.Errorf("%w: %w", errSnapshotStale, err)
	}
	return s.wrap(shard, fmt.Sprintf("commit access to owner %q", owner), err)
}

// SQLite's primary result code SQLITE_BUSY; its extended codes, SQLITE_BUSY_SNAPSHOT (517)
// among them, keep it in their low byte (https://www.sqlite.org/rescode.html).
const sqliteBusyCode = 5

// sqliteBusy says whether err is, or wraps, a modernc.org/sqlite error whose primary code
// is SQLITE_BUSY. It matches the driver's *sqlite.Error by its Code method, so that this
// package does not link the driver for PostgreSQL users.
func sqliteBusy(err error) bool { return sqliteCode(err)&0xff == sqliteBusyCode }

// sqliteCode is the result code of the modernc.org/sqlite error err is or wraps, or 0.
func sqliteCode(err error) int {
	var coded interface {
		error
		Code() int
	}
	if errors.As(err, &coded) {
		return coded.Code()
	}
	return 0
}

// Fences returns the fence of each of owners on shard.
func (s *Store) Fences(ctx context.Context, owners []string, shard int) ([]rebalance.Fence, error) {
	db, err := s.shard(shard)
	if err != nil {
		return nil, err
	}
	out := make([]rebalance.Fence, len(owners))
	at := make(map[string][]int, len(owners))
	for i, o := range owners {
		at[o] = append(at[o], i)
	}
	err = s.byIndex(ctx, db, shard, func(query lookup) error {
		for batch := range slices.Chunk(owners, 500) {
			if s.dialect == PostgreSQL {
				batch = padded(batch)
			}
			q, args := "SELECT owner, state, migration FROM rebalance_fence WHERE owner IN ("+s.placeholders(1, len(batch))+")", toAny(batch)
			rows, err := query(ctx, q, args...)
			if err != nil {
				return s.wrap(shard, "read fences", err)
			}
			for rows.Next() {
				var o, m string
				var f int64
				if err := rows.Scan(&o, &f, &m); err != nil {
					rows.Close()
					return s.wrap(shard, "read fences", err)
				}
				for _, i := range at[o] {
					out[i] = rebalance.Fence{State: rebalance.FenceState(f), Migration: m}
				}
			}
			if err := rows.Close(); err != nil {
				return s.wrap(shard, "read fences", err)
			}
			if err := rows.Err(); err != nil {
				return s.wrap(shard, "read fences", err)
			}
		}
		return nil
	})
	return out, err
}

// SetFence sets the fence of owners on shard, each owner held exclusive against Access,
// after checking token; see rebalance.SharedStore.
func (s *Store) SetFence(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) error {
	if state > rebalance.Exporting {
		return fmt.Errorf("sqlstore: set fence to %v: %w", state, rebalance.ErrConfig)
	}
	if err := s.checkOwners(owners...); err != nil {
		return err
	}
	if s.dialect == PostgreSQL {
		return s.setFencePG(ctx, migration, owners, shard, state, token)
	}
	v, err := s.setFenceSQLite(ctx, migration, owners, shard, state, token)
	if err != nil {
		return err
	}
	s.counted(shard, v)
	return nil
}

// setFenceSQLite is SetFence's transaction on SQLite, in the Store's turn to write there. It
// returns the shard's count of changes after it.
func (s *Store) setFenceSQLite(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) (int64, error) {
	release, err := s.writeTurn(ctx, shard)
	if err != nil {
		return 0, err
	}
	defer release()
	known := s.versions.known[shard].Load()
	tx, err := s.begin(ctx, shard)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if err := s.checkToken(ctx, tx, migration, token, shard, tokenHeld); err != nil {
		return 0, err
	}
	if state != rebalance.Serving {
		var fin sql.NullInt64
		err := tx.QueryRowContext(ctx, "SELECT MAX(finished) FROM rebalance_placement WHERE migration = $1", migration).Scan(&fin)
		if err == nil && fin.Int64 > 0 {
			err = fenceWhileFinishing(migration, map[bool]int64{true: -3, false: -2}[fin.Int64 == 1])
		}
		if err != nil {
			return 0, s.wrap(shard, fmt.Sprintf("fence %d owners %v", len(owners), state), err)
		}
	}
	for batch := range slices.Chunk(owners, 500) {
		var q string
		var args []any
		if state == rebalance.Serving {
			q, args = "DELETE FROM rebalance_fence WHERE owner IN ("+s.placeholders(1, len(batch))+")", toAny(batch)
		} else {
			var b strings.Builder
			b.WriteString("INSERT INTO rebalance_fence (owner, state, migration, token) VALUES ")
			for i, o := range batch {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "(%s, %d, %s, %d)", s.placeholders(2*i+1, 1), state, s.placeholders(2*i+2, 1), int64(token))
				args = append(args, o, migration)
			}
			b.WriteString(" ON CONFLICT (owner) DO UPDATE SET state = excluded.state, migration = excluded.migration, token = excluded.token")
			q = b.String()
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return 0, s.wrap(shard, fmt.Sprintf("fence %d owners %v", len(batch), state), err)
		}
	}
	v, err := s.bump(ctx, tx, shard, known)
	if err != nil {
		return 0, err
	}
	return v, s.wrap(shard, fmt.Sprintf("commit fence of %d owners %v", len(owners), state), tx.Commit())
}

// setFencePG is SetFence on PostgreSQL: one statement, rebalance_set_fence, that takes the
// migration's token lock shared and the owners exclusive in key order (two fence changes of
// overlapping owners cannot deadlock), checks the token and writes the fences.
func (s *Store) setFencePG(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) error {
	db, err := s.shard(shard)
	if err != nil {
		return err
	}
	if token > math.MaxInt64 {
		return s.wrap(shard, "check mover token", fmt.Errorf("token %d above %d: %w", token, int64(math.MaxInt64), rebalance.ErrConfig))
	}
	// Owners all fenced moved by the migration, fenced exporting again (a mover's window
	// that stopped): no writer wrote their rows under the old fence, which refused them, so
	// there is nothing to wait for, and a writer left open would only delay their reopening.
	reopening := false
	if state == rebalance.Exporting {
		var moved int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM rebalance_fence WHERE owner = ANY($1::text[]) AND state = $2 AND migration = $3",
			owners, int(rebalance.Moved), migration).Scan(&moved); err != nil {
			return s.wrap(shard, "read the fences", err)
		}
		reopening = moved == len(slices.Compact(slices.Sorted(slices.Values(owners))))
	}
	keys := make([]int32, len(owners))
	for i, o := range owners {
		keys[i] = lockKey(o)
	}
	slices.Sort(keys)
	var newest int64
	// Not on a shard behind its known count (a one-time filter, evaluated before the call).
	// The count read with it is the shard's before the call: the change's is at least one more.
	known := s.versions.known[shard].Load()
	var before int64
	err = db.QueryRowContext(ctx, "SELECT rebalance_set_fence($1, $2, $3, $4, $5, $6, $7, $8, $9), "+readVersion+" WHERE "+readVersion+" >= $10",
		fenceNS, epochNS, lockKey(migration), slices.Compact(keys), owners, int32(state), migration, int64(token), placementNS, known).Scan(&newest, &before)
	if errors.Is(err, sql.ErrNoRows) {
		err = cmp.Or(s.behindIn(ctx, db, shard, known), errors.New("the shard's version was below the one known, then not: set the fence again"))
	}
	if err == nil {
		err = fenceWhileFinishing(migration, newest)
	}
	if err != nil {
		return s.wrap(shard, fmt.Sprintf("fence %d owners %v", len(owners), state), err)
	}
	if newest > int64(token) {
		return &rebalance.FenceError{Shard: shard, Migration: migration, Token: token, Newest: uint64(newest)}
	}
	s.counted(shard, before+1)
	if state == rebalance.Serving || reopening {
		return nil // a return to serving: nothing the mover reads next depends on writes before it
	}
	return s.wrap(shard, "wait for the writes under way", s.waitForWriters(ctx, db, owners))
}

// waitForWriters waits, after a fence change of owners on a PostgreSQL shard, for the
// transactions that hold one of the owners' stripes (stripeNS): each wrote a row of an owner
// of that stripe after taking its stripe, then read its fence, perhaps before the change, and
// no copy, replay or sum sees what it wrote until it commits. A writer that takes a stripe
// after this looks reads the changed fence. (Waiting rather than taking the stripes
// exclusive: movers' fence changes whose owners share a stripe would wait for each other.)
func (s *Store) waitForWriters(ctx context.Context, db *sql.DB, owners []string) error {
	// The transactions holding the stripes now, then those of them that still hold one: a
	// transaction, prepared ones too, keeps its advisory locks until it ends, and one that
	// starts later has another virtual ID.
	holders := `SELECT DISTINCT virtualtransaction FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid::bigint = $1 AND objsubid = 2 AND granted
			AND objid::bigint IN (SELECT ` + stripeOf("o") + ` FROM unnest($2::text[]) AS o)`
	var writers []string
	deadline := time.Now().Add(s.writerWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		q, args := holders, []any{int64(uint32(stripeNS)), owners}
		if writers != nil {
			q, args = holders+" AND virtualtransaction = ANY($3::text[])", append(args, writers)
		}
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		writers = writers[:0:0]
		for rows.Next() {
			var w string
			if err := rows.Scan(&w); err != nil {
				rows.Close()
				return err
			}
			writers = append(writers, w)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(writers) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return s.openWriters(ctx, db, writers)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// openWriters is waitForWriters' error when it gives up: ErrWritersOpen, naming up to three
// of the transactions (virtual IDs) writers by what pg_stat_activity says of their sessions
// (not their statements, which may quote the application's data).
func (s *Store) openWriters(ctx context.Context, db *sql.DB, writers []string) error {
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT ON (l.virtualtransaction) COALESCE(a.pid, 0), COALESCE(a.application_name, ''),
			COALESCE(a.state, ''), COALESCE(extract(epoch FROM now() - a.xact_start)::float8, 0)
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.virtualtransaction = ANY($1::text[]) ORDER BY l.virtualtransaction LIMIT 3`, writers)
	if err != nil {
		return err
	}
	defer rows.Close()
	var named []string
	for rows.Next() {
		var pid int64
		var app, state string
		var open float64
		if err := rows.Scan(&pid, &app, &state, &open); err != nil {
			return err
		}
		if pid == 0 {
			named = append(named, "a prepared transaction (pg_prepared_xacts)")
			continue
		}
		named = append(named, fmt.Sprintf("pid %d (application %q, %s, open %.1fs)", pid, app, state, open))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return fmt.Errorf("waited %v for %d open transaction(s) that wrote rows of these owners' stripes around the library: %s; end them or wait for them, then run the move again: %w",
		s.writerWait, len(writers), strings.Join(named, ", "), ErrWritersOpen)
}

// epochNS is the advisory lock namespace of the migrations' tokens (PostgreSQL).
var epochNS = namespace("shardkit/rebalance-epoch")

// placementNS is the advisory lock namespace of the placement a shard serves: Leaving
// accesses hold its key 0 shared, an in-process mover's claim and a change to "being
// finished" exclusive (PostgreSQL).
var placementNS = namespace("shardkit/rebalance-placement")

// fenceNS is the advisory lock namespace of the owners' fences (PostgreSQL). It is one for
// every Store, whatever its tables: a shard has one fence per owner, which every Store on
// it reads, so every Store must lock it alike.
var fenceNS = namespace("shardkit/rebalance-fence")

// stripeNS is the advisory lock namespace of the owners' stripes (PostgreSQL): a capture
// trigger holds the stripe of each owner whose row it sees written shared, until the
// writing transaction ends, and after a fence change the mover waits for the transactions
// that hold its owners' stripes (waitForWriters): the writes under way that went around the
// library (see guard.go). Stripes rather than owners bound what one transaction holds: a
// batch job that writes every owner takes at most 256 locks, not one per owner, which could
// fill PostgreSQL's lock table.
var stripeNS = namespace("shardkit/rebalance-stripe")

// stripes is how many stripes the owners hash into (a power of two).
const stripes = 256

// stripeOf is the SQL expression of the stripe of the text owner, an integer.
func stripeOf(owner string) string {
	return fmt.Sprintf("(hashtext(%s) & %d)", owner, stripes-1)
}

func namespace(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32())
}

// How checkToken takes the migration's token lock on PostgreSQL.
const (
	tokenHeld      = iota // SQLite's fence change: its write lock is the token lock
	tokenShared           // a mover's step: many at once
	tokenExclusive        // a claim: waits for the steps under way
)

// checkToken is the first step of a mover's transaction on shard (-1: the control
// database): it records token as the newest of migration there, or returns a
// *rebalance.FenceError if a newer one was recorded. On PostgreSQL a step holds the
// migration's token lock shared until it commits and a claim holds it exclusive, so a newer
// mover's claim waits for the steps under way and then refuses the older mover everything
// (an advisory lock rather than FOR SHARE on the token row, which makes a MultiXact for every
// concurrent step). On SQLite the transaction's first statement writes, which serializes it
// with everything else on that database.
func (s *Store) checkToken(ctx context.Context, tx *sql.Tx, migration string, token uint64, shard int, lock int) error {
	where := func(err error) error {
		if shard < 0 {
			return fmt.Errorf("sqlstore: control database: check mover token: %w", err)
		}
		return s.wrap(shard, "check mover token", err)
	}
	if token > math.MaxInt64 {
		return where(fmt.Errorf("token %d above %d: %w", token, int64(math.MaxInt64), rebalance.ErrConfig))
	}
	var newest int64
	if s.dialect == PostgreSQL {
		if lock != tokenHeld {
			fn := map[int]string{tokenShared: "pg_advisory_xact_lock_shared", tokenExclusive: "pg_advisory_xact_lock"}[lock]
			if _, err := tx.ExecContext(ctx, "SELECT "+fn+"($1, $2)", epochNS, lockKey(migration)); err != nil {
				return where(err)
			}
		}
		err := tx.QueryRowContext(ctx, "SELECT token FROM rebalance_epoch WHERE migration = $1", migration).Scan(&newest)
		switch {
		case err == nil && newest == int64(token):
			return nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return where(err)
		case err == nil && newest > int64(token):
			return &rebalance.FenceError{Shard: shard, Migration: migration, Token: token, Newest: uint64(newest)}
		}
	}
	// SQLite: a write as the first statement, which takes the write lock.
	upsert := `INSERT INTO rebalance_epoch (migration, token) VALUES ($1, $2)
		ON CONFLICT (migration) DO UPDATE SET token = max(rebalance_epoch.token, excluded.token) RETURNING token`
	if s.dialect == PostgreSQL {
		upsert = strings.Replace(upsert, "max(", "GREATEST(", 1)
	}
	if err := tx.QueryRowContext(ctx, upsert, migration, int64(token)).Scan(&newest); err != nil {
		return where(err)
	}
	if newest > int64(token) {
		return &rebalance.FenceError{Shard: shard, Migration: migration, Token: token, Newest: uint64(newest)}
	}
	return nil
}

// placeholders returns n parameters from the first: "$first, ..., $(first+n-1)" on
// PostgreSQL, "?, ..., ?" on SQLite, where modernc.org/sqlite binds numbered parameters
// ($n, ?n) by name, which takes 100-200 ms for a statement of 5,000 of them against 3 ms for
// plain ones (measured here). Statements of many parameters take their arguments in the
// order the parameters appear.
func (s *Store) placeholders(first, n int) string {
	var b strings.Builder
	s.writePlaceholders(&b, first, n)
	return b.String()
}

// writePlaceholders writes placeholders(first, n) to b, without fmt: for the mover's
// INSERTs of thousands of parameters fmt was a quarter of its CPU.
func (s *Store) writePlaceholders(b *strings.Builder, first, n int) {
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		if s.dialect == SQLite {
			b.WriteByte('?')
		} else {
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(first + i))
		}
	}
}

// flag is a bool as the 0 or 1 of an INTEGER column or parameter.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// Unsettled returns up to 10 owners fenced Importing or Exporting by migration on shard, and
// how many are (see rebalance.FenceLister).
func (s *Store) Unsettled(ctx context.Context, migration string, shard int) ([]string, int, error) {
	db, err := s.shard(shard)
	if err != nil {
		return nil, 0, err
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT owner, COUNT(*) OVER () FROM rebalance_fence
		WHERE migration = $1 AND state IN (%d, %d) ORDER BY owner LIMIT 10`, rebalance.Importing, rebalance.Exporting), migration)
	if err != nil {
		return nil, 0, s.wrap(shard, "list the owners fenced part way", err)
	}
	defer rows.Close()
	var owners []string
	var n int
	for rows.Next() {
		var o string
		if err := rows.Scan(&o, &n); err != nil {
			return nil, 0, s.wrap(shard, "list the owners fenced part way", err)
		}
		owners = append(owners, o)
	}
	return owners, n, s.wrap(shard, "list the owners fenced part way", rows.Err())
}

var _ rebalance.FenceLister = (*Store)(nil)

// fenceWhileFinishing is the error of a fence refused because the shard records migration
// finished (code -3) or a Finish of it listing the owners (code -2), else nil. A Run fencing
// an owner then (another process's, started or resumed) would leave it importing on its
// new shard and exporting on its old one after the finish: refused on the first for good,
// written on the second where no router reads it, unseen by the listing.
func fenceWhileFinishing(migration string, code int64) error {
	switch code {
	case -3:
		return fmt.Errorf("migration %q is finished here: a mover may not fence owners any more: %w", migration, rebalance.ErrFinished)
	case -2:
		return fmt.Errorf("a Finish of migration %q is listing the owners here: fence again once it ends: %w", migration, rebalance.ErrMoverRunning)
	}
	return nil
}
