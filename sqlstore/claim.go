package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// The claim of a migration, in the control database (rebalance_claim): the election epoch
// and the mover that hold it, the token the store issued to that mover, and the end of its
// lease in milliseconds of the control database's clock. Each shard records the newest token
// (rebalance_epoch) and the placement it serves (rebalance_placement, one row).

// nowMillis is the database's clock in Unix milliseconds: one clock for every process that
// compares leases.
func (s *Store) nowMillis() string {
	if s.dialect == PostgreSQL {
		return "(extract(epoch from clock_timestamp()) * 1000)::bigint"
	}
	return "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
}

// Claim takes migration for c.Mover and returns the token the store issues it; see
// rebalance.MoverLock. The control database decides, in one transaction that holds the
// claim's row: an older election epoch is refused, a live lease of another mover of the same
// epoch is refused, and otherwise the token is one more than the last one issued, or than
// the newest a shard recorded if that is newer (a control database restored from an older
// backup: an in-process claim is refused then, ErrControlBehind, since its marks route). Then every
// shard records the token (waiting for the steps of older tokens under way, and refusing if
// it has seen a newer one) and c.Placement, which it may follow (Placement.Accepts).
func (s *Store) Claim(ctx context.Context, c rebalance.Claim) (uint64, error) {
	if c.Election > math.MaxInt64 {
		return 0, fmt.Errorf("sqlstore: claim with election epoch %d above %d: %w", c.Election, int64(math.MaxInt64), rebalance.ErrConfig)
	}
	if err := s.checkVersions(ctx); err != nil {
		return 0, err
	}
	newest, at, err := s.newestOnShards(ctx, c.Migration)
	if err != nil {
		return 0, err
	}
	token, err := s.claimControl(ctx, c, newest, at)
	if err != nil {
		return 0, err
	}
	for i := range s.shards {
		if err := s.claimShard(ctx, i, c, token); err != nil {
			return 0, err
		}
	}
	return token, nil
}

// ErrControlBehind reports a control database that has issued fewer mover tokens for an
// in-process migration than a shard has recorded: it is older than the shards (restored from
// a backup, or rolled back), and its marks, by which an in-process Migration routes, no
// longer say where the owners are: a moved owner would be routed to the shard its rows
// left. It wraps rebalance.ErrConfig.
var ErrControlBehind = fmt.Errorf("control database behind the shards (%w)", rebalance.ErrConfig)

// newestOnShards returns the newest mover token of migration that a shard recorded, and
// the first shard that holds it (-1 if none holds one).
func (s *Store) newestOnShards(ctx context.Context, migration string) (newest int64, at int, err error) {
	at = -1
	for i, db := range s.shards {
		var tok int64
		if err := db.QueryRowContext(ctx, "SELECT COALESCE((SELECT token FROM rebalance_epoch WHERE migration = $1), 0)", migration).Scan(&tok); err != nil {
			return 0, 0, s.wrap(i, "read the newest mover token", err)
		}
		if tok > newest {
			newest, at = tok, i
		}
	}
	return newest, at, nil
}

// controlBehind is the error of a control database that issued tokens of migration up to
// issued, read after shard at was read to hold newest (nil if it issued that many): tokens
// only grow, and a shard holds only tokens the control database issued before.
func controlBehind(migration string, at int, newest, issued int64) error {
	if newest <= issued {
		return nil
	}
	return fmt.Errorf("sqlstore: shard %d recorded mover token %d of migration %.64q, and the control database has issued tokens only up to %d: it is older than the shards (restored from a backup, or rolled back), so its marks no longer say where the owners are; nothing was changed: restore it to its latest state, or, if that is lost, set the mark of every owner of the migration whose rows are on its after shard alone to 2 (done) in rebalance_marks, then the token of its row of rebalance_claim to %d: %w",
		at, newest, migration, issued, newest, ErrControlBehind)
}

// issuedTokens returns the last mover token the control database issued for migration.
func (s *Store) issuedTokens(ctx context.Context, q querier, migration string) (int64, error) {
	var issued int64
	err := q.QueryRowContext(ctx, "SELECT COALESCE((SELECT token FROM rebalance_claim WHERE migration = $1), 0)", migration).Scan(&issued)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: control database: read the tokens issued for migration %.64q: %w", migration, err)
	}
	return issued, nil
}

// claimControl issues the claim's token, refusing it where the control database is behind
// the shards, which were read first to hold newest (shard at).
func (s *Store) claimControl(ctx context.Context, c rebalance.Claim, newest int64, at int) (uint64, error) {
	fail := func(what string, err error) error {
		return fmt.Errorf("sqlstore: control database: %s: %w", what, err)
	}
	tx, err := s.control.BeginTx(ctx, nil)
	if err != nil {
		return 0, fail("begin", err)
	}
	defer tx.Rollback()
	// A write first, which takes SQLite's write lock; then the row, locked on PostgreSQL.
	if _, err := tx.ExecContext(ctx, `INSERT INTO rebalance_claim (migration, election, token, mover, expires)
		VALUES ($1, 0, 0, '', 0) ON CONFLICT (migration) DO NOTHING`, c.Migration); err != nil {
		return 0, fail("claim", err)
	}
	lock := ""
	if s.dialect == PostgreSQL {
		lock = " FOR UPDATE"
	}
	var election, token, expires, now int64
	var mover string
	err = tx.QueryRowContext(ctx, "SELECT election, token, mover, expires, "+s.nowMillis()+
		" FROM rebalance_claim WHERE migration = $1"+lock, c.Migration).Scan(&election, &token, &mover, &expires, &now)
	if err != nil {
		return 0, fail("read claim", err)
	}
	if c.Placement.InProcess {
		if err := controlBehind(c.Migration, at, newest, token); err != nil {
			return 0, err
		}
	}
	switch {
	case election > int64(c.Election):
		return 0, &rebalance.FenceError{Shard: -1, Migration: c.Migration, Token: c.Election, Newest: uint64(election)}
	case election == int64(c.Election) && mover != c.Mover && mover != "" && expires > now:
		return 0, &rebalance.MoverError{Migration: c.Migration, Holder: mover, Election: uint64(election),
			Left: time.Duration(expires-now) * time.Millisecond}
	}
	if c.Process != "" {
		if err := s.bindIn(ctx, tx, c.Migration, c.Process); err != nil {
			return 0, err
		}
	}
	if err := s.sameTables(ctx, tx, c.Migration); err != nil {
		return 0, err
	}
	// The control database decides the placement first, so that two movers of different
	// migrations started at once cannot each claim a part of the shards.
	if err := s.follow(ctx, tx, -1, c.Placement); err != nil {
		return 0, err
	}
	// A Shared mover routes by the fences on the shards and goes on past a control database
	// behind them, with a token newer than any issued before: one issued again would let a
	// mover of the lost history write beside it.
	token = max(token, newest) + 1
	if _, err := tx.ExecContext(ctx, "UPDATE rebalance_claim SET election = $1, token = $2, mover = $3, expires = "+s.nowMillis()+
		" + $4 WHERE migration = $5", int64(c.Election), token, c.Mover, c.Lease.Milliseconds(), c.Migration); err != nil {
		return 0, fail("claim", err)
	}
	// The marks' token check reads rebalance_epoch, as on the shards.
	if err := s.checkToken(ctx, tx, c.Migration, uint64(token), -1, tokenExclusive); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fail("commit claim", err)
	}
	return uint64(token), nil
}

// Bind binds process to the in-process migration; see rebalance.ProcessBinder. The control
// database decides, in one transaction that holds the migration's claim row, as Claim does.
func (s *Store) Bind(ctx context.Context, migration, process string) error {
	tx, err := s.control.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: control database: begin: %w", err)
	}
	defer tx.Rollback()
	// A write first, which takes SQLite's write lock; then the row, locked on PostgreSQL.
	if _, err := tx.ExecContext(ctx, `INSERT INTO rebalance_claim (migration, election, token, mover, expires)
		VALUES ($1, 0, 0, '', 0) ON CONFLICT (migration) DO NOTHING`, migration); err != nil {
		return fmt.Errorf("sqlstore: control database: bind process to migration %.64q: %w", migration, err)
	}
	if err := s.bindIn(ctx, tx, migration, process); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: control database: commit the binding of migration %.64q: %w", migration, err)
	}
	return nil
}

var _ rebalance.ProcessBinder = (*Store)(nil)

// bindIn binds process to migration in tx, which holds the migration's row of
// rebalance_claim (written in tx first), or returns a *rebalance.ProcessError while another
// process is bound: it routed, or its claim ended, within rebalance.ProcessWindow, or its
// claim's lease has not run out. A migration recorded finished binds nobody.
func (s *Store) bindIn(ctx context.Context, tx *sql.Tx, migration, process string) error {
	fail := func(err error) error {
		return fmt.Errorf("sqlstore: control database: bind process to migration %.64q: %w", migration, err)
	}
	lock := ""
	if s.dialect == PostgreSQL {
		lock = " FOR UPDATE"
	}
	var bound string
	var routed, expires, now int64
	var finished int
	err := tx.QueryRowContext(ctx, "SELECT process, routed, expires, "+s.nowMillis()+
		", (SELECT COUNT(*) FROM rebalance_finished WHERE migration = $1) FROM rebalance_claim WHERE migration = $1"+lock,
		migration).Scan(&bound, &routed, &expires, &now, &finished)
	if err != nil {
		return fail(err)
	}
	if finished > 0 {
		return nil
	}
	until := max(routed+rebalance.ProcessWindow.Milliseconds(), expires)
	if bound != "" && bound != process && until > now {
		return &rebalance.ProcessError{Migration: migration, Process: bound, Wanted: process,
			Moving: expires > now, Left: time.Duration(until-now) * time.Millisecond}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE rebalance_claim SET process = $1, routed = $2 WHERE migration = $3", process, now, migration); err != nil {
		return fail(err)
	}
	return nil
}

// sameTables records, in tx on the control database, the tables the Store moves as those of
// migration, at its first claim, and refuses a Store that moves others (rebalance.ErrConfig).
// A migration moves one set of tables from its first Run to its Finish: a table added on the
// way would be deleted with the old copies of the owners committed before (whose deletion a
// later Run resumes) without ever having been copied, and one dropped would be left on their
// old shards, where nothing reads it.
func (s *Store) sameTables(ctx context.Context, tx *sql.Tx, migration string) error {
	names := make([]string, len(s.tables))
	for i, t := range s.tables {
		names[i] = t.Table
	}
	mine := strings.ToLower(strings.Join(names, ",")) // as unquoted names fold
	if _, err := tx.ExecContext(ctx, "INSERT INTO rebalance_tables (migration, tables) VALUES ($1, $2) ON CONFLICT (migration) DO NOTHING", migration, mine); err != nil {
		return fmt.Errorf("sqlstore: control database: record the tables moved: %w", err)
	}
	var first string
	if err := tx.QueryRowContext(ctx, "SELECT tables FROM rebalance_tables WHERE migration = $1", migration).Scan(&first); err != nil {
		return fmt.Errorf("sqlstore: control database: read the tables moved: %w", err)
	}
	if first != mine {
		return fmt.Errorf("sqlstore: migration %q moves tables %s, and this Store moves %s: a migration moves the same tables from its first Run to its Finish (a table added would be deleted with old copies without having been copied, one dropped left behind on old shards): %w",
			migration, excerpt(first), excerpt(mine), rebalance.ErrConfig)
	}
	return nil
}

// checkTables is sameTables in a transaction of its own: Finish checks the owners of the
// tables the migration moved, no others.
func (s *Store) checkTables(ctx context.Context, migration string) error {
	tx, err := s.control.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: control database: begin: %w", err)
	}
	defer tx.Rollback()
	if err := s.sameTables(ctx, tx, migration); err != nil {
		return err
	}
	return tx.Commit()
}

// claimShard records token, and c.Placement if not zero, on shard i.
func (s *Store) claimShard(ctx context.Context, i int, c rebalance.Claim, token uint64) error {
	known := s.versions.known[i].Load()
	tx, err := s.begin(ctx, i)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.checkToken(ctx, tx, c.Migration, token, i, tokenExclusive); err != nil {
		return err
	}
	if err := s.follow(ctx, tx, i, c.Placement); err != nil {
		return err
	}
	return s.commitCounted(ctx, tx, i, known)
}

// follow records p, if not zero, as the placement shard i (-1: the control database) serves,
// in tx, if what it serves accepts it (Placement.Accepts), or returns a *PlacementError.
func (s *Store) follow(ctx context.Context, tx *sql.Tx, i int, p rebalance.Placement) error {
	if p.IsZero() {
		return nil
	}
	if s.dialect == PostgreSQL {
		// Claims of two migrations lock different claim rows: this lock makes their reads and
		// writes of the placement one after the other (SQLite's write lock already does).
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1, 2)", epochNS); err != nil {
			return s.where(i, "lock the placement served", err)
		}
		// An in-process mover's claim on a shard also takes the lock every Leaving access
		// holds shared, and so waits for those that found the shard serving what it served
		// before: that mover sets no fence that would wait for them, and a Shared access of
		// its migration's ID that began before its claim would write on an owner's old shard
		// after its copy. (A Shared mover's fences wait for them.)
		if i >= 0 && p.InProcess {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1, 0)", placementNS); err != nil {
				return s.where(i, "lock the placement served", err)
			}
		}
	}
	var done int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM rebalance_finished WHERE migration = $1", p.Migration).Scan(&done); err != nil {
		return s.where(i, "read the migrations finished", err)
	}
	if done > 0 {
		return s.where(i, "claim", fmt.Errorf("migration %q was finished here: its mover may not move owners again (a new migration moves them on): %w", p.Migration, rebalance.ErrFinished))
	}
	served, finished, err := s.served(ctx, tx, i)
	if err != nil {
		return err
	}
	if !p.Accepts(served, finished) {
		return &rebalance.PlacementError{Shard: i, Served: served, Wanted: p, Finished: finished, Claim: true}
	}
	if served == p {
		return nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO rebalance_placement (id, migration, before_fp, after_fp, finished, in_process)
		VALUES (0, $1, $2, $3, 0, $4) ON CONFLICT (id) DO UPDATE SET migration = excluded.migration,
		before_fp = excluded.before_fp, after_fp = excluded.after_fp, finished = 0, in_process = excluded.in_process`,
		p.Migration, int64(p.Before), int64(p.After), flag(p.InProcess))
	return s.where(i, "record the placement served", err)
}

// where names shard i, or the control database for -1, in err, if not nil.
func (s *Store) where(i int, what string, err error) error {
	if err == nil || i >= 0 {
		return s.wrap(max(i, 0), what, err)
	}
	return fmt.Errorf("sqlstore: control database: %s: %w", what, err)
}

// served reads the placement shard i (-1: the control database) serves: zero if none is
// recorded.
func (s *Store) served(ctx context.Context, tx querier, i int) (rebalance.Placement, bool, error) {
	var p rebalance.Placement
	var before, after, finished, inProcess int64
	err := tx.QueryRowContext(ctx, "SELECT migration, before_fp, after_fp, finished, in_process FROM rebalance_placement WHERE id = 0").
		Scan(&p.Migration, &before, &after, &finished, &inProcess)
	if errors.Is(err, sql.ErrNoRows) {
		return rebalance.Placement{}, false, nil
	}
	if err != nil {
		return p, false, s.where(i, "read the placement served", err)
	}
	p.Before, p.After, p.InProcess = uint64(before), uint64(after), inProcess == 1
	return p, finished == 1, nil // above 1: being finished, not yet
}

// refusesPlacement is a condition true of a shard that does not accept an access routed by
// the placement in parameters pm, pb, pa, lv (Leaving: 1 or 0), ar (Arriving: 1 or 0) and
// ip (InProcess: 1 or 0) (rebalance.Placement.Accepts), or that routed by a migration the shard recorded finished
// before the one it serves (rebalance_finished): its before sharder may be the after sharder
// of the one served (a migration back, 2 -> 3 -> 2 -> 3), but it is no next migration. An
// Arriving access is accepted only where the shard serves its very placement finished, so
// also refused by a shard that serves none; the next migration's accesses accepted before
// its mover claims are the others, routed by its before sharder.
const refusesPlacement = `(EXISTS (SELECT 1 FROM rebalance_placement WHERE NOT (
		migration = %[1]s AND before_fp = %[2]s AND after_fp = %[3]s AND NOT (finished = 1 AND %[4]s = 1) AND (finished = 1 OR %[5]s = 0 AND in_process = %[6]s)
		OR %[5]s = 0 AND finished = 1 AND migration <> %[1]s AND after_fp = %[2]s AND NOT EXISTS (SELECT 1 FROM rebalance_finished f WHERE f.migration = %[1]s)))
	OR %[5]s = 1 AND NOT EXISTS (SELECT 1 FROM rebalance_placement))`

// CheckPlacement returns a *rebalance.PlacementError for the first shard that refuses an
// access routed by p (by the rule of every Access), an error wrapping ErrShardBehind for a
// shard older than its recorded changes, one wrapping ErrControlBehind if a shard recorded a
// newer mover token of p's migration than the control database issued, or nil; see
// rebalance.PlacementChecker.
func (s *Store) CheckPlacement(ctx context.Context, p rebalance.Placement) error {
	refuses := "SELECT CASE WHEN " + fmt.Sprintf(refusesPlacement, "$1", "$2", "$3", "$4", "$5", "$6") +
		" THEN 1 ELSE 0 END, COALESCE((SELECT token FROM rebalance_epoch WHERE migration = $1), 0), " + readVersion
	recorded, err := s.recordedVersions(ctx)
	if err != nil {
		return err
	}
	var newest int64
	at := -1
	for i, db := range s.shards {
		var refused int
		var tok, version int64
		if err := db.QueryRowContext(ctx, refuses, p.Migration, int64(p.Before), int64(p.After), flag(p.Leaving), flag(p.Arriving), flag(p.InProcess)).Scan(&refused, &tok, &version); err != nil {
			return s.wrap(i, "read the placement served", err)
		}
		if err := s.shardBehind(i, version, recorded[i]); err != nil {
			return err
		}
		if tok > newest {
			newest, at = tok, i
		}
		if refused > 0 {
			served, finished, err := s.served(ctx, db, i)
			if err != nil {
				return err
			}
			return &rebalance.PlacementError{Shard: i, Served: served, Wanted: p, Finished: finished}
		}
	}
	// An in-process Migration routes by the marks of the control database: one restored
	// from an older backup would send a moved owner back to the shard its rows left.
	issued, err := s.issuedTokens(ctx, s.control, p.Migration)
	if err != nil {
		return err
	}
	return controlBehind(p.Migration, at, newest, issued)
}

var _ rebalance.PlacementChecker = (*Store)(nil)

// Renew extends the lease of the claim of token; see rebalance.MoverLock.
func (s *Store) Renew(ctx context.Context, migration string, token uint64, lease time.Duration) error {
	res, err := s.control.ExecContext(ctx, "UPDATE rebalance_claim SET expires = "+s.nowMillis()+
		" + $1 WHERE migration = $2 AND token = $3", lease.Milliseconds(), migration, int64(token))
	if err != nil {
		return fmt.Errorf("sqlstore: control database: renew the lease of migration %q: %w", migration, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	var newest int64
	if err := s.control.QueryRowContext(ctx, "SELECT token FROM rebalance_claim WHERE migration = $1", migration).Scan(&newest); err != nil {
		return fmt.Errorf("sqlstore: control database: read the claim of migration %q: %w", migration, err)
	}
	return &rebalance.FenceError{Shard: -1, Migration: migration, Token: token, Newest: uint64(newest)}
}

// Release ends the lease of the claim of token, if it still holds the migration, having
// recorded the counts of its changes on the shards (see behind.go).
func (s *Store) Release(ctx context.Context, migration string, token uint64) error {
	// The counts of the claim's changes, recorded before its Run returns.
	var counts error
	for i := range s.shards {
		counts = cmp.Or(counts, s.recordVersion(ctx, i))
	}
	// The process bound by an in-process claim stays bound for rebalance.ProcessWindow.
	_, err := s.control.ExecContext(ctx, "UPDATE rebalance_claim SET expires = 0, routed = "+s.nowMillis()+" WHERE migration = $1 AND token = $2", migration, int64(token))
	if err != nil {
		err = fmt.Errorf("sqlstore: control database: release migration %q: %w", migration, err)
	}
	return errors.Join(counts, err)
}

// Finishing records on every shard that serves p, unfinished, that the Finish named
// finisher is looking for owners left out (finished in rebalance_placement holds
// finishingID(finisher), above 1), or that it no longer is; see rebalance.SharedStore. On
// PostgreSQL it holds the placement lock that Leaving accesses hold shared, so it waits for
// those under way; on SQLite its write waits for every write.
func (s *Store) Finishing(ctx context.Context, p rebalance.Placement, finisher uint64, on bool) error {
	id := finishingID(finisher)
	set, where := "$1", "finished <> 1"
	if !on {
		set, where = "0", "finished = $1"
	} else if err := s.checkTables(ctx, p.Migration); err != nil {
		return err
	} else if err := s.claimedAs(ctx, p); err != nil {
		return err
	} else if err := s.checkVersions(ctx); err != nil {
		return err
	}
	for i := range s.shards {
		known := s.versions.known[i].Load()
		tx, err := s.begin(ctx, i)
		if err != nil {
			return err
		}
		if s.dialect == PostgreSQL {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1, 0)", placementNS); err != nil {
				tx.Rollback()
				return s.wrap(i, "lock the placement", err)
			}
		}
		_, err = tx.ExecContext(ctx, "UPDATE rebalance_placement SET finished = "+set+" WHERE migration = $2 AND before_fp = $3 AND after_fp = $4 AND "+where,
			id, p.Migration, int64(p.Before), int64(p.After))
		if err != nil {
			tx.Rollback()
			return s.wrap(i, "record the migration being finished", err)
		}
		if err := s.commitCounted(ctx, tx, i, known); err != nil {
			tx.Rollback()
			return err
		}
	}
	return nil
}

// finishingID is the value of finished in rebalance_placement that records the Finish named
// finisher looking for owners left out: above 1 (0 is unfinished, 1 finished), and within
// the column's INTEGER on PostgreSQL (32 bits).
func finishingID(finisher uint64) int64 { return int64(finisher>>34) + 2 }

// Finished records on every shard that serves p, and in the control database, that its
// migration is finished, and adds it to the migrations finished there (rebalance_finished),
// which no claim may take again and no access route by unless it is the one served. A shard
// that records another Finish looking for owners left out than finisher (or none, where
// finisher is not 0) is refused: its listing may be out of date.
func (s *Store) Finished(ctx context.Context, p rebalance.Placement, finisher uint64) error {
	if err := s.checkTables(ctx, p.Migration); err != nil {
		return err
	}
	if err := s.claimedAs(ctx, p); err != nil {
		return err
	}
	if err := s.checkVersions(ctx); err != nil {
		return err
	}
	const served = "FROM rebalance_placement WHERE migration = $1 AND before_fp = $2 AND after_fp = $3"
	finish := func(db *sql.DB, check bool, shard int) error { // shard -1: the control database
		var known int64
		if shard >= 0 {
			known = s.versions.known[shard].Load()
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		// Where checked, the record of being finished is changed only if it is still this
		// Finish's own, by the statement that reads it; a record of another is then left.
		update, args := "UPDATE rebalance_placement SET finished = 1 WHERE migration = $1 AND before_fp = $2 AND after_fp = $3", []any{p.Migration, int64(p.Before), int64(p.After)}
		if check {
			update, args = update+" AND finished IN (1, $4)", append(args, finishingID(finisher))
		}
		if _, err := tx.ExecContext(ctx, update, args...); err != nil {
			return err
		}
		if check {
			var other int64
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) "+served+" AND finished <> 1", args[:3]...).Scan(&other); err != nil {
				return err
			}
			if other > 0 {
				return fmt.Errorf("another Finish of migration %q began, or gave up, since this one listed the owners here: run Finish again: %w", p.Migration, rebalance.ErrMoverRunning)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO rebalance_finished (migration) SELECT migration "+served+" ON CONFLICT (migration) DO NOTHING",
			p.Migration, int64(p.Before), int64(p.After)); err != nil {
			return err
		}
		if shard < 0 {
			return tx.Commit()
		}
		return s.commitCounted(ctx, tx, shard, known)
	}
	for i, db := range s.shards {
		if err := finish(db, finisher != 0, i); err != nil {
			return s.wrap(i, "record the migration finished", err)
		}
	}
	return s.where(-1, "record the migration finished", finish(s.control, false, -1))
}

// claimedAs returns a *rebalance.PlacementError if the control database serves p's
// migration with other sharders than p's: a Finish through a value made with another after
// sharder (a configuration that differs) would record nothing and return nil, and that
// value would then route by its after sharder alone.
func (s *Store) claimedAs(ctx context.Context, p rebalance.Placement) error {
	var served rebalance.Placement
	var before, after, finished, inProcess int64
	err := s.control.QueryRowContext(ctx, "SELECT migration, before_fp, after_fp, finished, in_process FROM rebalance_placement WHERE migration = $1", p.Migration).Scan(&served.Migration, &before, &after, &finished, &inProcess)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return s.where(-1, "read the placement served", err)
	}
	served.Before, served.After, served.InProcess = uint64(before), uint64(after), inProcess == 1
	if served.Before != p.Before || served.After != p.After || served.InProcess != p.InProcess && finished != 1 {
		return &rebalance.PlacementError{Shard: -1, Served: served, Wanted: p, Finished: finished == 1}
	}
	return nil
}

// step is the first statement of a mover's write of owners' rows on shard, in its
// transaction: it refuses a stale token, and owners not all fenced in one of states by
// migration there, and marks the transaction's writes the mover's (see moverWrites: commit
// it with commitMover). On PostgreSQL it holds the migration's token lock shared (a claim
// waits for it); on SQLite its first statement writes, which takes the write lock.
func (s *Store) step(ctx context.Context, tx *sql.Tx, migration string, token uint64, owners []string, shard int, states ...rebalance.FenceState) error {
	if token > math.MaxInt64 {
		return s.wrap(shard, "check mover token", fmt.Errorf("token %d above %d: %w", token, int64(math.MaxInt64), rebalance.ErrConfig))
	}
	distinct := len(slices.Compact(slices.Sorted(slices.Values(owners))))
	fenced := 0
	if s.dialect == PostgreSQL {
		st := make([]int32, len(states))
		for i, f := range states {
			st[i] = int32(f)
		}
		var got int64
		err := tx.QueryRowContext(ctx, "SELECT rebalance_step($1, $2, $3, $4, $5, $6)",
			epochNS, lockKey(migration), migration, int64(token), owners, st).Scan(&got)
		if err != nil {
			return s.wrap(shard, "check mover token and fences", err)
		}
		switch {
		case got > int64(token):
			return &rebalance.FenceError{Shard: shard, Migration: migration, Token: token, Newest: uint64(got)}
		case got == int64(token):
			return nil
		}
		fenced = int(-1 - got) // how many were fenced, when not all
	} else {
		if err := s.checkToken(ctx, tx, migration, token, shard, tokenHeld); err != nil {
			return err
		}
		if err := s.moverWrites(ctx, tx); err != nil {
			return s.wrap(shard, "mark the mover's writes", err)
		}
		var in strings.Builder
		for i := range states {
			if i > 0 {
				in.WriteString(", ")
			}
			in.WriteString(strconv.Itoa(int(states[i])))
		}
		for batch := range slices.Chunk(owners, 500) {
			var n int
			q := "SELECT COUNT(*) FROM rebalance_fence WHERE migration = ? AND state IN (" + in.String() + ") AND owner IN (" + s.placeholders(1, len(batch)) + ")"
			if err := tx.QueryRowContext(ctx, q, append([]any{migration}, toAny(batch)...)...).Scan(&n); err != nil {
				return s.wrap(shard, "check fences", err)
			}
			fenced += n
		}
		if fenced == distinct {
			return nil
		}
	}
	return s.wrap(shard, "check fences", fmt.Errorf("of %d owners, %d are fenced %v by migration %q here: a mover writes rows only of owners it fenced: %w",
		distinct, fenced, states, migration, rebalance.ErrFenced))
}
