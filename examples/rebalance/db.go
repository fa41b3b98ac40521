package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver for PostgreSQL
	_ "modernc.org/sqlite"             // the "sqlite" driver, pure Go
)

// dbs are the example's databases: one per shard, and the control database that holds the
// marks, the ledger of acknowledged writes and the example's state (the rebalancing post's
// [004] users table, where the messages_rebalanced flag lives). Both dialects accept the same
// SQL: $n placeholders and INSERT ... ON CONFLICT.
type dbs struct {
	kind    string // "sqlite" or "postgres"
	shards  []*sql.DB
	names   []string // of the shards in errors: "shard 3 (data/shard3.db)", "shard 3 (DSN #4)"
	control *sql.DB
}

// shard wraps err, if not nil, with the name of shard i.
func (d *dbs) shard(i int, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", d.names[i], err)
}

// openSQLite opens n shard files and control.db in dir. The first run creates dir (not its
// parent: a mistyped path is an error, not a new tree) and the files. Once control.db exists
// the shard files must exist too: one that is missing was lost, and creating it empty would
// hide the loss and let a move delete the last copy of what it held.
func openSQLite(dir string, n int) (*dbs, error) {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("-data %s: %w", dir, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("-data %s: not a directory", dir)
	}
	probe, err := os.CreateTemp(dir, ".writable-*")
	if err != nil {
		return nil, fmt.Errorf("-data %s: the directory is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())

	_, err = os.Stat(filepath.Join(dir, "control.db"))
	existing := err == nil
	open := func(path string) (*sql.DB, error) {
		mode := "rwc"
		if existing {
			mode = "rw"
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("the file is missing but control.db exists: it was lost after this example wrote to it (or -shards/-grow differ from the first run's); refusing to create it empty: %w", errState)
			} else if err != nil {
				return nil, err
			}
		}
		// WAL and a busy timeout let readers work while a shard is written; one connection
		// per file serializes the writers, which is simpler than retrying SQLITE_BUSY.
		// SQLite enforces foreign keys (the -procs mode's chat tables have them) only on a
		// connection that asks.
		db, err := sql.Open("sqlite", "file:"+path+"?mode="+mode+
			"&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)")
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		if err := db.Ping(); err != nil {
			db.Close()
			return nil, err
		}
		return db, nil
	}
	d := &dbs{kind: "sqlite"}
	for i := range n {
		path := filepath.Join(dir, fmt.Sprintf("shard%d.db", i))
		d.names = append(d.names, fmt.Sprintf("shard %d (%s)", i, path))
		db, err := open(path)
		if err != nil {
			d.close()
			return nil, d.shard(i, err)
		}
		d.shards = append(d.shards, db)
	}
	d.control, err = open(filepath.Join(dir, "control.db"))
	if err != nil {
		d.close()
		return nil, fmt.Errorf("control database %s: %w", filepath.Join(dir, "control.db"), err)
	}
	return d, nil
}

// openPostgres opens one database per DSN; the control tables live in the first one.
// Every DSN must answer before anything is written.
func openPostgres(dsns []string) (*dbs, error) {
	d := &dbs{kind: "postgres"}
	for i, dsn := range dsns {
		d.names = append(d.names, fmt.Sprintf("shard %d (DSN #%d)", i, i+1))
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			d.close()
			return nil, d.shard(i, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err != nil {
			db.Close()
			d.close()
			return nil, d.shard(i, fmt.Errorf("does not connect: %w", err))
		}
		db.SetMaxOpenConns(8)
		d.shards = append(d.shards, db)
	}
	d.control = d.shards[0]
	return d, nil
}

func (d *dbs) close() {
	for _, db := range d.shards {
		db.Close()
	}
	if d.control != nil {
		d.control.Close() // a second Close of shard 0 on PostgreSQL is harmless
	}
}

// hasTable reports whether db has a table of that name.
func (d *dbs) hasTable(ctx context.Context, db *sql.DB, name string) (bool, error) {
	q := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1"
	if d.kind == "postgres" {
		q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
	}
	var n int
	err := db.QueryRowContext(ctx, q, name).Scan(&n)
	return n > 0, err
}

const shardSchema = `
CREATE TABLE IF NOT EXISTS messages (
	id      BIGINT PRIMARY KEY,
	user_id BIGINT NOT NULL,
	time    BIGINT NOT NULL,
	message TEXT NOT NULL,
	sender  BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_user_id ON messages (user_id);
CREATE TABLE IF NOT EXISTS example_shard (n INTEGER NOT NULL)`

const controlSchema = `
CREATE TABLE IF NOT EXISTS rebalance_marks (
	migration TEXT NOT NULL,
	owner     TEXT NOT NULL,
	mark      INTEGER NOT NULL,
	PRIMARY KEY (migration, owner)
);
CREATE TABLE IF NOT EXISTS example_ledger (
	user_id  BIGINT PRIMARY KEY,
	count    BIGINT NOT NULL,
	checksum BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS example_state (
	id      INTEGER PRIMARY KEY,
	round   INTEGER NOT NULL,
	phase   INTEGER NOT NULL,
	started INTEGER NOT NULL,
	shards  INTEGER NOT NULL,
	grow    INTEGER NOT NULL,
	users   INTEGER NOT NULL
)`

// execAll runs the statements of a schema one by one: database/sql drivers differ in how
// they treat several statements in one Exec.
func execAll(ctx context.Context, db *sql.DB, schema string) error {
	for _, stmt := range strings.Split(schema, ";") {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// createSchema creates the example's tables, schema on each shard (shardSchema, or the -procs
// mode's chatSchema), and tags each shard database with its number so that two DSNs naming
// one database are caught instead of corrupting each other.
func (d *dbs) createSchema(ctx context.Context, schema string) error {
	for i, db := range d.shards {
		if err := execAll(ctx, db, schema); err != nil {
			return d.shard(i, fmt.Errorf("create tables: %w", err))
		}
		tags, err := d.tags(ctx, i)
		if err != nil {
			return d.shard(i, err)
		}
		switch {
		case len(tags) == 0:
			if _, err := db.ExecContext(ctx, "INSERT INTO example_shard (n) VALUES ($1)", i); err != nil {
				return d.shard(i, err)
			}
		case len(tags) > 1 || tags[0] != i:
			return d.shard(i, fmt.Errorf("its database is already shard %v: give each shard its own database", tags))
		}
	}
	return execAll(ctx, d.control, controlSchema)
}

// tags returns the shard numbers a shard database is tagged with: one, or none before the
// first createSchema.
func (d *dbs) tags(ctx context.Context, i int) ([]int, error) {
	rows, err := d.shards[i].QueryContext(ctx, "SELECT n FROM example_shard")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var tags []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		tags = append(tags, n)
	}
	return tags, rows.Err()
}

// checkShards checks, once the example has state, that every shard database is still the
// one it created: tagged with its number and holding the messages table. A database that
// was replaced, truncated or dropped and recreated is refused with its name: creating the
// tables again would present the loss as an empty shard.
func (d *dbs) checkShards(ctx context.Context) error {
	for i, db := range d.shards {
		ok, err := d.hasTable(ctx, db, "messages")
		if err != nil {
			return d.shard(i, err)
		}
		var tags []int
		if has, err := d.hasTable(ctx, db, "example_shard"); err != nil {
			return d.shard(i, err)
		} else if has {
			if tags, err = d.tags(ctx, i); err != nil {
				return d.shard(i, err)
			}
		}
		if !ok || len(tags) != 1 || tags[0] != i {
			return d.shard(i, fmt.Errorf("not the database this example loaded (messages table: %v, shard tags: %v): it was replaced, truncated or recreated since; refusing to go on, or a move could delete the last copy of what it held: %w",
				ok, tags, errState))
		}
	}
	return nil
}
