package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard/rebalance"
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

// peakHeap samples the heap in use until stop is called, and returns its peak.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// BenchmarkMove moves users of 200 messages each, 5 -> 10 shards and back (alternately, one
// per iteration: run it with -benchtime 1x or 2x), with 8 movers, and reports rows and owners
// moved per second, the longest time one owner was served by no shard, and the peak heap of
// the process (the mover's, plus the test's ledger).
func BenchmarkMove(b *testing.B) {
	benchEngines(b, func(b *testing.B, name string, mk func(testing.TB, int) *engine) {
		for _, rows := range []int{200_000, 1_000_000} {
			b.Run(fmt.Sprintf("rows=%dk", rows/1000), func(b *testing.B) {
				e := mk(b, 10)
				admin := e.open(b, 2)
				grow := newWorld(b, e, 5, 10)
				grow.load(b, admin, span(1, rows/200), 200)
				grow.ledger = nil // memory in proportion to the work: the ledger is not needed here
				shrink := shrinkOf(b, grow)
				mover := e.open(b, benchConc)
				var moved, owners int64
				var exclusive, p99 time.Duration
				var took time.Duration
				var heap uint64
				runtime.GC()
				b.ResetTimer()
				for i := range b.N {
					w := []*world{grow, shrink}[i%2]
					m := w.shared(b, mover, "bench"+strconv.Itoa(i), rebalance.SharedOptions{Token: 1, Concurrency: benchConc})
					stop := peakHeap()
					began := time.Now()
					if err := m.Run(context.Background(), slices.Values(w.users)); err != nil {
						b.Fatal(err)
					}
					took += time.Since(began)
					heap = max(heap, stop())
					st := m.Stats()
					moved += st.Rows
					owners += st.Moved
					exclusive = max(exclusive, st.MaxExclusive)
					p99 = max(p99, st.ExclusiveQuantile(0.99))
				}
				b.StopTimer()
				b.ReportMetric(float64(moved)/took.Seconds(), "rows/s")
				b.ReportMetric(float64(owners)/took.Seconds(), "owners/s")
				b.ReportMetric(float64(exclusive.Microseconds())/1000, "max-exclusive-ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99-exclusive-ms")
				b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
			})
		}
	})
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
// during a 5 -> 10 migration of 200k messages (1,000 users, 4 movers), and reports p50 and
// p99 of each phase for users that do not move and for users that move.
//
// movers=4 is the mover at full speed; movers=1 (one mover, chunks of 200 rows, groups of
// 4) trades migration time for the foreground, which matters most on SQLite, where every
// write transaction of a database waits for the one before it.
func BenchmarkLatency(b *testing.B) {
	benchEngines(b, func(b *testing.B, name string, mk func(testing.TB, int) *engine) {
		for _, gentle := range []bool{false, true} {
			mover := rebalance.SharedOptions{Token: 1, Concurrency: 4}
			label := "movers=4"
			if gentle {
				mover = rebalance.SharedOptions{Token: 1, Concurrency: 1, ChunkRows: 200, Group: 4}
				label = "movers=1"
			}
			b.Run(label, func(b *testing.B) { benchLatency(b, mk, mover) })
		}
	})
}

func benchLatency(b *testing.B, mk func(testing.TB, int) *engine, opts rebalance.SharedOptions) {
	{
		e := mk(b, 10)
		admin := e.open(b, 2)
		w := newWorld(b, e, 5, 10)
		w.load(b, admin, span(1, 1000), 200)
		const (
			idle = iota
			during
		)
		var (
			mu    sync.Mutex
			lat   [2][2][]time.Duration // [phase][moving]
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
						if n%2 == 0 {
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
						lat[ph][moving] = append(lat[ph][moving], d)
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
					}
				})
			}
			time.Sleep(3 * time.Second)
			phase.Store(during)
			mover := w.shared(b, e.open(b, max(opts.Concurrency, 1)), "latency", opts)
			began := time.Now()
			err := mover.Run(context.Background(), slices.Values(w.users))
			took := time.Since(began)
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
				d := lat[ph][mv]
				b.ReportMetric(pct(d, 0.50), pname+"-"+mname+"-p50-ms")
				b.ReportMetric(pct(d, 0.99), pname+"-"+mname+"-p99-ms")
			}
		}
		if p := pct(lat[idle][0], 0.99); p > 0 {
			b.ReportMetric(pct(lat[during][0], 0.99)/p, "still-p99-during/idle")
		}
	}
}

var benchConc = func() int {
	if n, err := strconv.Atoi(os.Getenv("SQLSTORE_BENCH_CONC")); err == nil {
		return n
	}
	return 8
}()
