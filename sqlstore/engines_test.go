package sqlstore_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver

	"github.com/shardkit/shard/sqlstore"
)

// This file runs the engines the tests use: SQLite files in a temp dir, and a PostgreSQL
// server from Debian's package, started once by TestMain in a temp dir on a random port of
// 127.0.0.1 (as .ci/rebalance.sh does) and stopped when the tests end. Without PostgreSQL
// the tests on it are skipped with the reason, unless SQLSTORE_REQUIRE_PG=1 (CI), which makes
// that a failure.

var pg *pgServer // nil when PostgreSQL could not start
var pgWhy string // why not

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	if os.Getenv(moverEnv) != "" {
		os.Exit(moverMain())
	}
	if os.Getenv(routerEnv) != "" {
		os.Exit(routerMain())
	}
	if os.Getenv(longEnv) != "" {
		os.Exit(longFnMain())
	}
	var err error
	if fuzzing() {
		pg, pgWhy = nil, "not started by a fuzz worker: the fuzz targets run on SQLite"
		os.Exit(m.Run())
	}
	pg, err = startPostgres()
	if err != nil {
		pgWhy = err.Error()
		pg = nil
		if os.Getenv("SQLSTORE_REQUIRE_PG") == "1" {
			fmt.Fprintln(os.Stderr, "sqlstore tests: PostgreSQL is required (SQLSTORE_REQUIRE_PG=1) and did not start:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if pg != nil {
		pg.stop()
	}
	os.Exit(code)
}

// fuzzing reports whether this process fuzzes (go test -fuzz): every fuzz worker runs
// TestMain and is restarted often, and starting PostgreSQL in each would take most of the
// fuzzing time.
func fuzzing() bool {
	flag.Parse()
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

type pgServer struct {
	bin, dir string
	port     int
	dbs      atomic.Int64
}

func asPostgres(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 { // initdb refuses root: run the server as the package's user
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func startPostgres() (*pgServer, error) {
	find := func() []string { m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); return m }
	initdbs := find()
	if len(initdbs) == 0 && os.Geteuid() == 0 {
		if _, err := exec.LookPath("apt-get"); err == nil {
			out, err := exec.Command("sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql").CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("apt-get install postgresql: %v: %s", err, out)
			}
			initdbs = find()
		}
	}
	if len(initdbs) == 0 {
		return nil, errors.New("no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")
	}
	sort.Strings(initdbs)
	p := &pgServer{bin: filepath.Dir(initdbs[len(initdbs)-1])}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			if out, err := exec.Command("useradd", "--system", "--no-create-home", "postgres").CombinedOutput(); err != nil {
				return nil, fmt.Errorf("useradd postgres: %v: %s", err, out)
			}
		}
	}
	dir, err := os.MkdirTemp("", "sqlstore-pg-")
	if err != nil {
		return nil, err
	}
	p.dir = dir
	data := filepath.Join(dir, "data")
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chown: %v: %s", err, out)
		}
	}
	if out, err := asPostgres(filepath.Join(p.bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	for range 5 { // a free port may be taken between the probe and the start: try again
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			break
		}
		p.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		// fsync off unless SQLSTORE_PG_FSYNC=on: the tests need no durability, the benchmarks
		// may want it.
		fsync := cmp.Or(os.Getenv("SQLSTORE_PG_FSYNC"), "off")
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=%s -c max_connections=400 -c shared_buffers=256MB -c max_prepared_transactions=8", p.port, dir, fsync)
		if os.Getenv("SQLSTORE_BENCH_STATEMENTS") != "" {
			opts += " -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on" // see statementStats
		}
		if extra := os.Getenv("SQLSTORE_PG_OPTS"); extra != "" {
			opts += " " + extra // server settings to try, as "-c name=value ..."
		}
		out, err := asPostgres(filepath.Join(p.bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-o", opts, "start").CombinedOutput()
		if err == nil {
			p.watch()
			return p, nil
		}
		if !strings.Contains(string(out)+readFile(filepath.Join(dir, "log")), "in use") {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pg_ctl start: %v: %s", err, out)
		}
	}
	os.RemoveAll(dir)
	return nil, errors.New("pg_ctl start: no free port")
}

// watch starts a shell, in a session of its own, that stops the server and removes its
// directory once this process is gone however it ends (a test timeout's panic, a kill -9),
// so that no server outlives the tests.
func (p *pgServer) watch() {
	stop := asPostgres(filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "stop")
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; %s >/dev/null 2>&1; rm -rf %s",
		os.Getpid(), shellQuote(stop.Args), shellQuote([]string{p.dir}))
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func readFile(path string) string { b, _ := os.ReadFile(path); return string(b) }

func (p *pgServer) stop() {
	asPostgres(filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-m", "fast", "-w", "stop").Run()
	os.RemoveAll(p.dir)
}

func (p *pgServer) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// createDBs creates n new databases and returns their DSNs.
func (p *pgServer) createDBs(n int) ([]string, error) {
	admin, err := sql.Open("pgx", p.dsn("postgres"))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	var dsns []string
	for range n {
		name := fmt.Sprintf("t%d", p.dbs.Add(1))
		if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
			return nil, err
		}
		dsns = append(dsns, p.dsn(name))
	}
	return dsns, nil
}

// engine is one set of databases: shards and a control database, as DSNs that every
// "process" (a set of *sql.DB handles) opens on its own.
type engine struct {
	dialect sqlstore.Dialect
	driver  string
	shards  []string // DSNs
	control string
	schema  string               // the data tables' DDL; messagesSchema if ""
	tables  []sqlstore.TableSpec // what a Store moves; messages if nil
	opts    sqlstore.Options     // each Store's
}

// forEngines runs f on SQLite and, if it runs, PostgreSQL, each with fresh databases of n
// shards holding the messages table of examples/rebalance.
func forEngines(t *testing.T, n int, f func(t *testing.T, e *engine)) {
	forSchema(t, n, "", nil, f)
}

// forSchema is forEngines with the tables of schema, moved as tables (messages if "", nil).
func forSchema(t *testing.T, n int, schema string, tables []sqlstore.TableSpec, f func(t *testing.T, e *engine)) {
	t.Run("sqlite", func(t *testing.T) { f(t, newEngine(t, sqlstore.SQLite, n, schema, tables)) })
	t.Run("postgres", func(t *testing.T) {
		if pg == nil {
			t.Skip("PostgreSQL not available: " + pgWhy)
		}
		f(t, newEngine(t, sqlstore.PostgreSQL, n, schema, tables))
	})
}

// skipPlainCopies skips a test of the fast copy paths when SQLSTORE_PLAIN_COPIES=1 turns them
// off (see engine.open).
func skipPlainCopies(t *testing.T) {
	if os.Getenv("SQLSTORE_PLAIN_COPIES") == "1" {
		t.Skip("SQLSTORE_PLAIN_COPIES=1: the fast copy paths are off")
	}
}

func newSQLite(t testing.TB, n int) *engine { return newEngine(t, sqlstore.SQLite, n, "", nil) }

func newPostgres(t testing.TB, n int) *engine { return newEngine(t, sqlstore.PostgreSQL, n, "", nil) }

// newEngine returns n new shard databases of dialect holding the tables of schema. SQLite
// databases enforce foreign keys, as PostgreSQL's always do.
func newEngine(t testing.TB, dialect sqlstore.Dialect, n int, schema string, tables []sqlstore.TableSpec) *engine {
	e := &engine{dialect: dialect, driver: "sqlite", schema: schema, tables: tables}
	if dialect == sqlstore.PostgreSQL {
		dsns, err := pg.createDBs(n)
		if err != nil {
			t.Fatal(err)
		}
		// The control tables live in shard 0's database, as in examples/rebalance.
		e.driver, e.shards, e.control = "pgx", dsns, dsns[0]
	} else {
		dir := t.TempDir()
		dsn := func(name string) string {
			// A subtest's directory may hold '#' (fuzz seeds), which a URI takes for a fragment.
			path := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.Join(dir, name))
			return "file:" + path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
		}
		for i := range n {
			e.shards = append(e.shards, dsn(fmt.Sprintf("shard%d.db", i)))
		}
		e.control = dsn("control.db")
	}
	e.createTables(t)
	return e
}

const messagesSchema = `
CREATE TABLE IF NOT EXISTS messages (
	id      BIGINT PRIMARY KEY,
	user_id BIGINT NOT NULL,
	time    BIGINT NOT NULL,
	message TEXT NOT NULL,
	sender  BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_user_id_id ON messages (user_id, id)`

var messages = sqlstore.TableSpec{Table: "messages", Owner: "user_id", Key: "id", IntOwner: true,
	Columns: []string{"id", "user_id", "time", "message", "sender"}}

func (e *engine) createTables(t testing.TB) {
	for _, dsn := range e.shards {
		db, err := sql.Open(e.driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		for stmt := range strings.SplitSeq(cmp.Or(e.schema, messagesSchema), ";") {
			if _, err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
}

// proc is what one process holds: its own pools and its own Store.
type proc struct {
	dbs   []*sql.DB
	ctl   *sql.DB
	store *sqlstore.Store
}

// open opens a "process": its own *sql.DB per shard and for control, pooled for conns
// goroutines at once.
func (e *engine) open(t testing.TB, conns int) *proc {
	p, err := e.openErr(conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p
}

func (e *engine) openErr(conns int) (*proc, error) {
	p := &proc{}
	open := func(dsn string) (*sql.DB, error) {
		db, err := sql.Open(e.driver, dsn)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
		return db, nil
	}
	for _, dsn := range e.shards {
		db, err := open(dsn)
		if err != nil {
			p.close()
			return nil, err
		}
		p.dbs = append(p.dbs, db)
	}
	ctl := p.dbs[0]
	if e.control != e.shards[0] {
		var err error
		if ctl, err = open(e.control); err != nil {
			p.close()
			return nil, err
		}
	}
	p.ctl = ctl
	var err error
	tables := e.tables
	if tables == nil {
		tables = []sqlstore.TableSpec{messages}
	}
	p.store, err = sqlstore.New(e.dialect, p.dbs, p.ctl, tables, e.opts)
	if err == nil && os.Getenv("SQLSTORE_PLAIN_COPIES") == "1" { // measure the plain copy
		p.store.CopyPlainly(true)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = p.store.Init(ctx)
		cancel()
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *proc) close() {
	for _, db := range p.dbs {
		db.Close()
	}
	if p.ctl != nil {
		p.ctl.Close()
	}
}
