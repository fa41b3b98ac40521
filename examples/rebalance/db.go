package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver for PostgreSQL
	_ "modernc.org/sqlite"             // the "sqlite" driver, pure Go
)

// dbs are the example's databases: one per shard, and the control database that holds the
// marks, the ledger of acknowledged writes and the example's state (document 004's users
// table, where the messages_rebalanced flag lives). Both dialects accept the same SQL: $n
// placeholders and INSERT ... ON CONFLICT.
type dbs struct {
	kind    string // "sqlite" or "postgres"
	shards  []*sql.DB
	control *sql.DB
}

// openSQLite opens n shard files and control.db in dir, creating dir.
func openSQLite(dir string, n int) (*dbs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	open := func(name string) (*sql.DB, error) {
		// WAL and a busy timeout let readers work while a shard is written; one connection
		// per file serializes the writers, which is simpler than retrying SQLITE_BUSY.
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, name)+
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err == nil {
			db.SetMaxOpenConns(1)
		}
		return db, err
	}
	d := &dbs{kind: "sqlite"}
	for i := range n {
		db, err := open(fmt.Sprintf("shard%d.db", i))
		if err != nil {
			return nil, err
		}
		d.shards = append(d.shards, db)
	}
	var err error
	d.control, err = open("control.db")
	return d, err
}

// openPostgres opens one database per DSN; the control tables live in the first one.
// Every DSN must answer before anything is written.
func openPostgres(dsns []string) (*dbs, error) {
	d := &dbs{kind: "postgres"}
	for i, dsn := range dsns {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, fmt.Errorf("shard %d: DSN #%d: %w", i, i+1, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("shard %d: DSN #%d does not connect: %w", i, i+1, err)
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
	d.control.Close() // a second Close of shard 0 on PostgreSQL is harmless
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

// createSchema creates the example's tables, and tags each shard database with its number so
// that two DSNs naming one database are caught instead of corrupting each other.
func (d *dbs) createSchema(ctx context.Context) error {
	for i, db := range d.shards {
		if err := execAll(ctx, db, shardSchema); err != nil {
			return fmt.Errorf("shard %d: create tables: %w", i, err)
		}
		var tags []int
		rows, err := db.QueryContext(ctx, "SELECT n FROM example_shard")
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				return err
			}
			tags = append(tags, n)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		switch {
		case len(tags) == 0:
			if _, err := db.ExecContext(ctx, "INSERT INTO example_shard (n) VALUES ($1)", i); err != nil {
				return err
			}
		case len(tags) > 1 || tags[0] != i:
			return fmt.Errorf("shard %d: its database is already shard %v: give each shard its own database", i, tags)
		}
	}
	return execAll(ctx, d.control, controlSchema)
}
