// Command compare measures every placement strategy of package shard on the same keys and
// prints one table: nanoseconds and allocations per Locate, the bytes of state a sharder
// keeps, how evenly it spreads the keys, and how many keys move when a shard is added and
// when the shard count doubles, each next to the ideal. It then repeats document 002's
// experiment (the Murmur ring's deviation against its vnode count).
//
// Run it from the repository root:
//
//	go run ./examples/compare                          # 1,000,000 random 16-byte keys, 10 shards
//	go run ./examples/compare -keyfile keys.txt        # your own keys, one per line
//	go run ./examples/compare -shards 64 -plot out.png # and a chart (.svg or .png)
//
// The chart is drawn by the nested module examples/plot (gonum.org/v1/plot), run as
// `go run .` in that directory with the data as JSON on its standard input, so that this
// program and the library need nothing beyond the standard library.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/measure"
)

type config struct {
	keys, shards, vnodes, keylen, rounds, seeds int
	keyfile, plot, plotter                      string
}

func main() {
	var c config
	flag.IntVar(&c.keys, "keys", 1_000_000, "random keys to place (ignored with -keyfile)")
	flag.IntVar(&c.shards, "shards", 10, "shard count")
	flag.IntVar(&c.vnodes, "vnodes", catalog.DefaultVnodes, "points per shard on the Murmur ring")
	flag.IntVar(&c.keylen, "keylen", 16, "length of the random keys in bytes")
	flag.StringVar(&c.keyfile, "keyfile", "", "read the keys from this file, one per line, instead")
	flag.StringVar(&c.plot, "plot", "", "also draw a chart to this file, .svg or .png")
	flag.StringVar(&c.plotter, "plotter", "", "directory of the examples/plot module (default: found from the working directory)")
	flag.IntVar(&c.rounds, "rounds", 31, "interleaved timing rounds; the lower quartile is reported")
	flag.IntVar(&c.seeds, "seeds", 3, "rings (server names and keys) averaged in the vnodes experiment")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./examples/compare [flags]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, c); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func (c config) check() error {
	switch {
	case c.keys < 1 && c.keyfile == "":
		return fmt.Errorf("-keys %d: want at least 1", c.keys)
	case c.shards < 1:
		return fmt.Errorf("-shards %d: want at least 1", c.shards)
	case c.vnodes < 1:
		return fmt.Errorf("-vnodes %d: want at least 1", c.vnodes)
	case c.keylen < 1:
		return fmt.Errorf("-keylen %d: want at least 1", c.keylen)
	case c.rounds < 1 || c.seeds < 1:
		return errors.New("-rounds and -seeds: want at least 1")
	case c.plot != "" && !strings.HasSuffix(c.plot, ".svg") && !strings.HasSuffix(c.plot, ".png"):
		return fmt.Errorf("-plot %q: want a file name ending in .svg or .png", c.plot)
	}
	return nil
}

// row is one strategy's measurements.
type row struct {
	name       string
	fits       bool
	ns, allocs float64
	bytes      int64
	bal        measure.Balance
	loads      []int
	grow, dbl  float64 // moved % on n -> n+1 and n -> 2n; NaN where the strategy cannot
}

func run(w io.Writer, c config) error {
	prog := newProgress()
	defer prog.done()
	prog.say("making the keys")
	keys, source, err := loadKeys(c)
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
	pool := keys[:min(len(keys), 1<<14)]

	strategies := catalog.All()
	rows := make([]*row, len(strategies))
	var timed []measure.Locator
	var timedRows []*row
	for i, st := range strategies {
		prog.say(fmt.Sprintf("placing %d keys: %s (%d of %d)", len(keys), st.Name, i+1, len(strategies)))
		r := &row{name: st.Name, grow: math.NaN(), dbl: math.NaN()}
		rows[i] = r
		if !st.Fits(n, opts) {
			continue
		}
		s, size, err := measure.HeapBytes(func() (shard.Sharder, error) { return st.New(n, opts) })
		if err != nil {
			return fmt.Errorf("%s with %d shards: %w", st.Name, n, err)
		}
		r.fits, r.bytes = true, size
		r.allocs = measure.AllocsPerLocate(s, pool)
		before := measure.Placement(s, keys)
		r.loads = measure.Loads(before, n)
		r.bal = measure.BalanceOf(r.loads)
		r.grow = movedPct(st, n, n+1, opts, keys, before)
		r.dbl = movedPct(st, n, 2*n, opts, keys, before)
		timed, timedRows = append(timed, s), append(timedRows, r)
	}
	prog.say(fmt.Sprintf("timing %d strategies, %d rounds", len(timed), c.rounds))
	for i, ns := range measure.Race(timed, pool, c.rounds, 2*time.Millisecond) {
		timedRows[i].ns = ns
	}

	var curve []measure.VnodesPoint
	prog.say(fmt.Sprintf("document 002: %d UUIDs x %d rings on the Murmur ring", len(keys), c.seeds))
	if curve, err = measure.VnodesCurve(10, measure.VnodesDefault, len(keys), c.seeds); err != nil {
		return err
	}
	prog.done()

	fmt.Fprintf(w, "Machine: %s\n", measure.Machine())
	fmt.Fprintf(w, "%d shards, %s; Murmur ring with %d vnodes per shard; time: lower quartile of %d interleaved rounds over %d of the keys\n\n",
		n, source, c.vnodes, c.rounds, len(pool))
	var t measure.Table
	t.Header = []string{"strategy", "ns/op", "allocs/op", "state bytes", "stddev %", "max/mean",
		fmt.Sprintf("moved %% %d->%d", n, n+1), fmt.Sprintf("moved %% %d->%d", n, 2*n)}
	for _, r := range rows {
		if !r.fits {
			t.Add(r.name, "n/a", "", "", "", "", "", fmt.Sprintf("(not for %d shards)", n))
			continue
		}
		t.Add(r.name, fmt.Sprintf("%.1f", r.ns), fmt.Sprintf("%.0f", r.allocs), fmt.Sprint(max(r.bytes, 0)),
			fmt.Sprintf("%.2f", r.bal.StddevPct), fmt.Sprintf("%.3f", r.bal.MaxMean), pct(r.grow), pct(r.dbl))
	}
	t.Add("ideal", "", "0", "", fmt.Sprintf("%.2f", measure.HashStddevPct(n, len(keys))), "1.000",
		pct(measure.IdealMovedPct(n, n+1)), pct(measure.IdealMovedPct(n, 2*n)))
	if _, err := t.WriteTo(w); err != nil {
		return err
	}
	fmt.Fprintf(w, `
ns/op: one Locate through the shard.Sharder interface. state bytes: heap the sharder keeps
after construction (live heap before and after New, each after a GC). stddev %%: standard
deviation of the per-shard key counts in %% of the mean; ideal: what a perfect random hash
shows on %d keys, sqrt((n-1)/keys). max/mean: the fullest shard over the mean. moved %%: keys
whose shard changes on Resize; ideal: the new shards' fair share, 1/(n+1) and 1/2.
`, len(keys))

	fmt.Fprintf(w, "\nDocument 002: Murmur ring, 10 shards, %d random UUIDs, deviation averaged over %d rings and key sets\n\n", len(keys), c.seeds)
	var vt measure.Table
	vt.Header = []string{"vnodes", "stddev (keys)", "stddev %"}
	for _, p := range curve {
		vt.Add(fmt.Sprint(p.Vnodes), fmt.Sprintf("%.0f", p.Stddev), fmt.Sprintf("%.2f", p.StddevPct))
	}
	if _, err := vt.WriteTo(w); err != nil {
		return err
	}

	if c.plot != "" {
		if err := plot(c, n, len(keys), rows, curve); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nChart written to %s\n", c.plot)
	}
	return nil
}

// loadKeys returns the keys to place and a phrase that says where they came from.
func loadKeys(c config) ([]string, string, error) {
	if c.keyfile == "" {
		return measure.Keys(1, c.keys, c.keylen), fmt.Sprintf("%d random %d-byte keys", c.keys, c.keylen), nil
	}
	f, err := os.Open(c.keyfile)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	keys, err := measure.ReadKeys(f)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", c.keyfile, err)
	}
	if len(keys) == 0 {
		return nil, "", fmt.Errorf("%s: no keys", c.keyfile)
	}
	return keys, fmt.Sprintf("%d keys from %s", len(keys), c.keyfile), nil
}

// movedPct builds the strategy with from shards, resizes it to to, and returns the share of
// keys that changed shard; NaN if the strategy cannot have to shards. before is the
// placement with from shards.
func movedPct(st catalog.Strategy, from, to int, opts catalog.Options, keys []string, before []int32) float64 {
	if !st.Fits(to, opts) {
		return math.NaN()
	}
	s, err := st.New(from, opts)
	if err != nil {
		return math.NaN()
	}
	if err := s.Resize(to); err != nil {
		return math.NaN()
	}
	return measure.MovedPct(before, measure.Placement(s, keys))
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

// plotData is what examples/plot reads on its standard input.
type plotData struct {
	Title  string      `json:"title"`
	Shards int         `json:"shards"`
	Keys   int         `json:"keys"`
	Loads  []plotLoads `json:"loads"`
	Vnodes *plotVnodes `json:"vnodes,omitempty"`
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

func plot(c config, n, nkeys int, rows []*row, curve []measure.VnodesPoint) error {
	d := plotData{Title: fmt.Sprintf("%d shards, %d keys", n, nkeys), Shards: n, Keys: nkeys}
	for _, r := range rows {
		if r.fits {
			d.Loads = append(d.Loads, plotLoads{r.name, r.loads})
		}
	}
	if curve != nil {
		d.Vnodes = &plotVnodes{Shards: 10, Keys: nkeys, Seeds: c.seeds, Points: curve}
	}
	return measure.DrawChart(c.plotter, d, c.plot)
}

// progress writes one self-overwriting status line to stderr, only when stderr is a
// terminal, so that redirected output stays clean.
type progress struct {
	on    bool
	start time.Time
	width int
}

func newProgress() *progress {
	fi, err := os.Stderr.Stat()
	return &progress{on: err == nil && fi.Mode()&os.ModeCharDevice != 0, start: time.Now()}
}

func (p *progress) say(msg string) {
	if !p.on {
		return
	}
	line := fmt.Sprintf("[%4.1fs] %s", time.Since(p.start).Seconds(), msg)
	fmt.Fprintf(os.Stderr, "\r%-*s", p.width, line)
	p.width = max(p.width, len(line))
}

func (p *progress) done() {
	if p.on && p.width > 0 {
		fmt.Fprintf(os.Stderr, "\r%*s\r", p.width, "")
		p.width = 0
	}
}
