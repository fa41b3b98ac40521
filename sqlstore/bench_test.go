package sqlstore_test

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
	"github.com/shardkit/shard/sqlstore"
)

// benchEngines runs f on SQLite and, if it runs, PostgreSQL.
func benchEngines(b *testing.B, f func(b *testing.B, name string, mk func(testing.TB, int) *engine)) {
	b.Run("engine=sqlite", func(b *testing.B) { f(b, "sqlite", newSQLite) })
	b.Run("engine=postgres", func(b *testing.B) {
		if pg == nil {
			b.Skip("PostgreSQL not available: " + pgWhy)
		}
		f(b, "postgres", newPostgres)
	})
}

// peakHeap samples the heap until stop is called, and returns the peaks of the heap in use
// (garbage included, which grows with the live heap under GOGC) and of the live heap (what
// the last collection found reachable: the mover's state, without the garbage).
func peakHeap() (stop func() (inUse, live uint64)) {
	var inUsePeak, livePeak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			inUsePeak.Store(max(inUsePeak.Load(), ms.HeapInuse))
			livePeak.Store(max(livePeak.Load(), liveHeap()))
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return func() (uint64, uint64) { close(done); wg.Wait(); return inUsePeak.Load(), livePeak.Load() }
}

// liveHeap is the heap the last garbage collection found reachable.
func liveHeap() uint64 {
	m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// BenchmarkMove moves users of 200 messages each, 5 -> 10 shards and back (alternately, one
// per iteration: run it with -benchtime 1x or 2x), with 8 movers, and reports rows and owners
// moved per second, the longest time one owner was served by no shard, and the peak heap of
// the process (the mover's, plus the test's ledger). Before the mover it copies the same
// rows by the engine's plain fastest path (pipeCopy: no fence, capture, chunks or checks)
// and reports that as pipe-rows/s and the mover's speed over it as mover/pipe, then deletes
// them by user, as a plain move would, and reports copy and delete together as
// plain-rows/s and mover/plain, all measured side by side in one run. On SQLite it runs that
// plain move again into a table with copies of the store's triggers, which SQLite fires for
// the mover's writes too, and reports guarded-rows/s and mover/guarded. copy-%, delete-%,
// verify-% and rest-% say where the mover's time in the store went (see phaseStore);
// mover-heap-MiB is the peak heap in use above what the benchmark held before the move (its
// users and their counters grow with the rows; the mover's own state does not), garbage
// included, so it grows with what the benchmark holds (the collector lets garbage reach the
// live heap's size); mover-live-MiB is the peak live heap above the benchmark's own, the
// mover's state alone. cpu-µs/row and pipe-cpu-µs/row are the machine's busy CPU time (all
// processes: the database server's too) a row moved and a row piped, mover/pipe-cpu the
// second over the first: on a shared machine they vary less than the rates.
// SQLSTORE_BENCH_ROWS=n1,n2 sets the sizes (default 200000,1000000), SQLSTORE_BENCH_CHUNK
// the ChunkRows (default 1000), SQLSTORE_BENCH_DELETE the DeleteRows (default: the Store's,
// ten times ChunkRows on PostgreSQL and ChunkRows on SQLite), SQLSTORE_BENCH_GROUP the Group
// (default 16), SQLSTORE_BENCH_IDLE_GROUP the IdleGroup (default four times Group);
// SQLSTORE_BENCH_STATEMENTS=n logs (with -v) PostgreSQL's n costliest statements of the pipe
// and of the move (by pg_stat_statements; their time includes waits for the CPU when movers
// outnumber cores, so SQLSTORE_BENCH_CONC=1 gives each statement's own cost);
// SQLSTORE_PG_OPTS adds settings to the PostgreSQL server the benchmark starts ("-c
// autovacuum=off").
// SQLSTORE_PLAIN_COPIES=1 copies plainly, rows read into Go and written by multi-row INSERTs,
// rather than through ATTACH (SQLite) or by COPY (PostgreSQL), to compare the two.
func BenchmarkMove(b *testing.B) {
	sizes := []int{200_000, 1_000_000}
	if v := os.Getenv("SQLSTORE_BENCH_ROWS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 200 {
				b.Fatalf("SQLSTORE_BENCH_ROWS=%q: want sizes of at least 200 rows", v)
			}
			sizes = append(sizes, n)
		}
	}
	chunk, deleteRows := benchEnvInt(b, "SQLSTORE_BENCH_CHUNK"), benchEnvInt(b, "SQLSTORE_BENCH_DELETE") // 0: the defaults
	group, idleGroup := benchEnvInt(b, "SQLSTORE_BENCH_GROUP"), benchEnvInt(b, "SQLSTORE_BENCH_IDLE_GROUP")
	benchEngines(b, func(b *testing.B, name string, mk func(testing.TB, int) *engine) {
		for _, rows := range sizes {
			b.Run(fmt.Sprintf("rows=%dk", rows/1000), func(b *testing.B) {
				e := mk(b, 10)
				admin := e.open(b, 2)
				grow := newWorld(b, e, 5, 10)
				grow.load(b, admin, span(1, rows/200), 200)
				grow.ledger = nil // memory in proportion to the work: the ledger is not needed here
				shrink := shrinkOf(b, grow)
				mover := e.open(b, benchConc)
				pipeStatements := statementStats(b, e, admin, "the pipe")
				pipe := pipeCopy(b, e, mover, grow, benchConc, false)
				pipeStatements()
				var guarded pipeResult
				if e.dialect == sqlstore.SQLite {
					guarded = pipeCopy(b, e, mover, grow, benchConc, true)
				}
				phases := newPhaseStore(mover.store)
				var moved, owners int64
				var exclusive, p99 time.Duration
				var took time.Duration
				var heap, live uint64
				runtime.GC()
				var base runtime.MemStats // the test's own: its users, their counters, the sharders
				runtime.ReadMemStats(&base)
				baseLive := liveHeap()
				statements := statementStats(b, e, admin, "the mover")
				cpu := busyCPU()
				b.ResetTimer()
				for i := range b.N {
					w := []*world{grow, shrink}[i%2]
					m, err := rebalance.NewShared("bench"+strconv.Itoa(i), w.before, w.after, rebalance.SharedStore[*sql.Tx](phases), rebalance.SharedOptions{Token: 1, Concurrency: benchConc, ChunkRows: chunk, DeleteRows: deleteRows, Group: group, IdleGroup: idleGroup})
					if err != nil {
						b.Fatal(err)
					}
					stop := peakHeap()
					began := time.Now()
					if err := m.Run(context.Background(), slices.Values(w.users)); err != nil {
						b.Fatal(err)
					}
					took += time.Since(began)
					h, l := stop()
					heap, live = max(heap, h), max(live, l)
					st := m.Stats()
					moved += st.Rows
					owners += st.Moved
					exclusive = max(exclusive, st.MaxExclusive)
					p99 = max(p99, st.ExclusiveQuantile(0.99))
				}
				b.StopTimer()
				cpu = busyCPU() - cpu
				statements()
				rate := float64(moved) / took.Seconds()
				b.ReportMetric(rate, "rows/s")
				pipeRate := float64(pipe.rows) / pipe.copy.Seconds()
				plainRate := float64(pipe.rows) / (pipe.copy + pipe.delete).Seconds()
				b.ReportMetric(pipeRate, "pipe-rows/s")
				b.ReportMetric(rate/pipeRate, "mover/pipe")
				b.ReportMetric(plainRate, "plain-rows/s")
				b.ReportMetric(rate/plainRate, "mover/plain")
				if guarded.rows > 0 {
					guardedRate := float64(guarded.rows) / (guarded.copy + guarded.delete).Seconds()
					b.ReportMetric(guardedRate, "guarded-rows/s")
					b.ReportMetric(rate/guardedRate, "mover/guarded")
				}
				if cpu > 0 && pipe.cpu > 0 {
					moverCPU := cpu.Seconds() * 1e6 / float64(moved) // µs of CPU per row
					pipeCPU := pipe.cpu.Seconds() * 1e6 / float64(pipe.rows)
					b.ReportMetric(moverCPU, "cpu-µs/row")
					b.ReportMetric(pipeCPU, "pipe-cpu-µs/row")
					b.ReportMetric(pipeCPU/moverCPU, "mover/pipe-cpu")
				}
				for phase, share := range phases.shares() {
					b.ReportMetric(share, phase+"-%")
				}
				b.ReportMetric(float64(owners)/took.Seconds(), "owners/s")
				b.ReportMetric(float64(exclusive.Microseconds())/1000, "max-exclusive-ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99-exclusive-ms")
				b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(heap-min(heap, base.HeapInuse))/(1<<20), "mover-heap-MiB")
				b.ReportMetric(float64(live-min(live, baseLive))/(1<<20), "mover-live-MiB")
			})
		}
	})
}

// statementStats, if SQLSTORE_BENCH_STATEMENTS=n and the engine is PostgreSQL, empties
// pg_stat_statements (which newPostgres then loads) and returns a func that logs the n
// statements of what that took longest since, over all the shards, with their calls, plans,
// planning time and rows; statements that differ only in their number of parameters (lists
// of owners or keys) count as one.
func statementStats(b *testing.B, e *engine, p *proc, what string) func() {
	n := benchEnvInt(b, "SQLSTORE_BENCH_STATEMENTS")
	if n <= 0 || e.dialect != sqlstore.PostgreSQL {
		return func() {}
	}
	db := p.dbs[0]
	for _, q := range []string{"CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "SELECT pg_stat_statements_reset()"} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	return func() {
		rs, err := db.Query(`SELECT SUM(calls)::bigint, SUM(plans)::bigint, SUM(total_exec_time)::bigint, SUM(total_plan_time)::bigint, SUM(rows)::bigint, q
			FROM (SELECT calls, plans, total_exec_time, total_plan_time, rows, left(regexp_replace(regexp_replace(query, '\s+', ' ', 'g'), '\$\d+(, \$\d+)*', '$', 'g'), 80) AS q FROM pg_stat_statements) AS s
			GROUP BY q ORDER BY SUM(total_exec_time + total_plan_time) DESC LIMIT $1`, n)
		if err != nil {
			b.Fatal(err)
		}
		defer rs.Close()
		b.Logf("%s: %8s %6s %9s %9s %9s  %s", what, "calls", "plans", "ms", "plan ms", "rows", "statement (all shards)")
		for rs.Next() {
			var calls, plans, ms, plan, rows int64
			var q string
			if err := rs.Scan(&calls, &plans, &ms, &plan, &rows, &q); err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: %8d %6d %9d %9d %9d  %s", what, calls, plans, ms, plan, rows, q)
		}
		if err := rs.Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// busyCPU returns the CPU time the machine has spent busy since it booted, over all its
// cores and processes (the database server's and this one's), as /proc/stat counts it: user,
// nice, system, irq and softirq; zero where it cannot be read. It measures what a move costs
// in CPU, which varies less on a shared machine than its rows/s, and the mover's and the
// pipe's are compared per row.
func busyCPU() time.Duration {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
	fields := strings.Fields(line)
	if err != nil || len(fields) < 8 || fields[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system (idle iowait) irq softirq
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ, 100 on Linux
}

// benchEnvInt returns the integer in the environment variable name, 0 if it is not set.
func benchEnvInt(b *testing.B, name string) int {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// readLast reads user's last 20 messages through m.
func readLast(ctx context.Context, m *rebalance.Shared[*sql.Tx], user string) error {
	uid, _ := strconv.ParseInt(user, 10, 64)
	return m.Do(ctx, user, func(tx *sql.Tx, _ int) error {
		rows, err := tx.QueryContext(ctx, "SELECT id, message FROM messages WHERE user_id = $1 ORDER BY id DESC LIMIT 20", uid)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var msg string
			if err := rows.Scan(&id, &msg); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// BenchmarkLatency measures foreground reads and writes (4 processes of their own, each an
// operation every 2 ms: insert a message, or read a user's last 20) for 3 s idle, then
// during a 5 -> 10 migration of 200k messages (1,000 users), and reports p50 and p99 of
// each phase for users that do not move ("still") and for users that move, reads and
// writes apart, and for still users the ratio of p99 during to p99 idle: of reads, of
// writes, and of both together (still-p99-during/idle; within 2x of idle is the aim).
//
// mover=process runs the mover in a process of its own (this test binary re-executed), as
// a deployment would (examples/rebalance); mover=inproc runs it in the benchmark's process,
// where on SQLite the database work of the mover and of the foreground share the Go
// scheduler's 2 Ps, and a read waits for a P behind the mover's statements. movers=4 is
// the mover at full speed; movers=default is SharedOptions' defaults (one mover);
// movers=1 (one mover, chunks of 200 rows, groups of 4, a Yield of 1: idle after each chunk
// as long as it took) trades migration time for the foreground, which matters most on
// SQLite, where every write transaction of a database waits for the one before it. SQLSTORE_LAT_MOVERS=c,k,g[,y[,d]] adds
// a case with Concurrency c, ChunkRows k, Group g, Yield y and DeleteRows d.
// SQLSTORE_LAT_USERS=n moves n users rather than 1,000: a longer move gives steadier p99s.
func BenchmarkLatency(b *testing.B) {
	benchEngines(b, func(b *testing.B, name string, mk func(testing.TB, int) *engine) {
		cases := []struct {
			label string
			opts  rebalance.SharedOptions
		}{
			{"movers=4", rebalance.SharedOptions{Token: 1, Concurrency: 4}},
			{"movers=default", rebalance.SharedOptions{Token: 1}},
			{"movers=1", rebalance.SharedOptions{Token: 1, Concurrency: 1, ChunkRows: 200, Group: 4, Yield: 1}},
		}
		if v := os.Getenv("SQLSTORE_LAT_MOVERS"); v != "" {
			var c, k, g, d int
			var y float64
			if n, err := fmt.Sscanf(v, "%d,%d,%d,%g,%d", &c, &k, &g, &y, &d); n < 3 {
				b.Fatalf("SQLSTORE_LAT_MOVERS=%q: want concurrency,chunk rows,group[,yield[,delete rows]]: %v", v, err)
			}
			cases = append(cases, struct {
				label string
				opts  rebalance.SharedOptions
			}{"movers=" + v, rebalance.SharedOptions{Token: 1, Concurrency: c, ChunkRows: k, Group: g, Yield: y, DeleteRows: d}})
		}
		for _, own := range []bool{true, false} {
			b.Run(map[bool]string{true: "mover=process", false: "mover=inproc"}[own], func(b *testing.B) {
				for _, c := range cases {
					b.Run(c.label, func(b *testing.B) { benchLatency(b, mk, c.opts, own) })
				}
			})
		}
	})
}

func benchLatency(b *testing.B, mk func(testing.TB, int) *engine, opts rebalance.SharedOptions, ownProcess bool) {
	{
		e := mk(b, 10)
		admin := e.open(b, 2)
		w := newWorld(b, e, 5, 10)
		w.load(b, admin, span(1, cmp.Or(benchEnvInt(b, "SQLSTORE_LAT_USERS"), 1000)), 200)
		const (
			idle = iota
			during
		)
		var (
			mu    sync.Mutex
			lat   [2][2][2][]time.Duration // [phase][moving][write]
			phase atomic.Int32
			done  atomic.Bool
			wg    sync.WaitGroup
			errs  atomic.Pointer[error]
		)
		b.ResetTimer()
		for i := range b.N {
			if i > 0 {
				break // one migration per benchmark: the data has moved
			}
			for g := range 4 {
				p := e.open(b, 2)
				m := w.shared(b, p, "latency", rebalance.SharedOptions{})
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 2))
					ctx := context.Background()
					for n := 0; !done.Load(); n++ {
						u := w.users[r.IntN(len(w.users))]
						moving := 0
						if w.before.Locate(u) != w.after.Locate(u) {
							moving = 1
						}
						ph := phase.Load()
						began := time.Now()
						var err error
						write := n % 2
						if write == 1 {
							err = w.write(ctx, m, u)
						} else {
							err = readLast(ctx, m, u)
						}
						d := time.Since(began)
						if err != nil {
							errs.CompareAndSwap(nil, &err)
							return
						}
						mu.Lock()
						lat[ph][moving][write] = append(lat[ph][moving][write], d)
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
					}
				})
			}
			time.Sleep(3 * time.Second)
			var err error
			var took time.Duration
			if ownProcess {
				took, err = moveInProcess(w, opts, func() { phase.Store(during) })
			} else {
				mover := w.shared(b, e.open(b, max(opts.Concurrency, 1)), "latency", opts)
				phase.Store(during)
				began := time.Now()
				err = mover.Run(context.Background(), slices.Values(w.users))
				took = time.Since(began)
			}
			done.Store(true)
			wg.Wait()
			if err != nil {
				b.Fatal(err)
			}
			if e := errs.Load(); e != nil {
				b.Fatal(*e)
			}
			b.ReportMetric(took.Seconds(), "migration-s")
		}
		b.StopTimer()
		pct := func(d []time.Duration, p float64) float64 {
			if len(d) == 0 {
				return 0
			}
			slices.Sort(d)
			return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
		}
		for ph, pname := range []string{"idle", "during"} {
			for mv, mname := range []string{"still", "moving"} {
				for wr, oname := range []string{"read", "write"} {
					d := lat[ph][mv][wr]
					b.ReportMetric(pct(d, 0.50), pname+"-"+mname+"-"+oname+"-p50-ms")
					b.ReportMetric(pct(d, 0.99), pname+"-"+mname+"-"+oname+"-p99-ms")
				}
			}
		}
		ratio := func(during, idle []time.Duration) float64 {
			if p := pct(idle, 0.99); p > 0 {
				return pct(during, 0.99) / p
			}
			return 0
		}
		still := func(ph int) []time.Duration { return slices.Concat(lat[ph][0][0], lat[ph][0][1]) }
		b.ReportMetric(ratio(lat[during][0][0], lat[idle][0][0]), "still-read-p99-during/idle")
		b.ReportMetric(ratio(lat[during][0][1], lat[idle][0][1]), "still-write-p99-during/idle")
		b.ReportMetric(ratio(still(during), still(idle)), "still-p99-during/idle")
	}
}

var benchConc = func() int {
	if n, err := strconv.Atoi(os.Getenv("SQLSTORE_BENCH_CONC")); err == nil {
		return n
	}
	return 8
}()

// moverEnv, when set, makes the test binary a mover process (see benchLatency): its value is
// a moverConfig in JSON.
const moverEnv = "SQLSTORE_TEST_MOVER"

type moverConfig struct {
	Dialect sqlstore.Dialect
	Shards  []string
	Control string
	Users   []string
	// the SharedOptions (Progress, a func, does not travel)
	Token                         uint64
	Concurrency, ChunkRows, Group int
	Yield                         float64
	// The migration, "latency" 5 -> 10 if Migration is "" (TestKilledMoverProcess sets them),
	// and whether to print "progress" after each owner moved.
	Migration     string
	From, To      int
	PrintProgress bool
	Tables        []sqlstore.TableSpec // nil: messages
}

// moveInProcess runs w's migration "latency" in a mover process of its own, calls moving
// when the process starts moving, and returns how long the move took there.
func moveInProcess(w *world, opts rebalance.SharedOptions, moving func()) (time.Duration, error) {
	cfg, err := json.Marshal(moverConfig{Dialect: w.e.dialect, Shards: w.e.shards, Control: w.e.control, Users: w.users,
		Token: opts.Token, Concurrency: opts.Concurrency, ChunkRows: opts.ChunkRows, Group: opts.Group, Yield: opts.Yield})
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), moverEnv+"="+string(cfg))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	r := bufio.NewReader(out)
	line, _ := r.ReadString('\n')
	if line == "moving\n" {
		moving()
		line, _ = r.ReadString('\n')
	}
	err = cmd.Wait()
	var seconds float64
	var moved int
	if _, serr := fmt.Sscanf(line, "took %g moved %d\n", &seconds, &moved); err == nil && (serr != nil || moved == 0) {
		err = fmt.Errorf("mover process: %q: nothing moved or %v", line, serr)
	}
	return time.Duration(seconds * float64(time.Second)), err
}

// moverMain is benchLatency's mover process: it moves the users of the 5 -> 10 migration
// "latency" and exits, 0 if the move succeeded.
func moverMain() int {
	var c moverConfig
	if err := json.Unmarshal([]byte(os.Getenv(moverEnv)), &c); err != nil {
		fmt.Fprintln(os.Stderr, "mover:", err)
		return 2
	}
	e := &engine{dialect: c.Dialect, driver: map[sqlstore.Dialect]string{sqlstore.SQLite: "sqlite", sqlstore.PostgreSQL: "pgx"}[c.Dialect],
		shards: c.Shards, control: c.Control, tables: c.Tables}
	p, err := e.openErr(max(c.Concurrency, 1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mover:", err)
		return 2
	}
	if c.Migration == "" {
		c.Migration, c.From, c.To = "latency", 5, 10
	}
	before, _ := shard.NewJump(c.From)
	after, _ := shard.NewJump(c.To)
	opts := rebalance.SharedOptions{Token: c.Token, Concurrency: c.Concurrency, ChunkRows: c.ChunkRows, Group: c.Group, Yield: c.Yield}
	if c.PrintProgress {
		opts.Progress = func(rebalance.Progress) { fmt.Println("progress") }
	}
	m, err := rebalance.NewShared(c.Migration, before, after, rebalance.SharedStore[*sql.Tx](p.store), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mover:", err)
		return 2
	}
	fmt.Println("moving")
	began := time.Now()
	if err := m.Run(context.Background(), slices.Values(c.Users)); err != nil {
		fmt.Fprintln(os.Stderr, "mover:", err)
		return 3
	}
	fmt.Printf("took %g moved %d\n", time.Since(began).Seconds(), m.Stats().Moved)
	return 0
}

// BenchmarkSums measures what the window adds for a big owner: the sum (rows and content
// digest) of a 200k-row owner, against its count, on one shard. The mover computes both
// shards' sums at once, in the window.
func BenchmarkSums(b *testing.B) {
	benchEngines(b, func(b *testing.B, name string, mk func(testing.TB, int) *engine) {
		e := mk(b, 2)
		p := e.open(b, 2)
		w := newWorld(b, e, 1, 2)
		w.load(b, p, w.moving(1, 1), 200_000)
		ctx := context.Background()
		u := w.users[0]
		s := w.before.Locate(u)
		b.ResetTimer()
		var sumTook, countTook time.Duration
		for range b.N {
			began := time.Now()
			sums, err := p.store.Sums(ctx, []string{u}, s)
			if err != nil || sums[0].Rows != 200_000 {
				b.Fatal(sums, err)
			}
			sumTook += time.Since(began)
			began = time.Now()
			if n, err := p.store.Count(ctx, u, s); err != nil || n != 200_000 {
				b.Fatal(n, err)
			}
			countTook += time.Since(began)
		}
		b.ReportMetric(float64(sumTook.Milliseconds())/float64(b.N), "sum-ms")
		b.ReportMetric(float64(countTook.Milliseconds())/float64(b.N), "count-ms")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkCapture measures what the change capture costs a foreground write: an access
// that inserts one row and updates another, with no triggers on the table (none), with the
// triggers and no owner of the shard moving (idle: they look the owner's fence up and find
// none), and with the owner exporting (on: they record both changes). One process, one
// goroutine, so that the ratio is the triggers' own cost.
func BenchmarkCapture(b *testing.B) {
	benchEngines(b, func(b *testing.B, name string, mk func(testing.TB, int) *engine) {
		for _, mode := range []string{"none", "idle", "on"} {
			b.Run("capture="+mode, func(b *testing.B) {
				e := mk(b, 1)
				p := e.open(b, 2)
				ctx := context.Background()
				w := newWorld(b, e, 1, 2)
				w.load(b, p, span(1, 1), 10)
				var first int64
				if err := p.dbs[0].QueryRow("SELECT MIN(id) FROM messages WHERE user_id = 1").Scan(&first); err != nil {
					b.Fatal(err)
				}
				switch mode {
				case "none":
					drop := []string{"DROP TRIGGER rebalance_changes_messages_insert", "DROP TRIGGER rebalance_changes_messages_update", "DROP TRIGGER rebalance_changes_messages_delete"}
					if e.dialect == sqlstore.PostgreSQL {
						drop = []string{"DROP TRIGGER rebalance_changes_messages ON messages"}
					}
					for _, q := range drop {
						if _, err := p.dbs[0].Exec(q); err != nil {
							b.Fatal(err)
						}
					}
				case "on":
					tok, err := p.store.Claim(ctx, rebalance.Claim{Migration: "m", Mover: "bench", Lease: time.Hour})
					if err != nil {
						b.Fatal(err)
					}
					if err := p.store.SetFence(ctx, "m", []string{"1"}, 0, rebalance.Exporting, tok); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := range b.N {
					err := p.store.Access(ctx, rebalance.Placement{}, "1", 0, func(tx *sql.Tx) error {
						id := nextID.Add(1)
						if _, err := tx.ExecContext(ctx, "INSERT INTO messages VALUES ($1, 1, $1, 'x', 0)", id); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, "UPDATE messages SET sender = $1 WHERE id = $2", i, first)
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				var recorded int64
				p.dbs[0].QueryRow("SELECT COUNT(*) FROM rebalance_changes_messages").Scan(&recorded)
				b.ReportMetric(float64(recorded)/float64(b.N), "changes/op")
			})
		}
	})
}
