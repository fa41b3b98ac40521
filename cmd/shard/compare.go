package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

var compareVerb = &verb{
	name:    "compare",
	args:    "[flags]",
	summary: "measure every strategy on the same keys and print one table (the main job)",
	about: `
Compare measures every placement strategy on the same keys: nanoseconds and allocations
per Locate, the bytes of state a sharder keeps, how evenly it spreads the keys, and how
many keys move when a shard is added and when the shard count doubles, each next to the
ideal. It then measures the named pools of package pool over nodes of weights 1, 2, 3, 4,
1, 2, ... (10 and 100 of them): each node's share of the keys against weight/total, and the
keys moved when a node in the middle leaves, when it rejoins and when a new node joins at
the end, next to that node's fair share. Last it repeats the experiment of the
consistent-hash homework [002]: the Murmur ring's deviation against its number of points
per shard. With -zipf S it also sends as many requests as keys, drawn by Zipf(S), and
prints each strategy's fullest shard by requests over the average, for the pools also with
bounded loads (package pool/bounded, c = 1.25). It ends with a verdict drawn from the first
table: the fastest, the most even, the least movement, and which fits which need. It takes
about fifteen seconds with the
defaults; progress shows on stderr when it is a terminal (with stderr redirected, compare
says nothing until it is done).

  shard compare                            # 1,000,000 random 16-byte keys, 10 shards
  shard compare -keyfile keys.txt          # your own keys, one per line
  shard compare -zipf 1.1                  # and the skew table: Zipf(1.1) requests
  shard compare -shards 64 -plot out.png   # and a chart (.svg or .png): loads, the
                                           # vnodes curve, the pools' balance and moves

The chart is drawn by the nested module examples/plot (gonum.org/v1/plot), run with
"go run ." in that directory with the data as JSON on its standard input, so that the
command and the library need nothing beyond the standard library: run compare -plot from
a clone of the repository, or give -plotter.

Limits, checked before any work: -shards at most 1024; -vnodes at most 16384 and -vnodes ×
-shards at most 4194304 (a ring's points); -keys at most 10000000 and -keys × -keylen at
most 2^28 bytes; a -keyfile at most 10000000 keys and 2^28 bytes, each key at most 65536
bytes; -rounds at most 1000; -seeds at most 20. Time grows with -keys × -seeds and with
-shards: rendezvous places a key in time proportional to the shards.`,
	flags: func(fs *flag.FlagSet) func(*env, []string) error {
		var c compareConfig
		c.keys.define(fs, 1_000_000, compareKeyLimits)
		intFlag(fs, &c.shards, "shards", 10, maxCompareShards, "shard `count`")
		intFlag(fs, &c.vnodes, "vnodes", catalog.DefaultVnodes, maxCompareVnodes, "`points` per shard on the Murmur ring, and per unit of weight on the pools' ring")
		intFlag(fs, &c.rounds, "rounds", 31, maxRounds, "interleaved timing `rounds`, the lower quartile reported (0: no timing)")
		intFlag(fs, &c.seeds, "seeds", 3, maxSeeds, "`rings` (server names and keys) averaged in the vnodes experiment (0: skip it)")
		fs.StringVar(&c.plot, "plot", "", "also draw a chart to this `file`, .svg or .png")
		fs.StringVar(&c.plotter, "plotter", "", "`directory` of the examples/plot module (default: found from the working directory)")
		fs.BoolVar(&c.json, "json", false, "print the measurements as one JSON object")
		fs.Float64Var(&c.zipf, "zipf", 0, fmt.Sprintf("skew table: requests by Zipf(`S`), S in (1, %d] (0: none)", maxZipf))
		return func(e *env, args []string) error {
			rest, err := parse(fs, args)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return badUsage("unexpected argument %.80q: compare takes flags only", rest[0])
			}
			if err := c.check(); err != nil {
				return err
			}
			return compare(e, c)
		}
	},
}

type compareConfig struct {
	keys                          sample
	shards, vnodes, rounds, seeds int
	plot, plotter                 string
	json                          bool
	zipf                          float64
}

func (c compareConfig) check() error {
	if err := c.keys.check(); err != nil {
		return err
	}
	switch {
	case c.shards < 1:
		return badUsage("-shards %d: want at least 1", c.shards)
	case c.vnodes < 1:
		return badUsage("-vnodes %d: want at least 1", c.vnodes)
	case c.vnodes*c.shards > maxVnodes:
		return badUsage("-vnodes %d × -shards %d: want at most %d points on the Murmur ring", c.vnodes, c.shards, maxVnodes)
	case c.rounds < 0 || c.seeds < 0:
		return badUsage("-rounds %d, -seeds %d: want 0 or more", c.rounds, c.seeds)
	case c.zipf != 0 && !(c.zipf > 1 && c.zipf <= maxZipf):
		return badUsage("-zipf %v: want 0 (none) or an exponent in (1, %d]", c.zipf, maxZipf)
	case c.plot != "" && !strings.HasSuffix(c.plot, ".svg") && !strings.HasSuffix(c.plot, ".png"):
		return badUsage("-plot %.80q: want a file name ending in .svg or .png", c.plot)
	}
	return nil
}

// compareRow is one strategy's measurements.
type compareRow struct {
	Strategy string `json:"strategy"`
	// Fits is false when the strategy cannot have this many shards; the rest is then empty.
	Fits       bool    `json:"fits"`
	NsPerOp    float64 `json:"ns_per_op,omitempty"`
	AllocsOp   float64 `json:"allocs_per_op"`
	StateBytes int64   `json:"state_bytes"`
	StddevPct  float64 `json:"stddev_pct"`
	MaxMean    float64 `json:"max_mean"`
	// GrowPct and DoublePct are the keys moved, in %, on n -> n+1 and n -> 2n; null where
	// the strategy cannot have that many shards.
	GrowPct   *float64 `json:"moved_grow_pct"`
	DoublePct *float64 `json:"moved_double_pct"`
	loads     []int
}

// compareReport is everything compare prints.
type compareReport struct {
	Machine string       `json:"machine"`
	Shards  int          `json:"shards"`
	Keys    int          `json:"keys"`
	Source  string       `json:"source"`
	Vnodes  int          `json:"vnodes"`
	Rounds  int          `json:"rounds"`
	Timed   int          `json:"timed_keys"`
	Rows    []compareRow `json:"rows"`
	Ideal   compareRow   `json:"ideal"`
	// Curve is the vnodes experiment: a Murmur ring of 10 shards, Keys random UUIDs,
	// averaged over Seeds rings.
	Curve []measure.VnodesPoint `json:"vnodes_curve,omitempty"`
	Seeds int                   `json:"seeds"`
	// Pools is the section of named pools with mixed weights (comparepools.go).
	Pools *poolsReport `json:"pools"`
	// Skew is the section of -zipf (compareskew.go).
	Skew *skewReport `json:"skew,omitempty"`
	// Verdict sums up the main table (compareverdict.go).
	Verdict *verdict `json:"verdict"`
}

func compare(e *env, c compareConfig) error {
	prog := newProgress(e)
	defer prog.done()
	prog.say("making the keys")
	keys, source, err := c.loadKeys(e)
	if err != nil {
		return err
	}
	if c.plot != "" { // fail before the long part, not after it
		if c.plotter, err = measure.FindPlotter(c.plotter); err != nil {
			return err
		}
	}
	n := c.shards
	opts := catalog.Options{Vnodes: c.vnodes}
	timing := keys[:min(len(keys), 1<<14)]
	rep := &compareReport{Machine: measure.Machine(), Shards: n, Keys: len(keys), Source: source,
		Vnodes: c.vnodes, Rounds: c.rounds, Timed: len(timing), Seeds: c.seeds}

	if c.zipf != 0 {
		rep.Skew = newSkew(keys, c.zipf, n)
	}
	strategies := catalog.All()
	var timed []measure.Locator
	var timedRows []int
	for i, st := range strategies {
		prog.say(fmt.Sprintf("placing %d keys: %s (%d of %d)", len(keys), st.Name, i+1, len(strategies)))
		r := compareRow{Strategy: st.Name}
		if st.Fits(n, opts) {
			s, size, err := measure.HeapBytes(func() (shard.Sharder, error) { return st.New(n, opts) })
			if err != nil {
				return fmt.Errorf("%s with %d shards: %w", st.Name, n, err)
			}
			r.Fits, r.StateBytes = true, max(size, 0)
			r.AllocsOp = measure.AllocsPerLocate(s, timing)
			before := measure.Placement(s, keys)
			r.loads = measure.Loads(before, n)
			b := measure.BalanceOf(r.loads)
			r.StddevPct, r.MaxMean = b.StddevPct, b.MaxMean
			r.GrowPct = movedPct(st, n, n+1, opts, keys, before)
			r.DoublePct = movedPct(st, n, 2*n, opts, keys, before)
			timed, timedRows = append(timed, s), append(timedRows, len(rep.Rows))
			if rep.Skew != nil {
				rep.Skew.addDense(st.Name, s)
			}
		}
		rep.Rows = append(rep.Rows, r)
	}
	for i, ps := range catalog.Pools() {
		prog.say(fmt.Sprintf("placing %d keys: %s pool (%d of %d)", len(keys), ps.Name, i+1, len(catalog.Pools())))
		r, p, err := measurePool(ps, n, keys, timing)
		if err != nil {
			return err
		}
		timed, timedRows = append(timed, poolTimer{p}), append(timedRows, len(rep.Rows))
		rep.Rows = append(rep.Rows, r)
		if rep.Skew != nil {
			if err := rep.Skew.addPool(r.Strategy, p); err != nil {
				return err
			}
		}
	}
	if c.rounds > 0 {
		prog.say(fmt.Sprintf("timing %d strategies, %d rounds", len(timed), c.rounds))
		for i, ns := range measure.Race(timed, timing, c.rounds, 2*time.Millisecond) {
			rep.Rows[timedRows[i]].NsPerOp = ns
		}
	}
	if rep.Pools, err = measurePools(keys, c.vnodes, prog.say); err != nil {
		return err
	}
	grow, double := measure.IdealMovedPct(n, n+1), measure.IdealMovedPct(n, 2*n)
	rep.Ideal = compareRow{Strategy: "ideal", Fits: true, StddevPct: measure.HashStddevPct(n, len(keys)), MaxMean: 1,
		GrowPct: &grow, DoublePct: &double}
	rep.Verdict = rep.makeVerdict()

	if c.seeds > 0 {
		prog.say(fmt.Sprintf("the consistent-hash homework [002]: %d UUIDs x %d rings on the Murmur ring", len(keys), c.seeds))
		if rep.Curve, err = measure.VnodesCurve(10, measure.VnodesDefault, len(keys), c.seeds); err != nil {
			return err
		}
	}
	prog.done()

	if c.json {
		err = writeJSON(e.stdout, rep)
	} else {
		err = rep.write(e.stdout)
	}
	if err != nil || c.plot == "" {
		return err
	}
	if err := plot(c, rep); err != nil {
		return err
	}
	if !c.json {
		fmt.Fprintf(e.stdout, "\nChart written to %s\n", c.plot)
	}
	return nil
}

func (rep *compareReport) write(w io.Writer) error {
	n := rep.Shards
	fmt.Fprintf(w, "Machine: %s\n", rep.Machine)
	timing := "no timing"
	if rep.Rounds > 0 {
		timing = fmt.Sprintf("time: lower quartile of %d interleaved rounds over %d of the keys", rep.Rounds, rep.Timed)
	}
	fmt.Fprintf(w, "%d shards, %s; Murmur ring with %d vnodes per shard; %s\n\n", n, rep.Source, rep.Vnodes, timing)
	var t measure.Table
	t.Header = []string{"strategy", "ns/op", "allocs/op", "state bytes", "stddev %", "max/mean",
		fmt.Sprintf("moved %% %d->%d", n, n+1), fmt.Sprintf("moved %% %d->%d", n, 2*n)}
	for _, r := range rep.Rows {
		if !r.Fits {
			t.Add(r.Strategy, "n/a", "", "", "", "", "", fmt.Sprintf("(not for %d shards)", n))
			continue
		}
		ns := "n/a"
		if rep.Rounds > 0 {
			ns = fmt.Sprintf("%.1f", r.NsPerOp)
		}
		t.Add(r.Strategy, ns, fmt.Sprintf("%.0f", r.AllocsOp), fmt.Sprint(r.StateBytes),
			fmt.Sprintf("%.2f", r.StddevPct), fmt.Sprintf("%.3f", r.MaxMean), pct(r.GrowPct), pct(r.DoublePct))
	}
	i := rep.Ideal
	t.Add(i.Strategy, "", "0", "", fmt.Sprintf("%.2f", i.StddevPct), "1.000", pct(i.GrowPct), pct(i.DoublePct))
	if _, err := t.WriteTo(w); err != nil {
		return err
	}
	fmt.Fprintf(w, `
ns/op: one Locate through the shard.Sharder interface (pools: pool.Pool's Locate through an
adapter, one call more). Pools have nodes node0, node1, ... of weight 1 and default options;
growing adds one node, doubling as many as there are. state bytes: heap the sharder keeps
after construction (live heap before and after New, each after a GC). stddev %%: standard
deviation of the per-shard key counts in %% of the mean; ideal: what a perfect random hash
shows on %d keys, sqrt((n-1)/keys). max/mean: the fullest shard over the mean. moved %%: keys
whose shard changes on Resize; ideal: the new shards' fair share, 1/(n+1) and 1/2.
`, rep.Keys)
	if rep.Pools != nil {
		if err := rep.Pools.write(w); err != nil {
			return err
		}
	}
	if rep.Skew != nil {
		if err := rep.Skew.write(w); err != nil {
			return err
		}
	}
	if rep.Curve == nil {
		return rep.writeVerdict(w)
	}
	fmt.Fprintf(w, "\nThe consistent-hash homework [002]: Murmur ring, 10 shards, %d random UUIDs, deviation averaged over %d rings and key sets\n\n", rep.Keys, rep.Seeds)
	var vt measure.Table
	vt.Header = []string{"vnodes", "stddev (keys)", "stddev %"}
	for _, p := range rep.Curve {
		vt.Add(fmt.Sprint(p.Vnodes), fmt.Sprintf("%.0f", p.Stddev), fmt.Sprintf("%.2f", p.StddevPct))
	}
	if _, err := vt.WriteTo(w); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, "\n[002] 在野, \"架构师训练营第 5 周作业——一致性 Hash 算法\" (Architect training camp, week 5\n"+
		"homework: the consistent hash algorithm), blog post, 2020-07-08: a Murmur ring of 10 servers\n"+
		"and 1,000,000 keys, its deviation for 100 to 5000 virtual nodes. All sources: README, Sources.\n")
	if err != nil {
		return err
	}
	return rep.writeVerdict(w)
}

// measurePool measures a pool of n nodes named node0, node1, ... of weight 1 and default
// options as the dense strategies are measured: growing adds node<n>, doubling adds n nodes.
func measurePool(ps catalog.PoolStrategy, n int, keys, timing []string) (compareRow, pool.Pool, error) {
	r := compareRow{Strategy: ps.Name + " pool", Fits: true}
	build := func() (pool.Pool, error) { return ps.New(poolNodes(0, n), catalog.Options{}) }
	p, size, err := measure.HeapBytes(build)
	if err != nil {
		return r, nil, fmt.Errorf("%s pool of %d nodes: %w", ps.Name, n, err)
	}
	r.StateBytes = max(size, 0)
	r.AllocsOp = measure.AllocsPerLocate(poolTimer{p}, timing)
	before := measure.Placement(poolIndex{p}, keys)
	r.loads = measure.Loads(before, n)
	b := measure.BalanceOf(r.loads)
	r.StddevPct, r.MaxMean = b.StddevPct, b.MaxMean
	for _, to := range []int{n + 1, 2 * n} {
		q, err := build()
		if err == nil {
			err = q.Add(poolNodes(n, to)...)
		}
		if err != nil {
			return r, nil, fmt.Errorf("%s pool of %d nodes grown to %d: %w", ps.Name, n, to, err)
		}
		moved := measure.MovedPct(before, measure.Placement(poolIndex{q}, keys))
		if to == n+1 {
			r.GrowPct = &moved
		} else {
			r.DoublePct = &moved
		}
	}
	return r, p, nil
}

// poolNodes returns the nodes node<from> .. node<to-1>, of weight 1.
func poolNodes(from, to int) []pool.Node {
	nodes := make([]pool.Node, 0, to-from)
	for i := from; i < to; i++ {
		nodes = append(nodes, pool.Node{Name: "node" + strconv.Itoa(i)})
	}
	return nodes
}

// poolIndex numbers the nodes of poolNodes: node<i> is i.
type poolIndex struct{ p pool.Pool }

func (x poolIndex) Locate(key string) int {
	i, _ := strconv.Atoi(strings.TrimPrefix(x.p.Locate(key), "node"))
	return i
}

// poolTimer times a pool's Locate through the measure.Locator interface: one more call than
// a dense strategy pays, and the length of the name as the result.
type poolTimer struct{ p pool.Pool }

func (t poolTimer) Locate(key string) int { return len(t.p.Locate(key)) }

// loadKeys returns the keys to place and a phrase that says where they came from.
func (c compareConfig) loadKeys(e *env) ([]string, string, error) {
	if c.keys.file == "" {
		return measure.Keys(1, c.keys.count, c.keys.keylen), fmt.Sprintf("%d random %d-byte keys", c.keys.count, c.keys.keylen), nil
	}
	seq, what, closeKeys, err := c.keys.open(e)
	if err != nil {
		return nil, "", err
	}
	defer closeKeys()
	var keys []string
	for k, err := range seq {
		if err != nil {
			return nil, "", err
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, "", fmt.Errorf("%s: no keys", c.keys.file)
	}
	return keys, fmt.Sprintf("%d %s", len(keys), what), nil
}

// movedPct builds the strategy with from shards, resizes it to to, and returns the share of
// keys that changed shard, in %; nil if the strategy cannot have to shards. before is the
// placement with from shards.
func movedPct(st catalog.Strategy, from, to int, opts catalog.Options, keys []string, before []int32) *float64 {
	if !st.Fits(to, opts) {
		return nil
	}
	s, err := st.New(from, opts)
	if err != nil {
		return nil
	}
	if err := s.Resize(to); err != nil {
		return nil
	}
	moved := measure.MovedPct(before, measure.Placement(s, keys))
	return &moved
}

func pct(v *float64) string {
	if v == nil || math.IsNaN(*v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", *v)
}

// plotData is what examples/plot reads on its standard input.
type plotData struct {
	Title  string      `json:"title"`
	Shards int         `json:"shards"`
	Keys   int         `json:"keys"`
	Loads  []plotLoads `json:"loads"`
	Vnodes *plotVnodes `json:"vnodes,omitempty"`
	Pools  *plotPools  `json:"pools,omitempty"`
}

type plotLoads struct {
	Strategy string `json:"strategy"`
	Counts   []int  `json:"counts"`
}

type plotVnodes struct {
	Shards int                   `json:"shards"`
	Keys   int                   `json:"keys"`
	Seeds  int                   `json:"seeds"`
	Points []measure.VnodesPoint `json:"points"`
}

func plot(c compareConfig, rep *compareReport) error {
	d := plotData{Title: fmt.Sprintf("%d shards, %d keys", rep.Shards, rep.Keys), Shards: rep.Shards, Keys: rep.Keys}
	for _, r := range rep.Rows {
		if r.Fits {
			d.Loads = append(d.Loads, plotLoads{r.Strategy, r.loads})
		}
	}
	if rep.Curve != nil {
		d.Vnodes = &plotVnodes{Shards: 10, Keys: rep.Keys, Seeds: rep.Seeds, Points: rep.Curve}
	}
	if rep.Pools != nil {
		d.Pools = rep.Pools.plot()
	}
	return measure.DrawChart(c.plotter, d, c.plot)
}
