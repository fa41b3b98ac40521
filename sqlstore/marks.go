package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shardkit/shard/rebalance"
)

// Mark returns owner's mark in migration, Unmoved if it has none.
func (s *Store) Mark(ctx context.Context, migration, owner string) (rebalance.Mark, error) {
	var m int64
	err := s.control.QueryRowContext(ctx,
		"SELECT mark FROM rebalance_marks WHERE migration = $1 AND owner = $2", migration, owner).Scan(&m)
	if errors.Is(err, sql.ErrNoRows) {
		return rebalance.Unmoved, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: control database: read mark of owner %q: %w", owner, err)
	}
	return rebalance.Mark(m), nil
}

// SetMark records owner's mark in migration (never lowering it); for the in-process
// rebalance.Migration, which carries no token.
func (s *Store) SetMark(ctx context.Context, migration, owner string, mark rebalance.Mark) error {
	_, err := s.control.ExecContext(ctx, s.upsertMarks(1, mark), migration, owner)
	if err != nil {
		return fmt.Errorf("sqlstore: control database: mark owner %q %v: %w", owner, mark, err)
	}
	return nil
}

// markArgs are the arguments of upsertMarks.
func markArgs(migration string, owners []string) []any {
	args := make([]any, 0, 2*len(owners))
	for _, o := range owners {
		args = append(args, migration, o)
	}
	return args
}

// upsertMarks is the statement that sets n owners to mark: its arguments are markArgs.
func (s *Store) upsertMarks(n int, mark rebalance.Mark) string {
	var b strings.Builder
	b.WriteString("INSERT INTO rebalance_marks (migration, owner, mark) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%s, %d)", s.placeholders(2*i+1, 2), mark)
	}
	greatest := "max"
	if s.dialect == PostgreSQL {
		greatest = "GREATEST"
	}
	fmt.Fprintf(&b, " ON CONFLICT (migration, owner) DO UPDATE SET mark = %s(rebalance_marks.mark, excluded.mark)", greatest)
	return b.String()
}

// Marks returns the marks of owners in migration, a statement per 500 owners.
func (s *Store) Marks(ctx context.Context, migration string, owners []string) ([]rebalance.Mark, error) {
	out := make([]rebalance.Mark, len(owners))
	at := make(map[string][]int, len(owners))
	for i, o := range owners {
		at[o] = append(at[o], i)
	}
	for batch := range slices.Chunk(owners, 500) {
		// A lookup of each owner in the primary key, whatever the statistics say: "migration =
		// $1 AND owner IN (...)", planned from statistics older than the migration's marks,
		// read all of them and compared each with every owner of the batch (at 25,000 marks,
		// a third of a second for a batch).
		var q strings.Builder
		q.WriteString("SELECT rebalance_o.column1, (SELECT mark FROM rebalance_marks WHERE migration = " + s.placeholders(1, 1) + " AND owner = rebalance_o.column1) FROM (VALUES ")
		for i := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(" + s.placeholders(2+i, 1) + ")")
		}
		q.WriteString(") AS rebalance_o")
		rows, err := s.control.QueryContext(ctx, q.String(), append([]any{migration}, toAny(batch)...)...)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: control database: read marks: %w", err)
		}
		for rows.Next() {
			var o string
			var m sql.NullInt64 // none: the owner has no mark
			if err := rows.Scan(&o, &m); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlstore: control database: read marks: %w", err)
			}
			for _, i := range at[o] {
				out[i] = rebalance.Mark(m.Int64)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("sqlstore: control database: read marks: %w", err)
		}
	}
	return out, nil
}

// SetMarks records mark for owners in migration in one transaction, after checking token.
func (s *Store) SetMarks(ctx context.Context, migration string, owners []string, mark rebalance.Mark, token uint64) error {
	if mark > rebalance.Done {
		return fmt.Errorf("sqlstore: set marks to %v: %w", mark, rebalance.ErrConfig)
	}
	return s.controlTx(ctx, migration, token, func(tx *sql.Tx) error {
		for batch := range slices.Chunk(owners, 1000) {
			if _, err := tx.ExecContext(ctx, s.upsertMarks(len(batch), mark), markArgs(migration, batch)...); err != nil {
				return fmt.Errorf("sqlstore: control database: mark %d owners %v: %w", len(batch), mark, err)
			}
		}
		if mark == rebalance.Done { // their old copies are deleted
			return s.forgetSums(ctx, tx, migration, owners)
		}
		return nil
	})
}
