package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// Change capture, as pt-online-schema-change does it: triggers on the data table record the
// key of every row inserted, updated or deleted of an owner fenced exporting on the shard (the
// mover sets that fence, waiting for the accesses under way, before it copies the owner), in
// the change table rebalance_changes_<table> (seq, owner, row_key), in the writing transaction
// itself. The mover replays them on the new shard: a changed row that exists on the old shard
// is written, one that does not is deleted. Triggers rather than PostgreSQL's logical
// decoding: they work alike on SQLite, need no replication slot or wal_level change, and
// record nothing (an indexed lookup of the owner's fence, which finds none) while no owner
// of the shard is moving.

// createCapture creates the change table and the triggers of table tb on shard db, if
// missing. On SQLite it replaces a trigger of another definition (an older version's).
func (s *Store) createCapture(ctx context.Context, db *sql.DB, tb *table) error {
	t, o, k, c := tb.Table, tb.Owner, tb.Key, tb.changes()
	if s.dialect == SQLite {
		stmts := []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (seq INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT NULL, row_key NOT NULL)", c),
			fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s_owner ON %s (owner, seq)", c, c),
		}
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		// The WHEN clause decides in one index probe of the fence whether the trigger's
		// program runs at all: running it for every row, to find no fence, cost the mover's
		// own writes about half as much again as the write itself. The same trigger is the
		// guard (see guard.go): outside the mover's writes it fires for an owner fenced in
		// any state, and its program refuses one fenced moved or importing; in them, as
		// before, only for an owner exporting. One trigger, not a second per operation: SQLite
		// codes every trigger's program into each statement that writes the table.
		fenced := func(row string, states ...rebalance.FenceState) string {
			in := make([]string, len(states))
			for i, st := range states {
				in[i] = strconv.Itoa(int(st))
			}
			return fmt.Sprintf("EXISTS (SELECT 1 FROM rebalance_fence WHERE owner = CAST(%s.%s AS TEXT) AND state IN (%s))", row, o, strings.Join(in, ", "))
		}
		// Outside the mover's writes (writing 0) the trigger fires for an owner fenced in any
		// state, at least importing; in them (1) only for one exporting, the greatest state.
		when := func(row string) string {
			return fmt.Sprintf("EXISTS (SELECT 1 FROM rebalance_fence WHERE owner = CAST(%s.%s AS TEXT) AND state >= %d + %d * COALESCE((SELECT writing FROM rebalance_mover), 0))",
				row, o, rebalance.Importing, rebalance.Exporting-rebalance.Importing)
		}
		refuse := func(row string) string {
			return fmt.Sprintf("SELECT RAISE(ABORT, '%s') WHERE %s;", sqliteRefusal, fenced(row, rebalance.Moved, rebalance.Importing))
		}
		// A blob in the owner column: the fences find its owner by its text, but the copy,
		// the count and the deletion select an owner's rows by the column's equality, which
		// no text meets, so a move would leave the row behind. Refused, fenced or not.
		blob := func(row string) string { return fmt.Sprintf("typeof(%s.%s) = 'blob'", row, o) }
		refuseBlob := func(row string) string {
			return fmt.Sprintf("SELECT RAISE(ABORT, '%s') WHERE %s;", sqliteBlobOwner, blob(row))
		}
		// OR IGNORE: what it ignores, a row of a NULL key, no replay could find by its key
		// anyway: the sums compare it.
		record := func(row string) string {
			return fmt.Sprintf("INSERT OR IGNORE INTO %[1]s (owner, row_key) SELECT CAST(%[2]s.%[3]s AS TEXT), %[2]s.%[4]s WHERE %[5]s;", c, row, o, k, fenced(row, rebalance.Exporting))
		}
		for _, tr := range []struct{ op, when, body string }{
			{"INSERT", when("NEW") + " OR " + blob("NEW"), refuseBlob("NEW") + " " + refuse("NEW") + " " + record("NEW")},
			{"UPDATE", when("OLD") + " OR " + when("NEW") + " OR " + blob("NEW"), refuseBlob("NEW") + " " + refuse("OLD") + " " + refuse("NEW") + " " + record("OLD") + " " + record("NEW")},
			{"DELETE", when("OLD"), refuse("OLD") + " " + record("OLD")},
		} {
			name := c + "_" + strings.ToLower(tr.op)
			if err := replaceTrigger(ctx, db, name, fmt.Sprintf("CREATE TRIGGER %s AFTER %s ON %s WHEN %s BEGIN %s END", name, tr.op, t, tr.when, tr.body)); err != nil {
				return err
			}
		}
		return nil
	}
	var keyType string
	if err := db.QueryRowContext(ctx, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $2",
		t, k).Scan(&keyType); err != nil {
		return fmt.Errorf("read the type of the key column %s: %w", k, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// One creator at a time, and none once the trigger exists: every process calls Init,
	// and DDL on the table would stop its writes.
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1, 1)", epochNS); err != nil {
		return err
	}
	// For the row OLD or NEW: record it if its owner is exporting, refuse it if moved or
	// importing (see guard.go).
	// The owner's stripe first, shared until the writer's transaction ends: after a fence
	// change the mover waits for it (waitForWriters), and this read, after the lock, sees every fence committed before; where
	// the transaction reads by one snapshot, the stripe's row too, which fails if a fence
	// change of the stripe committed after that snapshot (see pgStripes).
	check := func(row string) string {
		return fmt.Sprintf(`
		PERFORM pg_advisory_xact_lock_shared(%[10]d, %[11]s);
		IF current_setting('transaction_isolation') <> 'read committed' THEN
			PERFORM 1 FROM rebalance_stripe WHERE stripe = %[11]s FOR SHARE;
		END IF;
		SELECT state INTO st FROM rebalance_fence WHERE owner = %[1]s.%[2]s::text;
		IF st = %[4]d THEN
			INSERT INTO %[9]s (owner, row_key) VALUES (%[1]s.%[2]s::text, %[1]s.%[3]s);
		ELSIF st IN (%[5]d, %[6]d) THEN
			RAISE EXCEPTION USING ERRCODE = '%[7]s', MESSAGE = format('%[8]s', %[1]s.%[2]s::text, TG_TABLE_NAME);
		END IF;`, row, o, k, rebalance.Exporting, rebalance.Moved, rebalance.Importing, pgRefusalState, pgRefusal, c, stripeNS, stripeOf(row+"."+o+"::text"))
	}
	record := fmt.Sprintf(`CREATE OR REPLACE FUNCTION %s_record() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
	st integer;
BEGIN
	IF TG_OP <> 'INSERT' THEN%s
	END IF;
	IF TG_OP <> 'DELETE' THEN%s
	END IF;
	RETURN NULL;
END
$f$`, c, check("OLD"), check("NEW"))
	// The trigger fires ALWAYS, as replica too: a logical replication's apply, or a session
	// with session_replication_role = replica, writes around the library like any other
	// writer, and a write of a moved owner's row that no guard refused was deleted with the
	// old copy. The mover's own writes skip it by rebalance.mover, as replicas or not.
	enableAlways := fmt.Sprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER %s", t, c)
	// The trigger on t, and whether it and its copies on t's partitions all fire ALWAYS
	// (pg_trigger.tgenabled 'A'; 'O' is the default, 'D' disabled).
	var exists, always bool
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(bool_or(tgrelid = to_regclass($2)), false), COALESCE(bool_and(tgenabled = 'A'), false) FROM pg_trigger WHERE tgname = $1",
		c, t).Scan(&exists, &always); err != nil {
		return err
	}
	if exists {
		// A function of an older version is replaced: every write calls the one or the other.
		var same bool
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE((SELECT prosrc = $1 FROM pg_proc WHERE oid = to_regproc($2)), false)",
			pgFunctionBody(record), c+"_record").Scan(&same); err != nil {
			return err
		}
		if !same {
			if _, err := tx.ExecContext(ctx, record); err != nil {
				return err
			}
		}
		if !always { // an older version's, or switched off by hand
			if _, err := tx.ExecContext(ctx, enableAlways); err != nil {
				return err
			}
		}
		return tx.Commit()
	}
	// The table's lock first, waiting for the writes under way: a writer holding the table
	// while this transaction holds the change table would wait for each other.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE", t)); err != nil {
		return err
	}
	for _, q := range []string{
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (seq BIGSERIAL PRIMARY KEY, owner TEXT NOT NULL, row_key %s NOT NULL)", c, keyType),
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s_owner ON %s (owner, seq)", c, c),
		record,
		fmt.Sprintf("CREATE TRIGGER %[1]s AFTER INSERT OR UPDATE OR DELETE ON %[2]s FOR EACH ROW WHEN (current_setting('rebalance.mover', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION %[1]s_record()", c, t),
		enableAlways,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// replaceTrigger creates the SQLite trigger name by the statement def, unless it exists with
// that definition: a trigger of another one is dropped and created anew in one transaction,
// so that every write sees one of the two. The transaction is IMMEDIATE, taking the write
// lock first (under busy_timeout): a deferred one that only read, as DROP TRIGGER IF EXISTS
// of no trigger does, could not write once another connection had (SQLITE_BUSY_SNAPSHOT).
func replaceTrigger(ctx context.Context, db *sql.DB, name, def string) error {
	var got string
	err := db.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", name).Scan(&got)
	if err == nil && got == def {
		return nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{"BEGIN IMMEDIATE", "DROP TRIGGER IF EXISTS " + name, def, "COMMIT"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			if q != "BEGIN IMMEDIATE" {
				if _, e := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); e != nil {
					conn.Raw(func(any) error { return driver.ErrBadConn }) // not back to the pool mid-transaction
				}
			}
			return err
		}
	}
	return nil
}

// ownersIn writes "owner IN (...)" of owners to q (the change table's owner is text).
func ownersIn(q *query, owners []string) {
	q.b.WriteString("owner IN (" + q.in(toAny(owners)) + ")")
}

// ClearChanges deletes the changes recorded of owners on shard; see rebalance.SharedStore.
// It first looks for any, outside a transaction: most often there are none (a copy that
// starts afresh, a replay that applied them all), and then the fenced transaction is
// skipped. A change recorded after the look is no loss either way: the copy that follows
// reads every row, and a replay applies a change again harmlessly.
func (s *Store) ClearChanges(ctx context.Context, migration string, token uint64, owners []string, shard int) error {
	db, err := s.shard(shard)
	if err != nil {
		return err
	}
	for _, t := range s.tables {
		for batch := range slices.Chunk(owners, armsPerStatement) {
			q := &query{sqlite: s.dialect == SQLite}
			q.b.WriteString("SELECT 1 FROM " + t.changes() + " WHERE ")
			ownersIn(q, batch)
			q.b.WriteString(" LIMIT 1")
			var one int
			switch err := db.QueryRowContext(ctx, q.b.String(), q.args...).Scan(&one); {
			case err == nil:
				return s.deleteChanges(ctx, migration, token, owners, shard, nil)
			case !errors.Is(err, sql.ErrNoRows):
				return s.wrap(shard, fmt.Sprintf("look for changes of %d owners in table %s", len(batch), t.Table), err)
			}
		}
	}
	return nil
}

// replayed is what a replay found of one table: the changes it applies (their seqs), the
// changed rows that exist on the old shard and the keys of those that do not.
type replayed struct {
	t      *table
	more   bool // changes of keys whose rows were not read, for want of room
	seqs   []any
	rows   [][]any
	gone   []any
	owners []any // the owners replayed, as t's owner column values
}

// Replay applies on to the oldest changes of owners recorded on from, up to limit of them,
// then deletes those on from; see rebalance.SharedStore. It takes the tables' changes in
// their order, and writes the changed rows parents first and deletes the rows gone
// children first. A changed row that no longer belongs to one of owners (an UPDATE of its
// owner column) is gone for them: deleted on to, where another owner's row of that key is
// left alone (the other owner's changes carry the row if it moves too). It goes in rounds,
// each reading rows of about the chunk's bytes into memory (rows of megabytes changed by
// the thousand do not take gigabytes), written in one transaction on to, then their changes
// deleted in one on from. A stop between two transactions leaves the changes recorded, and
// they are applied again: it is idempotent.
func (s *Store) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	db, err := s.shard(from)
	if err != nil {
		return 0, err
	}
	if _, err := s.shard(to); err != nil {
		return 0, err
	}
	// Rounds of at most chunkBytes of rows read into memory each (and one transaction on
	// each shard), until limit changes are applied or none is left.
	n := 0
	for n < limit {
		var work []replayed
		room, round, full := s.chunkBytes, 0, false
		for _, t := range s.tables {
			if n+round >= limit || full {
				break
			}
			if room <= 0 {
				full = true // the next tables' changes in the next round
				break
			}
			r, used, err := s.changedRows(ctx, db, t, owners, limit-n-round, room)
			if err != nil {
				return n, s.wrap(from, "read changes of table "+t.Table, err)
			}
			if len(r.seqs) > 0 {
				work = append(work, r)
				round += len(r.seqs)
			}
			room -= used
			full = r.more
		}
		if round == 0 {
			return n, nil
		}
		if s.replayRound != nil {
			s.replayRound(s.chunkBytes - room)
		}
		if err := s.writeChanged(ctx, migration, token, owners, to, work); err != nil {
			return n, err
		}
		if err := s.deleteChanges(ctx, migration, token, owners, from, work); err != nil {
			return n, err
		}
		n += round
		if !full {
			return n, nil // every change left was in this round, or limit reached
		}
	}
	return n, nil
}

// writeChanged writes on shard to, in one transaction, the rows of work, and deletes there
// the rows work found gone.
func (s *Store) writeChanged(ctx context.Context, migration string, token uint64, owners []string, to int, work []replayed) error {
	release, err := s.writeTurn(ctx, to)
	if err != nil {
		return err
	}
	defer release()
	tx, _, done, err := s.beginImport(ctx, to, "")
	if err != nil {
		return err
	}
	defer done()
	if err := s.step(ctx, tx, migration, token, owners, to, rebalance.Importing); err != nil {
		return err
	}
	for _, r := range work {
		if err := s.insertRows(ctx, tx, r.t, r.rows, owners); err != nil {
			return s.wrap(to, fmt.Sprintf("write %d changed rows of table %s", len(r.rows), r.t.Table), err)
		}
	}
	for i := len(work) - 1; i >= 0; i-- {
		r := work[i]
		for batch := range slices.Chunk(r.gone, 5000) {
			q := "DELETE FROM " + r.t.Table + " WHERE " + r.t.Key + " IN (" + s.placeholders(1, len(batch)) +
				") AND " + r.t.Owner + " IN (" + s.placeholders(len(batch)+1, len(r.owners)) + ")"
			if _, err := tx.ExecContext(ctx, q, append(slices.Clip(batch), r.owners...)...); err != nil {
				return s.wrap(to, fmt.Sprintf("delete %d rows of table %s deleted since their copy", len(batch), r.t.Table), err)
			}
		}
	}
	return s.wrap(to, "commit: replay changes", s.commitMover(ctx, tx))
}

// changedRows reads up to limit of the oldest changes of owners in table t on db, then the
// rows of their keys there, until the rows read hold about room bytes (rowBytes; a batch of
// keys is sized by the rows read before, and the first one of all holds at most 16 rows):
// the changes of keys not read then are left for the next round (more). It returns what the
// rows read hold.
func (s *Store) changedRows(ctx context.Context, db *sql.DB, t *table, owners []string, limit, room int) (replayed, int, error) {
	r := replayed{t: t}
	q := &query{sqlite: s.dialect == SQLite}
	q.b.WriteString("SELECT seq, row_key FROM " + t.changes() + " WHERE ")
	ownersIn(q, owners)
	q.b.WriteString(" ORDER BY seq LIMIT " + q.arg(limit))
	rs, err := db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return r, 0, err
	}
	var (
		keys   []any
		seqs   []any
		seqKey []string // the key of each of seqs
	)
	seen := map[string]bool{}
	for rs.Next() {
		var seq int64
		var key any
		if err := rs.Scan(&seq, &key); err != nil {
			rs.Close()
			return r, 0, err
		}
		k := fmt.Sprintf("%T:%v", key, key)
		seqs, seqKey = append(seqs, seq), append(seqKey, k)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, key)
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return r, 0, err
	}
	// The rows of those keys that are still the owners': written on the new shard; the keys
	// not found (deleted, or given to another owner, whose own changes carry it): deleted
	// there. Read in batches sized by the rows read so far, to stay within room.
	args, err := t.ownerArgs(owners)
	if err != nil {
		return r, 0, err
	}
	r.owners = args
	found, done := map[string]bool{}, map[string]bool{}
	used, read, batch := 0, 0, min(len(keys), 16)
	if size := int(t.replayRow.Load()); size > 0 {
		batch = min(len(keys), max(room/size, 1))
	}
	for len(keys) > 0 && batch > 0 {
		got, err := s.rowsByKey(ctx, db, t, keys[:batch], args)
		if err != nil {
			return r, used, err
		}
		for _, row := range got {
			found[fmt.Sprintf("%T:%v", row[t.key], row[t.key])] = true
			used += rowBytes(row)
		}
		for _, k := range keys[:batch] {
			kk := fmt.Sprintf("%T:%v", k, k)
			done[kk] = true
			if !found[kk] {
				r.gone = append(r.gone, k)
			}
		}
		r.rows = append(r.rows, got...)
		read += len(got)
		keys = keys[batch:]
		batch = min(len(keys), 5000)
		if read > 0 {
			batch = min(batch, (room-used)/max(used/read, 1))
		}
	}
	if read > 0 {
		t.replayRow.Store(int64(max(used/read, 1)))
	}
	r.more = len(keys) > 0
	for i, seq := range seqs {
		if done[seqKey[i]] {
			r.seqs = append(r.seqs, seq)
		}
	}
	return r, used, nil
}

// deleteChanges deletes the changes of work (every change of owners in every table if
// work is nil) on shard, in a transaction that checks the token and that owners are fenced
// by migration.
func (s *Store) deleteChanges(ctx context.Context, migration string, token uint64, owners []string, shard int, work []replayed) error {
	release, err := s.writeTurn(ctx, shard)
	if err != nil {
		return err
	}
	defer release()
	tx, err := s.begin(ctx, shard)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.step(ctx, tx, migration, token, owners, shard, rebalance.Exporting, rebalance.Moved); err != nil {
		return err
	}
	if work == nil {
		for _, t := range s.tables {
			for batch := range slices.Chunk(owners, armsPerStatement) {
				q := &query{sqlite: s.dialect == SQLite}
				q.b.WriteString("DELETE FROM " + t.changes() + " WHERE ")
				ownersIn(q, batch)
				if _, err := tx.ExecContext(ctx, q.b.String(), q.args...); err != nil {
					return s.wrap(shard, fmt.Sprintf("clear the changes of %d owners in table %s", len(batch), t.Table), err)
				}
			}
		}
	}
	for _, r := range work {
		for batch := range slices.Chunk(r.seqs, 5000) {
			q := "DELETE FROM " + r.t.changes() + " WHERE seq IN (" + s.placeholders(1, len(batch)) + ")"
			if _, err := tx.ExecContext(ctx, q, batch...); err != nil {
				return s.wrap(shard, fmt.Sprintf("delete %d changes applied of table %s", len(batch), r.t.Table), err)
			}
		}
	}
	return s.wrap(shard, "commit: delete changes", s.commitMover(ctx, tx))
}

// rowsByKey reads the rows of keys in table t on db that belong to owners (owner column
// values), every copied column.
func (s *Store) rowsByKey(ctx context.Context, db *sql.DB, t *table, keys, owners []any) ([][]any, error) {
	q := "SELECT " + t.reads + " FROM " + t.Table + " WHERE " + t.Key + " IN (" + s.placeholders(1, len(keys)) +
		") AND " + t.Owner + " IN (" + s.placeholders(len(keys)+1, len(owners)) + ")"
	rs, err := db.QueryContext(ctx, q, append(slices.Clip(keys), owners...)...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out [][]any
	for rs.Next() {
		row, err := t.scanRow(rs, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rs.Err()
}

// Sums returns each owner's row count and content digest on shard, over all the tables. On
// PostgreSQL a table's digest is computed in SQL, the exact sum of a hash of each row's
// copied columns (integers by value, the others by their text: see table.setRowHash; SUM
// of a bigint is a numeric, added up in 128 bits); SQLite has no hash function in SQL, so
// the rows are read and each one's values hashed here (FNV-1a over a typed encoding),
// summed modulo 2^64. Either way the
// digest does not depend on the order of the rows, and both shards of a comparison use the
// same rule. With several tables, the digest is the tables' digests in their order,
// separated by "/".
func (s *Store) Sums(ctx context.Context, owners []string, shard int) ([]rebalance.Sum, error) {
	// A column added since Init would not have been copied: the sums would agree without it;
	// nor would the rows of a table created since that references one of the tables, which
	// the deletion of the old copy could take with it (outsideRefs); nor would rows that row
	// security hides (shapeError). PostgreSQL checks them in the statement of the sums,
	// SQLite before.
	db, err := s.shard(shard)
	if err != nil {
		return nil, err
	}
	if err := s.sqliteSchemaAsInit(ctx, db, shard); err != nil {
		return nil, err
	}
	// Writes that no change capture saw, or no guard refused, would not be in the copy.
	if err := s.checkCapture(ctx, db, shard); err != nil {
		return nil, err
	}
	if err := s.checkOutward(ctx, db, owners, shard); err != nil {
		return nil, err
	}
	return s.sumsBy(ctx, func(read func(lookup) error) error { return s.byIndex(ctx, db, shard, read) }, owners, shard)
}

// sqliteSchemaAsInit is schemaAsInit on SQLite; PostgreSQL checks the same in the
// statement of the sums.
func (s *Store) sqliteSchemaAsInit(ctx context.Context, db querier, shard int) error {
	if s.dialect != SQLite {
		return nil
	}
	return s.schemaAsInit(ctx, db, shard)
}

// schemaAsInit checks the tables' columns on shard, and the tables that reference them
// there, as Init found them: a column added since would be left behind, one retyped
// converted, and a table that references one would lose rows to the deletion of an old copy.
func (s *Store) schemaAsInit(ctx context.Context, db querier, shard int) error {
	for _, t := range s.tables {
		if _, err := s.checkColumns(ctx, db, t, shard); err != nil {
			return s.wrap(shard, "check table "+t.Table, err)
		}
	}
	if err := s.outsideRefs(ctx, db, shard); err != nil {
		return s.wrap(shard, "check the tables that reference the moved ones", err)
	}
	return nil
}

// sumsBy is what Sums computes once its checks passed, its statements run through reader
// (perOwnerBy).
func (s *Store) sumsBy(ctx context.Context, reader func(func(lookup) error) error, owners []string, shard int) ([]rebalance.Sum, error) {
	rows := make([]int64, len(owners))
	digests := make([][]uint64, len(owners)) // SQLite: by owner, then table
	texts := make([][]string, len(owners))   // PostgreSQL: by owner, then table
	for i := range owners {
		digests[i] = make([]uint64, len(s.tables))
		texts[i] = make([]string, len(s.tables))
	}
	db, err := s.shard(shard)
	if err != nil {
		return nil, err
	}
	changed := make([]bool, len(s.tables)) // PostgreSQL: by table
	tableAt := func(t *table) int { return slices.Index(s.tables, t) }
	var (
		n      int64
		digest string
		h      uint64
	)
	if s.dialect == PostgreSQL {
		err = s.perOwnerBy(ctx, reader, owners, shard, "sum rows", func(t *table, in string) string {
			// The checks, once a statement, in a row of no owner where they fail: not in the
			// groups, as row security that hides every row of the owners leaves none.
			return fmt.Sprintf("SELECT %s, COUNT(*), COALESCE(SUM(%s), 0)::text FROM %s WHERE %s IN (%s) GROUP BY %s UNION ALL SELECT NULL, 0, '0' WHERE NOT (%s AND %s)",
				s.ownerText(t), t.rowHash, t.Table, t.Owner, in, t.Owner, t.sameColumnsOn(shard), t.unreferenced)
		}, func(t *table, rs rowsScanner) (owner any, err error) {
			err = rs.Scan(&owner, &n, &digest)
			if owner == nil {
				changed[tableAt(t)] = true
			}
			return owner, err
		}, func(t *table, i int) {
			rows[i] += n
			texts[i][tableAt(t)] = digest
		})
		for ti, t := range s.tables {
			if err == nil && changed[ti] {
				_, err = s.checkColumns(ctx, db, t, shard)
				err = cmp.Or(err, s.outsideRefs(ctx, db, shard),
					fmt.Errorf("the columns, or the tables that reference it, changed during the sums: %w", ErrSchema))
				err = s.wrap(shard, "check table "+t.Table, err)
			}
		}
	} else {
		scanners := map[*table]func(scanner) ([]any, error){} // each row hashed before the next is read
		err = s.perOwnerBy(ctx, reader, owners, shard, "sum rows", func(t *table, in string) string {
			return fmt.Sprintf("SELECT %s.%s, %s FROM %s WHERE %s IN (%s)", t.Table, t.Owner, t.reads, t.Table, t.Owner, in)
		}, func(t *table, rs rowsScanner) (any, error) {
			if scanners[t] == nil {
				scanners[t] = t.rowScanner(1)
			}
			row, err := scanners[t](rs)
			if err != nil {
				return nil, err
			}
			h = rowHash(row[1:])
			return row[0], nil
		}, func(t *table, i int) {
			rows[i]++
			digests[i][tableAt(t)] += h
		})
	}
	if err != nil {
		return nil, err
	}
	out := make([]rebalance.Sum, len(owners))
	for i := range owners {
		parts := texts[i]
		for ti := range s.tables {
			if s.dialect == SQLite {
				parts[ti] = strconv.FormatUint(digests[i][ti], 10)
			} else if parts[ti] == "" {
				parts[ti] = "0"
			}
		}
		out[i] = rebalance.Sum{Rows: rows[i], Digest: strings.Join(parts, "/")}
	}
	return out, nil
}

// ownerKey is an owner column's value as Counts and Sums key it.
func ownerKey(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// rowHash hashes one row's values with their types, so that 1 and "1" differ: FNV-1a
// (64-bit) over a tag byte a value, then its 8 bytes (integers, floats, times), or its
// length's 8 bytes and its bytes. Written out rather than by hash/fnv, which allocates a
// hasher and a copy of each string a row: Sums hashes every row of the owners on SQLite.
func rowHash(row []any) uint64 {
	h := fnvHash(14695981039346656037)
	for _, v := range row {
		switch x := v.(type) {
		case nil:
			h.byte(0)
		case int64:
			h.byte(1)
			h.uint64(uint64(x))
		case float64:
			h.byte(2)
			h.uint64(math.Float64bits(x))
		case string:
			h.byte(3)
			h.uint64(uint64(len(x)))
			for i := 0; i < len(x); i++ {
				h.byte(x[i])
			}
		case []byte:
			h.byte(4)
			h.uint64(uint64(len(x)))
			for _, c := range x {
				h.byte(c)
			}
		case bool:
			h.byte(5)
			if x {
				h.byte(1)
			} else {
				h.byte(0)
			}
		case time.Time:
			h.byte(6)
			h.uint64(uint64(x.UnixNano()))
		default:
			for _, c := range []byte(fmt.Sprintf("%T:%v", x, x)) {
				h.byte(c)
			}
		}
	}
	return uint64(h)
}

// fnvHash is a 64-bit FNV-1a state.
type fnvHash uint64

func (h *fnvHash) byte(c byte) { *h = (*h ^ fnvHash(c)) * 1099511628211 }

// uint64 adds v's 8 bytes, least significant first.
func (h *fnvHash) uint64(v uint64) {
	for range 8 {
		h.byte(byte(v))
		v >>= 8
	}
}

// FirstDiff returns the first key of owner's rows on shard a, table after table and in the
// key order, that shard b lacks or holds with other content, else the first of b's rows that
// a lacks, or "" if they hold the same rows; with several tables the key is prefixed by its
// table's name and a colon (see rebalance.SharedStore). It reads a page of
// rows at a time and, of the other shard, the rows of that page's keys, so its memory is a
// page's, whatever the owner's size (pages shrink to about chunkBytes as wide rows are read).
func (s *Store) FirstDiff(ctx context.Context, owner string, a, b int) (string, error) {
	for _, t := range s.tables {
		key, err := s.firstMissing(ctx, t, owner, a, b, true)
		if err == nil && key == "" {
			key, err = s.firstMissing(ctx, t, owner, b, a, false)
		}
		if err != nil || key == "" {
			return "", err
		}
		if len(s.tables) > 1 {
			key = t.Table + ":" + key
		}
		return key, nil
	}
	return "", nil
}

// firstMissing returns the key of the first row of owner in table t on shard from, in the
// key order, that shard to lacks or, if content, holds with other content; "" if none.
func (s *Store) firstMissing(ctx context.Context, t *table, owner string, from, to int, content bool) (string, error) {
	dbFrom, err := s.shard(from)
	if err != nil {
		return "", err
	}
	dbTo, err := s.shard(to)
	if err != nil {
		return "", err
	}
	owners, err := t.ownerArgs([]string{owner})
	if err != nil {
		return "", err
	}
	cur, page := "", 16
	for {
		rows, err := t.readRows(ctx, dbFrom, owner, cur, page)
		if err != nil {
			return "", s.wrap(from, fmt.Sprintf("read rows of owner %q in table %s", owner, t.Table), err)
		}
		if len(rows) == 0 {
			return "", nil
		}
		keys, size := make([]any, len(rows)), 0
		for i, r := range rows {
			keys[i] = r[t.key]
			size += rowBytes(r)
		}
		there, err := s.rowsByKey(ctx, dbTo, t, keys, owners)
		if err != nil {
			return "", s.wrap(to, fmt.Sprintf("read rows of owner %q in table %s", owner, t.Table), err)
		}
		hashes := make(map[string]uint64, len(there))
		for _, r := range there {
			hashes[fmt.Sprintf("%T:%v", r[t.key], r[t.key])] = rowHash(r)
		}
		for _, r := range rows {
			if h, ok := hashes[fmt.Sprintf("%T:%v", r[t.key], r[t.key])]; !ok || content && h != rowHash(r) {
				return fmt.Sprint(r[t.key]), nil
			}
		}
		if cur, err = encodeKey(rows[len(rows)-1][t.key]); err != nil {
			return "", s.wrap(from, "read key", err)
		}
		page = min(max(chunkBytes/max(size/len(rows), 1), 1), 5000)
	}
}

// checkOutward returns an error wrapping ErrSchema naming a row of owners on shard that
// references a row which shard does not hold: of a table the Store does not move (a team, a
// country), or of another owner who does not move with them (a reaction to another user's
// message). A copy writes with the foreign key checks off where the moved tables reference
// each other (see beginImport), so the new shard would serve a row whose declared reference
// is broken: a row created there later under that key would become its referent, and a
// deletion of the referent on the old shard would not cascade to it.
func (s *Store) checkOutward(ctx context.Context, db *sql.DB, owners []string, shard int) error {
	for _, r := range s.outward {
		c, parent := r.child, r.outside
		if r.parent != nil {
			parent = r.parent.Table
		}
		args, err := c.ownerArgs(owners)
		if err != nil {
			return err
		}
		from, to := strings.Split(r.from, ","), strings.Split(r.to, ",")
		var set, match []string
		for i := range from {
			set = append(set, "rebalance_c."+from[i]+" IS NOT NULL")
			match = append(match, "rebalance_p."+to[i]+" = rebalance_c."+from[i])
		}
		for batch := range slices.Chunk(args, armsPerStatement) {
			q := fmt.Sprintf("SELECT CAST(rebalance_c.%s AS TEXT) FROM %s AS rebalance_c WHERE rebalance_c.%s IN (%s) AND %s AND NOT EXISTS (SELECT 1 FROM %s AS rebalance_p WHERE %s) LIMIT 1",
				c.Key, c.Table, c.Owner, s.placeholders(1, len(batch)), strings.Join(set, " AND "), parent, strings.Join(match, " AND "))
			var key string
			switch err := db.QueryRowContext(ctx, q, batch...).Scan(&key); {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return s.wrap(shard, "look for references to tables not moved", err)
			case r.parent != nil:
				return s.wrap(shard, "look for references to rows not moved", fmt.Errorf("row %s of table %s references a row of table %s that this shard does not hold, another owner's who does not move with the row's owner: the reference would be broken on the new shard, and a deletion of the row it references would not reach it; move the owners that reference each other's rows together, or drop the foreign key: %w", excerpt(key), c.Table, parent, ErrSchema))
			default:
				return s.wrap(shard, "look for references to tables not moved", fmt.Errorf("row %s of table %s references a row of table %s, which the Store does not move, and this shard does not hold it: a copy would leave the reference broken; copy the rows of %s that moved owners reference to every shard first: %w", excerpt(key), c.Table, r.outside, r.outside, ErrSchema))
			}
		}
	}
	return nil
}
