package sqlstore_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/shardkit/shard/sqlstore"
)

// The limit the mover is measured against: the same rows copied by the engine's fastest
// plain path between two shards, with no fence, capture, chunking or verification. On
// PostgreSQL a binary COPY TO STDOUT of each pair of shards' moving rows streamed into a
// COPY FROM STDIN on the other (the psql pipe of two COPY commands, here through pgx's
// connections); on SQLite one INSERT INTO ... SELECT over ATTACH of the other file. The rows
// go into pipe_messages, a table like messages (its primary key and (user_id, id) index),
// emptied afterwards.
//
// On SQLite the same pipe and deletion also run with the triggers the store puts on messages
// (the change capture and the guard) copied onto pipe_messages: the least a move that keeps
// them costs there. SQLite fires a row trigger for the mover's own writes too (it cannot turn
// triggers off for one connection), so this, not the plain move, bounds the mover.

// pipeResult is what pipeCopy measured: the rows copied, how long the copy took and the
// machine's busy CPU time meanwhile (busyCPU), and how long deleting them again took.
type pipeResult struct {
	rows              int64
	copy, delete, cpu time.Duration
}

// pipeCopy copies the messages of w's users whose shard changes from their before shard to
// their after shard, pairs of shards up to conc at once, then deletes them from the copies,
// by user as a plain move deletes the rows it moved (the same rows, from a table with the
// same indexes), pairs up to conc at once again. guarded (SQLite only) gives pipe_messages
// copies of messages' triggers first.
func pipeCopy(tb testing.TB, e *engine, p *proc, w *world, conc int, guarded bool) pipeResult {
	tb.Helper()
	ctx := context.Background()
	pairs := map[[2]int][]string{}
	for _, u := range w.users {
		a, b := w.before.Locate(u), w.after.Locate(u)
		if a != b {
			pairs[[2]int{a, b}] = append(pairs[[2]int{a, b}], u)
		}
	}
	for i, db := range p.dbs {
		q := "CREATE TABLE IF NOT EXISTS pipe_messages (LIKE messages INCLUDING ALL)"
		if e.dialect == sqlstore.SQLite {
			q = "CREATE TABLE IF NOT EXISTS pipe_messages (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, time BIGINT NOT NULL, message TEXT NOT NULL, sender BIGINT NOT NULL)"
		}
		if _, err := db.Exec(q); err != nil {
			tb.Fatal(i, err)
		}
		if e.dialect == sqlstore.SQLite {
			if _, err := db.Exec("CREATE INDEX IF NOT EXISTS pipe_messages_user_id_id ON pipe_messages (user_id, id)"); err != nil {
				tb.Fatal(err)
			}
		}
		if guarded {
			copyTriggers(tb, db, "messages", "pipe_messages")
		}
	}
	var (
		copied int64
		mu     sync.Mutex
		wg     sync.WaitGroup
		sem    = make(chan struct{}, conc)
		first  error
	)
	began, cpu := time.Now(), busyCPU()
	for pair, users := range pairs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var n int64
			var err error
			if e.dialect == sqlstore.PostgreSQL {
				n, err = pipePostgres(ctx, p.dbs[pair[0]], p.dbs[pair[1]], users)
			} else {
				n, err = pipeSQLite(ctx, p.dbs[pair[0]], e.shards[pair[1]], users)
			}
			mu.Lock()
			defer mu.Unlock()
			copied += n
			if err != nil && first == nil {
				first = fmt.Errorf("shards %d -> %d: %w", pair[0], pair[1], err)
			}
		})
	}
	wg.Wait()
	took, cpu := time.Since(began), busyCPU()-cpu
	if first != nil {
		tb.Fatal(first)
	}
	var deleted int64
	began = time.Now()
	for pair, users := range pairs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := p.dbs[pair[1]].ExecContext(ctx, "DELETE FROM pipe_messages WHERE user_id IN ("+strings.Join(users, ",")+")")
			var n int64
			if err == nil {
				n, err = res.RowsAffected()
			}
			mu.Lock()
			defer mu.Unlock()
			deleted += n
			if err != nil && first == nil {
				first = fmt.Errorf("delete on shard %d: %w", pair[1], err)
			}
		})
	}
	wg.Wait()
	deleteTook := time.Since(began)
	if first == nil && deleted != copied {
		first = fmt.Errorf("deleted %d rows of the %d copied", deleted, copied)
	}
	if first != nil {
		tb.Fatal(first)
	}
	for _, db := range p.dbs {
		if _, err := db.Exec("DROP TABLE pipe_messages"); err != nil {
			tb.Fatal(err)
		}
	}
	return pipeResult{rows: copied, copy: took, delete: deleteTook, cpu: cpu}
}

// copyTriggers creates on SQLite table to a copy of each trigger of table from, named
// pipe_ and the trigger's name.
func copyTriggers(tb testing.TB, db *sql.DB, from, to string) {
	tb.Helper()
	rs, err := db.Query("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", from)
	if err != nil {
		tb.Fatal(err)
	}
	var defs []string
	for rs.Next() {
		var name, def string
		if err := rs.Scan(&name, &def); err != nil {
			tb.Fatal(err)
		}
		head := fmt.Sprintf("CREATE TRIGGER %s AFTER ", name)
		op, rest, ok := strings.Cut(strings.TrimPrefix(def, head), " ON "+from+" ")
		if !strings.HasPrefix(def, head) || !ok {
			tb.Fatalf("trigger %s: unexpected definition %.80q", name, def)
		}
		defs = append(defs, fmt.Sprintf("CREATE TRIGGER pipe_%s AFTER %s ON %s %s", name, op, to, rest))
	}
	if err := cmp.Or(rs.Err(), rs.Close()); err != nil {
		tb.Fatal(err)
	}
	if len(defs) == 0 {
		tb.Fatalf("table %s has no triggers", from)
	}
	for _, d := range defs {
		if _, err := db.Exec(d); err != nil {
			tb.Fatal(err)
		}
	}
}

// pipePostgres streams users' messages from src into pipe_messages on dst, binary COPY
// into binary COPY, and returns how many rows it copied.
func pipePostgres(ctx context.Context, src, dst *sql.DB, users []string) (int64, error) {
	out, err := pgConn(ctx, src)
	if err != nil {
		return 0, err
	}
	defer out.close()
	in, err := pgConn(ctx, dst)
	if err != nil {
		return 0, err
	}
	defer in.close()
	r, w := io.Pipe()
	read := make(chan error, 1)
	go func() {
		_, err := out.pg.CopyTo(ctx, w, "COPY (SELECT id, user_id, time, message, sender FROM messages WHERE user_id = ANY('{"+
			strings.Join(users, ",")+"}'::bigint[]) ORDER BY user_id, id) TO STDOUT (FORMAT binary)")
		w.CloseWithError(err)
		read <- err
	}()
	tag, err := in.pg.CopyFrom(ctx, r, "COPY pipe_messages (id, user_id, time, message, sender) FROM STDIN (FORMAT binary)")
	r.CloseWithError(err)
	if rerr := <-read; err == nil {
		err = rerr
	}
	return tag.RowsAffected(), err
}

// rawPG is a connection of a *sql.DB of the pgx driver, as pgx's own.
type rawPG struct {
	conn *sql.Conn
	pg   *pgconn.PgConn
}

func pgConn(ctx context.Context, db *sql.DB) (*rawPG, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	r := &rawPG{conn: c}
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("driver connection %T is not pgx's", dc)
		}
		r.pg = sc.Conn().PgConn()
		return nil
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	return r, nil
}

func (r *rawPG) close() { r.conn.Close() }

// pipeSQLite copies users' messages from src into pipe_messages of the database file of DSN
// dst, attached to a connection of src, in one INSERT INTO ... SELECT.
func pipeSQLite(ctx context.Context, src *sql.DB, dst string, users []string) (int64, error) {
	c, err := src.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	u, err := url.Parse(dst)
	if err != nil {
		return 0, err
	}
	if _, err := c.ExecContext(ctx, "ATTACH DATABASE $1 AS dst", cmp.Or(u.Opaque, u.Path)); err != nil {
		return 0, err
	}
	defer c.ExecContext(context.WithoutCancel(ctx), "DETACH DATABASE dst")
	res, err := c.ExecContext(ctx, "INSERT INTO dst.pipe_messages SELECT id, user_id, time, message, sender FROM main.messages WHERE user_id IN ("+
		strings.Join(users, ",")+") ORDER BY user_id, id")
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// TestPipeCopiesTheMovingRows: the baseline copies exactly the rows of the users whose shard
// changes, and deletes as many, on both engines.
func TestPipeCopiesTheMovingRows(t *testing.T) {
	forEngines(t, 4, func(t *testing.T, e *engine) {
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 4)
		w.load(t, admin, span(1, 40), 7)
		var want int64
		for _, u := range w.users {
			if w.before.Locate(u) != w.after.Locate(u) {
				want += 7
			}
		}
		for _, guarded := range []bool{false, e.dialect == sqlstore.SQLite} {
			got := pipeCopy(t, e, admin, w, 3, guarded) // which fails if it deletes other than it copied
			if got.rows != want || want == 0 {
				t.Fatalf("the pipe (guarded: %v) copied %d rows, want %d", guarded, got.rows, want)
			}
		}
	})
}
