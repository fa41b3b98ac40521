package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/shardkit/shard/rebalance"
)

// Between two PostgreSQL shards through pgx, CopyChunk passes a chunk's rows through as the
// server sends them: it reads them in the binary format (each value as the type's send
// function writes it) and hands those bytes to a binary COPY on the other shard, which reads
// each value with the type's receive function, as a COPY ... TO STDOUT piped into a COPY ...
// FROM STDIN does. No value is decoded into Go or encoded again; only each owner's last key
// is, for its cursor. A table whose key is of a type other than an integer, text or bytes, or
// whose values the other shard does not take in binary, goes through Go (writeRows) from
// then on; a chunk whose COPY fails for any reason is copied again that way, which also
// replaces rows already there.

// tupleBuffers keeps the buffers of chunks passed through for the next chunks: grown by
// appends chunk after chunk, they made most of what a move allocates (137 of 153 MB moving
// 1M rows of the benchmark; 27 MB in all with them kept), and the collector's work with it.
var tupleBuffers sync.Pool

// maxPooledTuples is the biggest buffer kept: a chunk of wide rows is let go.
const maxPooledTuples = 16 << 20

func getTuples() []byte {
	if b, ok := tupleBuffers.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

func putTuples(b []byte) {
	if cap(b) > 0 && cap(b) <= maxPooledTuples {
		tupleBuffers.Put(&b)
	}
}

// errNoRaw says a chunk was not passed through: nothing was written, the cursors are as
// they were.
var errNoRaw = errors.New("sqlstore: chunk not passed through")

// copyRaw is CopyChunk between two PostgreSQL shards by passing the rows through (see
// above). It returns errNoRaw, having written nothing, where it cannot.
func (s *Store) copyRaw(ctx context.Context, migration string, token uint64, owners []string, from, to int, in []int, keys []string, limit int) (int, bool, error) {
	db := s.shards[from]
	was, wasKeys := slices.Clone(in), slices.Clone(keys)
	undo := func(err error) (int, bool, error) {
		copy(in, was)
		copy(keys, wasKeys)
		return 0, false, err
	}
	tuples := make([][]byte, len(s.tables)) // by table: the rows read, in COPY's binary tuples
	for ti := range tuples {
		tuples[ti] = getTuples()
	}
	// Kept for the next chunks only if no COPY failed: pgx may return from a failed one
	// before its goroutine has stopped reading the buffer.
	pool := true
	defer func() {
		if pool {
			for _, b := range tuples {
				putTuples(b)
			}
		}
	}()
	room := s.chunkBytes
	n, full, err := s.walkChunk(in, keys, limit, func(ti int, batch []int, limit int) (int, bool, error) {
		if s.noRaw[ti].Load() {
			return 0, false, errNoRaw
		}
		what := fmt.Sprintf("read rows of %d owners in table %s", len(batch), s.tables[ti].Table)
		mark := len(tuples[ti])
		if !slices.ContainsFunc(batch, func(i int) bool { return keys[i] != "" }) {
			// No cursor yet (as copyWhole on SQLite): all their rows, if they fit.
			got, err := s.readRaw(ctx, ti, db, owners, batch, keys, limit, room, true, &tuples[ti])
			switch {
			case errors.Is(err, errNoRaw):
				return 0, false, err
			case err != nil:
				return 0, false, s.wrap(from, what, err)
			}
			if got <= limit {
				for _, i := range batch { // done with the table, even if they fill the chunk
					in[i] = ti + 1
				}
				room -= len(tuples[ti]) - mark
				return got, room <= 0, nil
			}
			tuples[ti] = tuples[ti][:mark] // more, or too many bytes: by ranges
		}
		got, err := s.readRaw(ctx, ti, db, owners, batch, keys, limit, room, false, &tuples[ti])
		if err != nil && !errors.Is(err, errNoRaw) {
			err = s.wrap(from, what, err)
		}
		room -= len(tuples[ti]) - mark
		return got, room <= 0, err
	})
	if err != nil {
		return undo(err)
	}
	if n == 0 {
		return 0, full, nil
	}
	what := fmt.Sprintf("write %d rows of %d owners", n, len(owners))
	tx, conn, done, err := s.beginImport(ctx, to, "")
	if err != nil {
		return undo(err)
	}
	defer done()
	if err := s.step(ctx, tx, migration, token, owners, to, rebalance.Importing); err != nil {
		return undo(err)
	}
	for ti, t := range s.tables {
		if len(tuples[ti]) == 0 {
			continue
		}
		if err := copyTuples(ctx, conn, t, tuples[ti]); err != nil {
			pool = false
			if ctx.Err() != nil {
				return undo(s.wrap(to, what+" in table "+t.Table, err))
			}
			if refusedBinary(err) {
				s.noRaw[ti].Store(true)
			}
			return undo(errNoRaw)
		}
	}
	if err := s.commitMover(ctx, tx); err != nil {
		return undo(s.wrap(to, "commit: "+what, err))
	}
	return n, full, nil
}

// readRaw reads, in one statement on db, up to limit rows of table ti of the owners at
// positions batch of owners after their keys, in the binary format, appends them to out as
// COPY tuples, sets each owner's key to its last row's, and returns how many rows it read.
// With whole, it reads up to limit+1 rows of those owners in no order, by one scan of the
// (owner, key) index rather than a range per owner merged and sorted (a quarter cheaper),
// and sets no key.
func (s *Store) readRaw(ctx context.Context, ti int, db *sql.DB, owners []string, batch []int, keys []string, limit, room int, whole bool, out *[]byte) (int, error) {
	t := s.tables[ti]
	q := &query{}
	cols := strings.Join(t.Columns, ", ")
	if whole {
		if err := q.whole(t, cols, owners, batch, limit); err != nil {
			return 0, err
		}
	} else if err := q.arms(t, "", cols, owners, batch, keys, limit); err != nil {
		return 0, err
	}
	c, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	n, start := 0, len(*out)
	err = c.Raw(func(dc any) (err error) {
		pc, ok := dc.(copyConn)
		if !ok {
			return errNoRaw
		}
		conn := pc.Conn()
		if _, err := conn.Exec(ctx, "BEGIN READ ONLY"); err != nil {
			return err
		}
		defer func() {
			// It only read; a connection left in its transaction is not put back.
			if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil && err == nil {
				err = driver.ErrBadConn
			}
		}()
		// As rangesOnly, for this transaction.
		if _, err := conn.Exec(ctx, rangesOnlySQL); err != nil {
			return err
		}
		rows, err := conn.Query(ctx, q.b.String(), append([]any{pgx.QueryResultFormats{pgx.BinaryFormatCode}}, q.args...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		fields := rows.FieldDescriptions()
		if len(fields) != len(t.Columns)+1 {
			return fmt.Errorf("%d columns read, want %d", len(fields), len(t.Columns)+1)
		}
		keyOf := rawKey(fields[t.key+1].DataTypeOID)
		if keyOf == nil || fields[0].DataTypeOID != int4OID {
			s.noRaw[ti].Store(true)
			return errNoRaw
		}
		for rows.Next() {
			raw := rows.RawValues()
			if len(raw[0]) != 4 {
				return fmt.Errorf("arm of %d bytes", len(raw[0]))
			}
			arm := int32(binary.BigEndian.Uint32(raw[0]))
			if arm < 0 || int(arm) >= len(batch) {
				return fmt.Errorf("row of arm %d among %d", arm, len(batch))
			}
			if !whole {
				if keys[batch[arm]], err = keyOf(raw[t.key+1]); err != nil {
					return err
				}
			}
			*out = binary.BigEndian.AppendUint16(*out, uint16(len(t.Columns)))
			for _, v := range raw[1:] {
				if v == nil {
					*out = binary.BigEndian.AppendUint32(*out, 0xffffffff) // NULL: a length of -1
					continue
				}
				*out = binary.BigEndian.AppendUint32(*out, uint32(len(v)))
				*out = append(*out, v...)
			}
			n++
			if len(*out)-start >= room {
				if whole {
					n = limit + 1 // not all of them: by ranges, which can stop in between
				}
				break
			}
		}
		return rows.Err()
	})
	return n, err
}

// refusedBinary says err is the server refusing a value in the binary format (malformed for
// its type there, SQLSTATE 08P01 or class 22, or of another type, class 42), rather than a row
// already there or a failure that may pass (a lost connection, a cancel).
func refusedBinary(err error) bool {
	var coded interface{ SQLState() string }
	if !errors.As(err, &coded) {
		return false
	}
	code := coded.SQLState()
	return code == "08P01" || strings.HasPrefix(code, "22") || strings.HasPrefix(code, "42")
}

// OIDs of the types whose binary values readRaw turns into cursor keys.
const (
	byteaOID   = 17
	int8OID    = 20
	int2OID    = 21
	int4OID    = 23
	textOID    = 25
	bpcharOID  = 1042
	varcharOID = 1043
)

// rawKey returns the function that turns a key value of type oid, in the binary format, into
// the key part of a cursor, as encodeKey does for the value read through database/sql; nil
// for a type it does not know.
func rawKey(oid uint32) func([]byte) (string, error) {
	integer := func(size int) func([]byte) (string, error) {
		return func(b []byte) (string, error) {
			if len(b) != size {
				return "", fmt.Errorf("integer key of %d bytes, want %d", len(b), size)
			}
			var v int64
			switch size {
			case 2:
				v = int64(int16(binary.BigEndian.Uint16(b)))
			case 4:
				v = int64(int32(binary.BigEndian.Uint32(b)))
			default:
				v = int64(binary.BigEndian.Uint64(b))
			}
			return "i" + strconv.FormatInt(v, 10), nil
		}
	}
	switch oid {
	case int2OID:
		return integer(2)
	case int4OID:
		return integer(4)
	case int8OID:
		return integer(8)
	case textOID, varcharOID, bpcharOID:
		return func(b []byte) (string, error) {
			if b == nil {
				return "", errors.New("NULL key")
			}
			return "s" + string(b), nil
		}
	case byteaOID:
		return func(b []byte) (string, error) {
			if b == nil {
				return "", errors.New("NULL key")
			}
			return "b" + string(b), nil
		}
	}
	return nil
}

// copyTuples writes tuples, binary COPY tuples of table t's columns, by one COPY on conn (in
// the transaction running there, which a failure aborts).
func copyTuples(ctx context.Context, conn *sql.Conn, t *table, tuples []byte) error {
	header := binary.BigEndian.AppendUint64([]byte("PGCOPY\n\377\r\n\000"), 0) // no flags, no extension
	end := []byte{0xff, 0xff}
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(copyConn)
		if !ok {
			return errNoCopy
		}
		_, err := pc.Conn().PgConn().CopyFrom(ctx, io.MultiReader(bytes.NewReader(header), bytes.NewReader(tuples), bytes.NewReader(end)),
			"COPY "+t.Table+" ("+strings.Join(t.Columns, ", ")+") FROM STDIN (FORMAT binary)")
		return err
	})
}
