package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
	"github.com/shardkit/shard/pool/bounded"
)

// The skew section of compare (-zipf S): requests, not keys. As many requests as keys, each
// for the key of rank r with probability proportional to 1/r^S (Zipf; the keys in the order
// given), and for every strategy the fullest shard's requests over the average; for the
// pools also with bounded loads (package pool/bounded, c = 1.25, every request held as one
// unit of load, as connections are), and the requests that the bound sends away from their
// key's owner.

// skewFactor is the balancing factor of the bounded column: HAProxy's and Vimeo's 125%.
const skewFactor = 1.25

// maxZipf is the largest -zipf: above it all requests are for the first few keys.
const maxZipf = 100

// skewReport is the skew section.
type skewReport struct {
	S        float64 `json:"s"`
	Requests int     `json:"requests"`
	Factor   float64 `json:"factor"`
	// HottestPct is the share of the requests for the hottest key, in %; StickyFloor the
	// hottest key's requests over the average per shard: no placement that keeps each key on
	// one shard can have its fullest shard below max(1, StickyFloor).
	HottestPct  float64   `json:"hottest_pct"`
	StickyFloor float64   `json:"sticky_floor"`
	Rows        []skewRow `json:"rows"`
	requests    []string  // the stream
	shards      int
}

// skewRow is one strategy's figures.
type skewRow struct {
	Strategy string  `json:"strategy"`
	MaxAvg   float64 `json:"max_avg"`
	// BoundedMaxAvg and OffOwnerPct are the pools' figures with bounded loads; null for the
	// dense strategies, which have no preference order past the owner.
	BoundedMaxAvg *float64 `json:"bounded_max_avg"`
	OffOwnerPct   *float64 `json:"off_owner_pct"`
}

// newSkew draws the requests: len(keys) of them, over keys by Zipf(s), from a fixed seed.
func newSkew(keys []string, s float64, shards int) *skewReport {
	r := rand.New(rand.NewPCG(25, math.Float64bits(s)))
	z := rand.NewZipf(r, s, 1, uint64(len(keys)-1))
	rep := &skewReport{S: s, Requests: len(keys), Factor: skewFactor, requests: make([]string, len(keys)), shards: shards}
	counts := map[uint64]int{}
	hottest := 0
	for i := range rep.requests {
		k := z.Uint64()
		rep.requests[i] = keys[k]
		counts[k]++
		hottest = max(hottest, counts[k])
	}
	rep.HottestPct = 100 * float64(hottest) / float64(len(keys))
	rep.StickyFloor = float64(hottest) * float64(shards) / float64(len(keys))
	return rep
}

// addDense measures a dense strategy.
func (rep *skewReport) addDense(name string, s shard.Sharder) {
	loads := make([]int, rep.shards)
	for _, k := range rep.requests {
		loads[s.Locate(k)]++
	}
	rep.Rows = append(rep.Rows, skewRow{Strategy: name, MaxAvg: maxOverAvg(loads, len(rep.requests))})
}

// addPool measures a pool, plain and with bounded loads.
func (rep *skewReport) addPool(name string, p pool.Pool) error {
	at := map[string]int{}
	for i, n := range p.Nodes() {
		at[n.Name] = i
	}
	plain := make([]int, len(at))
	for _, k := range rep.requests {
		plain[at[p.Locate(k)]]++
	}
	b, err := bounded.New(p, bounded.Options{Factor: skewFactor})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	held, off := make([]int, len(at)), 0
	for _, k := range rep.requests {
		l, err := b.Acquire(k)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		held[at[l.Node()]]++
		if l.Node() != p.Locate(k) {
			off++
		}
	}
	bmax := maxOverAvg(held, len(rep.requests))
	offPct := 100 * float64(off) / float64(len(rep.requests))
	rep.Rows = append(rep.Rows, skewRow{Strategy: name, MaxAvg: maxOverAvg(plain, len(rep.requests)), BoundedMaxAvg: &bmax, OffOwnerPct: &offPct})
	return nil
}

func maxOverAvg(loads []int, total int) float64 {
	m := 0
	for _, l := range loads {
		m = max(m, l)
	}
	return float64(m) * float64(len(loads)) / float64(total)
}

func (rep *skewReport) write(w io.Writer) error {
	fmt.Fprintf(w, "\nSkew: %d requests, Zipf(%g) over the keys in the order given; the hottest key has %.2f%% of them\n\n",
		rep.Requests, rep.S, rep.HottestPct)
	var t measure.Table
	t.Header = []string{"strategy", "max/avg", fmt.Sprintf("max/avg bounded c=%g", rep.Factor), "off owner %"}
	for _, r := range rep.Rows {
		if r.BoundedMaxAvg == nil {
			t.Add(r.Strategy, fmt.Sprintf("%.3f", r.MaxAvg), "n/a", "")
			continue
		}
		t.Add(r.Strategy, fmt.Sprintf("%.3f", r.MaxAvg), fmt.Sprintf("%.3f", *r.BoundedMaxAvg), fmt.Sprintf("%.2f", *r.OffOwnerPct))
	}
	limit := math.Ceil(rep.Factor*float64(rep.Requests)/float64(rep.shards)) * float64(rep.shards) / float64(rep.Requests)
	t.Add("ideal", "1.000", fmt.Sprintf("%.3f", limit), "")
	t.Add("one shard a key", fmt.Sprintf("%.3f", max(1, rep.StickyFloor)), "", "")
	if _, err := t.WriteTo(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, `
max/avg: the requests of the fullest shard over the average. one shard a key: no placement that
keeps every key on one shard goes below max(1, the hottest key's requests over the average).
bounded: package pool/bounded's Balancer over the pool, every request acquired and held, so
no node passes ceil(%g × the average); ideal: that cap. off owner %%: the requests it sends
past their key's owner, the locality the bound costs. Dense strategies have no order past the
owner (n/a).
`, rep.Factor)
	return err
}
