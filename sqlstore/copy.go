package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard/rebalance"
)

// maxParams bounds the parameters of one statement: below SQLite's 32766 and PostgreSQL's
// 65535.
const maxParams = 30000

// encodeCursor turns a key value as the driver returns it into a Cursor.
func encodeCursor(v any) (rebalance.Cursor, error) {
	switch k := v.(type) {
	case int64:
		return rebalance.Cursor("i" + strconv.FormatInt(k, 10)), nil
	case string:
		return rebalance.Cursor("s" + k), nil
	case []byte:
		return rebalance.Cursor("b" + string(k)), nil
	}
	return "", fmt.Errorf("key value %v of type %T: want an integer, text or bytes column: %w", v, v, rebalance.ErrConfig)
}

func decodeCursor(c rebalance.Cursor) (any, error) {
	if c == "" {
		return nil, nil
	}
	switch s := string(c[1:]); c[0] {
	case 'i':
		return strconv.ParseInt(s, 10, 64)
	case 's':
		return s, nil
	case 'b':
		return []byte(s), nil
	}
	return nil, fmt.Errorf("cursor %q was not made by this package: %w", c, rebalance.ErrConfig)
}

// readRows reads up to limit rows of owner on shard after cur, in key order.
func (s *Store) readRows(ctx context.Context, owner string, shard int, cur rebalance.Cursor, limit int) ([][]any, error) {
	db, err := s.shard(shard)
	if err != nil {
		return nil, err
	}
	o, err := s.ownerArg(owner)
	if err != nil {
		return nil, err
	}
	after, err := decodeCursor(cur)
	if err != nil {
		return nil, err
	}
	q, args := s.selectFirst, []any{o, limit}
	if after != nil {
		q, args = s.selectAfter, append(args, after)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.wrap(shard, fmt.Sprintf("read rows of owner %q", owner), err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		row := make([]any, len(s.table.Columns))
		ptrs := make([]any, len(row))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, s.wrap(shard, fmt.Sprintf("read rows of owner %q", owner), err)
		}
		out = append(out, row)
	}
	return out, s.wrap(shard, fmt.Sprintf("read rows of owner %q", owner), rows.Err())
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// perStatement is how many rows one INSERT carries.
func (s *Store) perStatement() int { return maxParams / len(s.table.Columns) }

// insertRows writes rows, many per statement, replacing rows of the same key.
func (s *Store) insertRows(ctx context.Context, tx execer, rows [][]any) error {
	ncol := len(s.table.Columns)
	per := s.perStatement()
	var b strings.Builder
	for len(rows) > 0 {
		batch := rows[:min(len(rows), per)]
		rows = rows[len(batch):]
		b.Reset()
		b.Grow(len(s.insertHead) + len(s.insertTail) + 8*ncol*len(batch))
		b.WriteString(s.insertHead)
		args := make([]any, 0, ncol*len(batch))
		for i, r := range batch {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			s.writePlaceholders(&b, i*ncol+1, ncol)
			b.WriteByte(')')
			args = append(args, r...)
		}
		b.WriteString(s.insertTail)
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	return nil
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

// armsPerStatement bounds the owners one statement of CopyChunk or DeleteChunk names.
const armsPerStatement = 500

// CopyChunk copies owners' rows after their cursors from shard from to shard to, up to limit
// rows in all, owner after owner, in one transaction on to; see rebalance.SharedStore. One
// statement reads the rows of up to 500 owners (a UNION ALL of one index range per owner,
// each up to the limit, the whole cut at the limit), and multi-row INSERTs write them, in a
// transaction whose first statement checks the token and the owners' fences on to.
func (s *Store) CopyChunk(ctx context.Context, migration string, token uint64, owners []string, from, to int, after []rebalance.Cursor, limit int) ([]rebalance.Cursor, int, bool, error) {
	switch {
	case limit <= 0:
		return nil, 0, false, fmt.Errorf("sqlstore: copy chunk of %d rows: %w", limit, rebalance.ErrConfig)
	case len(after) != len(owners):
		return nil, 0, false, fmt.Errorf("sqlstore: copy chunk: %d cursors for %d owners: %w", len(after), len(owners), rebalance.ErrConfig)
	}
	if _, err := s.shard(to); err != nil {
		return nil, 0, false, err
	}
	next := slices.Clone(after)
	var rows [][]any
	done := true
	for first := 0; first < len(owners) && done; first += armsPerStatement {
		last := min(first+armsPerStatement, len(owners))
		got, full, err := s.readArms(ctx, owners[first:last], from, after[first:last], limit-len(rows), next[first:last])
		if err != nil {
			return nil, 0, false, err
		}
		rows = append(rows, got...)
		done = !full
	}
	if len(rows) == 0 {
		return next, 0, done, nil
	}
	what := fmt.Sprintf("write %d rows of %d owners", len(rows), len(owners))
	tx, err := s.begin(ctx, to)
	if err != nil {
		return nil, 0, false, err
	}
	defer tx.Rollback()
	if err := s.step(ctx, tx, migration, token, owners, to, rebalance.Importing); err != nil {
		return nil, 0, false, err
	}
	if err := s.insertRows(ctx, tx, rows); err != nil {
		return nil, 0, false, s.wrap(to, what, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, false, s.wrap(to, "commit: "+what, err)
	}
	return next, len(rows), done, nil
}

// readArms reads up to limit rows of owners on shard, each owner's after its cursor in
// after, in owner order then key order, in one statement, and sets next[i] to the cursor of
// owner i's last row read. full reports that it read limit rows: more may be left.
func (s *Store) readArms(ctx context.Context, owners []string, shard int, after []rebalance.Cursor, limit int, next []rebalance.Cursor) (rows [][]any, full bool, err error) {
	db, err := s.shard(shard)
	if err != nil {
		return nil, false, err
	}
	q := &query{sqlite: s.dialect == SQLite}
	cols, t, o, k := strings.Join(s.table.Columns, ", "), s.table.Table, s.table.Owner, s.table.Key
	q.b.WriteString("SELECT * FROM (")
	for i, owner := range owners {
		arg, err := s.ownerArg(owner)
		if err != nil {
			return nil, false, err
		}
		cur, err := decodeCursor(after[i])
		if err != nil {
			return nil, false, err
		}
		if i > 0 {
			q.b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&q.b, "SELECT %d AS rebalance_arm, %s FROM (SELECT %s FROM %s WHERE %s = %s", i, cols, cols, t, o, q.arg(arg))
		if cur != nil {
			fmt.Fprintf(&q.b, " AND %s > %s", k, q.arg(cur))
		}
		fmt.Fprintf(&q.b, " ORDER BY %s LIMIT %s) AS arm%d", k, q.arg(limit), i)
	}
	fmt.Fprintf(&q.b, ") AS arms ORDER BY rebalance_arm, %s LIMIT %s", k, q.arg(limit))
	what := fmt.Sprintf("read rows of %d owners", len(owners))
	rs, err := db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, false, s.wrap(shard, what, err)
	}
	defer rs.Close()
	ncol := len(s.table.Columns)
	ptrs := make([]any, ncol+1)
	var arm int64
	ptrs[0] = &arm
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
			return nil, false, s.wrap(shard, what, err)
		}
		if arm < 0 || arm >= int64(len(owners)) {
			return nil, false, s.wrap(shard, what, fmt.Errorf("row of arm %d among %d", arm, len(owners)))
		}
		if next[arm], err = encodeCursor(row[s.key]); err != nil {
			return nil, false, s.wrap(shard, "read key", err)
		}
		rows = append(rows, row)
	}
	if err := rs.Err(); err != nil {
		return nil, false, s.wrap(shard, what, err)
	}
	return rows, len(rows) == limit, nil
}

// Copy makes owner's rows on shard to equal those on shard from, in one transaction on to
// that deletes the owner's rows there and inserts every row read from from, chunk by chunk.
// If from holds none while to held some, or from's count after the copy differs from the
// rows copied, it rolls back and returns an error wrapping rebalance.ErrSourceEmpty.
func (s *Store) Copy(ctx context.Context, owner string, from, to int) error {
	o, err := s.ownerArg(owner)
	if err != nil {
		return err
	}
	if _, err := s.shard(from); err != nil {
		return err
	}
	tx, err := s.begin(ctx, to)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.deleteAll, o)
	if err != nil {
		return s.wrap(to, fmt.Sprintf("delete rows of owner %q", owner), err)
	}
	deleted, err := res.RowsAffected()
	if err != nil {
		return s.wrap(to, fmt.Sprintf("delete rows of owner %q", owner), err)
	}
	var cur rebalance.Cursor
	copied := 0
	for {
		rows, err := s.readRows(ctx, owner, from, cur, 5000)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		copied += len(rows)
		if err := s.insertRows(ctx, tx, rows); err != nil {
			return s.wrap(to, fmt.Sprintf("write rows of owner %q", owner), err)
		}
		if cur, err = encodeCursor(rows[len(rows)-1][s.key]); err != nil {
			return s.wrap(from, "read key", err)
		}
	}
	if copied == 0 && deleted > 0 {
		return s.wrap(from, fmt.Sprintf("copy owner %q", owner), fmt.Errorf("no row of the owner here, while %s holds %d: nothing changed: %w", s.names[to], deleted, rebalance.ErrSourceEmpty))
	}
	// The rows were read in several statements: a deletion between two of them (a twin of
	// the Migration deleting the old copy) leaves a part; counted again, it shows.
	n, err := s.Count(ctx, owner, from)
	if err != nil {
		return err
	}
	if n != int64(copied) {
		return s.wrap(from, fmt.Sprintf("copy owner %q", owner), fmt.Errorf("%d rows of the owner read here, %d here now: the source changed during the copy: nothing changed: %w", copied, n, rebalance.ErrSourceEmpty))
	}
	return s.wrap(to, fmt.Sprintf("commit the copy of owner %q", owner), tx.Commit())
}

// Count returns how many rows owner has on shard.
func (s *Store) Count(ctx context.Context, owner string, shard int) (int64, error) {
	db, err := s.shard(shard)
	if err != nil {
		return 0, err
	}
	o, err := s.ownerArg(owner)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.QueryRowContext(ctx, s.count, o).Scan(&n)
	return n, s.wrap(shard, fmt.Sprintf("count rows of owner %q", owner), err)
}

// Counts returns how many rows each of owners has on shard, a statement per 500 owners.
func (s *Store) Counts(ctx context.Context, owners []string, shard int) ([]int64, error) {
	db, err := s.shard(shard)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(owners))
	at := make(map[string][]int, len(owners))
	args := make([]any, 0, min(len(owners), 500))
	for i, o := range owners {
		arg, err := s.ownerArg(o)
		if err != nil {
			return nil, err
		}
		// The owner column's value comes back in its own form: key the map by it.
		k := fmt.Sprint(arg)
		at[k] = append(at[k], i)
	}
	for batch := range slices.Chunk(owners, 500) {
		args = args[:0]
		for _, o := range batch {
			arg, _ := s.ownerArg(o)
			args = append(args, arg)
		}
		q := fmt.Sprintf("SELECT %s, COUNT(*) FROM %s WHERE %s IN (%s) GROUP BY %s",
			s.table.Owner, s.table.Table, s.table.Owner, s.placeholders(1, len(batch)), s.table.Owner)
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, s.wrap(shard, fmt.Sprintf("count rows of %d owners", len(batch)), err)
		}
		for rows.Next() {
			var o any
			var n int64
			if err := rows.Scan(&o, &n); err != nil {
				rows.Close()
				return nil, s.wrap(shard, "count rows", err)
			}
			if b, ok := o.([]byte); ok {
				o = string(b)
			}
			for _, i := range at[fmt.Sprint(o)] {
				out[i] = n
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, s.wrap(shard, "count rows", err)
		}
	}
	return out, nil
}

// Delete removes every row of owner from shard, in one statement.
func (s *Store) Delete(ctx context.Context, owner string, shard int) error {
	db, err := s.shard(shard)
	if err != nil {
		return err
	}
	o, err := s.ownerArg(owner)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, s.deleteAll, o)
	return s.wrap(shard, fmt.Sprintf("delete rows of owner %q", owner), err)
}

// DeleteChunk deletes up to limit rows of owners on shard, in one statement per 500 owners
// in a transaction whose first statement checks the token and the owners' fences, and
// returns how many.
func (s *Store) DeleteChunk(ctx context.Context, migration string, token uint64, owners []string, shard int, limit int) (int, error) {
	tx, err := s.begin(ctx, shard)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if err := s.step(ctx, tx, migration, token, owners, shard, rebalance.Importing, rebalance.Moved); err != nil {
		return 0, err
	}
	deleted := 0
	for batch := range slices.Chunk(owners, armsPerStatement) {
		if deleted == limit {
			break
		}
		q := &query{sqlite: s.dialect == SQLite}
		t, o, k := s.table.Table, s.table.Owner, s.table.Key
		// PostgreSQL plans "key IN (SELECT ...)" of a list of owners as a hash join over a
		// scan of the whole table (25 ms a chunk on a 44k-row shard, measured here), and an
		// array of keys as probes of the key's index (3 ms).
		in, end := "IN (", ")"
		if s.dialect == PostgreSQL {
			in, end = "= ANY(ARRAY(", "))"
		}
		fmt.Fprintf(&q.b, "DELETE FROM %s WHERE %s %sSELECT %s FROM %s WHERE %s IN (", t, k, in, k, t, o)
		for i, owner := range batch {
			arg, err := s.ownerArg(owner)
			if err != nil {
				return deleted, err
			}
			if i > 0 {
				q.b.WriteString(", ")
			}
			q.b.WriteString(q.arg(arg))
		}
		fmt.Fprintf(&q.b, ") LIMIT %s%s", q.arg(limit-deleted), end)
		res, err := tx.ExecContext(ctx, q.b.String(), q.args...)
		if err != nil {
			return 0, s.wrap(shard, fmt.Sprintf("delete rows of %d owners", len(batch)), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, s.wrap(shard, fmt.Sprintf("delete rows of %d owners", len(batch)), err)
		}
		deleted += int(n)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap(shard, fmt.Sprintf("commit the deletion of %d rows", deleted), err)
	}
	return deleted, nil
}
