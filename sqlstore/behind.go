package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// Each shard counts the changes to what it serves (rebalance_version: every claim, fence
// change, in-process copy and finish recorded there adds one, in its transaction, which is
// refused where the shard holds less than the count known before it), and the control
// database records the newest count each shard committed (rebalance_shard_versions, by the
// shard's identity): right after a claim's or a finish's commit, within versionFlush of a
// fence change's or a copy's, and before the Run that made them returns (Release); the
// process that made a change knows its count at once. A shard whose count is
// below the recorded one is older than its own last changes: restored from a backup, or
// rolled back. Such a shard may lack the fences, placement and finish of a migration, and
// then accepts an access routed by the before sharder for an owner whose rows moved away,
// a write nobody reads after the move. It cannot tell that itself (it looks like a shard
// before a claim); only the control database knows. So every access compares the shard's
// count with the recorded one, read from the control database at most versionStale before
// (the counts only grow, so a count read earlier is never above the shard's own unless the
// shard went back), and the mover's claim, fence changes and Finish, and the in-process
// routers' CheckPlacement, compare them too: all refuse with ErrShardBehind.
//
// A count recorded after its commit can be lost to a restore in between (the control
// database never sees it): that one change is then not detected. The counts never refuse a
// shard that did not go back: the control database records only counts a shard committed.

// ErrShardBehind reports a shard that holds an older state of the migrations than the
// control database recorded it committed: it was restored from a backup, or rolled back.
// It wraps rebalance.ErrConfig.
var ErrShardBehind = fmt.Errorf("shard behind its recorded changes (%w)", rebalance.ErrConfig)

const (
	versionSchema        = `CREATE TABLE IF NOT EXISTS rebalance_version (id INTEGER PRIMARY KEY CHECK (id = 0), version BIGINT NOT NULL)`
	versionRow           = `INSERT INTO rebalance_version (id, version) VALUES (0, 0) ON CONFLICT (id) DO NOTHING`
	controlVersionSchema = `CREATE TABLE IF NOT EXISTS rebalance_shard_versions (shard TEXT PRIMARY KEY, version BIGINT NOT NULL)`

	// bumpVersion counts a change in the function that changes fences (PostgreSQL): its
	// last statement, so that no lock is waited for while the row is held.
	bumpVersion = `UPDATE rebalance_version SET version = version + 1 WHERE id = 0`
	// readVersion is the shard's count, as a scalar expression: 0 if its row is gone (a
	// database that lost its state is behind too).
	readVersion = `COALESCE((SELECT version FROM rebalance_version WHERE id = 0), 0)`
)

// How long the counts read from the control database are trusted: an access that finds
// them older than versionRefresh has them read again in the background (a busy process
// never waits for the control database), one that finds them older than versionStale (an
// idle process, or one whose background reads fail) reads them first.
const (
	versionRefresh = time.Second
	versionStale   = 3 * time.Second
)

// versions is what a Store knows of the counts the control database recorded.
type versions struct {
	known      []atomic.Int64 // by shard position: recorded there, or read on the shard
	recorded   []atomic.Int64 // by shard position: known to be recorded there
	flushing   atomic.Bool    // a background write of the known counts is under way
	fetched    atomic.Int64   // when they were last read (or tried), in Unix nanoseconds
	refreshing atomic.Bool    // a background read is under way
	mu         sync.Mutex     // held by an access that reads them first
}

// raise records that shard i committed count v: the control database recorded it, or it
// was read there.
func (vs *versions) raise(i int, v int64) { raiseTo(&vs.known[i], v) }

// raiseTo sets *x to v if v is greater.
func raiseTo(x *atomic.Int64, v int64) {
	for {
		old := x.Load()
		if v <= old || x.CompareAndSwap(old, v) {
			return
		}
	}
}

// age is how long ago the counts were last read.
func (vs *versions) age() time.Duration { return time.Since(time.Unix(0, vs.fetched.Load())) }

// knownVersion returns the count the control database recorded for shard i, read at most
// versionStale before (or tried then: if the control database cannot be read, the counts
// read before stand, and a restore goes unseen until it can).
func (s *Store) knownVersion(ctx context.Context, i int) int64 {
	vs := &s.versions
	switch age := vs.age(); {
	case age > versionStale:
		vs.mu.Lock()
		if vs.age() > versionStale {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			s.recordedVersions(rctx)
			cancel()
			vs.fetched.Store(time.Now().UnixNano())
		}
		vs.mu.Unlock()
	case age > versionRefresh && vs.refreshing.CompareAndSwap(false, true):
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := s.recordedVersions(ctx); err == nil {
				vs.fetched.Store(time.Now().UnixNano())
			}
			vs.refreshing.Store(false)
		}()
	}
	return vs.known[i].Load()
}

// recordedVersions reads the counts the control database recorded, by shard position, and
// raises the known ones to them.
func (s *Store) recordedVersions(ctx context.Context) ([]int64, error) {
	rows, err := s.control.QueryContext(ctx, "SELECT shard, version FROM rebalance_shard_versions")
	if err != nil {
		return nil, fmt.Errorf("sqlstore: control database: read the shards' recorded versions: %w", err)
	}
	defer rows.Close()
	ids := s.shardIDs()
	at := make(map[string]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	out := make([]int64, len(s.shards))
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return nil, fmt.Errorf("sqlstore: control database: read the shards' recorded versions: %w", err)
		}
		if i, ok := at[id]; ok {
			out[i] = v
			s.versions.raise(i, v)
			raiseTo(&s.versions.recorded[i], v)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: control database: read the shards' recorded versions: %w", err)
	}
	return out, nil
}

// shardIDs returns the shards' identities by position, once Init read them (else nil).
func (s *Store) shardIDs() []string {
	if ids := s.ids.Load(); ids != nil {
		return *ids
	}
	return nil
}

// version reads shard i's count.
func (s *Store) version(ctx context.Context, q querier, i int) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, "SELECT "+readVersion).Scan(&v)
	return v, s.wrap(i, "read the shard's version", err)
}

// shardBehind is the error of shard i, which holds count has where a count of known
// committed there before, if has is lower, else nil.
func (s *Store) shardBehind(i int, has, known int64) error {
	if has >= known {
		return nil
	}
	return s.wrap(i, "check the shard's version", fmt.Errorf("it holds version %d of the migrations' state, and version %d committed here before (as the control database recorded, or a read here found): the database is older than its own last changes (restored from a backup, or rolled back), and may accept accesses for owners whose rows moved away, or lack rows that moved in; nothing was done here: restore it from a backup taken after its last change, or, with no migration under way, bring it up to the control database's record with Store.AcceptShard(ctx, %d): %w",
		has, known, i, ErrShardBehind))
}

// bump counts a change in tx on shard i, as the transaction's last statement before its
// commit (no lock is waited for while the row is held), or returns ErrShardBehind if the
// shard holds a count below known, one known before tx began: the change is refused before
// it commits, and a restored shard's count cannot climb back to the one recorded.
// It returns the count the change gives the shard.
func (s *Store) bump(ctx context.Context, tx *sql.Tx, i int, known int64) (int64, error) {
	var v int64
	err := tx.QueryRowContext(ctx, "UPDATE rebalance_version SET version = version + 1 WHERE id = 0 AND version >= $1 RETURNING version", known).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		err = cmp.Or(s.behindIn(ctx, tx, i, known), errors.New("rebalance_version has no row: run Init"))
	}
	return v, s.wrap(i, "count the change", err)
}

// behindIn returns ErrShardBehind if shard i, read in q, holds a count below known.
func (s *Store) behindIn(ctx context.Context, q querier, i int, known int64) error {
	v, err := s.version(ctx, q, i)
	if err != nil {
		return err
	}
	return s.shardBehind(i, v, known)
}

// checkVersions returns ErrShardBehind for the first shard whose count is below the one the
// control database recorded: read first, so that a change committed between the two reads
// only raises the shard's.
func (s *Store) checkVersions(ctx context.Context) error {
	if _, err := s.recordedVersions(ctx); err != nil {
		return err
	}
	for i, db := range s.shards {
		known := s.versions.known[i].Load() // the recorded count, or a higher one read here
		v, err := s.version(ctx, db, i)
		if err != nil {
			return err
		}
		if err := s.shardBehind(i, v, known); err != nil {
			return err
		}
	}
	return nil
}

// counted records that shard i committed count v (or a higher one), and has it recorded in
// the control database in the background (flushVersions), at most versionFlush later: a
// fence change does not wait for the control database.
func (s *Store) counted(i int, v int64) {
	s.versions.raise(i, v)
	if s.versions.flushing.CompareAndSwap(false, true) {
		go s.flushVersions()
	}
}

// flushVersions records the counts known and not yet recorded in the control database,
// versionFlush after it is started (the changes of a group of owners, one write), and again
// while changes come in meanwhile. On an error it stops: the next change starts it again.
func (s *Store) flushVersions() {
	vs := &s.versions
	for {
		time.Sleep(versionFlush)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		for i := range s.shards {
			err = cmp.Or(err, s.recordVersion(ctx, i))
		}
		cancel()
		vs.flushing.Store(false)
		pending := false
		for i := range vs.known {
			pending = pending || vs.known[i].Load() > vs.recorded[i].Load()
		}
		if err != nil || !pending || !vs.flushing.CompareAndSwap(false, true) {
			return
		}
	}
}

// versionFlush is how long after a fence change its count is recorded in the control
// database, with those of the changes after it.
const versionFlush = 50 * time.Millisecond

// commitCounted counts tx's change on shard i (bump: refused where the shard holds less
// than known), commits tx, and records the count in the control database (noteVersion).
func (s *Store) commitCounted(ctx context.Context, tx *sql.Tx, i int, known int64) error {
	v, err := s.bump(ctx, tx, i, known)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(i, "commit", err)
	}
	return s.noteVersion(ctx, i, v)
}

// noteVersion is counted, then records the count in the control database before it
// returns: after a claim or a finish, which other processes must see refused on a shard
// restored to before it.
func (s *Store) noteVersion(ctx context.Context, i int, v int64) error {
	s.counted(i, v)
	return s.recordVersion(ctx, i)
}

// recordVersion records in the control database the count known of shard i, if it is
// above the one recorded.
func (s *Store) recordVersion(ctx context.Context, i int) error {
	v, ids := s.versions.known[i].Load(), s.shardIDs()
	if v <= s.versions.recorded[i].Load() || ids == nil {
		return nil
	}
	upsert := `INSERT INTO rebalance_shard_versions (shard, version) VALUES ($1, $2)
		ON CONFLICT (shard) DO UPDATE SET version = max(rebalance_shard_versions.version, excluded.version) RETURNING version`
	if s.dialect == PostgreSQL {
		upsert = strings.Replace(upsert, "max(", "GREATEST(", 1)
	}
	var recorded int64
	if err := s.control.QueryRowContext(ctx, upsert, ids[i], v).Scan(&recorded); err != nil {
		return fmt.Errorf("sqlstore: control database: record the version of %s: %w", s.names[i], err)
	}
	s.versions.raise(i, recorded)
	raiseTo(&s.versions.recorded[i], recorded)
	return nil
}

// AcceptShard brings shard i, found behind its recorded changes (ErrShardBehind), up to
// what the control database holds of the migrations, and accepts it again: it records there
// the migrations finished, the newest mover tokens and, if the control database serves a
// finished placement, that placement finished, then raises the shard's count to the
// recorded one. A shard restored to before a finished migration then refuses every access
// routed by that migration's before sharder as to an owner leaving it (a process that
// still routes by it learns of the finish and goes to the after shard), as it did before
// the restore. The rows it holds of owners that left it stay, as they were at the backup,
// where no access of the finished placement reads them (the next migration's Run names
// them: delete them then). Rows written on the shard after the backup are not brought back.
//
// While a migration is under way (the control database serves a placement not finished),
// it refuses (rebalance.ErrConfig) and changes nothing: the shard may lack fences of owners
// moved since the backup, which only the shard held, and would accept their accesses.
// Restore the shard from a backup taken after its last change instead.
func (s *Store) AcceptShard(ctx context.Context, i int) error {
	db, err := s.shard(i)
	if err != nil {
		return err
	}
	if len(s.shardIDs()) != len(s.shards) {
		return fmt.Errorf("sqlstore: AcceptShard before Init: %w", rebalance.ErrConfig)
	}
	served, finished, err := s.served(ctx, s.control, -1)
	if err != nil {
		return err
	}
	if !served.IsZero() && !finished {
		return s.wrap(i, "accept the shard", fmt.Errorf("migration %q is under way: the shard may lack the fences of owners moved since its backup, which no other database holds, and would accept their accesses; restore it from a backup taken after its last change, or finish the migration first: %w", served.Migration, rebalance.ErrConfig))
	}
	var finishedIDs []string
	rows, err := s.control.QueryContext(ctx, "SELECT migration FROM rebalance_finished")
	if err == nil {
		for rows.Next() {
			var m string
			if err = rows.Scan(&m); err != nil {
				break
			}
			finishedIDs = append(finishedIDs, m)
		}
		rows.Close()
		err = cmp.Or(err, rows.Err())
	}
	if err != nil {
		return fmt.Errorf("sqlstore: control database: read the migrations finished: %w", err)
	}
	tokens := map[string]int64{}
	if rows, err = s.control.QueryContext(ctx, "SELECT migration, token FROM rebalance_claim"); err == nil {
		for rows.Next() {
			var m string
			var t int64
			if err = rows.Scan(&m, &t); err != nil {
				break
			}
			tokens[m] = t
		}
		rows.Close()
		err = cmp.Or(err, rows.Err())
	}
	if err != nil {
		return fmt.Errorf("sqlstore: control database: read the mover tokens issued: %w", err)
	}
	recorded, err := s.recordedVersions(ctx)
	if err != nil {
		return err
	}
	version := max(recorded[i], s.versions.known[i].Load()) // and what this process read there before

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(i, "begin", err)
	}
	defer tx.Rollback()
	exec := func(q string, args ...any) {
		if err == nil {
			_, err = tx.ExecContext(ctx, q, args...)
		}
	}
	for _, m := range finishedIDs {
		exec("INSERT INTO rebalance_finished (migration) VALUES ($1) ON CONFLICT (migration) DO NOTHING", m)
	}
	upsert := "INSERT INTO rebalance_epoch (migration, token) VALUES ($1, $2) ON CONFLICT (migration) DO UPDATE SET token = max(rebalance_epoch.token, excluded.token)"
	if s.dialect == PostgreSQL {
		upsert = strings.Replace(upsert, "max(", "GREATEST(", 1)
	}
	for m, t := range tokens {
		exec(upsert, m, t)
	}
	if !served.IsZero() {
		exec(`INSERT INTO rebalance_placement (id, migration, before_fp, after_fp, finished, in_process) VALUES (0, $1, $2, $3, 1, $4)
			ON CONFLICT (id) DO UPDATE SET migration = excluded.migration, before_fp = excluded.before_fp, after_fp = excluded.after_fp,
			finished = 1, in_process = excluded.in_process`, served.Migration, int64(served.Before), int64(served.After), flag(served.InProcess))
	}
	exec("UPDATE rebalance_version SET version = $1 WHERE id = 0 AND version < $1", version)
	if err != nil {
		return s.wrap(i, "bring the shard up to the control database", err)
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(i, "commit", err)
	}
	return s.noteVersion(ctx, i, version)
}
