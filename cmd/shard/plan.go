package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
	"github.com/shardkit/shard/rebalance"
)

var planVerb = &verb{
	name:    "plan",
	args:    "[flags] (placement flags, then one change)",
	summary: "show what a change moves: resize, add, remove or reweight a node, config A -> B",
	about: `
Plan places a sample of keys before and after one change and prints the share of keys that
move, the least share any placement could move for that change, and how many keys go from
each shard or node to each other one. Where both sides are partition tables, trie shapes or
rings, it also prints the exact plan: which partitions, or which ranges of key hashes or of
ring positions, move where, with the exact share next to the sample's. Rings are murmur-ring
and jedis-ring, ring pools and the presets built on a ring (ketama, nginx and HAProxy
consistent, Jedis); a ring's position of a key is its hash as that ring reads it.

The placement before is given as for locate. The change is one of:
  -to N                                 resize a dense strategy or a saved table to N shards
  -add LIST, -remove NAMES, -weight N:W change a pool's members (pools and presets)
  -to-strategy, -to-n, -to-nodes, -to-preset, -to-config, -to-pool, -to-table
                                        any other placement: flags not given keep their value

  shard plan -strategy jump -n 10 -to 11
  shard plan -strategy partitions -n 10 -to 12 -keys 1000000
  shard plan -strategy ring -nodes a,b,c -add d -ranges 200
  shard plan -strategy modulo -n 10 -to-strategy jump
  shard plan -table before.txt -to-table after.txt -keyfile keys.txt

Its memory grows with the keys planned (and the flows between owners), not with the shard
count: jump or modulo at n = 2147483647 plan as fast as at n = 10. Progress shows on stderr
when it is a terminal; with stderr redirected, plan says nothing until it is done.

Limits: -keys at most 10000000; a -keyfile (or stdin) at most 10000000 keys and 2^28
bytes, each key at most 65536 bytes. Rendezvous visits every shard or node for each key:
plan makes at most 2^32 visits (-keys times the shards or nodes before and after). At most
1048576 distinct flows are listed; the totals count every key. A -config or -table file is
at most 16 MiB, each line at most 1 MiB; a node's weight is 1 to 65536 (0 is refused:
-remove a node to drain it).`,
	names: true,
	flags: func(fs *flag.FlagSet) func(*env, []string) error {
		var c planChange
		c.before.define(fs)
		c.keys.define(fs, 100_000, planKeyLimits)
		intFlag(fs, &c.to, "to", 0, maxShardCount, "resize to `N` shards")
		fs.StringVar(&c.add, "add", "", "add pool members, a `LIST` of name[:weight],...")
		fs.StringVar(&c.remove, "remove", "", "remove the pool members `NAMES`, name,...")
		fs.StringVar(&c.weight, "weight", "", "set a pool member's weight, `NAME:WEIGHT`")
		fs.StringVar(&c.after.strategy, "to-strategy", "", "the strategy after")
		intFlag(fs, &c.after.n, "to-n", 0, maxShardCount, "the shard `count` of the placement after, built anew (-to resizes the one before)")
		fs.StringVar(&c.after.nodes, "to-nodes", "", "the pool members after")
		fs.StringVar(&c.after.preset, "to-preset", "", "the preset after")
		fs.StringVar(&c.after.config, "to-config", "", "the preset's configuration after")
		fs.StringVar(&c.after.group, "to-pool", "", "the pool of the configuration after")
		fs.StringVar(&c.after.table, "to-table", "", "the saved table after")
		intFlag(fs, &c.flows, "flows", 50, maxShown, "print at most `N` flows, the largest (-json prints them all)")
		intFlag(fs, &c.ranges, "ranges", 20, maxShown, "print at most `N` ranges of a range plan, the largest (-json prints them all)")
		asJSON := fs.Bool("json", false, "print the plan as one JSON object")
		return func(e *env, args []string) error {
			rest, err := parse(fs, args)
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return badUsage("unexpected argument %.80q: plan takes flags only", rest[0])
			}
			if err := c.keys.check(); err != nil {
				return err
			}
			if c.flows < 0 {
				return badUsage("-flows %d: want 0 or more", c.flows)
			}
			if c.ranges < 0 {
				return badUsage("-ranges %d: want 0 or more", c.ranges)
			}
			var badCount *flag.Flag // -to or -to-n given below 1
			fs.Visit(func(f *flag.Flag) {
				if strings.HasPrefix(f.Name, "to-") {
					c.other = true
				}
				if n, _ := strconv.Atoi(f.Value.String()); (f.Name == "to" || f.Name == "to-n") && n < 1 {
					badCount = f
				}
			})
			if badCount != nil {
				return badUsage("-%s %s: want the number of shards, at least 1", badCount.Name, badCount.Value)
			}
			rep, err := c.run(e)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(e.stdout, rep)
			}
			return rep.write(e.stdout, c.flows, c.ranges)
		}
	},
}

// planChange is plan's flags: the placement before and the one change.
type planChange struct {
	before, after       spec
	other               bool // a -to-X flag was given: after is another placement
	to                  int
	add, remove, weight string
	keys                sample
	flows, ranges       int // how many flows and ranges the text shows
}

// build returns the placements before and after the change.
func (c *planChange) build() (before, after *placement, err error) {
	changes := 0
	for _, given := range []bool{c.other, c.to != 0, c.add != "", c.remove != "", c.weight != ""} {
		if given {
			changes++
		}
	}
	switch {
	case changes == 0:
		return nil, nil, badUsage("nothing changes: give -to N, -add, -remove, -weight or a -to-X flag")
	case changes > 1 && !(c.other && c.to != 0):
		return nil, nil, badUsage("give one change: -to N, -add, -remove, -weight or -to-X flags")
	}
	if before, err = c.before.build(); err != nil {
		return nil, nil, err
	}
	if c.other {
		if c.to != 0 {
			c.after.n = c.to
		}
		a := c.before.with(c.after)
		after, err = a.build()
	} else {
		// The same placement again, then the change: for a partition table, a trie or a
		// Memento pool what moves depends on the state, not only on the counts.
		if after, err = c.before.build(); err == nil {
			err = c.apply(after)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if (before.pool == nil) != (after.pool == nil) {
		return nil, nil, badUsage("%s -> %s: shard numbers and node names cannot be compared: plan a change within one kind", before.what(), after.what())
	}
	return before, after, nil
}

// with returns s changed by the fields that o sets; a field of another form clears those
// of s, so that after -to-nodes the -n of before does not count.
func (s spec) with(o spec) spec {
	switch {
	case o.table != "":
		s = spec{table: o.table}
	case o.preset != "" || o.config != "" || o.group != "":
		if s.preset == "" || o.preset != "" {
			s = spec{preset: cmp.Or(o.preset, s.preset), config: s.config, group: s.group}
		}
	case o.nodes != "":
		s.n, s.table, s.preset = 0, "", ""
	case o.n != 0:
		s.nodes, s.table, s.preset = "", "", ""
	}
	s.strategy = cmp.Or(o.strategy, s.strategy)
	s.n = cmp.Or(o.n, s.n)
	s.nodes = cmp.Or(o.nodes, s.nodes)
	s.config = cmp.Or(o.config, s.config)
	s.group = cmp.Or(o.group, s.group)
	return s
}

// apply makes the one change of -to, -add, -remove or -weight to p.
func (c *planChange) apply(p *placement) error {
	if c.to != 0 {
		if p.pool != nil {
			return badUsage("-to %d: a pool's size is its nodes: use -add or -remove", c.to)
		}
		if err := p.dense.Resize(c.to); err != nil {
			return usageError{err}
		}
		p.change = fmt.Sprintf("-to %d", c.to)
		return nil
	}
	if p.pool == nil {
		return badUsage("-add, -remove and -weight change a pool: this is %s", p.what())
	}
	var err error
	switch {
	case c.add != "":
		p.change = "-add " + c.add
		var nodes []pool.Node
		if nodes, err = parseNodes(c.add); err == nil {
			err = p.pool.Add(nodes...)
		}
	case c.remove != "":
		p.change = "-remove " + c.remove
		err = p.pool.Remove(strings.Split(c.remove, ",")...)
	default:
		p.change = "-weight " + c.weight
		var nodes []pool.Node
		if nodes, err = parseNodes(c.weight); err == nil {
			if len(nodes) != 1 || !strings.Contains(c.weight, ":") {
				return badUsage("-weight %.80q: want one name:weight", c.weight)
			}
			err = p.pool.SetWeight(nodes[0].Name, nodes[0].Weight)
		}
	}
	var u usageError
	if err != nil && !errors.As(err, &u) {
		err = usageError{err}
	}
	return err
}

// planReport is what plan prints, in text or as JSON.
type planReport struct {
	Before   string  `json:"before"`
	After    string  `json:"after"`
	Keys     string  `json:"keys"`
	Total    int64   `json:"total"`
	Moved    int64   `json:"moved"`
	Fraction float64 `json:"fraction"`
	// Least is the smallest share of keys that any placement with the same shares per
	// shard or node before and after must move.
	Least      float64        `json:"least"`
	Flows      []planFlow     `json:"flows"`
	Partitions *partitionPlan `json:"partitions,omitempty"`
	Ranges     *rangePlan     `json:"ranges,omitempty"`
	Notes      []string       `json:"notes,omitempty"`
	owners     *owners        // numbers and labels the owners in the flows
}

// planFlow is how many keys of the sample go from one shard or node to another; flows with
// From == To count the keys that stay.
type planFlow struct {
	From  any   `json:"from"` // a shard number, or a node name
	To    any   `json:"to"`
	Count int64 `json:"count"`
}

type partitionPlan struct {
	Partitions int       `json:"partitions"`
	Moved      int       `json:"moved"`
	Fraction   float64   `json:"fraction"`
	Runs       []partRun `json:"runs"` // consecutive partitions with the same move
}

type partRun struct {
	First int `json:"first"`
	Last  int `json:"last"`
	From  int `json:"from"`
	To    int `json:"to"`
}

// rangePlan is an exact plan by ranges of hashes: of the key hashes that trie leaves split
// (XXH64), or of a ring's positions (its Position of a key).
type rangePlan struct {
	Source   string      `json:"source"`   // "trie shapes" or "ring arcs"
	Fraction float64     `json:"fraction"` // the share of the hashes that move
	Ranges   []hashRange `json:"ranges"`
}

type hashRange struct {
	First    string  `json:"first"` // hex
	Last     string  `json:"last"`
	From     any     `json:"from"` // a shard number, or a node name
	To       any     `json:"to"`
	Fraction float64 `json:"fraction"`
}

// maxPlanRanges is the most ranges of a range plan the report holds, the largest: a ring of 4
// million points has as many, and -json would print hundreds of megabytes.
const maxPlanRanges = 1 << 20

// newRangePlan returns plan as the report shows it, its shards named by owner, with at most
// maxPlanRanges ranges, the largest (and a note in notes when there are more).
func newRangePlan(source string, plan *rebalance.LeafPlan, owner func(int) any, notes *[]string) *rangePlan {
	ranges := plan.Ranges
	if len(ranges) > maxPlanRanges {
		ranges = largest(ranges, maxPlanRanges, rebalance.HashRange.Fraction)
		*notes = append(*notes, fmt.Sprintf("%d ranges move: the plan holds the %d largest, and its share counts them all", len(plan.Ranges), maxPlanRanges))
	}
	rp := &rangePlan{Source: source, Fraction: plan.Fraction(), Ranges: make([]hashRange, 0, len(ranges))}
	for _, r := range ranges {
		rp.Ranges = append(rp.Ranges, hashRange{First: fmt.Sprintf("%#016x", r.First), Last: fmt.Sprintf("%#016x", r.Last),
			From: owner(r.From), To: owner(r.To), Fraction: r.Fraction()})
	}
	return rp
}

func (c *planChange) run(e *env) (*planReport, error) {
	before, after, err := c.build()
	if err != nil {
		return nil, err
	}
	if perKey := int64(locateCost(before) + locateCost(after)); c.keys.file == "" && int64(c.keys.count)*perKey > maxPlanVisits {
		return nil, badUsage("-keys %d: rendezvous visits every shard or node, %d a key here: want -keys at most %d (%d visits)",
			c.keys.count, perKey, maxPlanVisits/perKey, int64(maxPlanVisits))
	}
	keys, what, closeKeys, err := c.keys.open(e)
	if err != nil {
		return nil, err
	}
	defer closeKeys()
	prog := newProgress(e)
	defer prog.done()
	rep := &planReport{Before: before.what(), After: after.what(), Keys: what, owners: newOwners(before, after)}
	if err := rep.count(before, after, keys, prog); err != nil {
		return nil, err
	}
	rep.Least = leastMoved(rep.owners.shares(before), rep.owners.shares(after))
	rep.exactPlan(before, after)
	return rep, nil
}

// count places every key before and after and counts the flows with rebalance.PlanKeys,
// pools through the owners' numbers. Where the shard counts allow more than maxFlowPairs
// distinct flows, it counts them itself and lists at most that many, so that its memory
// stays bounded whatever the keys (jump from 2^31-1 shards to 1 makes a flow of every key).
func (rep *planReport) count(before, after *placement, keys iter.Seq2[string, error], prog *progress) error {
	var readErr error
	perKey := int64(locateCost(before) + locateCost(after))
	seq := func(yield func(string) bool) {
		n := 0
		for k, err := range keys {
			if err != nil {
				readErr = err
				return
			}
			n++
			if int64(n)*perKey > maxPlanVisits {
				readErr = fmt.Errorf("%s: more than %d keys: %s and %s visit %d shards or nodes a key, and plan visits at most %d: %w",
					rep.Keys, maxPlanVisits/perKey, before.what(), after.what(), perKey, int64(maxPlanVisits), errLimit)
				return
			}
			prog.count("placing", n)
			if !yield(k) {
				return
			}
		}
	}
	b, a := rep.owners.sharder(before), rep.owners.sharder(after)
	var plan *rebalance.Plan
	var unlisted int64
	if uint64(b.Shards())*uint64(a.Shards()) <= uint64(maxFlowPairs) {
		plan = rebalance.PlanKeys(b, a, seq)
	} else {
		plan, unlisted = planCapped(b, a, seq)
	}
	if readErr != nil {
		return readErr
	}
	if plan.Total == 0 {
		return fmt.Errorf("%s: no keys", rep.Keys)
	}
	for _, f := range plan.Flows {
		rep.Flows = append(rep.Flows, planFlow{From: rep.owners.label(f.From), To: rep.owners.label(f.To), Count: f.Count})
	}
	rep.Total, rep.Moved = plan.Total, plan.Moved()+unlisted
	rep.Fraction = float64(rep.Moved) / float64(rep.Total)
	if unlisted > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d moved keys are counted but not listed in the flows: plan lists the first %d distinct flows", unlisted, maxFlowPairs))
	}
	return nil
}

// maxFlowPairs is the most distinct (from, to) flows plan lists (a variable for the tests).
var maxFlowPairs = 1 << 20

// maxPlanVisits bounds the work of plan: the keys times the shards or nodes that a Locate
// before and after visits, which is the shard or node count for rendezvous, a few for the
// others. At one or two nanoseconds a visit, it is a few seconds.
const maxPlanVisits = 1 << 32

// locateCost is the shards or nodes one Locate of p visits: all of them for rendezvous, one
// (a hash, a table or a search) for the other strategies.
func locateCost(p *placement) int {
	switch p.dense.(type) {
	case *shard.Rendezvous:
		return p.dense.Shards()
	}
	if _, ok := p.pool.(*pool.Rendezvous); ok {
		return len(p.pool.Nodes())
	}
	return 1
}

// planCapped is rebalance.PlanKeys with at most maxFlowPairs flows: a key of another flow is
// counted in the total, and returned apart if it moves (a key that stays is in no flow that
// the report shows).
func planCapped(before, after shard.Sharder, keys iter.Seq[string]) (plan *rebalance.Plan, unlisted int64) {
	type pair struct{ from, to int }
	counts := map[pair]int64{}
	plan = &rebalance.Plan{}
	for k := range keys {
		p := pair{before.Locate(k), after.Locate(k)}
		plan.Total++
		if c, ok := counts[p]; ok || len(counts) < maxFlowPairs {
			counts[p] = c + 1
		} else if p.from != p.to {
			unlisted++
		}
	}
	for p, c := range counts {
		plan.Flows = append(plan.Flows, rebalance.Flow{From: p.from, To: p.to, Count: c})
	}
	slices.SortFunc(plan.Flows, func(a, b rebalance.Flow) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	return plan, unlisted
}

// exactPlan adds the exact plan of two partition tables, two trie shapes or two rings.
func (rep *planReport) exactPlan(before, after *placement) {
	if before.pool != nil {
		b, a := compat.RingOf(before.pool), compat.RingOf(after.pool)
		if b == nil || a == nil {
			return
		}
		plan, names, err := rebalance.PlanPoolRing(b, a)
		if err != nil {
			rep.Notes = append(rep.Notes, "no range plan: "+err.Error())
			return
		}
		rep.Ranges = newRangePlan("ring arcs", plan, func(i int) any { return names[i] }, &rep.Notes)
		return
	}
	shardNumber := func(i int) any { return i }
	switch b := before.dense.(type) {
	case *shard.Partitions:
		a, ok := after.dense.(*shard.Partitions)
		if !ok {
			return
		}
		if hashRule(b) != hashRule(a) {
			rep.Notes = append(rep.Notes, "no partition plan: the two tables map keys to partitions by different rules")
			return
		}
		plan, moves, err := rebalance.PlanPartitions(b.Table(), a.Table())
		if err != nil {
			rep.Notes = append(rep.Notes, "no partition plan: "+err.Error())
			return
		}
		pp := &partitionPlan{Partitions: b.NumPartitions(), Moved: len(moves), Fraction: plan.Fraction()}
		for _, m := range moves {
			if n := len(pp.Runs); n > 0 && pp.Runs[n-1].Last+1 == m.Partition && pp.Runs[n-1].From == m.From && pp.Runs[n-1].To == m.To {
				pp.Runs[n-1].Last = m.Partition
				continue
			}
			pp.Runs = append(pp.Runs, partRun{First: m.Partition, Last: m.Partition, From: m.From, To: m.To})
		}
		rep.Partitions = pp
	case *shard.Trie:
		a, ok := after.dense.(*shard.Trie)
		if !ok {
			return
		}
		plan, err := rebalance.PlanLeaves(b.Leaves(), a.Leaves())
		if err != nil {
			rep.Notes = append(rep.Notes, "no range plan: "+err.Error())
			return
		}
		rep.Ranges = newRangePlan("trie shapes", plan, shardNumber, &rep.Notes)
	case *shard.Ring:
		a, ok := after.dense.(*shard.Ring)
		if !ok {
			return
		}
		plan, err := rebalance.PlanRing(b, a)
		if err != nil {
			rep.Notes = append(rep.Notes, "no range plan: "+err.Error())
			return
		}
		rep.Ranges = newRangePlan("ring arcs", plan, shardNumber, &rep.Notes)
	}
}

// hashRule returns the "hash=..." field of a partition table's header.
func hashRule(p *shard.Partitions) string {
	text, _ := p.MarshalText()
	rule, _, _ := strings.Cut(string(text), " ")
	return rule
}

// write prints the report as text, with at most maxFlows flows and maxRanges ranges: the
// largest, in order.
func (rep *planReport) write(w io.Writer, maxFlows, maxRanges int) error {
	fmt.Fprintf(w, "before: %s\nafter:  %s\nkeys:   %s\n\n", rep.Before, rep.After, rep.Keys)
	fmt.Fprintf(w, "moved: %d of %d keys (%s%%); the least any placement with these shares moves: %s%%\n",
		rep.Moved, rep.Total, pct2(rep.Fraction), pct2(rep.Least))
	moves := slices.DeleteFunc(slices.Clone(rep.Flows), func(f planFlow) bool { return f.From == f.To })
	if len(moves) > 0 && maxFlows > 0 {
		shown := largest(moves, maxFlows, func(f planFlow) float64 { return float64(f.Count) })
		var t measure.Table
		t.Header = []string{"from", "to", "keys", "% of keys"}
		for _, f := range shown {
			t.Add(fmt.Sprint(f.From), fmt.Sprint(f.To), strconv.FormatInt(f.Count, 10), pct2(float64(f.Count)/float64(rep.Total)))
		}
		fmt.Fprintln(w)
		if _, err := t.WriteTo(w); err != nil {
			return err
		}
		if len(shown) < len(moves) {
			fmt.Fprintf(w, "\n%d flows, the %d largest shown: -flows N shows more, -json all\n", len(moves), len(shown))
		}
	}
	if pp := rep.Partitions; pp != nil {
		fmt.Fprintf(w, "\npartition plan (exact, from the tables): %d of %d partitions move (%s%%)\n", pp.Moved, pp.Partitions, pct2(pp.Fraction))
		if len(pp.Runs) > 0 {
			var t measure.Table
			t.Header = []string{"partitions", "from", "to"}
			for _, r := range pp.Runs {
				t.Add(span(r.First, r.Last), strconv.Itoa(r.From), strconv.Itoa(r.To))
			}
			fmt.Fprintln(w)
			if _, err := t.WriteTo(w); err != nil {
				return err
			}
		}
	}
	if rp := rep.Ranges; rp != nil {
		what, from := "key hashes", "the trie shapes"
		if rp.Source == "ring arcs" {
			what, from = "ring positions", "the rings' arcs"
		}
		fmt.Fprintf(w, "\nrange plan (exact, from %s): %s%% of the %s move in %s (the key sample: %s%%)\n",
			from, pct2(rp.Fraction), what, plural(len(rp.Ranges), "range"), pct2(rep.Fraction))
		if len(rp.Ranges) > 0 && maxRanges > 0 {
			shown := largest(rp.Ranges, maxRanges, func(r hashRange) float64 { return r.Fraction })
			var t measure.Table
			t.Header = []string{"first", "last", "from", "to", "% of " + what}
			for _, r := range shown {
				t.Add(r.First, r.Last, fmt.Sprint(r.From), fmt.Sprint(r.To), pct2(r.Fraction))
			}
			fmt.Fprintln(w)
			if _, err := t.WriteTo(w); err != nil {
				return err
			}
			if len(shown) < len(rp.Ranges) {
				fmt.Fprintf(w, "\n%d ranges, the %d largest shown: -ranges N shows more, -json all\n", len(rp.Ranges), len(shown))
			}
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
	return nil
}

// largest returns the n items of the largest size, in their order in items: all of them if
// there are n or fewer; of equal sizes, the first ones. It keeps the n best in a heap, so it
// takes time len(items) log n and memory n: a ring of 4 million points has as many ranges.
func largest[T any](items []T, n int, size func(T) float64) []T {
	if len(items) <= n {
		return items
	}
	// worse orders by size, then by place, the later one being worse; keep[0] is the worst kept.
	worse := func(a, b int) bool {
		sa, sb := size(items[a]), size(items[b])
		return sa < sb || sa == sb && a > b
	}
	keep := make([]int, 0, n)
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(keep) {
				return
			}
			if c+1 < len(keep) && worse(keep[c+1], keep[c]) {
				c++
			}
			if !worse(keep[c], keep[i]) {
				return
			}
			keep[i], keep[c] = keep[c], keep[i]
			i = c
		}
	}
	for j := range items {
		switch {
		case len(keep) < n:
			keep = append(keep, j)
			for i := len(keep) - 1; i > 0 && worse(keep[i], keep[(i-1)/2]); i = (i - 1) / 2 {
				keep[i], keep[(i-1)/2] = keep[(i-1)/2], keep[i]
			}
		case n > 0 && worse(keep[0], j):
			keep[0] = j
			down(0)
		}
	}
	slices.Sort(keep)
	out := make([]T, len(keep))
	for i, j := range keep {
		out[i] = items[j]
	}
	return out
}

// plural says "1 range", "2 ranges".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func span(first, last int) string {
	if first == last {
		return strconv.Itoa(first)
	}
	return fmt.Sprintf("%d-%d", first, last)
}

// pct2 formats a fraction as a percentage with two decimals.
func pct2(f float64) string { return strconv.FormatFloat(100*f, 'f', 2, 64) }

// owners numbers the owners of two placements alike: shard numbers as they are, node
// names by their order of first appearance (the nodes before, then the new ones after).
type owners struct {
	names []string       // nil for dense placements
	index map[string]int // name -> number
}

func newOwners(before, after *placement) *owners {
	o := &owners{}
	if before.pool == nil {
		return o
	}
	o.index = map[string]int{}
	for _, p := range []*placement{before, after} {
		for _, n := range p.pool.Nodes() {
			if _, ok := o.index[n.Name]; !ok {
				o.index[n.Name] = len(o.names)
				o.names = append(o.names, n.Name)
			}
		}
	}
	return o
}

// sharder returns p as a shard.Sharder whose shard numbers are the owners' numbers.
func (o *owners) sharder(p *placement) shard.Sharder {
	if p.pool == nil {
		return p.dense
	}
	return numbered{o, p.pool}
}

// numbered is a pool seen as a shard.Sharder: node names become the owners' numbers.
type numbered struct {
	o *owners
	p pool.Pool
}

func (n numbered) Locate(key string) int { return n.o.index[n.p.Locate(key)] }
func (n numbered) Shards() int           { return len(n.o.names) }
func (n numbered) Resize(int) error      { return errors.New("a pool is resized by its members") }

// label returns what the output calls owner i: its shard number or its node name.
func (o *owners) label(i int) any {
	if o.names == nil {
		return i
	}
	return o.names[i]
}

// shares is the share of the keys each owner is meant to hold: equal shares of n owners
// (uniform > 0), kept as that count so that its memory does not grow with n, or one share per
// owner (each).
type shares struct {
	uniform int
	each    map[int]float64
}

// of returns owner i's share.
func (s shares) of(i int) float64 {
	if s.uniform > 0 {
		if i < s.uniform {
			return 1 / float64(s.uniform)
		}
		return 0
	}
	return s.each[i]
}

// shares returns the share of the keys each owner of p is meant to hold: in proportion to
// the weights of a pool, to the partitions of a table, to the key space of trie leaves, and
// equal for other dense strategies.
func (o *owners) shares(p *placement) shares {
	s := shares{each: map[int]float64{}}
	switch d := p.dense.(type) {
	case nil:
		total := 0
		for _, n := range p.pool.Nodes() {
			total += n.Weight
		}
		for _, n := range p.pool.Nodes() {
			s.each[o.index[n.Name]] += float64(n.Weight) / float64(total)
		}
	case *shard.Partitions:
		table := d.Table()
		for _, sh := range table {
			s.each[sh] += 1 / float64(len(table))
		}
	case *shard.Trie:
		for _, l := range d.Leaves() {
			s.each[l.Shard] += 1 / float64(uint64(1)<<l.Depth)
		}
	default:
		return shares{uniform: d.Shards()}
	}
	return s
}

// leastMoved is the total variation distance between two shares: what must change owner. It
// takes time in proportion to the owners listed one by one, not to a uniform count.
func leastMoved(before, after shares) float64 {
	if before.uniform > 0 && after.uniform > 0 {
		n, m := float64(before.uniform), float64(after.uniform)
		if m >= n {
			return 1 - n/m // each of the n owners gives up 1/n - 1/m
		}
		return (n - m) / n // the owners m..n-1 give up all they hold
	}
	moved := 0.0
	if before.uniform == 0 {
		for o, b := range before.each {
			moved += max(0, b-after.of(o))
		}
		return moved
	}
	// before is uniform over n owners, after lists its own: the owners that after lists,
	// then the rest of the n, which after gives nothing.
	n := before.uniform
	listed := 0
	for o, a := range after.each {
		if o < n {
			listed++
			moved += max(0, 1/float64(n)-a)
		}
	}
	return moved + float64(n-listed)/float64(n)
}
