package rebalance

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/shardkit/shard"
)

// ErrLayout reports a partition table or a set of trie leaves that does not describe a
// placement: a negative shard, tables of different lengths, leaves that overlap or leave a
// gap. Errors from PlanPartitions and PlanLeaves wrap it.
var ErrLayout = errors.New("invalid layout")

// Flow counts the units that are on shard From before a resize and on shard To after it;
// From == To counts the units that stay.
type Flow struct {
	From, To int
	Count    int64
}

// Plan counts what a resize moves, as flows between shards. Its units are keys for PlanKeys
// and partitions for PlanPartitions. It holds one Flow per pair of shards that some unit
// goes between, so its memory grows with the units planned and never with the shard
// numbers. A Plan is a plain value: safe to read concurrently, not to modify.
type Plan struct {
	// Flows has one Flow for every pair (from, to) with a count above zero, the units that
	// stay (From == To) included, ordered by From and then To.
	Flows []Flow
	// Total is the number of units planned: the sum of the counts of Flows.
	Total int64
}

// Count returns how many units are on shard from before and on shard to after, 0 for a pair
// no unit goes between. It takes O(log len(Flows)) time.
func (p *Plan) Count(from, to int) int64 {
	i, found := slices.BinarySearchFunc(p.Flows, pair{from, to}, func(f Flow, k pair) int {
		return k.compare(f.From, f.To)
	})
	if !found {
		return 0
	}
	return p.Flows[i].Count
}

// Moved returns the number of units whose shard changes, in [0, Total].
func (p *Plan) Moved() int64 {
	var n int64
	for _, f := range p.Flows {
		if f.From != f.To {
			n += f.Count
		}
	}
	return n
}

// Fraction returns Moved()/Total in [0, 1], or 0 for an empty plan.
func (p *Plan) Fraction() float64 {
	if p.Total == 0 {
		return 0
	}
	return float64(p.Moved()) / float64(p.Total)
}

// pair is a map key for counting flows: a sparse matrix, since a dense one of before x
// after counts takes gigabytes for a few thousand shards.
type pair struct{ from, to int }

// compare orders the pair (from, to) against k, by from and then to, as Flows are ordered.
func (k pair) compare(from, to int) int {
	return cmp.Or(cmp.Compare(from, k.from), cmp.Compare(to, k.to))
}

// plan turns counts by pair into a Plan.
func plan(counts map[pair]int64, total int64) *Plan {
	p := &Plan{Flows: make([]Flow, 0, len(counts)), Total: total}
	for k, n := range counts {
		p.Flows = append(p.Flows, Flow{From: k.from, To: k.to, Count: n})
	}
	slices.SortFunc(p.Flows, func(a, b Flow) int { return pair{b.From, b.To}.compare(a.From, a.To) })
	return p
}

// Move is one key that changes shard.
type Move struct {
	Key      string
	From, To int
}

// PlanKeys counts, for every key of keys, its shard under before and under after. A key
// that appears twice is counted twice; a nil keys is an empty set. before and after must be
// two distinct sharders (one resized copy of the other, typically); neither is modified. It
// is as safe for concurrent use as the two sharders' Locate. Its memory grows with the
// number of distinct (from, to) pairs, at most one per key.
func PlanKeys(before, after shard.Sharder, keys iter.Seq[string]) *Plan {
	p, _ := planWeighted(before, after, func(yield func(string, int64) bool) {
		if keys == nil {
			return
		}
		for k := range keys {
			if !yield(k, 1) {
				return
			}
		}
	})
	return p
}

// PlanOwners is PlanKeys weighted: owners yields each owner with its size, its rows or
// bytes, and the plan counts sizes, so its Flows say how many rows or bytes go from each
// shard to each shard, and Moved is exactly what a Migration of these owners copies. A nil
// owners is an empty set; a negative size is an error wrapping ErrLayout.
func PlanOwners(before, after shard.Sharder, owners iter.Seq2[string, int64]) (*Plan, error) {
	if owners == nil {
		return plan(nil, 0), nil
	}
	return planWeighted(before, after, owners)
}

// planWeighted counts the sizes of owners by their shards under before and after.
func planWeighted(before, after shard.Sharder, owners iter.Seq2[string, int64]) (*Plan, error) {
	counts := map[pair]int64{}
	var total int64
	// A small resize counts in a matrix, which is 2.4 times as fast as the map per key
	// (BenchmarkPlanKeys); keys placed outside it, by a sharder that breaks its contract,
	// still count, in the map.
	rows, cols := before.Shards(), after.Shards()
	var dense []int64
	if rows > 0 && cols > 0 && rows <= maxDense/cols {
		dense = make([]int64, rows*cols)
	}
	for k, n := range owners {
		if n < 0 {
			return nil, fmt.Errorf("rebalance: owner %.64q has size %d: sizes are >= 0: %w", k, n, ErrLayout)
		}
		from, to := before.Locate(k), after.Locate(k)
		if dense != nil && uint(from) < uint(rows) && uint(to) < uint(cols) {
			dense[from*cols+to] += n
		} else if n > 0 {
			counts[pair{from, to}] += n
		}
		total += n
	}
	for i, n := range dense {
		if n > 0 {
			counts[pair{i / cols, i % cols}] += n
		}
	}
	return plan(counts, total), nil
}

// maxDense is the most cells PlanKeys counts in a matrix: 32 KiB.
const maxDense = 4096

// Moves yields the keys of keys whose shard differs between before and after, in the order
// of keys, each with its shard before and after. A nil keys yields nothing.
func Moves(before, after shard.Sharder, keys iter.Seq[string]) iter.Seq[Move] {
	return func(yield func(Move) bool) {
		if keys == nil {
			return
		}
		for k := range keys {
			if from, to := before.Locate(k), after.Locate(k); from != to {
				if !yield(Move{Key: k, From: from, To: to}) {
					return
				}
			}
		}
	}
}

// PlanPartitions compares two partition tables (index = partition, value = shard, as
// Partitions.Table returns them) and returns a Plan counted in partitions, with the
// partitions that change shard in increasing order. When every partition holds an equal
// share of the keys (partition = hash mod the number of partitions), Fraction is also the
// share of keys that move. The tables must have the same length and no negative shard.
func PlanPartitions(before, after []int) (*Plan, []shard.PartitionMove, error) {
	if len(before) != len(after) {
		return nil, nil, fmt.Errorf("rebalance: partition tables of %d and %d partitions: a resize keeps the number of partitions: %w",
			len(before), len(after), ErrLayout)
	}
	if err := checkTable("before", before); err != nil {
		return nil, nil, err
	}
	if err := checkTable("after", after); err != nil {
		return nil, nil, err
	}
	counts := map[pair]int64{}
	var moves []shard.PartitionMove
	for i, from := range before {
		to := after[i]
		counts[pair{from, to}]++
		if from != to {
			moves = append(moves, shard.PartitionMove{Partition: i, From: from, To: to})
		}
	}
	return plan(counts, int64(len(before))), moves, nil
}

// checkTable checks that no shard of table is negative; any other int is a shard number.
func checkTable(which string, table []int) error {
	for i, s := range table {
		if s < 0 {
			return fmt.Errorf("rebalance: partition table %s: partition %d on shard %d: shards are >= 0: %w", which, i, s, ErrLayout)
		}
	}
	return nil
}

// HashRange is a range of 64-bit key hashes [First, Last] (a ring's positions, for a ring),
// both ends included so that a range can end at 2^64-1, that changes shard.
type HashRange struct {
	First, Last uint64
	From, To    int
}

// Fraction returns the share of the key space the range covers, in (0, 1].
func (r HashRange) Fraction() float64 {
	return (float64(r.Last-r.First) + 1) / (1 << 64)
}

// LeafFlow is the share of the key space on shard From before and on shard To after;
// From == To is a share that stays.
type LeafFlow struct {
	From, To int
	Share    float64
}

// LeafPlan is a range plan: what moves when a trie's leaves (PlanLeaves) or a ring's arcs
// (PlanRing, PlanPoolRing) change, measured in shares of the key space, with the hash
// ranges that change shard. Its memory grows with the number of ranges and pairs of shards,
// never with the shard numbers. It is a plain value: safe to read concurrently, not to
// modify.
type LeafPlan struct {
	// Flows has one LeafFlow for every pair (from, to) with a share above zero, the shares
	// that stay (From == To) included, ordered by From and then To. The shares sum to 1.
	Flows []LeafFlow
	// Ranges are the hash ranges that change shard, in increasing order; adjacent ranges
	// with the same From and To are merged.
	Ranges []HashRange
}

// Share returns the share of the key space on shard from before and on shard to after, 0
// for a pair nothing goes between. It takes O(log len(Flows)) time.
func (p *LeafPlan) Share(from, to int) float64 {
	i, found := slices.BinarySearchFunc(p.Flows, pair{from, to}, func(f LeafFlow, k pair) int {
		return k.compare(f.From, f.To)
	})
	if !found {
		return 0
	}
	return p.Flows[i].Share
}

// Fraction returns the share of the key space that changes shard, in [0, 1].
func (p *LeafPlan) Fraction() float64 {
	var n hashCount
	for _, r := range p.Ranges {
		n.add(r.First, r.Last)
	}
	return n.share()
}

// hashCount counts hashes exactly: up to 2^64 of them, one more than a uint64 holds.
type hashCount struct{ hi, lo uint64 }

// add counts the hashes of [first, last].
func (c *hashCount) add(first, last uint64) {
	var carry uint64
	c.lo, carry = bits.Add64(c.lo, last-first, 1)
	c.hi += carry
}

// share returns the count as a share of the 2^64 hashes.
func (c hashCount) share() float64 {
	return float64(c.hi) + float64(c.lo)/(1<<64)
}

// PlanLeaves compares two sets of trie leaves and returns the hash ranges that change
// shard. Each set must cover the key space exactly once: every leaf has Depth in [0, 64],
// Path < 2^Depth and Shard >= 0, and no two leaves overlap. The order of the leaves does not
// matter; the slices are not modified.
func PlanLeaves(before, after []shard.Leaf) (*LeafPlan, error) {
	b, err := tiles("before", before)
	if err != nil {
		return nil, err
	}
	a, err := tiles("after", after)
	if err != nil {
		return nil, err
	}
	return compareTilings(slices.Values(b), slices.Values(a)), nil
}

// tile is a range of hashes [First, Last] on one shard; a tiling is a sequence of tiles in
// increasing order that covers every hash once.
type tile struct {
	First, Last uint64
	Shard       int
}

// compareTilings walks two tilings of the hashes side by side, cutting at every boundary of
// either, and returns the shares that go from each shard to each shard and the ranges that
// change shard, adjacent ones with the same From and To merged. Its memory grows with the
// pairs of shards and the ranges that change, not with the tiles.
func compareTilings(before, after iter.Seq[tile]) *LeafPlan {
	p := &LeafPlan{}
	shares := map[pair]hashCount{}
	// One side pulled, the other ranged over: one coroutine switch per tile of before.
	nextB, stopB := iter.Pull(before)
	defer stopB()
	b, okB := nextB()
	for a := range after {
		for okB {
			first := max(b.First, a.First)
			last := min(b.Last, a.Last)
			r := HashRange{First: first, Last: last, From: b.Shard, To: a.Shard}
			c := shares[pair{r.From, r.To}]
			c.add(first, last)
			shares[pair{r.From, r.To}] = c
			if r.From != r.To {
				if n := len(p.Ranges); n > 0 && p.Ranges[n-1].Last+1 == first &&
					p.Ranges[n-1].From == r.From && p.Ranges[n-1].To == r.To {
					p.Ranges[n-1].Last = last
				} else {
					p.Ranges = append(p.Ranges, r)
				}
			}
			if b.Last == last {
				b, okB = nextB()
			}
			if a.Last == last {
				break
			}
		}
	}
	p.Flows = make([]LeafFlow, 0, len(shares))
	for k, n := range shares {
		p.Flows = append(p.Flows, LeafFlow{From: k.from, To: k.to, Share: n.share()})
	}
	slices.SortFunc(p.Flows, func(a, b LeafFlow) int { return pair{b.From, b.To}.compare(a.From, a.To) })
	return p
}

// tiles converts leaves to tiles in increasing order and checks that they tile
// the key space.
func tiles(which string, leaves []shard.Leaf) ([]tile, error) {
	if len(leaves) == 0 {
		return nil, fmt.Errorf("rebalance: leaves %s: none: the leaves must cover the key space: %w", which, ErrLayout)
	}
	rs := make([]tile, len(leaves))
	for i, l := range leaves {
		if l.Depth < 0 || l.Depth > 64 || (l.Depth < 64 && l.Path >= 1<<l.Depth) || l.Shard < 0 {
			return nil, fmt.Errorf("rebalance: leaves %s: leaf %+v: want Depth in [0, 64], Path < 2^Depth, Shard >= 0: %w", which, l, ErrLayout)
		}
		first := l.Path << (64 - l.Depth) // a shift by 64 (Depth 0) is 0 in Go
		rs[i] = tile{First: first, Last: first | math.MaxUint64>>l.Depth, Shard: l.Shard}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
	var next uint64 // the first hash not covered yet
	for i, r := range rs {
		if r.First != next || (i > 0 && rs[i-1].Last == math.MaxUint64) {
			return nil, fmt.Errorf("rebalance: leaves %s: hash %#016x: %s: %w", which, next, gapOrOverlap(r.First, next), ErrLayout)
		}
		next = r.Last + 1
	}
	if last := rs[len(rs)-1].Last; last != math.MaxUint64 {
		return nil, fmt.Errorf("rebalance: leaves %s: hashes from %#016x on are in no leaf: %w", which, last+1, ErrLayout)
	}
	return rs, nil
}

func gapOrOverlap(first, next uint64) string {
	if first > next {
		return "in no leaf"
	}
	return "in two leaves"
}
