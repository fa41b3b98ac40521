// Command peers compares this library's strategies with the Go packages people use for the
// same job, on the same keys in one process. It prints these tables:
//
//   - at -shards shards: ns per lookup, allocations, balance and the keys a resize moves, and
//     the speed ratio of ours to the best peer of the same kind;
//   - ns per lookup at every shard count of -scale, for every implementation that can have
//     that many shards (and can be built with them in a few seconds);
//   - at every member count of -cache, the lookups whose table grows with the members
//     (pool.Ring, pool.Maglev, buraksezer/consistent, names[xxhash % n]) warm, alone over the
//     timing keys, and cold, after reading 64 MiB, next to one load from memory (see cache.go);
//   - at every shard count of -batch, ours placing the keys with a loop of Locate and with
//     LocateBatch, side by side;
//   - at -shards shards, ours looking keys up from one goroutine with GOMAXPROCS 1 and from
//     two with GOMAXPROCS 2, side by side, in millions of lookups per second (lookups share
//     no writes, so two should make about twice as many);
//   - the library's speed targets, each marked pass or miss.
//
// With -plot it also draws ns per lookup against the shard count (the second table), through
// the nested module examples/plot.
//
//	go -C benchmarks/peers run . [-keys 1000000] [-shards 10] [-rounds 31] [-plot scale.png]
//
// Timing is the lower quartile of many short interleaved rounds (see measure.RacePasses), so
// that a machine shared with other work disturbs every contestant alike; read ratios, not
// absolutes. Every ratio is taken within one race.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/measure"
)

type config struct {
	keys, shards, keylen, pool, vnodes, rounds int
	build, burakMax                            int
	minDur                                     time.Duration
	scale, batch, replicas, cache              []int
	plot, plotter, cpuprofile                  string
	zipf                                       float64
}

func main() {
	var c config
	var scale, batch, replicas, cache string
	flag.IntVar(&c.keys, "keys", 1_000_000, "random keys for the balance and movement columns")
	flag.IntVar(&c.shards, "shards", 10, "shard count of the first table")
	flag.IntVar(&c.keylen, "keylen", 16, "key length in bytes")
	flag.IntVar(&c.pool, "pool", 1<<14, "distinct keys in the timing loop")
	flag.IntVar(&c.vnodes, "vnodes", 160, "points per shard for every ring that lets its user choose (ours and peers)")
	flag.IntVar(&c.rounds, "rounds", 31, "interleaved timing rounds; the lower quartile is reported")
	flag.DurationVar(&c.minDur, "mindur", 2*time.Millisecond, "length of one timing measurement")
	flag.StringVar(&scale, "scale", "10,100,1000,10000,100000,1000000", "shard counts of the scaling table, comma-separated; empty for none")
	flag.StringVar(&batch, "batch", "10,1000", "shard counts of the batch table, comma-separated; empty for none")
	flag.StringVar(&replicas, "replicas", "10,100,1000,10000", "member counts of the replicas table (AppendN against GetClosestN), comma-separated; empty for none")
	flag.StringVar(&cache, "cache", "1000,10000", "member counts of the cache table (warm against cold lookups), comma-separated; empty for none")
	flag.IntVar(&c.build, "build", 10000, "member count of the build table (0: no build table)")
	flag.IntVar(&c.burakMax, "buraksezer-max", 1000, "most members buraksezer/consistent is built with: its New re-sorts every point after each member, about 1 s at 1000, minutes at 10000")
	flag.Float64Var(&c.zipf, "zipf", 1.1, "exponent of the skew table's Zipf requests, above 1 (0: no skew table)")
	flag.StringVar(&c.plot, "plot", "", "also draw ns per lookup against the shard count to this file, .svg or .png")
	flag.StringVar(&c.plotter, "plotter", "", "directory of the examples/plot module (default: found from the working directory)")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "also write a CPU profile of the whole run to this file, for go tool pprof (-list Locate shows where a lookup's time goes)")
	flag.Parse()
	err := c.check()
	if err == nil {
		if c.scale, err = counts("-scale", scale); err == nil {
			if c.batch, err = counts("-batch", batch); err == nil {
				if c.replicas, err = counts("-replicas", replicas); err == nil {
					c.cache, err = counts("-cache", cache)
				}
			}
		}
	}
	if err == nil && c.plot != "" {
		c.plotter, err = measure.FindPlotter(c.plotter)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	stop := func() {}
	if c.cpuprofile != "" {
		if stop, err = profile(c.cpuprofile); err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(2)
		}
	}
	err = run(os.Stdout, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// profile starts a CPU profile into file and returns what stops it.
func profile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func (c config) check() error {
	switch {
	case c.keys < 1 || c.shards < 1 || c.pool < 1 || c.vnodes < 1 || c.rounds < 1:
		return fmt.Errorf("-keys, -shards, -pool, -vnodes and -rounds must be at least 1")
	case c.keylen < 0:
		return fmt.Errorf("-keylen %d: want at least 0", c.keylen)
	case c.build < 0 || c.build > 99999 || c.burakMax < 1:
		return fmt.Errorf("-build %d, -buraksezer-max %d: want 0 to 99999 members, and at least 1", c.build, c.burakMax)
	case c.zipf != 0 && !(c.zipf > 1 && c.zipf <= 100):
		return fmt.Errorf("-zipf %v: want 0 (no skew table) or an exponent in (1, 100]", c.zipf)
	case c.plot != "" && !strings.HasSuffix(c.plot, ".svg") && !strings.HasSuffix(c.plot, ".png"):
		return fmt.Errorf("-plot %q: want a file name ending in .svg or .png", c.plot)
	}
	return nil
}

// counts parses a comma-separated list of shard counts.
func counts(flagName, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a shard count", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// timings holds every ns per lookup measured in one run, by table, implementation and
// shard count, for the targets.
type timings map[timing]float64

type timing struct {
	table  string // "main", "scale", "batch" or "replicas"
	name   string // a contestant's name; in the batch table with " Locate loop" or " LocateBatch"
	shards int
}

func run(w io.Writer, c config) error {
	timingKeys := measure.Keys(1, c.pool, c.keylen)
	ts := timings{}
	allocs := map[string]float64{} // the most allocations per lookup seen, by our contestant
	cs := contestants(c.vnodes, c.burakMax)

	fmt.Fprintf(w, "Machine: %s\n", measure.Machine())
	if err := mainTable(w, c, cs, timingKeys, ts, allocs); err != nil {
		return err
	}
	if len(c.scale) > 0 {
		series, err := scaleTable(w, c, cs, timingKeys, ts)
		if err != nil {
			return err
		}
		if c.plot != "" {
			if err := drawScale(c, series); err != nil {
				return err
			}
			fmt.Fprintf(w, "\nChart written to %s\n", c.plot)
		}
	}
	if len(c.replicas) > 0 {
		if err := replicasTable(w, c, timingKeys, ts, allocs); err != nil {
			return err
		}
	}
	if len(c.cache) > 0 {
		if err := cacheTable(w, c, timingKeys, ts); err != nil {
			return err
		}
	}
	if c.build > 0 {
		if err := buildTable(w, c); err != nil {
			return err
		}
	}
	if len(c.batch) > 0 {
		if err := batchTable(w, c, cs, timingKeys, ts, allocs); err != nil {
			return err
		}
	}
	if err := parallelTable(w, c, cs, timingKeys); err != nil {
		return err
	}
	if c.zipf != 0 {
		if err := skewTable(w, c, len(timingKeys)); err != nil {
			return err
		}
	}
	return targetTable(w, c, ts, allocs)
}

type result struct {
	c        contestant
	ok       bool // false when the contestant cannot have this many shards
	ns       float64
	allocs   float64
	bal      measure.Balance
	movedPct float64 // on shards -> shards+1; NaN if the strategy cannot grow that far
}

// mainTable measures every contestant at c.shards shards: speed, balance and movement.
func mainTable(w io.Writer, c config, cs []contestant, timingKeys []string, ts timings, allocs map[string]float64) error {
	n := c.shards
	qualityKeys := measure.Keys(2, c.keys, c.keylen)
	var results []*result
	var live []measure.Locator
	var liveRes []*result
	for _, ct := range cs {
		r := &result{c: ct, movedPct: math.NaN()}
		results = append(results, r)
		l, err := ct.build(n)
		if err != nil {
			continue // e.g. first-byte SHA-1 above 10 shards
		}
		r.ok = true
		r.allocs = measure.AllocsPerLocate(l, timingKeys)
		if ct.ours {
			allocs[ct.name] = max(allocs[ct.name], r.allocs)
		}
		before := measure.Placement(l, qualityKeys)
		r.bal = measure.BalanceOf(measure.Loads(before, n))
		// Time on a locator of its own, so the resize below cannot touch it.
		t, err := ct.build(n)
		if err != nil {
			return fmt.Errorf("%s: %w", ct.name, err)
		}
		live, liveRes = append(live, t), append(liveRes, r)
		if g, err := ct.resize(l, n+1); err == nil {
			r.movedPct = measure.MovedPct(before, measure.Placement(g, qualityKeys))
		}
	}
	for i, ns := range measure.Race(live, timingKeys, c.rounds, c.minDur) {
		liveRes[i].ns = ns
		ts[timing{"main", liveRes[i].c.name, n}] = ns
	}

	fmt.Fprintf(w, "%d shards; timing: %d keys of %d bytes, lower quartile of %d interleaved rounds; balance and movement: %d keys; rings with a choice: %d points per shard\n\n",
		n, c.pool, c.keylen, c.rounds, c.keys, c.vnodes)
	best := map[string]*result{} // the fastest peer of each kind
	for _, r := range results {
		if r.ok && !r.c.ours && (best[r.c.kind] == nil || r.ns < best[r.c.kind].ns) {
			best[r.c.kind] = r
		}
	}
	best[kindTable] = find(results, "xxhash % n")

	var t measure.Table
	t.Header = []string{"implementation", "kind", "ns/op", "allocs/op", "stddev %", "max/mean",
		fmt.Sprintf("moved %% %d->%d", n, n+1), "ours / best peer"}
	for _, r := range results {
		if !r.ok {
			t.Add(r.c.name, r.c.kind, "n/a", "", "", "", "", fmt.Sprintf("not for %d shards", n))
			continue
		}
		ratio := ""
		if b := best[r.c.kind]; r.c.ours && b != nil && b.ok {
			ratio = fmt.Sprintf("%.2fx %s", r.ns/b.ns, b.c.name)
		}
		t.Add(r.c.name, r.c.kind, fmt.Sprintf("%.1f", r.ns), fmt.Sprintf("%.0f", r.allocs),
			fmt.Sprintf("%.2f", r.bal.StddevPct), fmt.Sprintf("%.3f", r.bal.MaxMean), pct(r.movedPct), ratio)
	}
	t.Add("ideal", "", "", "0", fmt.Sprintf("%.2f", measure.HashStddevPct(n, c.keys)), "1.000",
		pct(measure.IdealMovedPct(n, n+1)), "")
	if _, err := t.WriteTo(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nideal: stddev %% is what a perfect random hash shows on %d keys (sqrt((n-1)/keys)); moved %% is 1/(n+1), the new shard's fair share.\n", c.keys)
	return nil
}

// A series is one contestant's ns per lookup at each shard count where it was measured.
type series struct {
	name   string
	points map[int]float64
}

// scaleTable times every contestant at each shard count of c.scale where it fits, one race
// per count, and prints ns per lookup with one column per count.
func scaleTable(w io.Writer, c config, cs []contestant, timingKeys []string, ts timings) ([]series, error) {
	all := make([]series, len(cs))
	for i, ct := range cs {
		all[i] = series{name: ct.name, points: map[int]float64{}}
	}
	for _, n := range c.scale {
		var live []measure.Locator
		var idx []int
		for i, ct := range cs {
			if n > ct.maxShards {
				continue
			}
			l, err := ct.build(n)
			if err != nil {
				return nil, fmt.Errorf("%s with %d shards: %w", ct.name, n, err)
			}
			live, idx = append(live, l), append(idx, i)
		}
		for j, ns := range measure.Race(live, timingKeys, c.rounds, c.minDur) {
			all[idx[j]].points[n] = ns
			ts[timing{"scale", cs[idx[j]].name, n}] = ns
		}
	}

	fmt.Fprintf(w, "\nns per lookup against the shard count (one race per count; blank: not for that many shards, or too slow to build; rings: %d points per shard)\n\n", c.vnodes)
	var t measure.Table
	t.Header = []string{"implementation"}
	for _, n := range c.scale {
		t.Header = append(t.Header, shardCount(n))
	}
	var out []series
	for _, s := range all {
		if len(s.points) == 0 {
			continue
		}
		out = append(out, s)
		row := []string{s.name}
		for _, n := range c.scale {
			cell := ""
			if ns, ok := s.points[n]; ok {
				cell = fmt.Sprintf("%.1f", ns)
			}
			row = append(row, cell)
		}
		t.Add(row...)
	}
	_, err := t.WriteTo(w)
	return out, err
}

// shardCount writes 1000000 as 10^6 and other counts in full.
func shardCount(n int) string {
	if e := math.Log10(float64(n)); n >= 10000 && e == math.Trunc(e) {
		return fmt.Sprintf("10^%.0f", e)
	}
	return strconv.Itoa(n)
}

// drawScale draws the scaling table through examples/plot.
func drawScale(c config, all []series) error {
	type point struct {
		Shards int     `json:"shards"`
		Ns     float64 `json:"ns"`
	}
	type line struct {
		Name   string  `json:"name"`
		Points []point `json:"points"`
	}
	var lines []line
	for _, s := range all {
		l := line{Name: s.name}
		for _, n := range c.scale {
			if ns, ok := s.points[n]; ok {
				l.Points = append(l.Points, point{n, ns})
			}
		}
		lines = append(lines, l)
	}
	data := map[string]any{"scaling": map[string]any{
		"title":  fmt.Sprintf("ns per lookup, %d-byte keys, one run on a shared machine", c.keylen),
		"series": lines,
	}}
	return measure.DrawChart(c.plotter, data, c.plot)
}

// batchTable races, at each shard count of c.batch, a loop of Locate against LocateBatch
// (256 keys per call) for each of ours that has one.
func batchTable(w io.Writer, c config, cs []contestant, timingKeys []string, ts timings, allocs map[string]float64) error {
	const size = 256
	fmt.Fprintf(w, "\nours: a loop of Locate (through the Sharder interface) against LocateBatch, %d keys per call, raced side by side\n\n", size)
	var t measure.Table
	t.Header = []string{"implementation", "shards", "loop ns/key", "batch ns/key", "speedup", "batch allocs/key"}
	for _, n := range c.batch {
		var passes []measure.Pass
		var names []string
		var batchAllocs []float64
		for _, ct := range cs {
			if !ct.ours || n > ct.maxShards {
				continue
			}
			l, err := ct.build(n)
			if err != nil {
				return fmt.Errorf("%s with %d shards: %w", ct.name, n, err)
			}
			b, ok := l.(shard.BatchLocator)
			if !ok {
				continue
			}
			a := measure.AllocsPerBatchKey(b, timingKeys)
			allocs[ct.name] = max(allocs[ct.name], a)
			passes = append(passes, measure.LocatePass(l), measure.BatchPass(b, size))
			names, batchAllocs = append(names, ct.name), append(batchAllocs, a)
		}
		ns := measure.RacePasses(passes, timingKeys, c.rounds, c.minDur)
		for i, name := range names {
			loop, batch := ns[2*i], ns[2*i+1]
			ts[timing{"batch", name + " Locate loop", n}] = loop
			ts[timing{"batch", name + " LocateBatch", n}] = batch
			t.Add(name, strconv.Itoa(n), fmt.Sprintf("%.1f", loop), fmt.Sprintf("%.1f", batch),
				fmt.Sprintf("%.2fx", loop/batch), fmt.Sprintf("%.0f", batchAllocs[i]))
		}
	}
	_, err := t.WriteTo(w)
	return err
}

// parallelTable races, for each of ours at c.shards shards, lookups from one goroutine with
// GOMAXPROCS 1 against two goroutines with GOMAXPROCS 2.
func parallelTable(w io.Writer, c config, cs []contestant, timingKeys []string) error {
	var passes []measure.Pass
	var names []string
	for _, ct := range cs {
		if !ct.ours {
			continue
		}
		l, err := ct.build(c.shards)
		if err != nil {
			continue // not for this many shards
		}
		passes = append(passes, measure.ParallelPass(l, 1), measure.ParallelPass(l, 2))
		names = append(names, ct.name)
	}
	ns := measure.RacePasses(passes, timingKeys, c.rounds, c.minDur)
	fmt.Fprintf(w, "\nours at %d shards: millions of lookups per second from 1 goroutine (GOMAXPROCS 1) and from 2 (GOMAXPROCS 2), raced side by side on %d CPUs\n\n",
		c.shards, runtime.NumCPU())
	var t measure.Table
	t.Header = []string{"implementation", "Mlookups/s, 1", "Mlookups/s, 2", "2 / 1"}
	for i, name := range names {
		one, two := 1000/ns[2*i], 2*1000/ns[2*i+1]
		t.Add(name, fmt.Sprintf("%.1f", one), fmt.Sprintf("%.1f", two), fmt.Sprintf("%.2fx", two/one))
	}
	_, err := t.WriteTo(w)
	return err
}

// A target is a speed ratio, ours over another's ns per lookup, that ours must not exceed,
// both measured in one race of one table.
type target struct {
	table       string // "main" (at -shards shards), "scale", "batch", "replicas", "warm" or "cold"
	ours, other string
	shards      int // the count of both sides (ignored in "main")
	otherShards int // if not 0: the other side is ours at this count (how flat ours is)
	max         float64
	why         string // what the target stands for, when the ratio alone does not say
}

// targets are the library's speed goals.
var targets = []target{
	{table: "main", ours: "ours/modulo", other: "xxhash % n", max: 1.1},
	{table: "main", ours: "ours/jump", other: "dgryski/go-jump+xxhash", max: 1.0},
	{table: "main", ours: "ours/rendezvous", other: "dgryski/go-rendezvous+xxhash", max: 0.75},
	{table: "main", ours: "ours/murmur-ring", other: "buraksezer/consistent+xxhash", max: 1.0},
	{table: "main", ours: "ours/murmur-ring", other: "serialx/hashring", max: 0.2},
	{table: "main", ours: "ours/murmur-ring", other: "stathat/consistent", max: 0.2},
	{table: "main", ours: "ours/partitions", other: "xxhash % n", max: 1.5},
	{table: "main", ours: "ours/trie", other: "xxhash % n", max: 1.5},
	{table: "scale", ours: "ours/jump", other: "dgryski/go-jump+xxhash", shards: 10, max: 1.0},
	{table: "scale", ours: "ours/jump", other: "dgryski/go-jump+xxhash", shards: 1000, max: 1.0},
	{table: "scale", ours: "ours/jump", other: "dgryski/go-jump+xxhash", shards: 1000000, max: 1.0},
	{table: "scale", ours: "ours/jump-back", other: "dgryski/go-jump+xxhash", shards: 1000000, max: 0.5},
	{table: "scale", ours: "ours/jump-back", other: "ours/jump-back", shards: 1000000, otherShards: 10, max: 1.5, why: "flat"},
	{table: "batch", ours: "ours/jump LocateBatch", other: "ours/jump Locate loop", shards: 1000, max: 1 / 1.5, why: ">= 1.5x throughput"},
	{table: "batch", ours: "ours/rendezvous LocateBatch", other: "ours/rendezvous Locate loop", shards: 1000, max: 1 / 1.5, why: ">= 1.5x throughput"},
	{table: "batch", ours: "ours/murmur-ring LocateBatch", other: "ours/murmur-ring Locate loop", shards: 1000, max: 1 / 1.5, why: ">= 1.5x throughput"},
	{table: "main", ours: "ours/pool-maglev", other: "xxhash % n", max: 1.5},
	{table: "main", ours: "ours/pool-memento", other: "xxhash % n", max: 1.5},
	{table: "main", ours: "ours/pool-maglev", other: "names[xxhash % n]", max: 1.5, why: "same result type"},
	{table: "main", ours: "ours/pool-memento", other: "names[xxhash % n]", max: 1.5, why: "same result type"},
	{table: "scale", ours: "ours/pool-maglev", other: "xxhash % n", shards: 10000, max: 1.5},
	{table: "scale", ours: "ours/pool-memento", other: "xxhash % n", shards: 10000, max: 1.5},
	{table: "scale", ours: "ours/pool-maglev", other: "names[xxhash % n]", shards: 10000, max: 1.5, why: "same result type"},
	{table: "scale", ours: "ours/pool-memento", other: "names[xxhash % n]", shards: 10000, max: 1.5, why: "same result type"},
	{table: "scale", ours: "ours/pool-ring", other: "buraksezer/consistent+xxhash", shards: 10, max: 1.0},
	{table: "scale", ours: "ours/pool-ring", other: "buraksezer/consistent+xxhash", shards: 100, max: 1.0},
	{table: "scale", ours: "ours/pool-ring", other: "buraksezer/consistent+xxhash", shards: 1000, max: 1.0},
	{table: "scale", ours: "ours/pool-ring", other: "buraksezer/consistent+xxhash", shards: 10000, max: 1.0},
	// The same lookups alone over the timing keys, their tables cached (the cache table): the
	// race above leaves ours the others' data in the caches, which favours small tables.
	{table: "warm", ours: "ours/pool-ring", other: "buraksezer/consistent+xxhash", shards: 1000, max: 1.0, why: "warm"},
	{table: "warm", ours: "ours/pool-ring", other: "buraksezer/consistent+xxhash", shards: 10000, max: 1.0, why: "warm"},
	{table: "replicas", ours: "ours/pool-ring AppendN", other: "buraksezer/consistent+xxhash GetClosestN", shards: 10, max: 1 / 3.0, why: ">= 3x faster"},
	{table: "replicas", ours: "ours/pool-ring AppendN", other: "buraksezer/consistent+xxhash GetClosestN", shards: 100, max: 1 / 3.0, why: ">= 3x faster"},
	{table: "replicas", ours: "ours/pool-ring AppendN", other: "buraksezer/consistent+xxhash GetClosestN", shards: 1000, max: 1 / 3.0, why: ">= 3x faster"},
	{table: "replicas", ours: "ours/pool-ring AppendN", other: "buraksezer/consistent+xxhash GetClosestN", shards: 10000, max: 1 / 3.0, why: ">= 3x faster"},
}

func targetTable(w io.Writer, c config, ts timings, allocs map[string]float64) error {
	fmt.Fprintf(w, "\nTargets (ratio: ours / other ns per lookup, from one race, or from the warm column of the cache table; main: the first table, at %d shards):\n\n", c.shards)
	var t measure.Table
	t.Header = []string{"ours", "other", "shards", "ratio", "target", "result"}
	for _, tg := range targets {
		n, on := tg.shards, tg.shards
		if tg.table == "main" {
			n, on = c.shards, c.shards
		}
		ours, other, shards := tg.ours, tg.other, shardCount(n)
		if tg.otherShards != 0 {
			on = tg.otherShards
			ours, other = fmt.Sprintf("%s at %s", ours, shardCount(n)), fmt.Sprintf("%s at %s", other, shardCount(on))
			shards = ""
		}
		goal := fmt.Sprintf("<= %.2fx", tg.max)
		if tg.why != "" {
			goal += " (" + tg.why + ")"
		}
		o, okO := ts[timing{tg.table, tg.ours, n}]
		p, okP := ts[timing{tg.table, tg.other, on}]
		if !okO || !okP {
			why := "n/a (not measured in this run)"
			if strings.HasPrefix(tg.other, "buraksezer/") && on > c.burakMax {
				why = fmt.Sprintf("n/a (buraksezer above -buraksezer-max %d)", c.burakMax)
			}
			t.Add(ours, other, shards, "", goal, why)
			continue
		}
		ratio := o / p
		verdict := "pass"
		if ratio > tg.max {
			verdict = fmt.Sprintf("MISS by %.0f%%", 100*(ratio/tg.max-1))
		}
		t.Add(ours, other, shards, ratioText(ratio), goal, verdict)
	}
	most, who := 0.0, ""
	for name, a := range allocs {
		if a > most {
			most, who = a, name
		}
	}
	verdict := "pass"
	if most > 0 {
		verdict = fmt.Sprintf("MISS: %s makes %.2f", who, most)
	}
	t.Add("every ours", "allocations per lookup (Locate, LocateBatch, AppendN with room)", "", fmt.Sprintf("%.0f", most), "= 0", verdict)
	_, err := t.WriteTo(w)
	return err
}

// ratioText writes a ratio with two decimals, or three significant digits below 0.1.
func ratioText(r float64) string {
	if r < 0.1 {
		return fmt.Sprintf("%.3gx", r)
	}
	return fmt.Sprintf("%.2fx", r)
}

func find(rs []*result, name string) *result {
	for _, r := range rs {
		if r.c.name == name {
			return r
		}
	}
	return nil
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
