package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"

	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

// The pools section of compare: every strategy of package pool over nodes of mixed weights
// (1, 2, 3, 4, 1, 2, ... over 10 and over 100 nodes): how close each node's share of the keys
// comes to weight/total, and how many keys move when a node in the middle leaves, when it
// comes back, and when a new node joins at the end, each next to the ideal.

// poolSizes are the pool sizes the section measures.
var poolSizes = []int{10, 100}

// poolWeight is the weight of node<i> in the section: 1, 2, 3, 4, 1, 2, ...
func poolWeight(i int) int { return 1 + i%4 }

// weightedNodes returns node<from> .. node<to-1> with the weights of poolWeight.
func weightedNodes(from, to int) []pool.Node {
	nodes := poolNodes(from, to)
	for i := range nodes {
		nodes[i].Weight = poolWeight(from + i)
	}
	return nodes
}

// poolsReport is the pools section.
type poolsReport struct {
	Keys  int        `json:"keys"`
	Sizes []int      `json:"sizes"`
	Rows  []poolsRow `json:"rows"`
	// Ideal holds, for each size, what a perfect strategy shows: no deviation but the keys'
	// sampling noise (WorstDevPct is one standard deviation of a weight-1 node's share) and,
	// for the moves, the node's fair share, weight/total.
	Ideal []poolsAt `json:"ideal"`
}

// poolsRow is one pool strategy, at each size of poolsReport.Sizes.
type poolsRow struct {
	Strategy string    `json:"strategy"`
	At       []poolsAt `json:"at"`
}

// poolsAt is one strategy's figures for one pool size.
type poolsAt struct {
	Nodes int `json:"nodes"`
	// WorstDevPct is the largest |share - weight/total| / (weight/total) over the nodes, in %;
	// MaxIdeal the largest share / (weight/total).
	WorstDevPct float64 `json:"worst_dev_pct"`
	MaxIdeal    float64 `json:"max_ideal"`
	// ExactWorstDevPct is WorstDevPct computed from the ring's arcs instead of the keys, free
	// of their sampling noise; rings only.
	ExactWorstDevPct *float64 `json:"exact_worst_dev_pct,omitempty"`
	// Middle is the node that leaves and rejoins, Joiner the one that joins at the end.
	Middle string `json:"middle"`
	Joiner string `json:"joiner"`
	// LeavePct is the keys that change node when Middle leaves, RejoinPct when it comes back
	// after that, JoinPct when Joiner joins the first pool; NotHomePct the keys that are not on
	// their first node after Middle left and came back.
	LeavePct   float64 `json:"leave_pct"`
	RejoinPct  float64 `json:"rejoin_pct"`
	JoinPct    float64 `json:"join_pct"`
	NotHomePct float64 `json:"not_home_pct"`
}

// poolVariant is a pool strategy as the section builds it.
type poolVariant struct {
	name string
	new  func(nodes []pool.Node) (pool.Pool, error)
}

// poolVariants returns every strategy of catalog.Pools with its default options, and the
// ring again with vnodes points per unit of weight, the Murmur ring's count.
func poolVariants(vnodes int) []poolVariant {
	var vs []poolVariant
	for _, ps := range catalog.Pools() {
		vs = append(vs, poolVariant{ps.Name + " pool", func(nodes []pool.Node) (pool.Pool, error) {
			return ps.New(nodes, catalog.Options{})
		}})
		if ps.Name == "ring" {
			vs = append(vs, poolVariant{fmt.Sprintf("ring pool, %d vnodes", vnodes), func(nodes []pool.Node) (pool.Pool, error) {
				return ps.New(nodes, catalog.Options{Vnodes: vnodes})
			}})
		}
	}
	return vs
}

// measurePools measures the section on keys, saying how far it got through say. The
// strategies and sizes are measured side by side, one per processor: each has its own pools.
func measurePools(keys []string, vnodes int, say func(string)) (*poolsReport, error) {
	rep := &poolsReport{Keys: len(keys), Sizes: poolSizes}
	for _, n := range poolSizes {
		rep.Ideal = append(rep.Ideal, idealPoolsAt(n, len(keys)))
	}
	vs := poolVariants(vnodes)
	type job struct{ v, s int }
	jobs := make(chan job)
	done := make(chan error)
	ats := make([][]poolsAt, len(vs))
	for i := range ats {
		ats[i] = make([]poolsAt, len(poolSizes))
	}
	workers := min(runtime.GOMAXPROCS(0), len(vs)*len(poolSizes))
	for range workers {
		go func() {
			for j := range jobs {
				var err error
				ats[j.v][j.s], err = measurePoolAt(vs[j.v], poolSizes[j.s], keys)
				done <- err
			}
		}()
	}
	go func() {
		for v := range vs {
			for s := range poolSizes {
				jobs <- job{v, s}
			}
		}
		close(jobs)
	}()
	var first error
	total := len(vs) * len(poolSizes)
	for i := range total {
		if err := <-done; err != nil && first == nil {
			first = err
		}
		say(fmt.Sprintf("pools with weights 1..4: %d of %d strategies and sizes measured", i+1, total))
	}
	if first != nil {
		return nil, first
	}
	for i, v := range vs {
		rep.Rows = append(rep.Rows, poolsRow{Strategy: v.name, At: ats[i]})
	}
	return rep, nil
}

// idealPoolsAt is the ideal row for n nodes and the given number of keys.
func idealPoolsAt(n, keys int) poolsAt {
	total := totalWeight(n)
	p := 1 / float64(total) // a node of weight 1
	mid, joiner := n/2, n
	fair := func(w, of int) float64 { return 100 * float64(w) / float64(of) }
	return poolsAt{Nodes: n, WorstDevPct: 100 * math.Sqrt((1-p)/(float64(keys)*p)), MaxIdeal: 1,
		Middle: "node" + strconv.Itoa(mid), Joiner: "node" + strconv.Itoa(joiner),
		LeavePct: fair(poolWeight(mid), total), RejoinPct: fair(poolWeight(mid), total),
		JoinPct: fair(poolWeight(joiner), total+poolWeight(joiner))}
}

func totalWeight(n int) int {
	t := 0
	for i := range n {
		t += poolWeight(i)
	}
	return t
}

// measurePoolAt measures v over n weighted nodes.
func measurePoolAt(v poolVariant, n int, keys []string) (poolsAt, error) {
	at := poolsAt{Nodes: n}
	fail := func(what string, err error) (poolsAt, error) {
		return at, fmt.Errorf("%s of %d nodes, weights 1..4: %s: %w", v.name, n, what, err)
	}
	p, err := v.new(weightedNodes(0, n))
	if err != nil {
		return fail("new", err)
	}
	before := measure.Placement(poolIndex{p}, keys)
	loads := measure.Loads(before, n)
	total := float64(totalWeight(n))
	for i, l := range loads {
		fair := float64(poolWeight(i)) / total
		share := float64(l) / float64(len(keys)) / fair
		at.WorstDevPct = max(at.WorstDevPct, 100*math.Abs(share-1))
		at.MaxIdeal = max(at.MaxIdeal, share)
	}
	if r, ok := p.(*pool.Ring); ok {
		exact := ringWorstDevPct(r, total)
		at.ExactWorstDevPct = &exact
	}

	mid := weightedNodes(n/2, n/2+1)[0]
	at.Middle = mid.Name
	if err := p.Remove(mid.Name); err != nil {
		return fail("remove "+mid.Name, err)
	}
	left := measure.Placement(poolIndex{p}, keys)
	at.LeavePct = measure.MovedPct(before, left)
	if err := p.Add(mid); err != nil {
		return fail("add "+mid.Name+" back", err)
	}
	back := measure.Placement(poolIndex{p}, keys)
	at.RejoinPct = measure.MovedPct(left, back)
	at.NotHomePct = measure.MovedPct(before, back)

	// A new pool for the join: some strategies (Memento) remember the history above.
	q, err := v.new(weightedNodes(0, n))
	if err != nil {
		return fail("new", err)
	}
	joiner := weightedNodes(n, n+1)[0]
	at.Joiner = joiner.Name
	if err := q.Add(joiner); err != nil {
		return fail("add "+joiner.Name, err)
	}
	at.JoinPct = measure.MovedPct(before, measure.Placement(poolIndex{q}, keys))
	return at, nil
}

// ringWorstDevPct is the largest relative deviation of a node's share of the circle (the
// arcs it owns) from weight/total, in %: a ring's shares without the keys' sampling noise.
func ringWorstDevPct(r *pool.Ring, total float64) float64 {
	owned := map[string]float64{}
	for a := range r.Arcs() {
		owned[a.Node] += (float64(a.Last-a.First) + 1) / math.Exp2(64)
	}
	worst := 0.0
	for _, nd := range r.Nodes() {
		fair := float64(nd.Weight) / total
		worst = max(worst, 100*math.Abs(owned[nd.Name]/fair-1))
	}
	return worst
}

func (rep *poolsReport) write(w io.Writer) error {
	fmt.Fprintf(w, "\nNamed pools (package pool): nodes node0, node1, ... of weights 1, 2, 3, 4, 1, 2, ..., %d keys\n\n", rep.Keys)
	var bt measure.Table
	bt.Header = []string{"strategy"}
	for _, n := range rep.Sizes {
		bt.Header = append(bt.Header, fmt.Sprintf("%d nodes: worst dev %%", n), "max/ideal", "exact worst dev %")
	}
	for _, r := range rep.Rows {
		cells := []string{r.Strategy}
		for _, at := range r.At {
			cells = append(cells, fmt.Sprintf("%.2f", at.WorstDevPct), fmt.Sprintf("%.3f", at.MaxIdeal), pct(at.ExactWorstDevPct))
		}
		bt.Add(cells...)
	}
	cells := []string{"ideal"}
	for _, at := range rep.Ideal {
		cells = append(cells, fmt.Sprintf("(%.2f)", at.WorstDevPct), "1.000", "0.00")
	}
	bt.Add(cells...)
	if _, err := bt.WriteTo(w); err != nil {
		return err
	}
	fmt.Fprintf(w, `
worst dev %%: the largest relative deviation of a node's share of the keys from its fair
share weight/total, |share/fair - 1|; max/ideal: the largest share/fair. exact: the same from
the arcs a ring's nodes own, free of the keys' sampling noise (n/a: the strategy has no
arcs). ideal (in brackets): the keys' own noise, one standard deviation of a weight-1 node's
share, sqrt((1-p)/(keys p)) relative with p = 1/total; a perfect strategy's worst node over
many nodes lies two to three of those out.

`)
	var mt measure.Table
	mt.Header = []string{"strategy"}
	for _, at := range rep.Ideal {
		mt.Header = append(mt.Header, fmt.Sprintf("%d nodes: %s leaves", at.Nodes, at.Middle), "rejoins", "not home", at.Joiner+" joins")
	}
	for _, r := range rep.Rows {
		cells := []string{r.Strategy}
		for _, at := range r.At {
			cells = append(cells, fmt.Sprintf("%.2f", at.LeavePct), fmt.Sprintf("%.2f", at.RejoinPct),
				fmt.Sprintf("%.2f", at.NotHomePct), fmt.Sprintf("%.2f", at.JoinPct))
		}
		mt.Add(cells...)
	}
	cells = []string{"ideal"}
	for _, at := range rep.Ideal {
		cells = append(cells, fmt.Sprintf("%.2f", at.LeavePct), fmt.Sprintf("%.2f", at.RejoinPct), "0.00", fmt.Sprintf("%.2f", at.JoinPct))
	}
	mt.Add(cells...)
	if _, err := mt.WriteTo(w); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, `
Keys moved, in %: when the middle node leaves the pool; when it rejoins after that (against
the pool without it); not home: keys not on the node they had before it left and came back;
when a new node joins at the end of the first pool. ideal: the node's fair share,
weight/total (a strategy that moves only keys to or from that node moves its actual share,
which for a ring differs from the fair one by its arcs' spread).
`)
	return err
}

// plotPools is the pools section as examples/plot draws it: two panels, the worst deviation
// at each size next to the keys' noise, and each change's keys moved over its ideal.
type plotPools struct {
	Title      string           `json:"title"`
	Strategies []string         `json:"strategies"`
	Balance    []plotPoolSeries `json:"balance"`
	Moved      []plotPoolSeries `json:"moved"`
}

type plotPoolSeries struct {
	Name   string    `json:"name"`
	Values []float64 `json:"values"`
	Ideal  float64   `json:"ideal"`
}

func (rep *poolsReport) plot() *plotPools {
	d := &plotPools{Title: fmt.Sprintf("weights 1..4, %d keys", rep.Keys)}
	for _, r := range rep.Rows {
		d.Strategies = append(d.Strategies, r.Strategy)
	}
	for s, ideal := range rep.Ideal {
		bal := plotPoolSeries{Name: fmt.Sprintf("%d nodes", ideal.Nodes), Ideal: ideal.WorstDevPct}
		leave := plotPoolSeries{Name: fmt.Sprintf("%d nodes: %s leaves", ideal.Nodes, ideal.Middle), Ideal: 1}
		join := plotPoolSeries{Name: fmt.Sprintf("%d nodes: %s joins", ideal.Nodes, ideal.Joiner), Ideal: 1}
		for _, r := range rep.Rows {
			at := r.At[s]
			bal.Values = append(bal.Values, at.WorstDevPct)
			leave.Values = append(leave.Values, at.LeavePct/ideal.LeavePct)
			join.Values = append(join.Values, at.JoinPct/ideal.JoinPct)
		}
		d.Balance = append(d.Balance, bal)
		d.Moved = append(d.Moved, leave, join)
	}
	return d
}
