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

// The copy between two SQLite shards in files: the shard the rows leave is attached to the
// importing shard's connection, and each chunk is copied by INSERT ... SELECT inside the
// engine, as the fastest plain copy between two SQLite files does, rather than read into Go
// and written back row by row. It reads the same rows in the same order as the general path
// (the same arms of the (owner, key) index), under the same transaction on the importing
// shard, whose first statement checks the token and the fences; within that transaction the
// attached file is read at one snapshot.

// errAttach marks an error of ATTACH itself: the copy goes through Go instead.
var errAttach = errors.New("cannot attach the shard's file")

// attachable returns the file of SQLite shard from if a chunk from it to shard to can be
// copied through ATTACH: both are distinct database files. It returns "" on PostgreSQL, for
// an in-memory shard, or for two shards in one file.
func (s *Store) attachable(ctx context.Context, from, to int) (string, error) {
	if s.dialect != SQLite || s.plainCopies {
		return "", nil
	}
	a, err := s.fileOf(ctx, from)
	if err != nil {
		return "", err
	}
	b, err := s.fileOf(ctx, to)
	if err != nil || a == "" || b == "" || a == b {
		return "", err
	}
	return a, nil
}

// fileOf returns the file of SQLite shard i's main database, "" if it has none or is not
// in WAL mode.
func (s *Store) fileOf(ctx context.Context, i int) (string, error) {
	if f, ok := s.files.Load(i); ok {
		return f.(string), nil
	}
	db, err := s.shard(i)
	if err != nil {
		return "", err
	}
	rs, err := db.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return "", s.wrap(i, "list the database files", err)
	}
	defer rs.Close()
	file := ""
	for rs.Next() {
		var seq int
		var name, path string
		if err := rs.Scan(&seq, &name, &path); err != nil {
			return "", s.wrap(i, "list the database files", err)
		}
		if name == "main" {
			file = path
		}
	}
	if err := rs.Err(); err != nil {
		return "", s.wrap(i, "list the database files", err)
	}
	// Outside WAL mode a reader locks the file against writers until the importing
	// transaction ends, and two copies in opposite directions would wait for each other.
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return "", s.wrap(i, "read the journal mode", err)
	}
	if !strings.EqualFold(mode, "wal") {
		file = ""
	}
	s.files.Store(i, file)
	return file, nil
}

// copyAttached copies a chunk of CopyChunk, up to limit rows of owners whose cursors are in
// tables in at keys, from the file src to shard to, parents first, and moves the cursors past
// the rows copied. It returns the rows copied and whether the chunk is full (rows may be
// left).
func (s *Store) copyAttached(ctx context.Context, migration string, token uint64, owners []string, src string, to int, in []int, keys []string, limit int) (n int, full bool, err error) {
	release, err := s.writeTurn(ctx, to)
	if err != nil {
		return 0, false, err
	}
	defer release()
	tx, _, done, err := s.beginImport(ctx, to, src)
	if err != nil {
		return 0, false, err
	}
	defer done()
	if err := s.step(ctx, tx, migration, token, owners, to, rebalance.Importing); err != nil {
		return 0, false, err
	}
	n, full, err = s.walkChunk(in, keys, limit, func(ti int, batch []int, limit int) (int, bool, error) {
		t := s.tables[ti]
		what := fmt.Sprintf("copy rows of %d owners in table %s", len(batch), t.Table)
		if n, whole, err := s.copyWhole(ctx, tx, t, owners, batch, keys, limit); err != nil {
			return 0, false, s.wrap(to, what, err)
		} else if whole {
			for _, i := range batch { // done with t, even if they fill the chunk
				in[i], keys[i] = ti+1, ""
			}
			return n, false, nil
		}
		// Where each owner's rows end, first: the last key read of each arm.
		q := &query{sqlite: true}
		q.b.WriteString("SELECT rebalance_arm, COUNT(*), MAX(" + t.Key + ") FROM (")
		if err := q.arms(t, "rebalance_src", t.Key, owners, batch, keys, limit); err != nil {
			return 0, false, err
		}
		q.b.WriteString(") GROUP BY rebalance_arm")
		rs, err := tx.QueryContext(ctx, q.b.String(), q.args...)
		if err != nil {
			return 0, false, s.wrap(to, what, err)
		}
		read := 0
		ends := make([]string, len(batch))
		for rs.Next() {
			var arm, count int64
			var last any
			if err := rs.Scan(&arm, &count, &last); err != nil {
				rs.Close()
				return 0, false, s.wrap(to, what, err)
			}
			if arm < 0 || arm >= int64(len(batch)) {
				rs.Close()
				return 0, false, s.wrap(to, what, fmt.Errorf("rows of arm %d among %d", arm, len(batch)))
			}
			if ends[arm], err = encodeKey(last); err != nil {
				rs.Close()
				return 0, false, s.wrap(to, what, err)
			}
			read += int(count)
		}
		if err := rs.Close(); err != nil {
			return 0, false, s.wrap(to, what, err)
		}
		if err := rs.Err(); err != nil {
			return 0, false, s.wrap(to, what, err)
		}
		if read > 0 {
			// Then the same rows, from the same snapshot of src.
			cols := strings.Join(t.Columns, ", ")
			q := &query{sqlite: true}
			fmt.Fprintf(&q.b, "INSERT OR ABORT INTO main.%s (%s) SELECT %s FROM (", t.Table, cols, cols) // see insertHead
			if err := q.arms(t, "rebalance_src", cols, owners, batch, keys, limit); err != nil {
				return 0, false, err
			}
			group := groupList(owners)
			q.b.WriteString(") WHERE true" + t.upsert(q.arg(group)))
			if err := s.insertSelected(ctx, tx, t, q, read, group, func(k *query) error {
				k.b.WriteString("SELECT " + t.Key + " FROM (")
				if err := k.arms(t, "rebalance_src", t.Key, owners, batch, keys, limit); err != nil {
					return err
				}
				k.b.WriteString(")")
				return nil
			}); err != nil {
				return 0, false, s.wrap(to, what, err)
			}
		}
		for arm, i := range batch {
			if ends[arm] != "" {
				keys[i] = ends[arm]
			}
		}
		return read, false, nil
	})
	if err != nil {
		return 0, false, err
	}
	if n == 0 {
		return 0, full, nil
	}
	if err := s.commitMover(ctx, tx); err != nil {
		return 0, false, s.wrap(to, fmt.Sprintf("commit: copy %d rows of %d owners", n, len(owners)), err)
	}
	return n, full, nil
}

// copyWhole copies, in tx, all the rows of table t of the owners at positions batch of
// owners by one plain INSERT ... SELECT, if none of them has a cursor yet and they have at
// most limit rows there (the common case: copyAll puts owners that fit in a chunk together),
// and returns how many and true; else it copies nothing and returns false. The arms'
// statements cost the chunk a quarter of its time to prepare, and sort the rows by arm.
func (s *Store) copyWhole(ctx context.Context, tx *sql.Tx, t *table, owners []string, batch []int, keys []string, limit int) (int, bool, error) {
	some := make([]string, len(batch))
	for arm, i := range batch {
		if keys[i] != "" {
			return 0, false, nil
		}
		some[arm] = owners[i]
	}
	args, err := t.ownerArgs(some)
	if err != nil {
		return 0, false, err
	}
	in := strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")
	var n int
	err = tx.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM (SELECT 1 FROM rebalance_src.%s WHERE %s IN (%s) LIMIT %d)", t.Table, t.Owner, in, limit+1), args...).Scan(&n)
	if err != nil || n > limit {
		return 0, false, err
	}
	if n > 0 { // the same rows: tx reads rebalance_src at one snapshot
		cols := strings.Join(t.Columns, ", ")
		q := &query{sqlite: true, args: slices.Clip(args)}
		group := groupList(some)
		fmt.Fprintf(&q.b, "INSERT OR ABORT INTO main.%s (%s) SELECT %s FROM rebalance_src.%s WHERE %s IN (%s)%s", t.Table, cols, cols, t.Table, t.Owner, in, t.upsert(q.arg(group)))
		if err := s.insertSelected(ctx, tx, t, q, n, group, func(k *query) error {
			k.args = args
			fmt.Fprintf(&k.b, "SELECT %s FROM rebalance_src.%s WHERE %s IN (%s)", t.Key, t.Table, t.Owner, in)
			return nil
		}); err != nil {
			return 0, false, err
		}
	}
	return n, true, nil
}

// insertSelected runs ins, an INSERT ... SELECT of want rows of table t, of the owners whose
// JSON list is group, in tx; if it wrote fewer (upsert skips a row whose key another owner's
// row holds), it returns keyTaken's error, with the SELECT of the rows' keys that keys writes.
func (s *Store) insertSelected(ctx context.Context, tx *sql.Tx, t *table, ins *query, want int, group string, keys func(*query) error) error {
	res, err := tx.ExecContext(ctx, ins.b.String(), ins.args...)
	if err != nil {
		return err
	}
	wrote, err := res.RowsAffected()
	if err != nil || wrote == int64(want) {
		return err
	}
	k := &query{sqlite: true}
	if err := keys(k); err != nil {
		return err
	}
	return s.keyTaken(ctx, tx, t, k.b.String(), k.args, group, wrote, want)
}
