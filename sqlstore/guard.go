package sqlstore

import (
	"context"
	"database/sql"
	"strings"
)

// A shard refuses a write of any row of an owner it does not serve (fenced moved or
// importing), unless the mover makes it. An access checks its own owner's fence, but a
// writer that bypasses the library (a batch job, an administrator's SQL session, an access
// of one owner that writes another's rows) would otherwise write an owner's old copy after
// the window, and the deletion of the old copies would take the write with it while Run
// returned nil; or write on the new shard before it serves the owner. The change capture's
// triggers do it, in the writer's own statement:
//
//   - PostgreSQL: the capture's function raises SQLSTATE RB001 when the row's owner is fenced
//     moved or importing. The mover's transactions skip the trigger (rebalance_step sets
//     rebalance.mover for the transaction; Copy and Delete set it themselves).
//   - SQLite: the capture's trigger raises an ABORT when the row's owner is fenced moved or
//     importing, unless the one-row table rebalance_mover says the mover writes. The mover
//     sets it at the start of each of its write transactions (step, Copy, Delete) and clears
//     it before the commit (commitMover): SQLite runs one write transaction at a time, and
//     no other connection sees the set value uncommitted, so it holds for the mover's own
//     transaction only. (A trigger's WHEN may not read a connection's TEMP tables, which
//     would have marked the mover's connections instead.)
//
// TestWriteOutsideAnAccess writes so on both engines, on the old shard after the window and
// on the new one during the copy.
//
// A write such a writer made before a fence change, in a transaction still open, is seen
// by no copy, replay or sum until it commits. On PostgreSQL the capture's function holds
// the owner's stripe (stripeNS) shared until the writer's transaction ends, and after a
// fence change the mover waits for the transactions that hold its owners' stripes
// (waitForWriters); one that reads by a single snapshot fails instead where a fence change
// committed after it (pgStripes). SQLite runs one write transaction at a time, and a transaction that read
// before another's commit cannot write (SQLITE_BUSY_SNAPSHOT). TestWriteThatSpansTheWindow
// writes so before the fence, during the copy and after the window.

// pgRefusalState is the SQLSTATE of a refused write on PostgreSQL.
const pgRefusalState = "RB001"

// pgRefusal is the refused write's message on PostgreSQL, a format() of the owner and table.
const pgRefusal = "rebalance: owner %s is not served here (a migration moved it away or is copying it in): write the rows of table %s of an owner through an access of that owner"

// sqliteRefusal is the refused write's message on SQLite (a literal: RAISE takes no values).
const sqliteRefusal = "rebalance: a row of an owner not served here (a migration moved it away or is copying it in): write the rows of an owner through an access of that owner"

// sqliteBlobOwner is the message of a write of a SQLite row whose owner is a blob.
const sqliteBlobOwner = "rebalance: an owner given as a blob (a []byte): the rows of an owner are selected by its text, which a blob never equals, so a move would leave the row behind; give owners as strings"

// sqliteMarker is the table of the SQLite guard's exception.
const sqliteMarker = `
CREATE TABLE IF NOT EXISTS rebalance_mover (id INTEGER PRIMARY KEY CHECK (id = 0), writing INTEGER NOT NULL);
INSERT OR IGNORE INTO rebalance_mover (id, writing) VALUES (0, 0)`

// moverWrites makes tx's writes the mover's: the guard lets them through. (On SQLite a
// marker row deleted by hand is made again; the triggers take a missing one for 0, so
// that the guard holds without it.)
func (s *Store) moverWrites(ctx context.Context, tx *sql.Tx) error {
	q := "INSERT INTO rebalance_mover (id, writing) VALUES (0, 1) ON CONFLICT (id) DO UPDATE SET writing = 1"
	if s.dialect == PostgreSQL {
		q = "SELECT set_config('rebalance.mover', 'on', true)"
	}
	_, err := tx.ExecContext(ctx, q)
	return err
}

// commitMover commits a transaction of the mover, on SQLite with the guard's marker cleared
// first.
func (s *Store) commitMover(ctx context.Context, tx *sql.Tx) error {
	if s.dialect == SQLite {
		if _, err := tx.ExecContext(ctx, "UPDATE rebalance_mover SET writing = 0"); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// pgFunctionBody returns what pg_proc.prosrc holds of a CREATE FUNCTION def: its body
// between the $f$ quotes.
func pgFunctionBody(def string) string {
	_, body, _ := strings.Cut(def, "$f$")
	body, _, _ = strings.Cut(body, "$f$")
	return body
}
