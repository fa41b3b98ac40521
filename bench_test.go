package shard_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

// One harness over every strategy in package catalog. Speed:
//
//	go test -run '^$' -bench Locate
//
// Quality, reported as metrics next to the time of one full pass over the keys (run once,
// the numbers do not depend on the run count):
//
//	go test -run '^$' -bench 'Balance|Movement|Vnodes' -benchtime 1x
//
// Units: stddev% is the standard deviation of the per-shard key counts in % of the mean;
// max/mean is the fullest shard over the mean; moved% is the share of keys whose shard
// changes on a resize, next to ideal-moved%, the fewest any even placement must move.

var sink int

// parallelSink collects the parallel loops' sums without a data race.
var parallelSink atomic.Int64

const (
	poolSize    = 1 << 14 // keys in the timing pool: a power of two, to index with a mask
	keyLen      = 16
	qualityKeys = 1_000_000
)

var benchShards = []int{10, 100, 1000}

// runSharders runs bench as a sub-benchmark named strategy=<name>/shards=<n> for every
// strategy of the catalog and every count of benchShards that it accepts (first-byte SHA-1
// stops at 10 shards).
func runSharders(b *testing.B, bench func(b *testing.B, s shard.Sharder)) {
	for _, st := range catalog.All() {
		for _, n := range benchShards {
			if !st.Fits(n, catalog.Options{}) {
				continue
			}
			s, err := st.New(n, catalog.Options{})
			if err != nil {
				b.Fatalf("%s(%d): %v", st.Name, n, err)
			}
			b.Run(fmt.Sprintf("strategy=%s/shards=%d", st.Name, n), func(b *testing.B) { bench(b, s) })
		}
	}
}

func BenchmarkLocate(b *testing.B) {
	keys := measure.Keys(1, poolSize, keyLen)
	runSharders(b, func(b *testing.B, s shard.Sharder) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			sink += s.Locate(keys[i&(poolSize-1)])
			i++
		}
	})
}

// BenchmarkLocateBatch times a loop of Locate (through the Sharder interface) and one
// LocateBatch over the same 256 keys, alternately in every iteration so that both see the
// same machine, and reports the ns per key of each and speedup, the loop's time over the
// batch's. Strategies without their own LocateBatch are skipped.
func BenchmarkLocateBatch(b *testing.B) {
	const batch = 256 // divides poolSize
	keys := measure.Keys(1, poolSize, keyLen)
	dst := make([]int, batch)
	runSharders(b, func(b *testing.B, s shard.Sharder) {
		bl, ok := s.(shard.BatchLocator)
		if !ok {
			b.Skip("no LocateBatch")
		}
		b.ReportAllocs()
		var loop, batched time.Duration
		i := 0
		for b.Loop() {
			k := keys[i : i+batch]
			i = (i + batch) & (poolSize - 1)
			start := time.Now()
			for _, key := range k {
				sink += s.Locate(key)
			}
			mid := time.Now()
			bl.LocateBatch(k, dst)
			end := time.Now()
			sink += dst[batch-1]
			loop += mid.Sub(start)
			batched += end.Sub(mid)
		}
		perKey := float64(b.N * batch)
		b.ReportMetric(float64(loop.Nanoseconds())/perKey, "loop-ns/key")
		b.ReportMetric(float64(batched.Nanoseconds())/perKey, "batch-ns/key")
		b.ReportMetric(float64(loop)/float64(batched), "speedup")
	})
}

// BenchmarkLocateParallel runs lookups from GOMAXPROCS goroutines on one sharder and
// reports the total throughput in millions of lookups per second. Lookups take no lock and
// write nothing shared (each goroutine sums into its own variable), so it should grow in
// proportion to the cores; compare with
//
//	go test -run '^$' -bench LocateParallel -cpu 1,2
func BenchmarkLocateParallel(b *testing.B) {
	keys := measure.Keys(1, poolSize, keyLen)
	runSharders(b, func(b *testing.B, s shard.Sharder) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			sum, i := 0, 0
			for pb.Next() {
				sum += s.Locate(keys[i&(poolSize-1)])
				i++
			}
			parallelSink.Add(int64(sum))
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mlookups/s")
	})
}

// BenchmarkPoolLocate times Locate of every pool strategy in package catalog, on nodes
// named node0, node1, ... of weight 1 (package pool's own benchmarks cover weights, AppendN
// and changes).
func BenchmarkPoolLocate(b *testing.B) {
	keys := measure.Keys(1, poolSize, keyLen)
	for _, ps := range catalog.Pools() {
		for _, n := range benchShards {
			nodes := make([]pool.Node, n)
			for i := range nodes {
				nodes[i].Name = fmt.Sprintf("node%d", i)
			}
			p, err := ps.New(nodes, catalog.Options{})
			if err != nil {
				b.Fatalf("%s(%d nodes): %v", ps.Name, n, err)
			}
			b.Run(fmt.Sprintf("pool=%s/nodes=%d", ps.Name, n), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sink += len(p.Locate(keys[i&(poolSize-1)]))
					i++
				}
			})
		}
	}
}

// BenchmarkBalance places 1,000,000 random 16-byte keys on 10 shards.
func BenchmarkBalance(b *testing.B) {
	if testing.Short() {
		b.Skip("places a million keys per strategy")
	}
	const n = 10
	keys := measure.Keys(2, qualityKeys, keyLen)
	for _, st := range catalog.All() {
		s, err := st.New(n, catalog.Options{})
		if err != nil {
			b.Fatalf("%s(%d): %v", st.Name, n, err)
		}
		b.Run(fmt.Sprintf("strategy=%s/shards=%d", st.Name, n), func(b *testing.B) {
			var bal measure.Balance
			for b.Loop() {
				bal = measure.BalanceOf(measure.Loads(measure.Placement(s, keys), n))
			}
			b.ReportMetric(bal.StddevPct, "stddev%")
			b.ReportMetric(bal.MaxMean, "max/mean")
		})
	}
}

// BenchmarkMovement resizes each strategy and counts the keys that change shard. Each
// iteration builds a fresh sharder, so history-dependent strategies start from the same
// shape every time.
func BenchmarkMovement(b *testing.B) {
	if testing.Short() {
		b.Skip("places a million keys twice per strategy and resize")
	}
	keys := measure.Keys(2, qualityKeys, keyLen)
	resizes := []struct{ from, to int }{{10, 11}, {11, 10}, {10, 20}}
	for _, st := range catalog.All() {
		for _, rs := range resizes {
			if !st.Fits(rs.from, catalog.Options{}) || !st.Fits(rs.to, catalog.Options{}) {
				continue
			}
			b.Run(fmt.Sprintf("strategy=%s/resize=%dto%d", st.Name, rs.from, rs.to), func(b *testing.B) {
				var moved float64
				for b.Loop() {
					s, err := st.New(rs.from, catalog.Options{})
					if err != nil {
						b.Fatalf("%s(%d): %v", st.Name, rs.from, err)
					}
					before := measure.Placement(s, keys)
					if err := s.Resize(rs.to); err != nil {
						b.Fatalf("%s: Resize(%d): %v", st.Name, rs.to, err)
					}
					moved = measure.MovedPct(before, measure.Placement(s, keys))
				}
				b.ReportMetric(moved, "moved%")
				b.ReportMetric(measure.IdealMovedPct(rs.from, rs.to), "ideal-moved%")
			})
		}
	}
}

// BenchmarkVnodes repeats the consistent-hash homework's [002] experiment: the Murmur ring
// with 10 shards, 1,000,000 random UUID keys, vnodes from 100 to 5000, and the deviation of
// the per-shard counts averaged over several rings and key sets. More vnodes should mean a
// smaller deviation. stddev% is in % of the mean; stddev is in keys, the unit the
// consistent-hash homework [002] reports.
func BenchmarkVnodes(b *testing.B) {
	if testing.Short() {
		b.Skip("places a million UUIDs per vnode count and seed")
	}
	const shards, runs = 10, 3
	for _, v := range measure.VnodesDefault {
		b.Run(fmt.Sprintf("strategy=murmur-ring/shards=%d/vnodes=%d", shards, v), func(b *testing.B) {
			var p []measure.VnodesPoint
			for b.Loop() {
				var err error
				if p, err = measure.VnodesCurve(shards, []int{v}, qualityKeys, runs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(p[0].StddevPct, "stddev%")
			b.ReportMetric(p[0].Stddev, "stddev")
		})
	}
}
