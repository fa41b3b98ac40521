package sqlstore

import (
	"context"
	"fmt"

	"github.com/shardkit/shard/rebalance"
)

// This file keeps the finish of an in-process rebalance.Migration (rebalance.FinishRecorder):
// in rebalance_finished of the control database, with the Shared migrations finished
// there, so that a process that restarts after Finish routes by the after sharder alone
// instead of reading a new owner's missing mark as Unmoved. The shards need no record of
// it: an in-process Migration claims no placement on them.

// RecordFinished records in the control database that migration is finished; recording it
// again changes nothing. No claim of a Shared migration of that ID is granted afterwards.
func (s *Store) RecordFinished(ctx context.Context, migration string) error {
	_, err := s.control.ExecContext(ctx, "INSERT INTO rebalance_finished (migration) VALUES ($1) ON CONFLICT (migration) DO NOTHING", migration)
	if err != nil {
		return fmt.Errorf("sqlstore: control database: record migration %.64q finished: %w", migration, err)
	}
	return nil
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
