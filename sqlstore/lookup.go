package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
)

// rowsScanner is what a lookup's rows offer: a *sql.Rows, or pgx's rows of a batch.
type rowsScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// lookup runs one statement of byIndex's read.
type lookup func(ctx context.Context, query string, args ...any) (rowsScanner, error)

// byIndex runs read on shard's db, each of its statements on PostgreSQL read by index
// ranges only (rangesOnly), whatever the statistics say. A table a migration fills from
// empty keeps the statistics of its first ANALYZE (one owner, say) until autovacuum comes
// by, which may be minutes: "owner IN (500 owners)" then seems to match every row, and each
// batch read the whole table, so the time of a migration grew with the square of its size
// (TestLookupsUseTheIndex).
//
// Through pgx each statement goes in one batch after rangesOnly's settings: one round trip,
// in the batch's implicit transaction, which ends the settings with it. Other drivers read
// in a transaction of its own that sets them first: four round trips, which made the
// lookups of a group of owners (fences, counts, sums on both shards) cost a single mover a
// third of its time. Statements must only read, and select an
// owner column's value as text: pgx reads a uuid as bytes where database/sql gives text.
func (s *Store) byIndex(ctx context.Context, db *sql.DB, shard int, read func(lookup) error) error {
	if s.dialect == SQLite {
		return read(func(ctx context.Context, q string, args ...any) (rowsScanner, error) {
			return db.QueryContext(ctx, q, args...)
		})
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return s.wrap(shard, "begin a read", err)
	}
	defer conn.Close()
	var readErr error
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(copyConn)
		if !ok || c.Conn() == nil {
			return errNoCopy
		}
		pc := c.Conn()
		readErr = read(func(ctx context.Context, q string, args ...any) (rowsScanner, error) {
			b := &pgx.Batch{}
			b.Queue(rangesOnlySQL)
			b.Queue(q, args...)
			br := pc.SendBatch(ctx, b)
			if _, err := br.Exec(); err != nil {
				br.Close()
				return nil, err
			}
			rs, err := br.Query()
			if err != nil {
				br.Close()
				return nil, err
			}
			return &batchRows{Rows: rs, batch: br}, nil
		})
		return nil
	})
	if errors.Is(err, errNoCopy) {
		return s.byIndexTx(ctx, conn, shard, read)
	}
	if err != nil {
		return s.wrap(shard, "read by index", err)
	}
	return readErr
}

// byIndexTx is byIndex through a driver other than pgx.
func (s *Store) byIndexTx(ctx context.Context, conn *sql.Conn, shard int, read func(lookup) error) error {
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return s.wrap(shard, "begin a read", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, rangesOnlySQL); err != nil {
		return s.wrap(shard, "plan a read by index", err)
	}
	if err := read(func(ctx context.Context, q string, args ...any) (rowsScanner, error) {
		return tx.QueryContext(ctx, q, args...)
	}); err != nil {
		return err
	}
	return s.wrap(shard, "end a read", tx.Commit())
}

// inTx is a reader of perOwnerBy that runs each statement in tx.
func inTx(tx *sql.Tx) func(func(lookup) error) error {
	return func(read func(lookup) error) error {
		return read(func(ctx context.Context, q string, args ...any) (rowsScanner, error) {
			return tx.QueryContext(ctx, q, args...)
		})
	}
}

// batchRows are the rows of a batch's last statement; Close ends the batch.
type batchRows struct {
	pgx.Rows
	batch pgx.BatchResults
}

func (r *batchRows) Close() error {
	r.Rows.Close()
	return errors.Join(r.Rows.Err(), r.batch.Close())
}

// scanner is a row's Scan.
type scanner interface{ Scan(dest ...any) error }

// ownerText is how a lookup selects t's owner column: as text on PostgreSQL, so that byIndex
// reads it alike through pgx and database/sql (the form the owners are given in: see
// ownerForm).
func (s *Store) ownerText(t *table) string {
	if s.dialect == PostgreSQL {
		return t.Owner + "::text"
	}
	return t.Owner
}
