package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard/rebalance"
)

// maxParams bounds the parameters of one statement: below SQLite's 32766 and PostgreSQL's
// 65535.
const maxParams = 30000

// A Store's cursor is the index of the table it is in, in decimal, then the key of the last
// row copied of that table ("" before the first): the kind of the key's value (i, s or b)
// then its text. An owner past its last table is done.

// encodeKey turns a key value as the driver returns it into the key part of a cursor.
func encodeKey(v any) (string, error) {
	switch k := v.(type) {
	case int64:
		return "i" + strconv.FormatInt(k, 10), nil
	case string:
		return "s" + k, nil
	case []byte:
		return "b" + string(k), nil
	}
	return "", fmt.Errorf("key value %v of type %T: want an integer, text or bytes column: %w", v, v, rebalance.ErrConfig)
}

// decodeKey is encodeKey's inverse; "" is before the first key.
func decodeKey(c string) (any, error) {
	if c == "" {
		return nil, nil
	}
	switch s := c[1:]; c[0] {
	case 'i':
		return strconv.ParseInt(s, 10, 64)
	case 's':
		return s, nil
	case 'b':
		return []byte(s), nil
	}
	return nil, fmt.Errorf("cursor key %q was not made by this package: %w", c, rebalance.ErrConfig)
}

// cursorAt returns the cursor in table t after key (encoded).
func cursorAt(t int, key string) rebalance.Cursor {
	return rebalance.Cursor(strconv.Itoa(t) + key)
}

// splitCursor returns the table of c and its key part; "" is the start of table 0.
func (s *Store) splitCursor(c rebalance.Cursor) (int, string, error) {
	if c == "" {
		return 0, "", nil
	}
	digits := strings.IndexFunc(string(c), func(r rune) bool { return r < '0' || r > '9' })
	if digits < 0 {
		digits = len(c)
	}
	t, err := strconv.Atoi(string(c[:digits]))
	if err != nil || t > len(s.tables) {
		return 0, "", fmt.Errorf("sqlstore: cursor %q was not made by this Store: %w", excerpt(string(c)), rebalance.ErrConfig)
	}
	return t, string(c[digits:]), nil
}

// excerpt quotes at most 80 bytes of s.
func excerpt(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// readRows reads up to limit rows of owner in table t on db after the key cur, in key order.
func (t *table) readRows(ctx context.Context, db *sql.DB, owner string, cur string, limit int) ([][]any, error) {
	o, err := t.ownerArg(owner)
	if err != nil {
		return nil, err
	}
	after, err := decodeKey(cur)
	if err != nil {
		return nil, err
	}
	q, args := t.selectFirst, []any{o, limit}
	if after != nil {
		q, args = t.selectAfter, append(args, after)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		row, err := t.scanRow(rows, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// insertRows writes rows of table t, of owners, many per statement, replacing rows of the
// same key (upsert: of the same owner, or of one of owners this shard does not serve yet).
// A row whose key another owner's row holds is an error wrapping ErrKeyTaken.
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, t *table, rows [][]any, owners []string) error {
	ncol := len(t.Columns)
	per := t.perStatement()
	group := groupList(owners)
	var b strings.Builder
	for len(rows) > 0 {
		batch := rows[:min(len(rows), per)]
		rows = rows[len(batch):]
		b.Reset()
		b.Grow(len(t.insertHead) + len(t.insertTail) + 8*ncol*len(batch))
		b.WriteString(t.insertHead)
		args := make([]any, 0, ncol*len(batch)+1)
		for i, r := range batch {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			s.writePlaceholders(&b, i*ncol+1, ncol)
			b.WriteByte(')')
			args = append(args, r...)
		}
		b.WriteString(t.upsert(s.placeholders(len(args)+1, 1)))
		res, err := tx.ExecContext(ctx, b.String(), append(args, group)...)
		if err != nil {
			return err
		}
		if wrote, err := res.RowsAffected(); err != nil {
			return err
		} else if wrote != int64(len(batch)) {
			keys := make([]any, len(batch))
			for i, r := range batch {
				keys[i] = r[t.key]
			}
			return s.keyTaken(ctx, tx, t, s.placeholders(1, len(keys)), keys, group, wrote, len(batch))
		}
	}
	return nil
}

// keyTaken returns the error of a write of want rows of table t, of the owners whose JSON
// list is group, that wrote fewer (wrote); keys is an SQL list or SELECT of the rows' keys,
// with args. It is ErrKeyTaken naming one of the keys that a row of another owner holds (one
// this shard serves, or imports in another group), or if there is none (an application
// trigger that skipped a row) an error saying how many were written.
func (s *Store) keyTaken(ctx context.Context, tx querier, t *table, keys string, args []any, group string, wrote int64, want int) error {
	var key string
	var owner sql.NullString
	err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT CAST(%[2]s AS TEXT), CAST(%[3]s AS TEXT) FROM %[1]s WHERE %[2]s IN (%[4]s) AND NOT (%[5]s AND %[6]s) LIMIT 1",
		t.Table, t.Key, t.Owner, keys, t.importing(t.Table), t.inGroup(t.Table, s.placeholders(len(args)+1, 1))), append(slices.Clip(args), group)...).Scan(&key, &owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("table %s: wrote %d of %d rows", t.Table, wrote, want)
	case err != nil:
		return fmt.Errorf("table %s: wrote %d of %d rows, then looking for a key held by another owner: %w", t.Table, wrote, want, err)
	}
	return fmt.Errorf("table %s: key %s of a moving owner's row is owner %s's here, an owner this shard serves or imports with other owners: keys must be unique across the shards (a sequence of each shard's own repeats them); nothing was written: %w",
		t.Table, excerpt(key), excerpt(cmp.Or(owner.String, "NULL")), ErrKeyTaken)
}

// query builds a statement and its arguments in the order its parameters appear: "$n" on
// PostgreSQL, "?" on SQLite (see placeholders).
type query struct {
	sqlite bool
	b      strings.Builder
	args   []any
}

// arg appends v to the arguments and returns its parameter.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	if q.sqlite {
		return "?"
	}
	return "$" + strconv.Itoa(len(q.args))
}

// list appends args and returns their parameters, comma separated.
func (q *query) list(args []any) string {
	ps := make([]string, len(args))
	for i, a := range args {
		ps[i] = q.arg(a)
	}
	return strings.Join(ps, ", ")
}

// in appends args and returns their parameters, comma separated, for an IN list: on
// PostgreSQL padded (see padded).
func (q *query) in(args []any) string {
	if !q.sqlite {
		args = padded(args)
	}
	return q.list(args)
}

// padded returns args with the last repeated up to the next power of two, for an IN list on
// PostgreSQL, which ignores the repeats. PostgreSQL keeps a prepared statement's plan by its
// text on each connection: lists of any length then take a few texts, each planned once a
// connection, not one a length (a group's owners vary in number, a shard's chunks in keys),
// which a move planned anew on most of its calls.
func padded[T any](args []T) []T {
	n := len(args)
	if n < 2 {
		return args
	}
	size := 1 << bits.Len(uint(n-1))
	out := make([]T, size)
	copy(out, args)
	for i := n; i < size; i++ {
		out[i] = args[n-1]
	}
	return out
}

// arms writes a SELECT of cols of table t in schema (empty: the connection's own) with a
// leading column rebalance_arm: up to limit rows of the owners at positions batch of owners,
// each owner's after its key in keys, in batch order then key order. One arm per owner, a
// range of the (owner, key) index each.
func (q *query) arms(t *table, schema, cols string, owners []string, batch []int, keys []string, limit int) error {
	from := t.Table
	if schema != "" {
		from = schema + "." + t.Table
	}
	q.b.WriteString("SELECT * FROM (")
	for arm, i := range batch {
		arg, err := t.ownerArg(owners[i])
		if err != nil {
			return err
		}
		cur, err := decodeKey(keys[i])
		if err != nil {
			return err
		}
		if arm > 0 {
			q.b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&q.b, "SELECT %d AS rebalance_arm, %s FROM (SELECT %s FROM %s WHERE %s = %s", arm, cols, cols, from, t.Owner, q.arg(arg))
		if cur != nil {
			fmt.Fprintf(&q.b, " AND %s > %s", t.Key, q.arg(cur))
		}
		fmt.Fprintf(&q.b, " ORDER BY %s.%s LIMIT %s) AS arm%d", t.Table, t.Key, q.arg(limit), arm)
	}
	fmt.Fprintf(&q.b, ") AS arms ORDER BY rebalance_arm, %s LIMIT %s", t.Key, q.arg(limit))
	return nil
}

// whole writes a SELECT of cols of table t with a leading column rebalance_arm of 0: up to
// limit+1 rows of the owners at positions batch of owners, in no order (a chunk of owners
// that have no cursor yet reads them this way, and by arms only if more than limit come).
func (q *query) whole(t *table, cols string, owners []string, batch []int, limit int) error {
	args := make([]any, len(batch))
	for arm, i := range batch {
		arg, err := t.ownerArg(owners[i])
		if err != nil {
			return err
		}
		args[arm] = arg
	}
	fmt.Fprintf(&q.b, "SELECT 0 AS rebalance_arm, %s FROM %s WHERE %s IN (%s) LIMIT %s", cols, t.Table, t.Owner, q.in(args), q.arg(limit+1))
	return nil
}

// chunkBytes bounds what a chunk read into the mover's memory holds (the rows through Go,
// the tuples passed through on PostgreSQL): a chunk ends after the row that reaches it, so
// that rows of megabytes, in chunks grown to IdleChunkRows, do not take gigabytes. The
// attached SQLite copy holds nothing in Go.
const chunkBytes = 32 << 20

// armsPerStatement bounds the owners one statement of CopyChunk or DeleteChunk names.
const armsPerStatement = 500

// CopyChunk copies owners' rows after their cursors from shard from to shard to, up to limit
// rows in all, in one transaction on to; see rebalance.SharedStore. It goes table by table,
// parents first, each owner through every table in turn: one statement reads the rows of up
// to 500 owners of a table (a UNION ALL of one index range per owner, each up to the limit,
// the whole cut at the limit), and multi-row INSERTs write them, in a transaction whose
// first statement checks the token and the owners' fences on to.
func (s *Store) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	switch {
	case limit <= 0:
		return nil, 0, false, fmt.Errorf("sqlstore: copy chunk of %d rows: %w", limit, rebalance.ErrConfig)
	case len(after) != len(owners):
		return nil, 0, false, fmt.Errorf("sqlstore: copy chunk: %d cursors for %d owners: %w", len(after), len(owners), rebalance.ErrConfig)
	}
	db, err := s.shard(from)
	if err != nil {
		return nil, 0, false, err
	}
	if _, err := s.shard(to); err != nil {
		return nil, 0, false, err
	}
	in := make([]int, len(owners)) // the table of each owner's cursor
	keys := make([]string, len(owners))
	for i, c := range after {
		if in[i], keys[i], err = s.splitCursor(c); err != nil {
			return nil, 0, false, err
		}
	}
	if src, err := s.attachable(ctx, from, to); err != nil {
		return nil, 0, false, err
	} else if src != "" {
		n, full, err := s.copyAttached(ctx, migration, token, owners, src, to, in, keys, limit)
		switch {
		case errors.Is(err, errAttach):
			// A file the connection cannot attach (another VFS, a key, read-only): this
			// shard's rows go through Go from now on. Nothing was written.
			s.files.Store(from, "")
		case err != nil:
			return nil, 0, false, err
		default:
			return cursors(in, keys), n, !full, nil
		}
	}
	if s.dialect == PostgreSQL && !s.plainCopies {
		n, full, err := s.copyRaw(ctx, migration, token, owners, from, to, in, keys, limit)
		switch {
		case errors.Is(err, errNoRaw): // through Go, below
		case err != nil:
			return nil, 0, false, err
		default:
			return cursors(in, keys), n, !full, nil
		}
	}
	rows := make([][][]any, len(s.tables)) // the rows read, by table
	room := s.chunkBytes
	n, full, err := s.walkChunk(in, keys, limit, func(ti int, batch []int, limit int) (int, bool, error) {
		got, size, err := s.readArms(ctx, s.tables[ti], db, owners, batch, keys, limit, room)
		if err != nil {
			return 0, false, s.wrap(from, fmt.Sprintf("read rows of %d owners in table %s", len(batch), s.tables[ti].Table), err)
		}
		rows[ti] = append(rows[ti], got...)
		room -= size
		return len(got), room <= 0, nil
	})
	if err != nil {
		return nil, 0, false, err
	}
	next := cursors(in, keys)
	if n == 0 {
		return next, 0, !full, nil
	}
	what := fmt.Sprintf("write %d rows of %d owners", n, len(owners))
	release, err := s.writeTurn(ctx, to)
	if err != nil {
		return nil, 0, false, err
	}
	defer release()
	tx, conn, done, err := s.beginImport(ctx, to, "")
	if err != nil {
		return nil, 0, false, err
	}
	defer done()
	if err := s.step(ctx, tx, migration, token, owners, to, rebalance.Importing); err != nil {
		return nil, 0, false, err
	}
	for ti, t := range s.tables {
		if err := s.writeRows(ctx, tx, conn, ti, rows[ti], owners); err != nil {
			return nil, 0, false, s.wrap(to, what+" in table "+t.Table, err)
		}
	}
	if err := s.commitMover(ctx, tx); err != nil {
		return nil, 0, false, s.wrap(to, "commit: "+what, err)
	}
	return next, n, !full, nil
}

// walkChunk walks a chunk of up to limit rows through the tables, parents first, each owner
// from its cursor (in, keys): read handles up to limit rows of table ti of the owners at
// positions batch (up to armsPerStatement of them), sets their keys to their last row's, and
// returns how many rows it handled, and whether it cut them short at the chunk's bytes
// (Store.chunkBytes), which ends the chunk. An owner moves past a table once the table has no row of
// it left. walkChunk returns the rows handled and whether the chunk is full.
func (s *Store) walkChunk(in []int, keys []string, limit int, read func(ti int, batch []int, limit int) (int, bool, error)) (int, bool, error) {
	n := 0
	for ti := range s.tables {
		at := atTable(in, ti) // the owners in table ti
		for batch := range slices.Chunk(at, armsPerStatement) {
			got, cut, err := read(ti, batch, limit-n)
			if err != nil {
				return 0, false, err
			}
			if n += got; n == limit || cut {
				return n, true, nil // table ti may have rows of these owners left
			}
		}
		for _, i := range at {
			in[i], keys[i] = ti+1, ""
		}
	}
	return n, false, nil
}

// atTable returns the positions of the owners whose cursors are in table ti.
func atTable(in []int, ti int) []int {
	var at []int
	for i, t := range in {
		if t == ti {
			at = append(at, i)
		}
	}
	return at
}

// identity returns 0, 1, ..., n-1.
func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// cursors returns the cursors of owners in tables in at keys.
func cursors(in []int, keys []string) []rebalance.Cursor {
	next := make([]rebalance.Cursor, len(in))
	for i := range in {
		next[i] = cursorAt(in[i], keys[i])
	}
	return next
}

// readArms reads, in one statement, up to limit rows of table t on db of the owners at
// positions batch of owners, each owner's after its key in keys, in batch order then key
// order, and sets keys[i] to the key of owner i's last row read. It stops after the row
// that brings what it read to room bytes (rowBytes), and returns that size too.
func (s *Store) readArms(ctx context.Context, t *table, db *sql.DB, owners []string, batch []int, keys []string, limit, room int) ([][]any, int, error) {
	q := &query{sqlite: s.dialect == SQLite}
	if err := q.arms(t, "", t.reads, owners, batch, keys, limit); err != nil {
		return nil, 0, err
	}
	var from interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	} = db
	if s.dialect == PostgreSQL {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, 0, err
		}
		defer tx.Rollback() // it only read
		if err := rangesOnly(ctx, tx); err != nil {
			return nil, 0, err
		}
		from = tx
	}
	rs, err := from.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, 0, err
	}
	defer rs.Close()
	ncol := len(t.Columns)
	ptrs := make([]any, ncol+1)
	var arm int64
	ptrs[0] = &arm
	var rows [][]any
	size := 0
	var cells []any // the rows' values, allocated a few rows at a time
	for rs.Next() {
		if len(cells) < ncol {
			cells = make([]any, ncol*min(limit-len(rows), 256))
		}
		row := cells[:ncol:ncol]
		cells = cells[ncol:]
		for i := range row {
			ptrs[i+1] = &row[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, 0, err
		}
		if arm < 0 || arm >= int64(len(batch)) {
			return nil, 0, fmt.Errorf("row of arm %d among %d", arm, len(batch))
		}
		if keys[batch[arm]], err = encodeKey(row[t.key]); err != nil {
			return nil, 0, err
		}
		rows = append(rows, row)
		if size += rowBytes(row); size >= room {
			break // the rows after stay after the cursor
		}
	}
	return rows, size, rs.Err()
}

// rowBytes is about what a row read into Go holds.
func rowBytes(row []any) int {
	n := 0
	for _, v := range row {
		switch v := v.(type) {
		case []byte:
			n += len(v)
		case string:
			n += len(v)
		}
		n += 16
	}
	return n
}

// Copy makes owner's rows on shard to equal those on shard from, in one transaction on to
// that deletes the owner's rows there (children first) and inserts every row read from
// from (parents first), chunk by chunk.
//
// It replaces rows of the owner already on to only where they are what the last Copy to that
// shard wrote, and Delete has not deleted the old copy since: the control database's
// rebalance_copying records the Copy, with the sum of what it wrote (rows and digest, as
// Sums), before its commit. A crash, or a comparison that failed, before the owner was
// marked copied left them. Other rows there, or a copy's rows changed since, were written
// by a process that routed the owner to a shard that does not serve it, or the owner is
// served there already: Copy then changes nothing and returns an error wrapping
// rebalance.ErrStrayRows, as it does if rows of the owner are written there during the
// copy. If from's count after the copy differs from the rows copied, or
// from holds no row while to held rows that are not such a copy (a twin of the Migration
// moved the owner and deleted its old copy), it changes nothing and returns an error
// wrapping rebalance.ErrSourceEmpty; over a crashed copy of its own, an empty source is the
// application's deletion of the owner's rows, and Copy makes to empty too.
func (s *Store) Copy(ctx context.Context, owner string, from, to int) (err error) {
	rec, err := s.copies(ctx, owner, to)
	if err != nil {
		return err
	}
	copying, committing := rec.on, false
	if !copying {
		// Recorded before the copy, so that a crash after its commit leaves it; forgotten
		// again if the copy failed before its commit. A commit that failed may have landed
		// (the answer lost): its rows need the record, or the next Copy takes them for
		// stray ones and the owner can never move.
		if err := s.setCopying(ctx, owner, to, true); err != nil {
			return err
		}
		defer func() {
			if err != nil && !committing {
				err = errors.Join(err, s.setCopying(context.WithoutCancel(ctx), owner, to, false))
			}
		}()
	}
	db, err := s.shard(from)
	if err != nil {
		return err
	}
	// The schema as Init found it on both shards, as each window of the Shared mover
	// checks: a column added since would be left behind, one retyped converted, and the
	// counts that follow would not tell.
	for _, i := range []int{from, to} {
		d, err := s.shard(i)
		if err != nil {
			return err
		}
		if err := s.schemaAsInit(ctx, d, i); err != nil {
			return err
		}
	}
	release, err := s.writeTurn(ctx, to)
	if err != nil {
		return err
	}
	defer release()
	known := s.versions.known[to].Load()
	tx, err := s.begin(ctx, to)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.moverWrites(ctx, tx); err != nil {
		return s.wrap(to, "mark the mover's writes", err)
	}
	var held rebalance.Sum // what the owner has on to, where a copy of its own may be
	if copying && rec.known {
		if held, err = s.heldIn(ctx, tx, owner, to, true); err != nil {
			return err
		}
	}
	if s.copyStep != nil {
		s.copyStep("held", owner)
	}
	deleted, refs, err := s.deleteOwner(ctx, tx, owner, to)
	if err != nil {
		return s.wrap(to, fmt.Sprintf("delete rows of owner %q", owner), err)
	}
	if copying && rec.known && deleted > 0 && (deleted != held.Rows || !slices.Contains(rec.sums, sumText(held))) {
		return s.wrap(to, fmt.Sprintf("copy owner %q", owner), fmt.Errorf("%d rows of the owner here, which are not what the last copy to this shard wrote: rows written here since by a process that routed the owner here by a placement not in force (a migration made before the one in force finished, or a wrong plan, or an access of another owner), or the owner is served here already (another mover moved it): copying over them would lose them: nothing changed (bring what was written here to %s, which serves the owner, delete the owner's rows here, and run again): %w", deleted, s.names[from], rebalance.ErrStrayRows))
	}
	copied := int64(0)
	for _, t := range s.tables {
		cur := ""
		for {
			rows, err := t.readRows(ctx, db, owner, cur, 5000)
			if err != nil {
				return s.wrap(from, fmt.Sprintf("read rows of owner %q in table %s", owner, t.Table), err)
			}
			if len(rows) == 0 {
				break
			}
			copied += int64(len(rows))
			if err := s.insertRows(ctx, tx, t, rows, []string{owner}); err != nil {
				return s.wrap(to, fmt.Sprintf("write rows of owner %q in table %s", owner, t.Table), err)
			}
			if cur, err = encodeKey(rows[len(rows)-1][t.key]); err != nil {
				return s.wrap(from, "read key", err)
			}
		}
	}
	if copied == 0 && deleted > 0 {
		// The destination's rows are a crashed copy's of its own, and the application has
		// deleted every row of the owner since: the copy of nothing is right. Asked again
		// after the read of the source: a twin of the Migration that moved the owner
		// forgets the copy before it deletes the old copy, so if the source was empty
		// because a twin deleted it, the record is gone by now.
		again := false
		if copying {
			now, err := s.copies(ctx, owner, to)
			if err != nil {
				return err
			}
			again = now.on
		}
		if !again {
			return s.wrap(from, fmt.Sprintf("copy owner %q", owner), fmt.Errorf("no row of the owner here, while %s holds %d: nothing changed: %w", s.names[to], deleted, rebalance.ErrSourceEmpty))
		}
	}
	// The rows were read in several statements: a deletion between two of them (a twin of
	// the Migration deleting the old copy) leaves a part; counted again, it shows.
	n, err := s.Count(ctx, owner, from)
	if err != nil {
		return err
	}
	if n != copied {
		return s.wrap(from, fmt.Sprintf("copy owner %q", owner), fmt.Errorf("%d rows of the owner read here, %d here now: the source changed during the copy: nothing changed: %w", copied, n, rebalance.ErrSourceEmpty))
	}
	if deleted > 0 && !copying {
		return s.wrap(to, fmt.Sprintf("copy owner %q", owner), fmt.Errorf("%d rows of the owner here that no copy to this shard wrote: a process routed the owner here by a placement not in force (a migration made before the one in force finished, or a wrong plan), or it is served here already (another mover moved it): copying over them would lose them: nothing changed: %w", deleted, rebalance.ErrStrayRows))
	}
	if err := s.sameReferences(ctx, tx, to, refs); err != nil {
		return err
	}
	if s.copyStep != nil {
		s.copyStep("copied", owner)
	}
	// What the copy leaves, counted: a row written here during the copy is not its own.
	made, err := s.heldIn(ctx, tx, owner, to, false)
	if err != nil {
		return err
	}
	if made.Rows != copied {
		return s.wrap(to, fmt.Sprintf("copy owner %q", owner), fmt.Errorf("%d rows of the owner here at the end of a copy of %d: a process wrote rows of the owner here during the copy, routed by a placement not in force: nothing changed: %w", made.Rows, copied, rebalance.ErrStrayRows))
	}
	// Until the commit, which may land unseen, the shard holds what it held or the copy;
	// after it, the copy. An older build's record stays as it is until the commit.
	if rec.known || !rec.on {
		may := []rebalance.Sum{made}
		if deleted > 0 {
			may = append(may, held)
		}
		if err := s.recordCopy(ctx, owner, to, may...); err != nil {
			return err
		}
	}
	// Counted, as the Shared mover's fence changes are: a shard restored to before the copy
	// is told (ErrShardBehind) rather than routed to.
	v, err := s.bump(ctx, tx, to, known)
	if err != nil {
		return err
	}
	committing = true
	if err := s.commitMover(ctx, tx); err != nil {
		return s.wrap(to, fmt.Sprintf("commit the copy of owner %q", owner), err)
	}
	s.counted(to, v)
	return s.recordCopy(ctx, owner, to, made)
}

// heldIn returns the sum of owner's rows on shard in tx, as Sums computes it. With lock, on
// PostgreSQL it first locks them (FOR UPDATE), so that none changes before tx deletes them;
// a row written meanwhile is counted by the deletion, and told apart by the count.
func (s *Store) heldIn(ctx context.Context, tx *sql.Tx, owner string, shard int, lock bool) (rebalance.Sum, error) {
	if lock && s.dialect == PostgreSQL {
		for _, t := range s.tables {
			sel, err := s.ownersDeletion(t, []string{owner})
			if err == nil {
				_, err = tx.ExecContext(ctx, fmt.Sprintf("SELECT 1 FROM %s WHERE %s FOR UPDATE", t.Table, sel.where), sel.args...)
			}
			if err != nil {
				return rebalance.Sum{}, s.wrap(shard, fmt.Sprintf("lock the rows of owner %q in table %s", owner, t.Table), err)
			}
		}
	}
	sums, err := s.sumsBy(ctx, inTx(tx), []string{owner}, shard)
	if err != nil {
		return rebalance.Sum{}, s.wrap(shard, fmt.Sprintf("sum the rows of owner %q", owner), err)
	}
	return sums[0], nil
}

// deleteOwner deletes every row of owner on shard in tx, children first (see
// deleteSelected), and returns how many, and the foreign keys among the tables it went by.
func (s *Store) deleteOwner(ctx context.Context, tx *sql.Tx, owner string, shard int) (int64, []reference, error) {
	refs, err := s.references(ctx, tx, shard)
	if err != nil {
		return 0, nil, err
	}
	var deleted int64
	for _, t := range s.tablesFor(true) {
		sel, err := s.ownersDeletion(t, []string{owner})
		if err != nil {
			return 0, nil, err
		}
		n, err := s.deleteSelected(ctx, tx, refs, sel, []string{owner})
		if err != nil {
			return 0, nil, fmt.Errorf("table %s: %w", t.Table, err)
		}
		deleted += n
	}
	return deleted, refs, nil
}

// sameReferences checks, at the end of a deletion of old copies in tx on shard, that no
// table outside the Store references its tables (see outsideRefs) and that the foreign
// keys among them are still refs, which the deletion went by (PostgreSQL: one created
// meanwhile would have cascaded unchecked; none can be created until tx ends); and that
// the change capture is whole (checkCapture): without it the guard refused no write of a
// moved owner's rows there, which the deletion would take.
func (s *Store) sameReferences(ctx context.Context, tx *sql.Tx, shard int, refs []reference) error {
	now, err := s.references(ctx, tx, shard)
	if err == nil && !slices.Equal(now, refs) {
		err = fmt.Errorf("the foreign keys among the tables changed during the deletion: %w", ErrSchema)
	}
	return cmp.Or(s.wrap(shard, "check the tables that reference the moved ones", err), s.checkCapture(ctx, tx, shard),
		s.checkDeleteTriggers(ctx, tx, shard))
}

// deleteTrigger finds the header of a SQLite trigger that fires on DELETE: DELETE, then
// ON, with blanks or comments between them.
var deleteTrigger = regexp.MustCompile(`(?is)\bDELETE(?:\s|/\*.*?\*/|--[^\n]*(?:\n|$))+ON\b`)

// checkDeleteTriggers returns an error wrapping ErrSchema naming a trigger of the
// application's on a moved table of shard that the deletion of old copies in tx fired (or
// would fire): it may change rows the move does not, another owner's in another table say,
// as a cascade would, and nothing compares them. Called before tx commits, so the
// deletion, and what the trigger did, roll back. On PostgreSQL a mover that writes as a
// replica (Options.ReplicaWrites) fires only triggers enabled ALWAYS or REPLICA.
func (s *Store) checkDeleteTriggers(ctx context.Context, tx *sql.Tx, shard int) error {
	var tbl, name string
	var err error
	if s.dialect == PostgreSQL {
		enabled := "<> 'D'"
		if s.replicaWrites {
			enabled = "IN ('A', 'R')"
		}
		// A rule ON DELETE DO ALSO (or INSTEAD) acts as a trigger would, and obeys
		// session_replication_role as triggers do.
		err = tx.QueryRowContext(ctx, `SELECT tgrelid::regclass::text, tgname::text FROM pg_trigger
			WHERE tgrelid = ANY ('{`+s.movedTables+`}'::regclass[]) AND NOT tgisinternal AND tgname NOT LIKE 'rebalance\_%'
			AND tgtype & 8 <> 0 AND tgenabled `+enabled+`
			UNION ALL SELECT ev_class::regclass::text, 'rule ' || rulename::text FROM pg_rewrite
			WHERE ev_class = ANY ('{`+s.movedTables+`}'::regclass[]) AND ev_type = '4' AND ev_enabled `+enabled+` LIMIT 1`).Scan(&tbl, &name)
	} else {
		var rows *sql.Rows
		if rows, err = tx.QueryContext(ctx, `SELECT tbl_name, name, sql FROM sqlite_master WHERE type = 'trigger' AND name NOT LIKE 'rebalance\_%' ESCAPE '\'`); err == nil {
			err = sql.ErrNoRows
			for rows.Next() && errors.Is(err, sql.ErrNoRows) {
				var t, n, q string
				if err = rows.Scan(&t, &n, &q); err == nil {
					err = sql.ErrNoRows
					if slices.ContainsFunc(s.tables, func(m *table) bool { return strings.EqualFold(m.Table, t) }) && deleteTrigger.MatchString(q) {
						tbl, name, err = t, n, nil
					}
				}
			}
			err = cmp.Or(rows.Close(), rows.Err(), err)
		}
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err == nil:
		err = fmt.Errorf("table %s has a trigger or rule of the application's, %s, that fires on DELETE: the deletion of old copies fires it, and it may change rows the move does not (another owner's, as a cascade would), which nothing compares; nothing was deleted; drop or disable it for the move (PostgreSQL: Options.ReplicaWrites keeps the application's triggers silent for the mover's writes): %w", tbl, name, ErrSchema)
	}
	return s.wrap(shard, "check the triggers of the moved tables", err)
}

// Count returns how many rows owner has on shard, in all its tables.
func (s *Store) Count(ctx context.Context, owner string, shard int) (int64, error) {
	n, err := s.Counts(ctx, []string{owner}, shard)
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// Counts returns how many rows each of owners has on shard in all the tables, a statement
// per table and 500 owners.
func (s *Store) Counts(ctx context.Context, owners []string, shard int) ([]int64, error) {
	out := make([]int64, len(owners))
	var n int64
	err := s.perOwner(ctx, owners, shard, "count rows", func(t *table, in string) string {
		return fmt.Sprintf("SELECT %s, COUNT(*) FROM %s WHERE %s IN (%s) GROUP BY %s", s.ownerText(t), t.Table, t.Owner, in, t.Owner)
	}, func(t *table, rs rowsScanner) (owner any, err error) {
		return owner, rs.Scan(&owner, &n)
	}, func(t *table, i int) { out[i] += n })
	return out, err
}

// perOwner runs through byIndex, for each table and each 500 of owners, the statement query
// returns for the placeholders of their owner values. It calls scan for each row (which
// reads the row and returns its owner column's value, selected by ownerText), then add for
// each position in owners of that owner.
func (s *Store) perOwner(ctx context.Context, owners []string, shard int, what string,
	statement func(t *table, in string) string, scan func(t *table, rs rowsScanner) (any, error), add func(t *table, i int)) error {
	db, err := s.shard(shard)
	if err != nil {
		return err
	}
	return s.perOwnerBy(ctx, func(read func(lookup) error) error { return s.byIndex(ctx, db, shard, read) },
		owners, shard, what, statement, scan, add)
}

// perOwnerBy is perOwner with its statements run through reader: byIndex, or a transaction
// of the caller's (inTx).
func (s *Store) perOwnerBy(ctx context.Context, reader func(func(lookup) error) error, owners []string, shard int, what string,
	statement func(t *table, in string) string, scan func(t *table, rs rowsScanner) (any, error), add func(t *table, i int)) error {
	return reader(func(query lookup) error {
		for _, t := range s.tables {
			args, err := t.ownerArgs(owners)
			if err != nil {
				return err
			}
			// The owner column's value comes back in its own form: index owners by it.
			at := make(map[string][]int, len(owners))
			for i, a := range args {
				k := ownerKey(a)
				at[k] = append(at[k], i)
			}
			for batch := range slices.Chunk(args, armsPerStatement) {
				if s.dialect == PostgreSQL {
					batch = padded(batch)
				}
				rs, err := query(ctx, statement(t, s.placeholders(1, len(batch))), batch...)
				if err != nil {
					return s.wrap(shard, fmt.Sprintf("%s of %d owners in table %s", what, len(batch), t.Table), err)
				}
				for rs.Next() {
					owner, err := scan(t, rs)
					if err != nil {
						rs.Close()
						return s.wrap(shard, what+" in table "+t.Table, err)
					}
					for _, i := range at[ownerKey(owner)] {
						add(t, i)
					}
				}
				rs.Close()
				if err := rs.Err(); err != nil {
					return s.wrap(shard, what+" in table "+t.Table, err)
				}
			}
		}
		return nil
	})
}

// Delete removes every row of owner from shard, children first, in one transaction. The
// owner's copies to other shards are served from then on: it first forgets them (see Copy).
func (s *Store) Delete(ctx context.Context, owner string, shard int) error {
	return s.deleteOld(ctx, owner, shard, nil)
}

// deleteOld is Delete, calling check, if not nil, in the deletion's transaction before it
// deletes anything: on SQLite it holds the write lock; on PostgreSQL it reads by the
// snapshot the deletion deletes by (REPEATABLE READ), and the deletion fails on a row
// changed since.
func (s *Store) deleteOld(ctx context.Context, owner string, shard int, check func(tx *sql.Tx) error) error {
	if err := s.setCopying(ctx, owner, -1, false); err != nil {
		return err
	}
	release, err := s.writeTurn(ctx, shard)
	if err != nil {
		return err
	}
	defer release()
	var tx *sql.Tx
	if check != nil && s.dialect == PostgreSQL {
		tx, err = s.shards[shard].BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		err = s.wrap(shard, "begin", err)
	} else {
		tx, err = s.begin(ctx, shard)
	}
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.moverWrites(ctx, tx); err != nil {
		return s.wrap(shard, "mark the mover's writes", err)
	}
	if check != nil {
		if err := check(tx); err != nil {
			return err
		}
	}
	_, refs, err := s.deleteOwner(ctx, tx, owner, shard)
	var coded interface{ SQLState() string }
	if check != nil && errors.As(err, &coded) && coded.SQLState() == "40001" {
		err = fmt.Errorf("a row of it changed after the deletion's snapshot, without the Migration's lock: nothing deleted: %w: %w", rebalance.ErrCopyMismatch, err)
	}
	if err != nil {
		return s.wrap(shard, fmt.Sprintf("delete rows of owner %q", owner), err)
	}
	if err := s.sameReferences(ctx, tx, shard, refs); err != nil {
		return err
	}
	return s.wrap(shard, fmt.Sprintf("commit the deletion of owner %q", owner), s.commitMover(ctx, tx))
}

// copyRecord is what rebalance_copying says of the Copies of an owner to a shard.
type copyRecord struct {
	on    bool     // a Copy committed, or may have, since the last Delete of the owner
	known bool     // the sums are recorded: an older build recorded none
	sums  []string // what the owner's rows there may sum to, each a Copy's (sumText)
}

// sumText is a Sum as rebalance_copying records it.
func sumText(sum rebalance.Sum) string { return strconv.FormatInt(sum.Rows, 10) + ":" + sum.Digest }

// copies returns what rebalance_copying says of the Copies of owner to shard to.
func (s *Store) copies(ctx context.Context, owner string, to int) (copyRecord, error) {
	var sums sql.NullString
	err := s.control.QueryRowContext(ctx, "SELECT sums FROM rebalance_copying WHERE owner = $1 AND shard = $2", owner, to).Scan(&sums)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return copyRecord{}, nil
	case err != nil:
		return copyRecord{}, fmt.Errorf("sqlstore: control database: read the copies of owner %q: %w", owner, err)
	}
	rec := copyRecord{on: true, known: sums.Valid}
	for sum := range strings.SplitSeq(sums.String, ";") {
		if sum != "" {
			rec.sums = append(rec.sums, sum)
		}
	}
	return rec, nil
}

// recordCopy records sums as what owner's rows on shard to may be, each a Copy's: the next
// Copy replaces them only if they sum to one. Only what the shard may hold now is kept: an
// older copy's sum, recorded still, would accept rows written there since that bring the
// shard back to it (an UPDATE to a row's former value, say).
func (s *Store) recordCopy(ctx context.Context, owner string, to int, sums ...rebalance.Sum) error {
	var b strings.Builder
	for _, sum := range sums {
		b.WriteString(sumText(sum) + ";")
	}
	_, err := s.control.ExecContext(ctx, "UPDATE rebalance_copying SET sums = $3 WHERE owner = $1 AND shard = $2", owner, to, b.String())
	if err != nil {
		return fmt.Errorf("sqlstore: control database: record the copy of owner %q: %w", owner, err)
	}
	return nil
}

// setCopying records a Copy of owner to shard to (on), with no sum yet, or forgets it
// (off; to -1: every shard's).
func (s *Store) setCopying(ctx context.Context, owner string, to int, on bool) error {
	q, args := "INSERT INTO rebalance_copying (owner, shard, sums) VALUES ($1, $2, '') ON CONFLICT (owner, shard) DO NOTHING", []any{owner, to}
	switch {
	case !on && to < 0:
		q, args = "DELETE FROM rebalance_copying WHERE owner = $1", args[:1]
	case !on:
		q = "DELETE FROM rebalance_copying WHERE owner = $1 AND shard = $2"
	}
	if _, err := s.control.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("sqlstore: control database: record the copies of owner %q: %w", owner, err)
	}
	return nil
}

// DeleteChunk deletes up to limit rows of owners on shard, children first (a table's rows
// only once the tables after it have none of these owners left), in one statement per
// table and 500 owners (see deleteKeys) in a transaction whose first statement checks the
// token and the owners' fences, and returns how many.
func (s *Store) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("sqlstore: delete chunk of %d rows: %w", limit, rebalance.ErrConfig)
	}
	n, err := s.deleteChunk(ctx, migration, token, owners, shard, limit)
	if errors.Is(err, errByAddress) { // again, that table in deleteKeys' exact form
		n, err = s.deleteChunk(ctx, migration, token, owners, shard, limit)
	}
	return n, err
}

// errByAddress says a deletion by row address deleted more rows than its limit, or failed
// (a SQLite table WITHOUT ROWID), and was rolled back.
var errByAddress = errors.New("sqlstore: deletion by row address past its limit or failed")

func (s *Store) deleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	release, err := s.writeTurn(ctx, shard)
	if err != nil {
		return 0, err
	}
	defer release()
	tx, err := s.begin(ctx, shard)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if err := s.step(ctx, tx, migration, token, owners, shard, rebalance.Importing, rebalance.Moved); err != nil {
		return 0, err
	}
	if s.dialect == PostgreSQL {
		if err := rangesOnly(ctx, tx); err != nil {
			return 0, s.wrap(shard, "plan the deletion", err)
		}
	}
	if s.replicaWrites {
		if err := s.asReplica(ctx, tx, shard); err != nil {
			return 0, err
		}
	}
	refs, err := s.references(ctx, tx, shard)
	if err != nil {
		return 0, s.wrap(shard, "check the tables that reference the moved ones", err)
	}
	// Each owner once: an owner listed twice would fill the limit with its keys twice.
	owners = slices.Compact(slices.Sorted(slices.Values(owners)))
	deleted := 0
	for _, t := range s.tablesFor(true) {
		ti := slices.Index(s.tables, t)
		for batch := range slices.Chunk(owners, armsPerStatement) {
			if deleted == limit {
				break
			}
			exact := s.exactDelete[ti].Load()
			sel, err := s.deleteKeys(t, batch, limit-deleted, exact)
			if err != nil {
				return 0, err
			}
			what := fmt.Sprintf("delete rows of %d owners in table %s", len(batch), t.Table)
			n, err := s.deleteSelected(ctx, tx, refs, sel, owners)
			if err != nil && !exact && s.dialect == SQLite && ctx.Err() == nil && !errors.Is(err, ErrSchema) {
				s.exactDelete[ti].Store(true) // no rowid
				return 0, errByAddress
			}
			if err != nil {
				return 0, s.wrap(shard, what, err)
			}
			if deleted += int(n); deleted > limit {
				if exact {
					return 0, s.wrap(shard, what, fmt.Errorf("%d rows deleted, past the limit of %d", deleted, limit))
				}
				s.exactDelete[ti].Store(true)
				return 0, errByAddress
			}
		}
		if deleted == limit {
			break // this table may have rows left: its parents wait for the next chunk
		}
	}
	if err := s.sameReferences(ctx, tx, shard, refs); err != nil {
		return 0, err
	}
	if err := s.commitMover(ctx, tx); err != nil {
		return 0, s.wrap(shard, fmt.Sprintf("commit the deletion of %d rows", deleted), err)
	}
	return deleted, nil
}

// DeleteOwners deletes every row of owners on shard, if there are at most most of them; see
// rebalance.OwnersDeleter. One plain DELETE a table, by the owner, finds each row once
// through the (owner, key) index (on PostgreSQL by a bitmap, in the table's order), where
// DeleteChunk's cut at its limit finds each twice: in the key order, then by its address.
// A deletion that finds more than most rows is rolled back.
func (s *Store) DeleteOwners(ctx context.Context, migration string, token uint64, owners []string, shard int, most int) (int, bool, error) {
	if most < 0 {
		return 0, false, fmt.Errorf("sqlstore: delete owners of at most %d rows: %w", most, rebalance.ErrConfig)
	}
	release, err := s.writeTurn(ctx, shard)
	if err != nil {
		return 0, false, err
	}
	defer release()
	tx, err := s.begin(ctx, shard)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	if err := s.step(ctx, tx, migration, token, owners, shard, rebalance.Importing, rebalance.Moved); err != nil {
		return 0, false, err
	}
	if s.dialect == PostgreSQL {
		if _, err := tx.ExecContext(ctx, noSeqScanSQL); err != nil {
			return 0, false, s.wrap(shard, "plan the deletion", err)
		}
	}
	if s.replicaWrites {
		if err := s.asReplica(ctx, tx, shard); err != nil {
			return 0, false, err
		}
	}
	refs, err := s.references(ctx, tx, shard)
	if err != nil {
		return 0, false, s.wrap(shard, "check the tables that reference the moved ones", err)
	}
	owners = slices.Compact(slices.Sorted(slices.Values(owners)))
	deleted := 0
	for _, t := range s.tablesFor(true) {
		for batch := range slices.Chunk(owners, armsPerStatement) {
			sel, err := s.ownersDeletion(t, batch)
			if err != nil {
				return 0, false, err
			}
			n, err := s.deleteSelected(ctx, tx, refs, sel, owners)
			if err != nil {
				return 0, false, s.wrap(shard, fmt.Sprintf("delete rows of %d owners in table %s", len(batch), t.Table), err)
			}
			if deleted += int(n); deleted > most {
				return 0, false, nil // rolled back
			}
		}
	}
	if err := s.sameReferences(ctx, tx, shard, refs); err != nil {
		return 0, false, err
	}
	if err := s.commitMover(ctx, tx); err != nil {
		return 0, false, s.wrap(shard, fmt.Sprintf("commit the deletion of %d rows", deleted), err)
	}
	return deleted, true, nil
}

// noSeqScanSQL keeps PostgreSQL from reading a whole table to delete a few owners' rows,
// which it may do where it has no statistics of them (a table just loaded, autovacuum off):
// it then takes each owner for half a percent of the table (TestDeleteOwnersPlan). The
// deletion is planned once per connection, as rangesOnlySQL's reads are.
const noSeqScanSQL = "SELECT set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)"

// ownersDeletion returns DeleteOwners' selection of table t: every row of owners.
func (s *Store) ownersDeletion(t *table, owners []string) (*selection, error) {
	args, err := t.ownerArgs(owners)
	if err != nil {
		return nil, err
	}
	q := &query{sqlite: s.dialect == SQLite}
	fmt.Fprintf(&q.b, "%s IN (%s)", t.Owner, q.in(args))
	return &selection{t: t, where: q.b.String(), args: q.args}, nil
}

// DeleteRows says how many rows one deletion of old copies handles when
// rebalance.SharedOptions.DeleteRows is zero (see rebalance.DeleteSizer): on PostgreSQL ten
// times chunkRows, since no access takes a lock on the rows of owners a shard no longer
// serves; on SQLite chunkRows, since a deletion holds the file's one write lock that every
// write of the application needs.
func (s *Store) DeleteRows(chunkRows int) int {
	if s.dialect == PostgreSQL {
		return 10 * chunkRows
	}
	return chunkRows
}

var (
	_ rebalance.DeleteSizer   = (*Store)(nil)
	_ rebalance.AccessMeter   = (*Store)(nil)
	_ rebalance.OwnersDeleter = (*Store)(nil)
)

// rangesOnlySQL is rangesOnly's statement. It also has PostgreSQL plan each of the
// transaction's statements once per connection (a generic plan, kept with the prepared
// statement) rather than for each call's values: a plan by index ranges does not depend on
// which owners a group holds, and planning the sums (with their schema checks) and the
// lookups of each group anew took about a tenth of the machine's CPU in a move.
const rangesOnlySQL = "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)"

// rangesOnly makes PostgreSQL read each owner's range of the (owner, key) index in key order
// for the rest of tx, stopping at the arm's limit, whatever it believes of the owner's size.
// With statistics that predate the owner's rows (a table just loaded or copied into, or
// autovacuum off) it estimates a few dozen rows an owner and reads them all through a bitmap
// and sorts them instead: the whole owner for every chunk, quadratic in the owner's rows
// (TestRangesOnly).
func rangesOnly(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, rangesOnlySQL)
	return err
}

// deleteKeys returns the statement of DeleteChunk that deletes up to limit rows of owners
// in table t: the first limit rows of the owners in (owner, key) order, read by one ordered
// scan of that index (no sort: a plain "owner IN (...) LIMIT n" may be planned as a bitmap
// of every index entry of those owners, which for a big owner costs each chunk as much as
// all its rows), then deleted by their addresses in the table (PostgreSQL's ctid, SQLite's
// rowid), among the owners' rows only. A row updated meanwhile (nothing writes owners a
// shard no longer serves) is not deleted, rather than mistaken for another. Deleting by key
// instead cost twice as much: each row found again through the key's index, and the rows
// sorted to find each owner's last key within the limit (PostgreSQL: 62-78 against 120-127
// ms for 40 chunks of 3,200 rows; SQLite 166-190 against 252-260 for 200 chunks of 1,000).
//
// Where an address is not one row (PostgreSQL's partitions repeat them; a SQLite column
// named _rowid_ hides the rowid), the statement can delete more of the owners' rows than the
// limit; where a table has none (SQLite WITHOUT ROWID), it fails. DeleteChunk then rolls
// back and deletes that table's rows in the exact form from then on: by partition and
// address on PostgreSQL, by key on SQLite.
func (s *Store) deleteKeys(t *table, owners []string, limit int, exact bool) (*selection, error) {
	q := &query{sqlite: s.dialect == SQLite}
	args, err := t.ownerArgs(owners)
	if err != nil {
		return nil, err
	}
	in := func() string { return q.in(args) } // the owners, as parameters (SQLite's "?" once each)
	var using string
	switch {
	case !exact && !q.sqlite: // ANY(ARRAY(...)), one scan of the addresses rather than a join
		list := in()
		fmt.Fprintf(&q.b, "%[2]s IN (%[3]s) AND ctid = ANY(ARRAY(SELECT ctid FROM %[1]s WHERE %[2]s IN (%[3]s) ORDER BY %[2]s, %[4]s LIMIT %[5]s))",
			t.Table, t.Owner, list, t.Key, q.arg(limit))
	case !exact:
		fmt.Fprintf(&q.b, "%[2]s IN (%[3]s) AND _rowid_ IN (SELECT _rowid_ FROM %[1]s WHERE %[2]s IN (%[4]s) ORDER BY %[2]s, %[5]s LIMIT %[6]s)",
			t.Table, t.Owner, in(), in(), t.Key, q.arg(limit))
	case !q.sqlite:
		using = fmt.Sprintf("(SELECT tableoid AS rebalance_part, ctid AS rebalance_row FROM %[1]s WHERE %[2]s IN (%[3]s) ORDER BY %[2]s, %[4]s LIMIT %[5]s) AS rebalance_cut",
			t.Table, t.Owner, in(), t.Key, q.arg(limit))
		fmt.Fprintf(&q.b, "%[1]s.tableoid = rebalance_part AND %[1]s.ctid = rebalance_row", t.Table)
	default:
		fmt.Fprintf(&q.b, "%s IN (SELECT %s FROM (", t.Key, t.Key)
		if err := q.arms(t, "", t.Key, owners, identity(len(owners)), make([]string, len(owners)), limit); err != nil {
			return nil, err
		}
		q.b.WriteString(") AS rebalance_keys)")
	}
	return &selection{t: t, using: using, where: q.b.String(), args: q.args}, nil
}

// selection is the rows of table t a deletion deletes: DELETE FROM t [USING using] WHERE
// where, with args.
type selection struct {
	t            *table
	using, where string
	args         []any
}

// deletion returns the DELETE of sel's rows.
func (sel *selection) deletion() string {
	if sel.using != "" {
		return "DELETE FROM " + sel.t.Table + " USING " + sel.using + " WHERE " + sel.where
	}
	return "DELETE FROM " + sel.t.Table + " WHERE " + sel.where
}

// deleteSelected deletes the rows of sel in tx, which deletes the rows of owners (this
// deletion's, in any table, children first), and returns how many. refs are the foreign
// keys among the Store's tables: a row of another owner that references one of sel's rows
// is an error wrapping ErrSchema, and nothing is deleted. By the time a parent's rows are
// deleted, its children of owners are (children first): a row left that references them
// is another owner's, which the deletion would take with it (ON DELETE CASCADE), change
// (SET NULL) or leave referencing a row on another shard.
func (s *Store) deleteSelected(ctx context.Context, tx *sql.Tx, refs []reference, sel *selection, owners []string) (int64, error) {
	from := sel.t.Table
	if sel.using != "" {
		from += ", " + sel.using
	}
	if s.dialect == PostgreSQL && slices.ContainsFunc(refs, func(r reference) bool { return r.parent == sel.t }) {
		// A row of another owner that references these, written by a transaction still
		// open, is not seen by the look below, and its foreign key check holds the row it
		// references (KEY SHARE): the deletion waited for it, then cascaded into it. Locked
		// first, the rows wait for such writers, whose rows the look then sees, and later
		// ones wait for the deletion, then fail for want of the row they reference.
		rows, err := tx.QueryContext(ctx, fmt.Sprintf("SELECT 1 FROM %s WHERE %s FOR UPDATE OF %s", from, sel.where, sel.t.Table), sel.args...)
		if err == nil {
			for rows.Next() {
			}
			err = cmp.Or(rows.Err(), rows.Close())
		}
		if err != nil {
			return 0, fmt.Errorf("lock the rows of table %s to delete: %w", sel.t.Table, err)
		}
	}
	for _, r := range refs {
		if r.parent != sel.t {
			continue
		}
		c := r.child
		args, err := c.ownerArgs(owners)
		if err != nil {
			return 0, err
		}
		q := &query{sqlite: s.dialect == SQLite, args: slices.Clone(sel.args)}
		fmt.Fprintf(&q.b, "SELECT CAST(rebalance_child.%s AS TEXT), CAST(rebalance_child.%s AS TEXT) FROM %s AS rebalance_child WHERE (%s) IN (SELECT %s FROM %s WHERE %s)",
			c.Key, c.Owner, c.Table, qualified("rebalance_child", r.from), qualified(sel.t.Table, r.to), from, sel.where)
		fmt.Fprintf(&q.b, " AND NOT COALESCE(rebalance_child.%s IN (%s), false) LIMIT 1", c.Owner, q.list(args))
		var key, owner sql.NullString
		switch err := tx.QueryRowContext(ctx, q.b.String(), q.args...).Scan(&key, &owner); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return 0, fmt.Errorf("look for rows of other owners in table %s that reference these: %w", c.Table, err)
		default:
			return 0, fmt.Errorf("row %s of table %s, owner %s's, references a row of table %s of an owner whose rows are being deleted here: the deletion would take it along (ON DELETE CASCADE), change it, or leave it referencing a row on another shard; nothing was deleted; rows that reference each other must belong to one owner: %w",
				excerpt(cmp.Or(key.String, "NULL")), c.Table, excerpt(cmp.Or(owner.String, "NULL")), sel.t.Table, ErrSchema)
		}
	}
	res, err := tx.ExecContext(ctx, sel.deletion(), sel.args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// qualified returns the comma-separated columns of cols, each prefixed with table.
func qualified(table, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = table + "." + c
	}
	return strings.Join(parts, ", ")
}

// beginImport starts a mover's transaction on shard to, which imports owners: if the tables
// have foreign keys among them, with their checks off (see Init; on PostgreSQL as a replica,
// as with Options.ReplicaWrites), and on SQLite with the
// database file src, if not empty, attached as rebalance_src. It returns the transaction,
// the connection it runs on if it is one of its own (else nil), and done, which ends the
// transaction (rolling it back if not committed) and gives the connection back. PostgreSQL
// always takes one (writeRows COPYs on it); SQLite takes one only to turn its foreign_keys
// pragma off or attach src, and done puts it back as it was, or closes it for good if it
// cannot.
func (s *Store) beginImport(ctx context.Context, to int, src string) (*sql.Tx, *sql.Conn, func(), error) {
	if s.dialect == PostgreSQL {
		// A connection of its own, so that writeRows can COPY on it within tx.
		conn, err := s.shards[to].Conn(ctx)
		if err != nil {
			return nil, nil, nil, s.wrap(to, "begin", err)
		}
		tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			conn.Close()
			return nil, nil, nil, s.wrap(to, "begin", err)
		}
		done := func() { tx.Rollback(); conn.Close() }
		if s.foreignKeys || s.replicaWrites {
			if err := s.asReplica(ctx, tx, to); err != nil {
				done()
				return nil, nil, nil, err
			}
		}
		return tx, conn, done, nil
	}
	if !s.foreignKeys && src == "" {
		tx, err := s.begin(ctx, to)
		if err != nil {
			return nil, nil, nil, err
		}
		return tx, nil, func() { tx.Rollback() }, nil
	}
	conn, err := s.shards[to].Conn(ctx)
	if err != nil {
		return nil, nil, nil, s.wrap(to, "begin", err)
	}
	var undo []string // what puts the connection back as it was, in order
	restore := func() {
		for _, q := range undo {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), q); err != nil {
				conn.Raw(func(any) error { return driver.ErrBadConn })
				break
			}
		}
		conn.Close()
	}
	fail := func(what string, err error) (*sql.Tx, *sql.Conn, func(), error) {
		restore()
		return nil, nil, nil, s.wrap(to, what, err)
	}
	if s.foreignKeys {
		var was int
		if err := conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&was); err != nil {
			return fail("begin", err)
		}
		if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
			return fail("begin", err)
		}
		undo = append(undo, "PRAGMA foreign_keys = "+strconv.Itoa(was))
	}
	if src != "" {
		if _, err := conn.ExecContext(ctx, "ATTACH DATABASE ? AS rebalance_src", src); err != nil {
			return fail("attach "+excerpt(src), fmt.Errorf("%w: %w", errAttach, err))
		}
		undo = append(undo, "DETACH DATABASE rebalance_src")
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fail("begin", err)
	}
	return tx, conn, func() { tx.Rollback(); restore() }, nil
}

// asReplica makes tx, on PostgreSQL shard i, write as a replica: no foreign key checks or
// actions and no trigger of the application's fire for its writes (see Options.ReplicaWrites).
func (s *Store) asReplica(ctx context.Context, tx *sql.Tx, i int) error {
	_, err := tx.ExecContext(ctx, "SET LOCAL session_replication_role = replica")
	return s.wrap(i, "write as a replica, without the application's triggers and foreign key checks (session_replication_role: it needs a superuser, or GRANT SET ON PARAMETER session_replication_role)", err)
}

// Owners yields each owner that has rows on shard, table by table, a page of 1000 at a time
// by a loose index scan: each owner found is the least above the last, one index probe of
// (owner, key) per owner, whatever its rows; see rebalance.OwnerLister. It first refuses
// (ErrSchema) a table with an owner column that is not moved (see Options.Unmoved), such as
// one created during the move, whose rows would stay behind.
func (s *Store) Owners(ctx context.Context, shard int) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		db, err := s.shard(shard)
		if err != nil {
			yield("", err)
			return
		}
		if err := s.checkLeftBehind(ctx, db); err != nil {
			yield("", s.wrap(shard, "check the other tables", err))
			return
		}
		for _, t := range s.tables {
			var last any
			for {
				page, err := s.ownersAfter(ctx, db, t, last, 1000)
				if err != nil {
					yield("", s.wrap(shard, "list the owners in table "+t.Table, err))
					return
				}
				for _, o := range page {
					if !yield(ownerKey(o), nil) {
						return
					}
				}
				if len(page) < 1000 {
					break
				}
				last = page[len(page)-1]
			}
		}
	}
}

// ownersAfter returns up to limit owner values of table t on db, in order, above last (from
// the least if last is nil).
func (s *Store) ownersAfter(ctx context.Context, db *sql.DB, t *table, last any, limit int) ([]any, error) {
	q := &query{sqlite: s.dialect == SQLite}
	o, n := t.Owner, t.Table
	// The least owner, then each next one, by the index: ORDER BY and LIMIT rather than MIN,
	// which PostgreSQL 15 has not for every ordered type (uuid).
	fmt.Fprintf(&q.b, "WITH RECURSIVE o(v) AS (SELECT (SELECT %s FROM %s", o, n)
	if last != nil {
		fmt.Fprintf(&q.b, " WHERE %s > %s", o, q.arg(last))
	}
	fmt.Fprintf(&q.b, " ORDER BY %[1]s LIMIT 1) UNION ALL SELECT (SELECT %[1]s FROM %[2]s WHERE %[1]s > o.v ORDER BY %[1]s LIMIT 1) FROM o WHERE o.v IS NOT NULL) SELECT v FROM o WHERE v IS NOT NULL LIMIT %[3]s", o, n, q.arg(limit))
	rs, err := db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []any
	for rs.Next() {
		var v any
		if err := rs.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rs.Err()
}

var _ rebalance.OwnerLister = (*Store)(nil)
