package sqlstore_test

// Network failures. A faulty database/sql driver wraps the real one (pgx, modernc sqlite)
// under the mover's pools and makes the n-th commit point (a transaction's COMMIT, or a
// statement run outside a transaction) fail: "after" runs it for real and then returns a
// connection-reset error, as when the connection drops while the commit's answer is on its
// way (the ambiguous commit); "before" fails it without running it. PostgreSQL backends are
// also terminated at random, and shards made unreachable for a while. After each failure the
// mover runs again until Run returns nil, Finish, and every acknowledged write must be found
// once on its owner's shard. TestBackendsKilled, TestShardUnreachable and TestFlakyLinks run
// for minutes: only with SQLSTORE_LONG=1.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// faults decides which commit point fails.
type faults struct {
	mu     sync.Mutex
	at     int  // commit points seen since arm
	n      int  // the one that fails; 0: none
	after  bool // run it, then fail (ambiguous commit); else fail without running it
	hit    string
	record bool
	log    []string
	// p, if not zero, fails each point with probability p instead (after or before the
	// commit at random); hits counts those failures.
	p    float64
	rng  *rand.Rand
	hits int
	// hidePgx hides the pgx connection (Conn gives nil), as another driver would.
	hidePgx bool
}

func (f *faults) arm(n int, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at, f.n, f.after, f.hit, f.log = 0, n, after, "", nil
}

// point counts a commit point and says whether it fails, and how.
func (f *faults) point(what string, commits bool) (fail, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.p > 0 {
		if f.rng.Float64() < f.p {
			f.hits++
			return true, commits && f.rng.IntN(2) == 0
		}
		return false, false
	}
	if f.after && !commits {
		return false, false // a read failed after it ran is no ambiguous commit
	}
	f.at++
	if f.record {
		f.log = append(f.log, what)
	}
	if f.at == f.n {
		f.hit = fmt.Sprintf("#%d %s", f.n, what)
		return true, f.after
	}
	return false, false
}

func (f *faults) hitWhat() string { f.mu.Lock(); defer f.mu.Unlock(); return f.hit }
func (f *faults) count() int      { f.mu.Lock(); defer f.mu.Unlock(); return f.at }

func connReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

type faultConnector struct {
	drv driver.Driver
	dsn string
	f   *faults
	tag string
}

func (c *faultConnector) Connect(ctx context.Context) (driver.Conn, error) {
	var inner driver.Conn
	var err error
	if dc, ok := c.drv.(driver.DriverContext); ok {
		var cn driver.Connector
		if cn, err = dc.OpenConnector(c.dsn); err == nil {
			inner, err = cn.Connect(ctx)
		}
	} else {
		inner, err = c.drv.Open(c.dsn)
	}
	if err != nil {
		return nil, err
	}
	return &faultConn{inner: inner, f: c.f, tag: c.tag}, nil
}

func (c *faultConnector) Driver() driver.Driver { return c.drv }

type faultConn struct {
	inner driver.Conn
	f     *faults
	tag   string
	bad   bool
	inTx  bool
	first string // the first statement of the transaction under way
}

func short(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 70 {
		q = q[:70]
	}
	return q
}

func (c *faultConn) Prepare(q string) (driver.Stmt, error) { return c.inner.Prepare(q) }
func (c *faultConn) Close() error                          { return c.inner.Close() }
func (c *faultConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *faultConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, q)
	}
	return c.inner.Prepare(q)
}

func (c *faultConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	var tx driver.Tx
	var err error
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, o)
	} else {
		tx, err = c.inner.Begin() //nolint
	}
	if err != nil {
		return nil, err
	}
	c.inTx, c.first = true, ""
	return &faultTx{inner: tx, c: c}, nil
}

func (c *faultConn) note(q string) {
	q = short(q)
	if c.inTx && len(c.first) < 120 && !strings.HasPrefix(q, "INSERT INTO rebalance_epoch") && !strings.HasPrefix(q, "SELECT") && !strings.HasPrefix(q, "SAVEPOINT") && !strings.HasPrefix(q, "RELEASE") {
		c.first += q[:min(len(q), 40)] + "; "
	}
}

// writes says whether a statement outside a transaction may write: its failure after it ran
// is an ambiguous commit (reads are failed only before they run).
func writes(q string) bool {
	q = strings.ToUpper(strings.TrimSpace(q))
	return !strings.HasPrefix(q, "SELECT") && !strings.HasPrefix(q, "PRAGMA") && !strings.HasPrefix(q, "WITH") ||
		strings.Contains(q, "REBALANCE_") && strings.Contains(q, "(") && !strings.Contains(q, " FROM ")
}

func (c *faultConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if c.inTx {
		c.note(q)
		return e.ExecContext(ctx, q, args)
	}
	fail, after := c.f.point(c.tag+" exec "+short(q), writes(q))
	if !fail {
		return e.ExecContext(ctx, q, args)
	}
	c.bad = true
	if after {
		if _, err := e.ExecContext(ctx, q, args); err != nil {
			return nil, err
		}
	}
	return nil, connReset()
}

func (c *faultConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	qc, ok := c.inner.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if c.inTx {
		c.note(q)
		return qc.QueryContext(ctx, q, args)
	}
	fail, after := c.f.point(c.tag+" query "+short(q), writes(q))
	if !fail {
		return qc.QueryContext(ctx, q, args)
	}
	c.bad = true
	if after {
		rows, err := qc.QueryContext(ctx, q, args)
		if err != nil {
			return nil, err
		}
		dest := make([]driver.Value, len(rows.Columns()))
		for {
			if err := rows.Next(dest); err != nil {
				if err != io.EOF {
					rows.Close()
					return nil, err
				}
				break
			}
		}
		rows.Close()
	}
	return nil, connReset()
}

func (c *faultConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.inner.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *faultConn) ResetSession(ctx context.Context) error {
	if c.bad {
		return driver.ErrBadConn
	}
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *faultConn) IsValid() bool {
	if c.bad {
		return false
	}
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *faultConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Conn gives the pgx connection, so that the store's COPY paths (copyConn) still run.
func (c *faultConn) Conn() *pgx.Conn {
	if pc, ok := c.inner.(interface{ Conn() *pgx.Conn }); ok && !c.f.hidePgx {
		return pc.Conn()
	}
	return nil
}

type faultTx struct {
	inner driver.Tx
	c     *faultConn
}

func (t *faultTx) Commit() error {
	t.c.inTx = false
	fail, after := t.c.f.point(t.c.tag+" commit tx of "+t.c.first, true)
	if !fail {
		return t.inner.Commit()
	}
	t.c.bad = true
	if after {
		if err := t.inner.Commit(); err != nil {
			return err
		}
	} else {
		t.inner.Rollback()
	}
	return connReset()
}

func (t *faultTx) Rollback() error {
	t.c.inTx = false
	return t.inner.Rollback()
}

// longTest skips t unless SQLSTORE_LONG=1.
func longTest(t *testing.T) {
	if os.Getenv("SQLSTORE_LONG") != "1" {
		t.Skip("runs for minutes: SQLSTORE_LONG=1")
	}
}

// openFaulty opens a "process" like engine.open whose pools go through faulty connections.
func openFaulty(t testing.TB, e *engine, conns int, f *faults) *proc {
	t.Helper()
	probe, err := sql.Open(e.driver, e.shards[0])
	if err != nil {
		t.Fatal(err)
	}
	drv := probe.Driver()
	probe.Close()
	p := &proc{}
	t.Cleanup(p.close)
	open := func(dsn, tag string) *sql.DB {
		db := sql.OpenDB(&faultConnector{drv: drv, dsn: dsn, f: f, tag: tag})
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
		return db
	}
	for i, dsn := range e.shards {
		p.dbs = append(p.dbs, open(dsn, fmt.Sprintf("shard%d", i)))
	}
	p.ctl = p.dbs[0]
	if e.control != e.shards[0] {
		p.ctl = open(e.control, "control")
	}
	tables := e.tables
	if tables == nil {
		tables = []sqlstore.TableSpec{messages}
	}
	p.store, err = sqlstore.New(e.dialect, p.dbs, p.ctl, tables, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.store.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// appTraffic writes and reads random users of w through m's of each proc until stopped.
// Errors of Do are tolerated (counted) unless strict; a read that finds fewer messages than
// were acknowledged before it began is always a finding.
type appTraffic struct {
	done             atomic.Bool
	wg               sync.WaitGroup
	ops, errs        atomic.Int64
	mu               sync.Mutex
	firstErr, broken error
}

func startTraffic(w *world, procs []*proc, id string, pace time.Duration, fenceWait time.Duration) *appTraffic {
	tr := &appTraffic{}
	for g, p := range procs {
		m, err := rebalance.NewShared(id, w.before, w.after, rebalance.SharedStore[*sql.Tx](p.store), rebalance.SharedOptions{FenceWait: fenceWait})
		if err != nil {
			panic(err)
		}
		tr.wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			ctx := context.Background()
			for !tr.done.Load() {
				u := w.users[r.IntN(len(w.users))]
				err := w.write(ctx, m, u)
				if err == nil {
					err = w.read(ctx, m, u)
					if err != nil && strings.Contains(err.Error(), "were acknowledged before the read") {
						tr.mu.Lock()
						if tr.broken == nil {
							tr.broken = err
						}
						tr.mu.Unlock()
					}
				}
				if err != nil {
					tr.errs.Add(1)
					tr.mu.Lock()
					if tr.firstErr == nil {
						tr.firstErr = err
					}
					tr.mu.Unlock()
				} else {
					tr.ops.Add(2)
				}
				time.Sleep(pace)
			}
		})
	}
	return tr
}

func (tr *appTraffic) stop() (ops, errs int64, first, broken error) {
	tr.done.Store(true)
	tr.wg.Wait()
	return tr.ops.Load(), tr.errs.Load(), tr.firstErr, tr.broken
}

// runUntil runs m until Run returns nil, up to tries times, and returns the errors seen.
func runUntil(ctx context.Context, m *rebalance.Shared[*sql.Tx], users []string, tries int, pause time.Duration) (errs []error, ok bool) {
	for range tries {
		err := m.Run(ctx, slices.Values(users))
		if err == nil {
			return errs, true
		}
		errs = append(errs, err)
		time.Sleep(pause)
	}
	return errs, false
}

func finishUntil(ctx context.Context, m *rebalance.Shared[*sql.Tx], users []string, tries int, pause time.Duration) (errs []error, ok bool) {
	for range tries {
		err := m.Finish(ctx, slices.Values(users))
		if err == nil {
			return errs, true
		}
		errs = append(errs, err)
		time.Sleep(pause)
	}
	return errs, false
}

// everyCommitPoint fails each commit point of a play in turn. count plays it once without a
// fault and returns how many points it had (every COMMIT; with after false, every statement
// outside a transaction too). play then plays it again, on fresh databases, with its nth
// point failing, after its commit landed (the answer lost) or before, and returns what
// failed, or "" if it had fewer points: the sweep ends there, past the count if traffic
// added points (changes replayed, moves retried), up to 4 times it.
func everyCommitPoint(t *testing.T, count func(t *testing.T, after bool) int, play func(t *testing.T, n int, after bool) (hit string)) {
	var steps [2]int
	for i, after := range []bool{true, false} {
		steps[i] = count(t, after)
	}
	t.Logf("%d commit points, %d points with the reads, without traffic", steps[0], steps[1])
	failures := 0
	for i, after := range []bool{true, false} {
		began, cases := time.Now(), 0
		stride := 1
		if !after {
			stride = 3 // each case makes databases: fewer of the plain failures
		}
		missed := false
		for n := 1; !missed && n <= 4*steps[i]; n += stride {
			if !t.Run(fmt.Sprintf("n%d-after%v", n, after), func(t *testing.T) {
				hit := play(t, n, after)
				if missed = hit == ""; missed {
					t.Skip("no fault: the play had fewer points")
				}
				cases++
			}) {
				failures++
			}
		}
		t.Logf("after=%v: %d points failed in %v", after, cases, time.Since(began))
		if cases == 0 {
			t.Fatalf("after=%v: no point failed of %d counted: the faults missed", after, steps[i])
		}
	}
	t.Logf("%d findings", failures)
}

// logPoints logs the points f recorded, in a verbose run.
func logPoints(t *testing.T, f *faults) {
	if testing.Verbose() {
		for i, s := range f.log {
			t.Logf("point %d: %s", i+1, s)
		}
	}
}

// report logs what a case of everyCommitPoint saw, as an error if bad.
func report(t *testing.T, bad bool, format string, args ...any) {
	t.Helper()
	if bad {
		t.Errorf(format, args...)
	} else if testing.Verbose() {
		t.Logf(format, args...)
	}
}

// TestAmbiguousCommitAtEveryPoint fails each commit point of a Run and Finish in turn,
// once, either after the commit landed (the answer lost: the ambiguous commit) or before,
// while the application writes; the same mover then runs again until Run returns nil, and
// Finish. Every commit point counts: a transaction's COMMIT on any database (so the first half
// of a two-database step, like Replay's apply on the new shard before the changes are deleted
// on the old one), and every statement outside a transaction (PostgreSQL's fence functions,
// reads).
func TestAmbiguousCommitAtEveryPoint(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e0 *engine) {
		ctx := context.Background()
		opts := rebalance.SharedOptions{Token: 1, Mover: "net", ChunkRows: 4, DeleteRows: 12, Batch: 2, Group: 2, Lease: 2 * time.Second}
		count := func(t *testing.T, after bool) int {
			e, _, w := ambiguitySetup(t, e0)
			f := &faults{record: true}
			mp := openFaulty(t, e, 3, f)
			f.arm(0, after) // after Init's points
			m := w.shared(t, mp, "count", opts)
			if err := m.Run(ctx, slices.Values(w.users)); err != nil {
				t.Fatal(err)
			}
			if err := m.Finish(ctx, slices.Values(w.users)); err != nil {
				t.Fatal(err)
			}
			logPoints(t, f)
			return f.count()
		}
		everyCommitPoint(t, count, func(t *testing.T, n int, after bool) string {
			e, admin, w := ambiguitySetup(t, e0)
			id := "amb"
			f := &faults{}
			mp := openFaulty(t, e, 3, f)
			app := e.open(t, 2)
			tr := startTraffic(w, []*proc{app}, id, 5*time.Millisecond, 30*time.Second)
			time.Sleep(5 * time.Millisecond)
			f.arm(n, after)
			m := w.shared(t, mp, id, opts)
			firstErr := m.Run(ctx, slices.Values(w.users))
			var runErrs []error
			ran := firstErr == nil
			if !ran {
				runErrs, ran = runUntil(ctx, m, w.users, 5, 50*time.Millisecond)
			}
			finErrs, fin := finishUntil(ctx, m, w.users, 5, 50*time.Millisecond)
			ops, terrs, tfirst, broken := tr.stop()
			hit := f.hitWhat()
			f.arm(0, false)
			if hit == "" {
				return ""
			}
			v := w.verify(t, admin, w.after)
			report(t, !ran || !fin || broken != nil || terrs > 0 || v.lost+v.duplicated+v.misplaced != 0,
				"fault at %s (after=%v): first Run: %v; runs again: ok=%v %v; finish: ok=%v %v; traffic: %d ops, %d errors (%v), broken read %v; %v",
				hit, after, firstErr, ran, runErrs, fin, finErrs, ops, terrs, tfirst, broken, v)
			return hit
		})
	})
}

// ambiguitySetup makes fresh databases of e0's engine for a case of everyCommitPoint: three
// owners of 9 rows (a group of two and one alone) and one of 30, bigger than a deletion
// (deleted in chunks), all moving in a grow from 2 shards to 3.
func ambiguitySetup(t *testing.T, e0 *engine) (*engine, *proc, *world) {
	e := newEngine(t, e0.dialect, 3, "", nil)
	admin := e.open(t, 2)
	w := newWorld(t, e, 2, 3)
	w.load(t, admin, w.moving(1, 3), 9)
	w.load(t, admin, w.moving(200, 1), 30)
	return e, admin, w
}

// withApp returns a copy of e whose PostgreSQL DSNs name application_name app.
func withApp(e *engine, app string) *engine {
	c := *e
	c.shards = nil
	for _, d := range e.shards {
		c.shards = append(c.shards, d+"&application_name="+app)
	}
	c.control = e.control + "&application_name=" + app
	if e.control == e.shards[0] {
		c.control = c.shards[0]
	}
	return &c
}

// killer terminates at random moments, every lo..hi, the backends of the applications names
// (PostgreSQL), until stopped; it returns how many it terminated.
func killer(t *testing.T, names []string, lo, hi time.Duration) (stop func() int64) {
	admin, err := sql.Open("pgx", pg.dsn("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var killed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		for !done.Load() {
			time.Sleep(lo + time.Duration(r.Int64N(int64(hi-lo))))
			name := names[r.IntN(len(names))]
			var n int64
			if err := admin.QueryRow("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", name).Scan(&n); err == nil {
				killed.Add(n)
			}
		}
	})
	return func() int64 {
		done.Store(true)
		wg.Wait()
		admin.Close()
		return killed.Load()
	}
}

// TestBackendsKilled (PostgreSQL) terminates the mover's backends, and the
// application's, at random moments while a grow runs under traffic; Run runs again until it
// returns nil, then Finish (still under the killer); every acknowledged write must be there.
func TestBackendsKilled(t *testing.T) {
	longTest(t)
	forEngines(t, 5, func(t *testing.T, e *engine) {
		if e.dialect != sqlstore.PostgreSQL {
			t.Skip("PostgreSQL backends")
		}
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 3, 5)
		w.load(t, admin, span(1000, 120), 30)
		for round, kill := range [][]string{{"net-mover"}, {"net-app"}, {"net-mover", "net-app"}} {
			id := fmt.Sprintf("kill%d", round)
			ww := w
			var apps []*proc
			for range 3 {
				apps = append(apps, withApp(e, "net-app").open(t, 2))
			}
			tr := startTraffic(ww, apps, id, time.Millisecond, 30*time.Second)
			mp := withApp(e, "net-mover").open(t, 4)
			m := ww.shared(t, mp, id, rebalance.SharedOptions{Token: 1, Mover: "net", Concurrency: 4, ChunkRows: 7, Group: 4, Lease: 2 * time.Second})
			stopKill := killer(t, kill, 50*time.Millisecond, 600*time.Millisecond)
			began := time.Now()
			// Under the killer for up to 15 s (Run and Finish), then without it: Run and Finish
			// must then succeed within a few tries.
			var runErrs, finErrs []error
			ran, fin := false, false
			for time.Since(began) < 15*time.Second && !fin {
				if !ran {
					if err := m.Run(ctx, slices.Values(ww.users)); err != nil {
						runErrs = append(runErrs, err)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					ran = true
				}
				if err := m.Finish(ctx, slices.Values(ww.users)); err != nil {
					finErrs = append(finErrs, err)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				fin = true
			}
			killed := stopKill()
			underKill := ran
			if !ran {
				var more []error
				more, ran = runUntil(ctx, m, ww.users, 5, 100*time.Millisecond)
				runErrs = append(runErrs, more...)
			}
			if !fin {
				var more []error
				more, fin = finishUntil(ctx, m, ww.users, 5, 100*time.Millisecond)
				finErrs = append(finErrs, more...)
			}
			t.Logf("%s: Run succeeded while the killer ran: %v", id, underKill)
			ops, terrs, tfirst, broken := tr.stop()
			v := ww.verify(t, admin, ww.after)
			t.Logf("%s: killing %v: %d backends terminated in %v; Run ok=%v after %d failed Runs (first: %v); Finish ok=%v after %d errors; traffic %d ops, %d errors (first %v); %v",
				id, kill, killed, time.Since(began).Round(time.Millisecond), ran, len(runErrs), oldest(runErrs), fin, len(finErrs), ops, terrs, tfirst, v)
			for i, err := range runErrs {
				if i < 5 && testing.Verbose() {
					t.Logf("  run error %d: %v", i, err)
				}
			}
			if !ran || !fin {
				t.Fatalf("STUCK: Run ok=%v (last %v), Finish ok=%v (last %v)", ran, newest(runErrs), fin, newest(finErrs))
			}
			if broken != nil {
				t.Errorf("a read saw fewer messages than acknowledged: %v", broken)
			}
			if v.lost+v.duplicated+v.misplaced != 0 {
				t.Fatalf("DATA: %v", v)
			}
			if st := m.Stats(); st.Moved == 0 {
				t.Fatalf("nothing moved")
			}
			w = shrinkOf(t, ww)
		}
	})
}

func oldest(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

func newest(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[len(errs)-1]
}

// outage makes one shard database at a time unreachable for a while, at random, until
// stopped: PostgreSQL ALLOW_CONNECTIONS false and its backends terminated (but the admin's),
// SQLite a connection that holds BEGIN EXCLUSIVE (the mover's pools wait only 200 ms).
func outage(t *testing.T, e *engine, lo, hi, hold time.Duration) (stop func() int) {
	var done atomic.Bool
	var n atomic.Int64
	var wg sync.WaitGroup
	var admin *sql.DB
	if e.dialect == sqlstore.PostgreSQL {
		var err error
		if admin, err = sql.Open("pgx", pg.dsn("postgres")); err != nil {
			t.Fatal(err)
		}
	}
	wg.Go(func() {
		r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
		for !done.Load() {
			time.Sleep(lo + time.Duration(r.Int64N(int64(hi-lo))))
			s := r.IntN(len(e.shards))
			if e.dialect == sqlstore.PostgreSQL {
				name := e.shards[s][strings.LastIndex(e.shards[s], "/")+1:]
				name = name[:strings.Index(name, "?")]
				if _, err := admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS false"); err != nil {
					t.Logf("outage: %v", err)
					continue
				}
				admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
				time.Sleep(hold)
				if _, err := admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS true"); err != nil {
					t.Errorf("outage: %v", err)
				}
			} else {
				db, err := sql.Open("sqlite", e.shards[s])
				if err != nil {
					continue
				}
				db.SetMaxOpenConns(1)
				c, err := db.Conn(context.Background())
				if err == nil {
					if _, err := c.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err == nil {
						time.Sleep(hold)
						c.ExecContext(context.Background(), "ROLLBACK")
					}
					c.Close()
				}
				db.Close()
			}
			n.Add(1)
		}
	})
	return func() int {
		done.Store(true)
		wg.Wait()
		if admin != nil {
			admin.Close()
		}
		return int(n.Load())
	}
}

// shortBusy returns a copy of a SQLite e whose connections wait 200 ms for a lock.
func shortBusy(e *engine) *engine {
	if e.dialect != sqlstore.SQLite {
		return e
	}
	c := *e
	c.shards = nil
	for _, d := range e.shards {
		c.shards = append(c.shards, strings.Replace(d, "busy_timeout(20000)", "busy_timeout(200)", 1))
	}
	c.control = strings.Replace(e.control, "busy_timeout(20000)", "busy_timeout(200)", 1)
	return &c
}

// TestShardUnreachable makes shards unreachable for 0.3-1.5 s at random
// moments during a grow under traffic (the window and the deletion included); Run runs again
// until it returns nil, then Finish.
func TestShardUnreachable(t *testing.T) {
	longTest(t)
	forEngines(t, 4, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		w := newWorld(t, e, 2, 4)
		w.load(t, admin, span(1000, 120), 30)
		var apps []*proc
		for range 3 {
			apps = append(apps, e.open(t, 2))
		}
		for round := range 2 {
			id := fmt.Sprintf("out%d", round)
			tr := startTraffic(w, apps, id, time.Millisecond, 30*time.Second)
			mp := shortBusy(e).open(t, 4)
			m := w.shared(t, mp, id, rebalance.SharedOptions{Token: 1, Mover: "net", Concurrency: 4, ChunkRows: 7, Group: 4, Lease: 2 * time.Second})
			hold := time.Duration(300+round*900) * time.Millisecond
			stopOut := outage(t, e, 50*time.Millisecond, 400*time.Millisecond, hold)
			began := time.Now()
			runErrs, ran := runUntil(ctx, m, w.users, 300, 20*time.Millisecond)
			finErrs, fin := finishUntil(ctx, m, w.users, 100, 20*time.Millisecond)
			outs := stopOut()
			ops, terrs, tfirst, broken := tr.stop()
			v := w.verify(t, admin, w.after)
			t.Logf("%s: %d outages of %v in %v; Run ok=%v after %d failed Runs (first: %v); Finish ok=%v after %d errors; traffic %d ops, %d errors (first %v); %v",
				id, outs, hold, time.Since(began).Round(time.Millisecond), ran, len(runErrs), oldest(runErrs), fin, len(finErrs), ops, terrs, tfirst, v)
			if !ran || !fin {
				t.Fatalf("STUCK: Run ok=%v (last %v), Finish ok=%v (last %v)", ran, newest(runErrs), fin, newest(finErrs))
			}
			if broken != nil {
				t.Errorf("a read saw fewer messages than acknowledged: %v", broken)
			}
			if v.lost+v.duplicated+v.misplaced != 0 {
				t.Fatalf("DATA: %v", v)
			}
			w = shrinkOf(t, w)
		}
	})
}

// TestFlakyLinks fails every commit point of the mover with probability p
// (after the commit landed, or before, at random), so that the steps that recover from a
// failure (the reopen of the old shard, a resumed window, a resumed deletion) fail too, while
// the application writes; Run runs again until it returns nil, then (the faults still on)
// Finish; every acknowledged write must be there. Several seeds and rates.
func TestFlakyLinks(t *testing.T) {
	longTest(t)
	forEngines(t, 3, func(t *testing.T, e0 *engine) {
		ctx := context.Background()
		seeds := 12
		if e0.dialect == sqlstore.PostgreSQL {
			seeds = 8
		}
		for seed := range seeds {
			p := []float64{0.02, 0.05, 0.1}[seed%3]
			t.Run(fmt.Sprintf("seed%d-p%v", seed, p), func(t *testing.T) {
				e := newEngine(t, e0.dialect, 3, "", nil)
				admin := e.open(t, 2)
				w := newWorld(t, e, 2, 3)
				w.load(t, admin, w.moving(1, 12), 9)
				w.load(t, admin, w.moving(200, 2), 30)
				f := &faults{}
				mp := openFaulty(t, e, 3, f)
				app := e.open(t, 2)
				tr := startTraffic(w, []*proc{app}, "flaky", 3*time.Millisecond, 30*time.Second)
				f.mu.Lock()
				f.p, f.rng = p, rand.New(rand.NewPCG(uint64(seed), 42))
				f.mu.Unlock()
				m, err := rebalance.NewShared("flaky", w.before, w.after, rebalance.SharedStore[*sql.Tx](mp.store),
					rebalance.SharedOptions{Token: 1, Mover: "net", ChunkRows: 4, DeleteRows: 12, Batch: 3, Group: 3, Concurrency: 2, Lease: 2 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				// Up to 30 Runs and 10 Finishes with the faults on; then off: the next few must
				// succeed (a Run that cannot proceed after the network healed is stuck).
				runErrs, ran := runUntil(ctx, m, w.users, 30, 10*time.Millisecond)
				var finErrs []error
				fin := false
				if ran {
					finErrs, fin = finishUntil(ctx, m, w.users, 10, 10*time.Millisecond)
				}
				f.mu.Lock()
				hits := f.hits
				f.p = 0
				f.mu.Unlock()
				healed := ran && fin
				if !ran {
					more, ok := runUntil(ctx, m, w.users, 3, 50*time.Millisecond)
					runErrs, ran = append(runErrs, more...), ok
				}
				if !fin {
					more, ok := finishUntil(ctx, m, w.users, 3, 50*time.Millisecond)
					finErrs, fin = append(finErrs, more...), ok
				}
				t.Logf("done while the faults were on: %v", healed)
				ops, terrs, tfirst, broken := tr.stop()
				v := w.verify(t, admin, w.after)
				msg := fmt.Sprintf("%d faults; Run ok=%v after %d errors (last %v); Finish ok=%v after %d errors (last %v); traffic %d ops, %d errors (%v); %v",
					hits, ran, len(runErrs), newest(runErrs), fin, len(finErrs), newest(finErrs), ops, terrs, tfirst, v)
				if !ran || !fin || broken != nil || terrs > 0 || v.lost+v.duplicated+v.misplaced != 0 {
					t.Fatalf("%s; broken read: %v", msg, broken)
				}
				t.Log(msg)
			})
		}
	})
}

// blockShard makes shard s of e unreachable now, for hold (PostgreSQL: connections refused
// and its backends terminated; SQLite: a connection holds BEGIN EXCLUSIVE, for pools that
// wait 200 ms for a lock, see shortBusy), and returns at once once it is blocked.
func blockShard(t *testing.T, e *engine, s int, hold time.Duration) (done <-chan struct{}) {
	ch := make(chan struct{})
	if e.dialect == sqlstore.PostgreSQL {
		admin, err := sql.Open("pgx", pg.dsn("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		name := e.shards[s][strings.LastIndex(e.shards[s], "/")+1:]
		name = name[:strings.Index(name, "?")]
		if _, err := admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS false"); err != nil {
			t.Fatal(err)
		}
		admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
		go func() {
			defer close(ch)
			defer admin.Close()
			time.Sleep(hold)
			if _, err := admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS true"); err != nil {
				t.Errorf("unblock: %v", err)
			}
		}()
		return ch
	}
	db, err := sql.Open("sqlite", e.shards[s])
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(ch)
		time.Sleep(hold)
		c.ExecContext(context.Background(), "ROLLBACK")
		c.Close()
		db.Close()
	}()
	return ch
}

// hookStore calls after once, after the first SetFence of state (whatever its result).
type hookStore struct {
	*sqlstore.Store
	state rebalance.FenceState
	once  sync.Once
	after func(shard int)
}

func (h *hookStore) SetFence(ctx context.Context, migration string, owners []string, shard int, state rebalance.FenceState, token uint64) error {
	err := h.Store.SetFence(ctx, migration, owners, shard, state, token)
	if state == h.state {
		h.once.Do(func() { h.after(shard) })
	}
	return err
}

// TestShardOutageAtEachFence makes the old or the new shard unreachable for 1.5 s
// right after each kind of fence change (exporting on the old shard: the copy; moved: the
// window's replay, sums and reopen; serving on the new shard: the deletion of the old copy),
// under traffic; Run runs again until it returns nil (after the outage), then Finish.
func TestShardOutageAtEachFence(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e0 *engine) {
		ctx := context.Background()
		for _, tc := range []struct {
			state rebalance.FenceState
			old   bool // block the owners' old shard, else their new one
		}{
			{rebalance.Importing, false}, {rebalance.Exporting, true}, {rebalance.Exporting, false},
			{rebalance.Moved, true}, {rebalance.Moved, false}, {rebalance.Serving, true}, {rebalance.Serving, false},
		} {
			t.Run(fmt.Sprintf("%v-old%v", tc.state, tc.old), func(t *testing.T) {
				e := newEngine(t, e0.dialect, 3, "", nil)
				admin := e.open(t, 2)
				w := newWorld(t, e, 2, 3)
				w.load(t, admin, w.moving(1, 6), 9)
				w.load(t, admin, w.moving(200, 1), 30)
				app := e.open(t, 2)
				tr := startTraffic(w, []*proc{app}, "out", 3*time.Millisecond, 30*time.Second)
				mp := shortBusy(e).open(t, 3)
				var blocked <-chan struct{}
				var what string
				h := &hookStore{Store: mp.store, state: tc.state}
				h.after = func(shard int) {
					// shard is the one fenced: the old one for exporting and moved, the new one
					// for importing and serving.
					s := shard
					if owners := tc.state == rebalance.Importing || tc.state == rebalance.Serving; owners == tc.old {
						// the other one of the pair: find it from the first user that moves to/from shard
						for _, u := range w.users {
							a, b := w.before.Locate(u), w.after.Locate(u)
							if a == shard {
								s = b
								break
							}
							if b == shard {
								s = a
								break
							}
						}
					}
					what = fmt.Sprintf("shard %d blocked after fence %v on shard %d", s, tc.state, shard)
					blocked = blockShard(t, e, s, 1500*time.Millisecond)
				}
				m, err := rebalance.NewShared("out", w.before, w.after, rebalance.SharedStore[*sql.Tx](h),
					rebalance.SharedOptions{Token: 1, Mover: "net", ChunkRows: 4, DeleteRows: 12, Group: 4, Lease: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				firstErr := m.Run(ctx, slices.Values(w.users))
				if blocked != nil {
					<-blocked
				}
				runErrs, ran := runUntil(ctx, m, w.users, 5, 100*time.Millisecond)
				finErrs, fin := finishUntil(ctx, m, w.users, 5, 100*time.Millisecond)
				ops, terrs, tfirst, broken := tr.stop()
				v := w.verify(t, admin, w.after)
				msg := fmt.Sprintf("%s: first Run: %v; again: ok=%v %v; Finish ok=%v %v; traffic %d ops, %d errors (%v); %v",
					what, firstErr, ran, runErrs, fin, finErrs, ops, terrs, tfirst, v)
				if !ran || !fin || broken != nil || v.lost+v.duplicated+v.misplaced != 0 {
					t.Fatalf("%s; broken read: %v", msg, broken)
				}
				t.Log(msg)
			})
		}
	})
}
