package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/shardkit/shard/rebalance"
)

// This file keeps the finish of an in-process rebalance.Migration (rebalance.FinishRecorder):
// in rebalance_finished of the control database, with the Shared migrations finished
// there, so that a process that restarts after Finish routes by the after sharder alone
// instead of reading a new owner's missing mark as Unmoved; and on the shards whose
// placement the migration's Run claimed (rebalance.Migration claims with its placement
// too), so that the next migration's claim is accepted there, and this one's never again.

// RecordFinished records that migration is finished: on every shard that serves a placement
// of it, as Finished does, then in the control database. Recording it again changes
// nothing. No claim of a migration of that ID is granted afterwards.
func (s *Store) RecordFinished(ctx context.Context, migration string) error {
	// The control database records it whether or not a claim recorded a placement (a
	// migration that moved nothing never claimed).
	finish := func(db *sql.DB, shard int) error { // shard -1: the control database
		var known int64
		if shard >= 0 {
			known = s.versions.known[shard].Load()
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "UPDATE rebalance_placement SET finished = 1 WHERE migration = $1", migration); err != nil {
			return err
		}
		record := "INSERT INTO rebalance_finished (migration) SELECT migration FROM rebalance_placement WHERE migration = $1 ON CONFLICT (migration) DO NOTHING"
		if shard < 0 {
			record = "INSERT INTO rebalance_finished (migration) VALUES ($1) ON CONFLICT (migration) DO NOTHING"
		}
		if _, err := tx.ExecContext(ctx, record, migration); err != nil {
			return err
		}
		if shard < 0 {
			return tx.Commit()
		}
		return s.commitCounted(ctx, tx, shard, known)
	}
	what := fmt.Sprintf("record migration %.64q finished", migration)
	// A Shared migration of that ID fenced owners: the in-process Finish would skip what
	// Shared.Finish checks (owners a Run left fenced part way) and holds (new owners'
	// accesses while it lists the shards), and record the Shared placement finished.
	for i, db := range s.shards {
		var fenced bool
		err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM rebalance_fence WHERE migration = $1)", migration).Scan(&fenced)
		if err == nil && fenced {
			err = fmt.Errorf("it holds fences of the migration: a Shared migration (rebalance.NewShared) moves it; finish it with Shared.Finish, which checks what this Finish cannot: %w", rebalance.ErrConfig)
		}
		if err != nil {
			return s.wrap(i, what, err)
		}
	}
	if err := s.checkVersions(ctx); err != nil {
		return err
	}
	for i, db := range s.shards {
		if err := finish(db, i); err != nil {
			return s.wrap(i, what, err)
		}
	}
	return s.where(-1, what, finish(s.control, -1))
}

// IsFinished reports whether the control database records migration finished, by
// RecordFinished or by the Finish of a Shared migration of that ID.
func (s *Store) IsFinished(ctx context.Context, migration string) (bool, error) {
	var n int
	err := s.control.QueryRowContext(ctx, "SELECT COUNT(*) FROM rebalance_finished WHERE migration = $1", migration).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("sqlstore: control database: read whether migration %.64q is finished: %w", migration, err)
	}
	return n > 0, nil
}

var _ rebalance.FinishRecorder = (*Store)(nil)
