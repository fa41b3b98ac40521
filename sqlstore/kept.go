package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/shardkit/shard/rebalance"
)

// The window's sums of old copies (rebalance.SumKeeper), kept in the control database in
// the table rebalance_kept (migration, owner, row_count, digest) until the owner is marked
// done: there, not on the shard, so that keeping them in the window takes no turn to write
// behind a deletion of other owners on that shard (on SQLite that lengthened the windows'
// p99 by a fifth to a half). A row holds the old copy's sums as the last window found them,
// the window that committed the owner if any, or, once its deletion in chunks began, the
// rows left of it and an empty digest; a Run that resumes its deletion compares the old copy
// with them first. To let a Run delete an old copy that no longer matches (a write went
// around its fence, and the new shard holds what should stay), delete the owner's row by
// hand once the difference is settled. An in-process rebalance.Migration keeps there the
// sum of the old copy it compared with the new one (KeepOldSum), and DeleteChecked deletes
// the old copy only while it still has that sum, then forgets it.

// KeepSums records the window's sums of owners; see rebalance.SumKeeper. The owners' old
// shard is checked by the window's own steps, the token here.
func (s *Store) KeepSums(ctx context.Context, migration string, token uint64, owners []string, shard int, sums []rebalance.Sum) error {
	if len(sums) != len(owners) {
		return fmt.Errorf("sqlstore: keep %d sums for %d owners: %w", len(sums), len(owners), rebalance.ErrConfig)
	}
	if _, err := s.shard(shard); err != nil {
		return err
	}
	if s.dialect == PostgreSQL {
		// One round trip, in the window: rebalance_keep_sums checks the token as checkToken.
		if token > math.MaxInt64 {
			return fmt.Errorf("sqlstore: control database: keep the sums: token %d above %d: %w", token, int64(math.MaxInt64), rebalance.ErrConfig)
		}
		counts, digests := make([]int64, len(sums)), make([]string, len(sums))
		for i, sum := range sums {
			counts[i], digests[i] = sum.Rows, sum.Digest
		}
		var newest int64
		if err := s.control.QueryRowContext(ctx, "SELECT rebalance_keep_sums($1, $2, $3, $4, $5, $6, $7)",
			epochNS, lockKey(migration), migration, int64(token), owners, counts, digests).Scan(&newest); err != nil {
			return fmt.Errorf("sqlstore: control database: keep the sums of %d owners: %w", len(owners), err)
		}
		if newest > int64(token) {
			return &rebalance.FenceError{Shard: -1, Migration: migration, Token: token, Newest: uint64(newest)}
		}
		return nil
	}
	return s.controlTx(ctx, migration, token, func(tx *sql.Tx) error {
		for first := 0; first < len(owners); first += 500 {
			last := min(first+500, len(owners))
			var b strings.Builder
			b.WriteString("INSERT INTO rebalance_kept (migration, owner, row_count, digest) VALUES ")
			var args []any
			for i := first; i < last; i++ {
				if i > first {
					b.WriteString(", ")
				}
				b.WriteString("(" + s.placeholders(len(args)+1, 4) + ")")
				args = append(args, migration, owners[i], sums[i].Rows, sums[i].Digest)
			}
			b.WriteString(" ON CONFLICT (migration, owner) DO UPDATE SET row_count = excluded.row_count, digest = excluded.digest")
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				return fmt.Errorf("sqlstore: control database: keep the sums of %d owners: %w", last-first, err)
			}
		}
		return nil
	})
}

// controlTx runs fn in a transaction on the control database that refuses a stale token.
func (s *Store) controlTx(ctx context.Context, migration string, token uint64, fn func(*sql.Tx) error) error {
	release, err := s.writeTurn(ctx, -1)
	if err != nil {
		return err
	}
	defer release()
	tx, err := s.control.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: control database: begin: %w", err)
	}
	defer tx.Rollback()
	if err := s.checkToken(ctx, tx, migration, token, -1, tokenShared); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: control database: commit: %w", err)
	}
	return nil
}

// KeptSums returns the sums KeepSums kept of owners on shard; see rebalance.SumKeeper.
func (s *Store) KeptSums(ctx context.Context, migration string, owners []string, shard int) ([]rebalance.Sum, []bool, error) {
	if _, err := s.shard(shard); err != nil {
		return nil, nil, err
	}
	kept := map[string]rebalance.Sum{}
	for batch := range slices.Chunk(owners, 500) {
		q := "SELECT owner, row_count, digest FROM rebalance_kept WHERE migration = " + s.placeholders(1, 1) +
			" AND owner IN (" + s.placeholders(2, len(batch)) + ")"
		if err := readKept(ctx, s.control, q, append([]any{migration}, toAny(batch)...), kept); err != nil {
			return nil, nil, fmt.Errorf("sqlstore: control database: read the kept sums: %w", err)
		}
	}
	sums, found := make([]rebalance.Sum, len(owners)), make([]bool, len(owners))
	for i, o := range owners {
		sums[i], found[i] = kept[o]
	}
	return sums, found, nil
}

func readKept(ctx context.Context, db querier, q string, args []any, kept map[string]rebalance.Sum) error {
	rs, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var o string
		var sum rebalance.Sum
		if err := rs.Scan(&o, &sum.Rows, &sum.Digest); err != nil {
			return err
		}
		kept[o] = sum
	}
	return rs.Err()
}

// forgetSums deletes the kept sums of owners in tx, on the control database.
func (s *Store) forgetSums(ctx context.Context, tx *sql.Tx, migration string, owners []string) error {
	for batch := range slices.Chunk(owners, 500) {
		q := "DELETE FROM rebalance_kept WHERE migration = " + s.placeholders(1, 1) + " AND owner IN (" + s.placeholders(2, len(batch)) + ")"
		if _, err := tx.ExecContext(ctx, q, append([]any{migration}, toAny(batch)...)...); err != nil {
			return fmt.Errorf("sqlstore: control database: forget the kept sums: %w", err)
		}
	}
	return nil
}

// KeepOldSum keeps the sum of owner's old copy on shard that an in-process Migration
// compared with the new copy, for DeleteChecked; see rebalance.CheckedDeleter. It takes no
// token: the in-process Migration's writes carry none.
func (s *Store) KeepOldSum(ctx context.Context, migration, owner string, shard int, sum rebalance.Sum) error {
	if _, err := s.shard(shard); err != nil {
		return err
	}
	_, err := s.control.ExecContext(ctx, `INSERT INTO rebalance_kept (migration, owner, row_count, digest) VALUES ($1, $2, $3, $4)
		ON CONFLICT (migration, owner) DO UPDATE SET row_count = excluded.row_count, digest = excluded.digest`, migration, owner, sum.Rows, sum.Digest)
	if err != nil {
		return fmt.Errorf("sqlstore: control database: keep the sum of owner %q: %w", owner, err)
	}
	return nil
}

// DeleteChecked deletes owner's old copy on shard as Delete does, if it is still what
// KeepOldSum kept of it, or empty by a deletion of its own (recorded on the shard, in table
// rebalance_deleted, until the kept sum is forgotten), and then forgets the kept sum; see
// rebalance.CheckedDeleter. The sum is read in the deletion's transaction: on SQLite under
// its write lock, on PostgreSQL at the snapshot the deletion deletes by, which fails on a row
// changed since.
func (s *Store) DeleteChecked(ctx context.Context, migration, owner string, shard int) error {
	kept, found, err := s.KeptSums(ctx, migration, []string{owner}, shard)
	if err != nil {
		return err
	}
	var check func(*sql.Tx) error
	if found[0] {
		check = func(tx *sql.Tx) error {
			if s.dialect == PostgreSQL { // read by the index, as byIndex does
				if _, err := tx.ExecContext(ctx, rangesOnlySQL); err != nil {
					return s.wrap(shard, "plan a read by index", err)
				}
			}
			// The schema too (PostgreSQL: in the sums' statement): a column added since the
			// comparison holds values the sums leave out. Read in the deletion's transaction,
			// whose write lock on SQLite an ALTER TABLE waits for.
			if err := s.sqliteSchemaAsInit(ctx, tx, shard); err != nil {
				return err
			}
			got, err := s.sumsBy(ctx, inTx(tx), []string{owner}, shard)
			if err != nil {
				return s.wrap(shard, fmt.Sprintf("sum the old copy of owner %q", owner), err)
			}
			// An old copy emptied since the comparison is this deletion's own, committed
			// before a crash kept it from forgetting the sum, only if its record is here:
			// else a script deleted the rows, and the new copy would bring them back.
			if got[0].Rows == 0 && kept[0].Rows > 0 {
				var n int
				if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM rebalance_deleted WHERE migration = $1 AND owner = $2", migration, owner).Scan(&n); err != nil {
					return s.wrap(shard, "read the deletions", err)
				}
				if n == 0 {
					got[0].Rows = -1 // differs
				}
			}
			if got[0].Rows != 0 && got[0] != kept[0] {
				have := fmt.Sprintf("its %d rows differ (in number or content) from", got[0].Rows)
				if got[0].Rows < 0 {
					have = "every row of it was deleted since the comparison, unlike"
				}
				return s.wrap(shard, fmt.Sprintf("delete the old copy of owner %q", owner),
					fmt.Errorf("%s the %d compared with the new copy before the owner was marked copied: something wrote there without the Migration's lock (a process routing through the in-process API, a script); nothing deleted: compare it with the new shard, settle the difference, then delete the owner's row of rebalance_kept (migration %.64q) in the control database: %w",
						have, kept[0].Rows, migration, rebalance.ErrCopyMismatch))
			}
			_, err = tx.ExecContext(ctx, "INSERT INTO rebalance_deleted (migration, owner) VALUES ($1, $2) ON CONFLICT (migration, owner) DO NOTHING", migration, owner)
			return s.wrap(shard, "record the deletion", err)
		}
	}
	if err := s.deleteOld(ctx, owner, shard, check); err != nil {
		return err
	}
	if !found[0] {
		return nil
	}
	if _, err := s.control.ExecContext(ctx, "DELETE FROM rebalance_kept WHERE migration = $1 AND owner = $2", migration, owner); err != nil {
		return fmt.Errorf("sqlstore: control database: forget the kept sum of owner %q: %w", owner, err)
	}
	// Only once the sum is forgotten: while it is kept, the record tells the deletion's
	// own emptied copy from a script's.
	_, err = s.shards[shard].ExecContext(ctx, "DELETE FROM rebalance_deleted WHERE migration = $1 AND owner = $2", migration, owner)
	return s.wrap(shard, fmt.Sprintf("forget the deletion of owner %q", owner), err)
}

var _ rebalance.CheckedDeleter = (*Store)(nil)
