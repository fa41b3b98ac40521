package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/shardkit/shard/rebalance"
)

// message is one row of the messages table of the rebalancing post [004].
type message struct {
	ID, UserID, Time int64
	Message          string
	Sender           int64
}

// store implements rebalance.Store over the example's databases: an owner is a user ID in
// decimal, its rows are its messages, and the marks live in the control database.
type store struct {
	db *dbs
	// crash, if set, ends the process in the middle of a move: see crasher.
	crash *crasher
	// copied counts the messages Copy has written, for the copy rate (capacity.go).
	copied atomic.Int64
}

func userID(owner string) (int64, error) {
	id, err := strconv.ParseInt(owner, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("owner %q is not a user ID: %w", owner, err)
	}
	return id, nil
}

// Copy replaces the user's messages on shard to with those on shard from, in one transaction
// on to, so a crash leaves either the old rows or the complete copy. Errors name the shard.
func (s *store) Copy(ctx context.Context, owner string, from, to int) error {
	id, err := userID(owner)
	if err != nil {
		return err
	}
	msgs, err := readMessages(ctx, s.db.shards[from], id)
	if err != nil {
		return s.db.shard(from, err)
	}
	s.crash.at(pointCopy, "user "+owner)
	if err := s.replace(ctx, to, id, msgs); err != nil {
		return s.db.shard(to, err)
	}
	s.crash.at(pointCopied, "user "+owner)
	s.copied.Add(int64(len(msgs)))
	return nil
}

func (s *store) replace(ctx context.Context, shard int, user int64, msgs []message) error {
	tx, err := s.db.shards[shard].BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	res, err := tx.ExecContext(ctx, "DELETE FROM messages WHERE user_id = $1", user)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 && len(msgs) == 0 {
		// The source may be gone because the user moved meanwhile: keep what is here.
		return cmp.Or(err, fmt.Errorf("no message of user %d on the source, %d here: nothing changed: %w", user, n, rebalance.ErrSourceEmpty))
	}
	if err := insertMessages(ctx, tx, msgs); err != nil {
		return err
	}
	return tx.Commit()
}

// Count counts the user's messages on shard, which the Migration compares before deleting.
func (s *store) Count(ctx context.Context, owner string, shard int) (int64, error) {
	id, err := userID(owner)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.db.shards[shard].QueryRowContext(ctx, "SELECT COUNT(*) FROM messages WHERE user_id = $1", id).Scan(&n)
	return n, s.db.shard(shard, err)
}

// Delete removes the user's messages from shard.
func (s *store) Delete(ctx context.Context, owner string, shard int) error {
	id, err := userID(owner)
	if err != nil {
		return err
	}
	if _, err = s.db.shards[shard].ExecContext(ctx, "DELETE FROM messages WHERE user_id = $1", id); err != nil {
		return s.db.shard(shard, err)
	}
	s.crash.at(pointDeleted, "user "+owner)
	return nil
}

// Mark reads the user's mark; no row means Unmoved.
func (s *store) Mark(ctx context.Context, migration, owner string) (rebalance.Mark, error) {
	var m int
	err := s.db.control.QueryRowContext(ctx,
		"SELECT mark FROM rebalance_marks WHERE migration = $1 AND owner = $2", migration, owner).Scan(&m)
	if errors.Is(err, sql.ErrNoRows) {
		return rebalance.Unmoved, nil
	}
	return rebalance.Mark(m), err
}

// SetMark upserts the user's mark; the statement commits before it returns.
func (s *store) SetMark(ctx context.Context, migration, owner string, m rebalance.Mark) error {
	_, err := s.db.control.ExecContext(ctx,
		`INSERT INTO rebalance_marks (migration, owner, mark) VALUES ($1, $2, $3)
		 ON CONFLICT (migration, owner) DO UPDATE SET mark = excluded.mark`, migration, owner, int(m))
	if err == nil && m == rebalance.Copied {
		s.crash.at(pointMarked, "user "+owner)
	}
	return err
}

func readMessages(ctx context.Context, db *sql.DB, user int64) ([]message, error) {
	rows, err := db.QueryContext(ctx,
		"SELECT id, user_id, time, message, sender FROM messages WHERE user_id = $1 ORDER BY id", user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []message
	for rows.Next() {
		var m message
		if err := rows.Scan(&m.ID, &m.UserID, &m.Time, &m.Message, &m.Sender); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertMessages inserts msgs in statements of up to 100 rows (500 parameters: below
// SQLite's and PostgreSQL's limits).
func insertMessages(ctx context.Context, db execer, msgs []message) error {
	for len(msgs) > 0 {
		batch := msgs[:min(len(msgs), 100)]
		msgs = msgs[len(batch):]
		var q strings.Builder
		q.WriteString("INSERT INTO messages (id, user_id, time, message, sender) VALUES ")
		args := make([]any, 0, 5*len(batch))
		for i, m := range batch {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d)", 5*i+1, 5*i+2, 5*i+3, 5*i+4, 5*i+5)
			args = append(args, m.ID, m.UserID, m.Time, m.Message, m.Sender)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// Crash points of -crash-point: the four a move passes, in order, and one of a write.
const (
	pointCopy    = "copy"    // the old rows are read, nothing written yet
	pointCopied  = "copied"  // the copy is committed, the user is not marked
	pointMarked  = "marked"  // the user is marked Copied, its old copy remains
	pointDeleted = "deleted" // the old copy is deleted, the user is not marked Done
	pointWritten = "written" // a message is committed on its shard, not yet in the ledger
)

// crasher kills the process with SIGKILL the (after+1)th time it reaches point: no cleanup,
// no deferred calls, other goroutines cut wherever they are (writers between a shard insert
// and its ledger update included), as a kill -9 or a power cut of the process would.
type crasher struct {
	after int64
	point string
	n     atomic.Int64
}

func (c *crasher) at(point, what string) {
	if c == nil || point != c.point {
		return
	}
	if n := c.n.Add(1); n == c.after+1 {
		p, err := os.FindProcess(os.Getpid())
		fmt.Fprintf(os.Stderr, "\nkilling the process at crash point %q, time %d (%s); run again to resume\n", point, n, what)
		if err == nil {
			err = p.Kill() // SIGKILL on Unix; the other goroutines run on until it lands
		}
		if err != nil {
			os.Exit(3)
		}
		select {} // until the signal lands
	}
}
