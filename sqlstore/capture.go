package sqlstore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/fnv"
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

// changes is the name of the change table of s's table.
func (s *Store) changes() string { return "rebalance_changes_" + s.table.Table }

// createCapture creates the change table and the triggers of shard db, if missing.
func (s *Store) createCapture(ctx context.Context, db *sql.DB) error {
	t, o, k, c := s.table.Table, s.table.Owner, s.table.Key, s.changes()
	if s.dialect == SQLite {
		stmts := []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (seq INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT NULL, row_key NOT NULL)", c),
			fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s_owner ON %s (owner, seq)", c, c),
		}
		record := func(row string) string {
			return fmt.Sprintf("INSERT INTO %[1]s (owner, row_key) SELECT CAST(%[2]s.%[3]s AS TEXT), %[2]s.%[4]s WHERE EXISTS (SELECT 1 FROM rebalance_fence WHERE owner = CAST(%[2]s.%[3]s AS TEXT) AND state = %[5]d);",
				c, row, o, k, rebalance.Exporting)
		}
		for _, tr := range []struct{ op, body string }{
			{"INSERT", record("NEW")},
			{"UPDATE", record("OLD") + " " + record("NEW")},
			{"DELETE", record("OLD")},
		} {
			stmts = append(stmts, fmt.Sprintf("CREATE TRIGGER IF NOT EXISTS %s_%s AFTER %s ON %s BEGIN %s END",
				c, strings.ToLower(tr.op), tr.op, t, tr.body))
		}
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
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
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = $1 AND tgrelid = to_regclass($2))", c, t).Scan(&exists); err != nil {
		return err
	}
	if exists {
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
		fmt.Sprintf(`CREATE OR REPLACE FUNCTION %[1]s_record() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	IF TG_OP <> 'INSERT' AND EXISTS (SELECT 1 FROM rebalance_fence WHERE owner = OLD.%[2]s::text AND state = %[4]d) THEN
		INSERT INTO %[1]s (owner, row_key) VALUES (OLD.%[2]s::text, OLD.%[3]s);
	END IF;
	IF TG_OP <> 'DELETE' AND EXISTS (SELECT 1 FROM rebalance_fence WHERE owner = NEW.%[2]s::text AND state = %[4]d) THEN
		INSERT INTO %[1]s (owner, row_key) VALUES (NEW.%[2]s::text, NEW.%[3]s);
	END IF;
	RETURN NULL;
END
$f$`, c, o, k, rebalance.Exporting),
		fmt.Sprintf("CREATE TRIGGER %[1]s AFTER INSERT OR UPDATE OR DELETE ON %[2]s FOR EACH ROW WHEN (current_setting('rebalance.mover', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION %[1]s_record()", c, t),
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// ownersIn writes "owner IN (...)" of owners to q (the change table's owner is text).
func ownersIn(q *query, owners []string) {
	q.b.WriteString("owner IN (")
	for i, o := range owners {
		if i > 0 {
			q.b.WriteString(", ")
		}
		q.b.WriteString(q.arg(o))
	}
	q.b.WriteString(")")
}

// ClearChanges deletes the changes recorded of owners on shard; see rebalance.SharedStore.
func (s *Store) ClearChanges(ctx context.Context, migration string, token uint64, owners []string, shard int) error {
	return s.deleteChanges(ctx, migration, token, owners, shard, nil)
}

// Replay applies on to the oldest changes of owners recorded on from, up to limit of them,
// then deletes those on from; see rebalance.SharedStore. Keys are unique across the shards
// (as the copy's INSERT ... ON CONFLICT (key) assumes), so a changed key missing on from is
// deleted on to whoever's row it is there. A stop between the two transactions leaves the
// changes recorded, and they are applied again: it is idempotent.
func (s *Store) Replay(ctx context.Context, migration string, token uint64, owners []string, from, to int, limit int) (int, error) {
	db, err := s.shard(from)
	if err != nil {
		return 0, err
	}
	if _, err := s.shard(to); err != nil {
		return 0, err
	}
	q := &query{sqlite: s.dialect == SQLite}
	q.b.WriteString("SELECT seq, row_key FROM " + s.changes() + " WHERE ")
	ownersIn(q, owners)
	q.b.WriteString(" ORDER BY seq LIMIT " + q.arg(limit))
	rs, err := db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return 0, s.wrap(from, "read changes", err)
	}
	var seqs, keys []any
	seen := map[string]bool{}
	for rs.Next() {
		var seq int64
		var key any
		if err := rs.Scan(&seq, &key); err != nil {
			rs.Close()
			return 0, s.wrap(from, "read changes", err)
		}
		seqs = append(seqs, seq)
		if k := fmt.Sprintf("%T:%v", key, key); !seen[k] {
			seen[k] = true
			keys = append(keys, key)
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, s.wrap(from, "read changes", err)
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	// The rows of those keys on from: written on to; the keys not found: deleted there.
	var rows [][]any
	found := map[string]bool{}
	for batch := range slices.Chunk(keys, 5000) {
		got, err := s.rowsByKey(ctx, db, batch)
		if err != nil {
			return 0, s.wrap(from, "read changed rows", err)
		}
		for _, r := range got {
			found[fmt.Sprintf("%T:%v", r[s.key], r[s.key])] = true
		}
		rows = append(rows, got...)
	}
	var gone []any
	for _, k := range keys {
		if !found[fmt.Sprintf("%T:%v", k, k)] {
			gone = append(gone, k)
		}
	}
	tx, err := s.begin(ctx, to)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if err := s.step(ctx, tx, migration, token, owners, to, rebalance.Importing); err != nil {
		return 0, err
	}
	if err := s.insertRows(ctx, tx, rows); err != nil {
		return 0, s.wrap(to, fmt.Sprintf("write %d changed rows", len(rows)), err)
	}
	for batch := range slices.Chunk(gone, 5000) {
		q := &query{sqlite: s.dialect == SQLite}
		q.b.WriteString("DELETE FROM " + s.table.Table + " WHERE " + s.table.Key + " IN (")
		for i, k := range batch {
			if i > 0 {
				q.b.WriteString(", ")
			}
			q.b.WriteString(q.arg(k))
		}
		q.b.WriteString(")")
		if _, err := tx.ExecContext(ctx, q.b.String(), q.args...); err != nil {
			return 0, s.wrap(to, fmt.Sprintf("delete %d rows deleted since their copy", len(batch)), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap(to, "commit: replay changes", err)
	}
	return len(seqs), s.deleteChanges(ctx, migration, token, owners, from, seqs)
}

// deleteChanges deletes the changes seqs of owners on shard, every change of theirs if seqs
// is nil, in a transaction that checks the token and that they are fenced by migration.
func (s *Store) deleteChanges(ctx context.Context, migration string, token uint64, owners []string, shard int, seqs []any) error {
	tx, err := s.begin(ctx, shard)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.step(ctx, tx, migration, token, owners, shard, rebalance.Exporting, rebalance.Moved); err != nil {
		return err
	}
	if seqs == nil {
		for batch := range slices.Chunk(owners, armsPerStatement) {
			q := &query{sqlite: s.dialect == SQLite}
			q.b.WriteString("DELETE FROM " + s.changes() + " WHERE ")
			ownersIn(q, batch)
			if _, err := tx.ExecContext(ctx, q.b.String(), q.args...); err != nil {
				return s.wrap(shard, fmt.Sprintf("clear the changes of %d owners", len(batch)), err)
			}
		}
	}
	for batch := range slices.Chunk(seqs, 5000) {
		q := "DELETE FROM " + s.changes() + " WHERE seq IN (" + s.placeholders(1, len(batch)) + ")"
		if _, err := tx.ExecContext(ctx, q, batch...); err != nil {
			return s.wrap(shard, fmt.Sprintf("delete %d changes applied", len(batch)), err)
		}
	}
	return s.wrap(shard, "commit: delete changes", tx.Commit())
}

func hasKey(m map[string]uint64, k string) bool { _, ok := m[k]; return ok }

// rowsByKey reads the rows of keys on db, every copied column.
func (s *Store) rowsByKey(ctx context.Context, db *sql.DB, keys []any) ([][]any, error) {
	q := &query{sqlite: s.dialect == SQLite}
	q.b.WriteString("SELECT " + strings.Join(s.table.Columns, ", ") + " FROM " + s.table.Table + " WHERE " + s.table.Key + " IN (")
	for i, k := range keys {
		if i > 0 {
			q.b.WriteString(", ")
		}
		q.b.WriteString(q.arg(k))
	}
	q.b.WriteString(")")
	rs, err := db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out [][]any
	for rs.Next() {
		row, err := s.scanRow(rs, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rs.Err()
}

// scanRow scans extra leading columns into nothing and then the copied columns.
func (s *Store) scanRow(rs *sql.Rows, extra int) ([]any, error) {
	row := make([]any, extra+len(s.table.Columns))
	ptrs := make([]any, len(row))
	for i := range row {
		ptrs[i] = &row[i]
	}
	if err := rs.Scan(ptrs...); err != nil {
		return nil, err
	}
	return row, nil
}

// Sums returns each owner's row count and content digest on shard. On PostgreSQL the digest
// is computed in SQL, the sum of hashtextextended over each row's text form (the copied
// columns); SQLite has no hash function in SQL, so the rows are read and each one's values
// hashed here (FNV-1a over a typed encoding), summed modulo 2^64. Either way the digest does
// not depend on the order of the rows, and both shards of a comparison use the same rule.
func (s *Store) Sums(ctx context.Context, owners []string, shard int) ([]rebalance.Sum, error) {
	db, err := s.shard(shard)
	if err != nil {
		return nil, err
	}
	out := make([]rebalance.Sum, len(owners))
	at := make(map[string][]int, len(owners))
	for i, o := range owners {
		arg, err := s.ownerArg(o)
		if err != nil {
			return nil, err
		}
		k := fmt.Sprint(arg)
		at[k] = append(at[k], i)
		out[i].Digest = "0"
	}
	cols, t, o := strings.Join(s.table.Columns, ", "), s.table.Table, s.table.Owner
	for batch := range slices.Chunk(owners, armsPerStatement) {
		args := make([]any, len(batch))
		for i, o := range batch {
			args[i], _ = s.ownerArg(o)
		}
		var q string
		if s.dialect == PostgreSQL {
			q = fmt.Sprintf("SELECT %s, COUNT(*), COALESCE(SUM(hashtextextended(ROW(%s)::text, 0)::numeric), 0)::text FROM %s WHERE %s IN (%s) GROUP BY %s",
				o, cols, t, o, s.placeholders(1, len(batch)), o)
		} else {
			q = fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s IN (%s)", o, cols, t, o, s.placeholders(1, len(batch)))
		}
		rs, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, s.wrap(shard, fmt.Sprintf("sum the rows of %d owners", len(batch)), err)
		}
		digests := map[string]uint64{}
		for rs.Next() {
			if s.dialect == PostgreSQL {
				var owner any
				var n int64
				var digest string
				if err := rs.Scan(&owner, &n, &digest); err != nil {
					rs.Close()
					return nil, s.wrap(shard, "sum rows", err)
				}
				for _, i := range at[ownerKey(owner)] {
					out[i] = rebalance.Sum{Rows: n, Digest: digest}
				}
				continue
			}
			row, err := s.scanRow(rs, 1)
			if err != nil {
				rs.Close()
				return nil, s.wrap(shard, "sum rows", err)
			}
			k := ownerKey(row[0])
			digests[k] += rowHash(row[1:])
			for _, i := range at[k] {
				out[i].Rows++
			}
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, s.wrap(shard, "sum rows", err)
		}
		for k, d := range digests {
			for _, i := range at[k] {
				out[i].Digest = strconv.FormatUint(d, 10)
			}
		}
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

// rowHash hashes one row's values with their types, so that 1 and "1" differ.
func rowHash(row []any) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	for _, v := range row {
		switch x := v.(type) {
		case nil:
			h.Write([]byte{0})
		case int64:
			h.Write([]byte{1})
			binary.LittleEndian.PutUint64(buf[:], uint64(x))
			h.Write(buf[:])
		case float64:
			h.Write([]byte{2})
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(x))
			h.Write(buf[:])
		case string:
			h.Write([]byte{3})
			binary.LittleEndian.PutUint64(buf[:], uint64(len(x)))
			h.Write(buf[:])
			h.Write([]byte(x))
		case []byte:
			h.Write([]byte{4})
			binary.LittleEndian.PutUint64(buf[:], uint64(len(x)))
			h.Write(buf[:])
			h.Write(x)
		case bool:
			h.Write([]byte{5})
			if x {
				h.Write([]byte{1})
			} else {
				h.Write([]byte{0})
			}
		case time.Time:
			h.Write([]byte{6})
			binary.LittleEndian.PutUint64(buf[:], uint64(x.UnixNano()))
			h.Write(buf[:])
		default:
			fmt.Fprintf(h, "%T:%v", x, x)
		}
	}
	return h.Sum64()
}

// FirstDiff returns the first key at which owner's rows on a and b differ: walking a's rows
// in key order, the first missing on b or different there; else the first of b's rows
// missing on a. It reads the owner's rows of both shards (it runs only when their sums
// differ).
func (s *Store) FirstDiff(ctx context.Context, owner string, a, b int) (string, error) {
	all := func(shard int) ([][]any, error) {
		var out [][]any
		var cur rebalance.Cursor
		for {
			rows, err := s.readRows(ctx, owner, shard, cur, 5000)
			if err != nil || len(rows) == 0 {
				return out, err
			}
			out = append(out, rows...)
			if cur, err = encodeCursor(rows[len(rows)-1][s.key]); err != nil {
				return nil, s.wrap(shard, "read key", err)
			}
		}
	}
	ra, err := all(a)
	if err != nil {
		return "", err
	}
	rb, err := all(b)
	if err != nil {
		return "", err
	}
	byKey := func(rows [][]any) map[string]uint64 {
		m := make(map[string]uint64, len(rows))
		for _, r := range rows {
			m[fmt.Sprint(r[s.key])] = rowHash(r)
		}
		return m
	}
	ha, hb := byKey(ra), byKey(rb)
	for _, r := range ra {
		k := fmt.Sprint(r[s.key])
		if h, ok := hb[k]; !ok || h != ha[k] {
			return k, nil
		}
	}
	for _, r := range rb {
		if k := fmt.Sprint(r[s.key]); !hasKey(ha, k) {
			return k, nil
		}
	}
	return "", nil
}
