// Command peers compares this library's strategies with the Go packages people use for the
// same job, on the same keys in one process: ns per lookup, allocations, balance and the keys
// a resize moves, and the speed ratio of ours to the best peer of the same kind. It ends with
// the library's speed targets, each marked pass or miss.
//
//	go -C benchmarks/peers run . [-keys 1000000] [-shards 10] [-rounds 31] [-only ring,rendezvous]
//
// Timing is the lower quartile of many short interleaved rounds (see measure.Race), so that
// a machine shared with other work disturbs every contestant alike; read ratios, not absolutes.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/shardkit/shard/measure"
)

func main() {
	keys := flag.Int("keys", 1_000_000, "random keys for the balance and movement columns")
	shards := flag.Int("shards", 10, "shard count")
	keylen := flag.Int("keylen", 16, "key length in bytes")
	pool := flag.Int("pool", 1<<14, "distinct keys in the timing loop")
	vnodes := flag.Int("vnodes", 160, "points per shard for every ring that lets its user choose (ours and peers)")
	rounds := flag.Int("rounds", 31, "interleaved timing rounds; the lower quartile is reported")
	minDur := flag.Duration("mindur", 2*time.Millisecond, "length of one timing measurement")
	only := flag.String("only", "", "comma-separated kinds (ring, rendezvous, jump, ...) to run, all if empty: at 10000 shards some peers take minutes to build")
	flag.Parse()
	if *keys < 1 || *shards < 1 || *keylen < 0 || *pool < 1 || *vnodes < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "peers: -keys, -shards, -pool, -vnodes and -rounds must be at least 1, -keylen at least 0")
		os.Exit(2)
	}
	if err := run(os.Stdout, *keys, *shards, *keylen, *pool, *vnodes, *rounds, *minDur, *only); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

type result struct {
	c        contestant
	ok       bool // false when the strategy cannot have this many shards
	ns       float64
	allocs   float64
	bal      measure.Balance
	movedPct float64 // on shards -> shards+1; NaN if the strategy cannot grow that far
}

func run(w io.Writer, nkeys, n, keylen, pool, vnodes, rounds int, minDur time.Duration, only string) error {
	timingKeys := measure.Keys(1, pool, keylen)
	qualityKeys := measure.Keys(2, nkeys, keylen)

	var results []*result
	var live []measure.Locator
	var liveRes []*result
	for _, c := range contestants(vnodes) {
		if only != "" && !slices.Contains(strings.Split(only, ","), c.kind) {
			continue
		}
		r := &result{c: c, movedPct: math.NaN()}
		results = append(results, r)
		if c.maxShards > 0 && n > c.maxShards {
			continue // too slow to build this large
		}
		l, err := c.build(n)
		if err != nil {
			continue // e.g. first-byte SHA-1 above 10 shards
		}
		r.ok = true
		r.allocs = measure.AllocsPerLocate(l, timingKeys)
		before := measure.Placement(l, qualityKeys)
		r.bal = measure.BalanceOf(measure.Loads(before, n))
		// Time on a locator of its own, so the resize below cannot touch it.
		t, err := c.build(n)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		live, liveRes = append(live, t), append(liveRes, r)
		if g, err := c.resize(l, n+1); err == nil {
			r.movedPct = measure.MovedPct(before, measure.Placement(g, qualityKeys))
		}
	}
	ns := measure.Race(live, timingKeys, rounds, minDur)
	for i, r := range liveRes {
		r.ns = ns[i]
	}

	fmt.Fprintf(w, "Machine: %s\n", measure.Machine())
	fmt.Fprintf(w, "%d shards; timing: %d keys of %d bytes, lower quartile of %d interleaved rounds; balance and movement: %d keys; rings with a choice: %d points per shard\n\n",
		n, pool, keylen, rounds, nkeys, vnodes)

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
		if b := best[r.c.kind]; r.c.ours && b != nil {
			ratio = fmt.Sprintf("%.2fx %s", r.ns/b.ns, b.c.name)
		}
		t.Add(r.c.name, r.c.kind, fmt.Sprintf("%.1f", r.ns), fmt.Sprintf("%.0f", r.allocs),
			fmt.Sprintf("%.2f", r.bal.StddevPct), fmt.Sprintf("%.3f", r.bal.MaxMean), pct(r.movedPct), ratio)
	}
	t.Add("ideal", "", "", "0", fmt.Sprintf("%.2f", measure.HashStddevPct(n, nkeys)), "1.000",
		pct(measure.IdealMovedPct(n, n+1)), "")
	if _, err := t.WriteTo(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nideal: stddev %% is what a perfect random hash shows on %d keys (sqrt((n-1)/keys)); moved %% is 1/(n+1), the new shard's fair share.\n", nkeys)

	fmt.Fprintf(w, "\nTargets at %d shards (ours / peer ns per lookup):\n\n", n)
	var tt measure.Table
	tt.Header = []string{"ours", "peer", "ratio", "target", "result"}
	for _, tg := range targets {
		o, p := find(results, tg.ours), find(results, tg.peer)
		switch {
		case o == nil:
			tt.Add(tg.ours, tg.peer, "", fmt.Sprintf("<= %.2fx", tg.max), "absent (not in this tree)")
		case !o.ok || p == nil || !p.ok:
			tt.Add(tg.ours, tg.peer, "", fmt.Sprintf("<= %.2fx", tg.max), "n/a")
		default:
			ratio := o.ns / p.ns
			verdict := "pass"
			if ratio > tg.max {
				verdict = fmt.Sprintf("MISS by %.0f%%", 100*(ratio/tg.max-1))
			}
			tt.Add(tg.ours, tg.peer, fmt.Sprintf("%.2fx", ratio), fmt.Sprintf("<= %.2fx", tg.max), verdict)
		}
	}
	_, err := tt.WriteTo(w)
	return err
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
