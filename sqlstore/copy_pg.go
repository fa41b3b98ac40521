package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// On PostgreSQL through pgx, a chunk that does not pass through (copyRaw) is read into Go,
// and writeRows writes its rows with a binary COPY, which the server takes in about 0.6 the
// time of the multi-row INSERT (1000-row chunks into the messages table, measured side by
// side). A COPY cannot replace a row that is there already (a copy run again after a crash,
// or a row the replay wrote), and may not encode a value the INSERT would take (a composite,
// which the driver reads as text), so it runs under a savepoint, and on any error the
// savepoint is rolled back and the rows go through the INSERT, which replaces rows of the
// same key. What is written is the same either way, and the window compares both copies by
// content before the new shard serves.

// copyConn is what a pgx driver connection offers (github.com/jackc/pgx/v5/stdlib.Conn).
type copyConn interface{ Conn() *pgx.Conn }

// errNoCopy says a COPY was not tried: the connection is not pgx's.
var errNoCopy = errors.New("sqlstore: no COPY on this connection")

// writeRows writes rows of table s.tables[ti], of owners, in tx, which runs on conn (nil: not
// a connection of its own): by COPY where it can (see above), else by insertRows.
func (s *Store) writeRows(ctx context.Context, tx *sql.Tx, conn *sql.Conn, ti int, rows [][]any, owners []string) error {
	t := s.tables[ti]
	if len(rows) == 0 {
		return nil
	}
	if conn == nil || s.dialect != PostgreSQL || s.plainCopies || s.noCopy[ti].Load() {
		return s.insertRows(ctx, tx, t, rows, owners)
	}
	if _, err := tx.ExecContext(ctx, "SAVEPOINT rebalance_copy"); err != nil {
		return err
	}
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(copyConn)
		if !ok {
			return errNoCopy
		}
		n, err := c.Conn().CopyFrom(ctx, pgx.Identifier{t.Table}, t.Columns, pgx.CopyFromRows(rows))
		if err == nil && n != int64(len(rows)) {
			err = fmt.Errorf("COPY wrote %d rows of %d", n, len(rows))
		}
		return err
	})
	if err == nil {
		_, err = tx.ExecContext(ctx, "RELEASE SAVEPOINT rebalance_copy")
		return err
	}
	if errors.Is(err, errNoCopy) {
		s.noCopy[ti].Store(true)
		return s.insertRows(ctx, tx, t, rows, owners)
	}
	if ctx.Err() != nil {
		return err
	}
	if !isUniqueViolation(err) {
		// A value COPY cannot encode, or a failure that the INSERT meets as well: this
		// table's rows go through the INSERT from now on.
		s.noCopy[ti].Store(true)
	}
	if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT rebalance_copy"); rerr != nil {
		return fmt.Errorf("%w (after COPY: %v)", rerr, err)
	}
	return s.insertRows(ctx, tx, t, rows, owners)
}

// isUniqueViolation says err is PostgreSQL's unique_violation (SQLSTATE 23505).
func isUniqueViolation(err error) bool {
	var coded interface{ SQLState() string }
	return errors.As(err, &coded) && coded.SQLState() == "23505"
}
