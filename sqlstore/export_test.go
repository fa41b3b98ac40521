package sqlstore

import (
	"context"
	"strings"
)

// AdvisoryKeys returns the advisory lock keys a fence change of owner takes on PostgreSQL
// (namespace and key), and those of migration's token lock: tests hold them by hand.
func (s *Store) AdvisoryKeys(owner, migration string) (ns, key, epoch, mkey int32) {
	return fenceNS, lockKey(owner), epochNS, lockKey(migration)
}

// CopyPlainly makes s copy chunks by reading rows into Go and writing them back by
// multi-row INSERTs, even where it would ATTACH (SQLite) or COPY (PostgreSQL), or not:
// tests of both paths.
func (s *Store) CopyPlainly(on bool) { s.plainCopies = on }

// OnCopyStep makes Copy call f in its transaction: "held" before it deletes the owner's rows
// on its destination, "copied" after it inserted the copy.
func (s *Store) OnCopyStep(f func(step, owner string)) { s.copyStep = f }

// AttachFile sets the database file that a copy from SQLite shard i attaches ("" for none),
// as if found there, and returns the one it held.
func (s *Store) AttachFile(i int, file string) string {
	was, _ := s.files.Load(i)
	s.files.Store(i, file)
	w, _ := was.(string)
	return w
}

// RangeStatements returns the statements, with their arguments, that read owners' rows
// up to limit for a copy (CopyChunk by ranges, and whole, the owners with no cursor yet)
// and delete them (DeleteChunk) in the Store's table t.
func (s *Store) RangeStatements(t int, owners []string, limit int) (read, whole, del string, readArgs, wholeArgs, delArgs []any, err error) {
	r, w := &query{sqlite: s.dialect == SQLite}, &query{sqlite: s.dialect == SQLite}
	all, cols := identity(len(owners)), strings.Join(s.tables[t].Columns, ", ")
	if err := r.arms(s.tables[t], "", cols, owners, all, make([]string, len(owners)), limit); err != nil {
		return "", "", "", nil, nil, nil, err
	}
	if err := w.whole(s.tables[t], cols, owners, all, limit); err != nil {
		return "", "", "", nil, nil, nil, err
	}
	d, err := s.deleteKeys(s.tables[t], owners, limit, s.exactDelete[t].Load())
	if err != nil {
		return "", "", "", nil, nil, nil, err
	}
	return r.b.String(), w.b.String(), d.deletion(), r.args, w.args, d.args, nil
}

// OwnersDeletion returns DeleteOwners' statement of owners in the Store's table t, with its
// arguments.
func (s *Store) OwnersDeletion(t int, owners []string) (string, []any, error) {
	q, err := s.ownersDeletion(s.tables[t], owners)
	if err != nil {
		return "", nil, err
	}
	return q.deletion(), q.args, nil
}

// ExplainRanges returns PostgreSQL's EXPLAIN ANALYZE of q on shard, planned as the Store
// plans its range reads (rangesOnly), in a transaction it rolls back.
func (s *Store) ExplainRanges(ctx context.Context, shard int, q string, args []any) ([]string, error) {
	return s.explain(ctx, shard, rangesOnlySQL, q, args)
}

// ExplainDeletion returns PostgreSQL's EXPLAIN ANALYZE of q on shard, planned as
// DeleteOwners plans it, or as PostgreSQL would by itself, in a transaction it rolls back.
func (s *Store) ExplainDeletion(ctx context.Context, shard int, q string, args []any, asDeleteOwners bool) ([]string, error) {
	setup := "SELECT 1"
	if asDeleteOwners {
		setup = noSeqScanSQL
	}
	return s.explain(ctx, shard, setup, q, args)
}

func (s *Store) explain(ctx context.Context, shard int, setup, q string, args []any) ([]string, error) {
	tx, err := s.shards[shard].BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, setup); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE) "+q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		plan = append(plan, line)
	}
	return plan, rows.Err()
}

// HoldTurn takes s's turn to write on SQLite shard i (see writeTurn) and returns what ends it.
func (s *Store) HoldTurn(ctx context.Context, i int) (func(), error) { return s.writeTurn(ctx, i) }

// RowHash is the hash Sums gives a row's values on SQLite.
func RowHash(row []any) uint64 { return rowHash(row) }

// SetChunkBytes sets what a chunk read into memory may hold (see chunkBytes).
func (s *Store) SetChunkBytes(n int) { s.chunkBytes = n }

// OnReplayRound makes each round of s's Replays call f with the bytes of rows it read.
func (s *Store) OnReplayRound(f func(bytes int)) { s.replayRound = f }

// VersionRefresh is how long an access trusts the counts of changes it read from the control
// database before it reads them again in the background.
const VersionRefresh = versionRefresh

// VersionStale is how old those counts may be before an access reads them first.
const VersionStale = versionStale
