package rebalance

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"sort"

	"github.com/shardkit/shard"
)

// ErrLayout reports a partition table or a set of trie leaves that does not describe a
// placement: a negative shard, tables of different lengths, leaves that overlap or leave a
// gap. Errors from PlanPartitions and PlanLeaves wrap it.
var ErrLayout = errors.New("invalid layout")

// Plan counts what a resize moves. Its units are keys for PlanKeys and partitions for
// PlanPartitions. A Plan is a plain value: safe to read concurrently, not to modify.
type Plan struct {
	// Count[from][to] is how many units are on shard from before and on shard to after;
	// the diagonal counts the units that stay. It has one row per shard before and one
	// column per shard after.
	Count [][]int64
	// Total is the number of units planned.
	Total int64
}

func newPlan(before, after int) *Plan {
	p := &Plan{Count: make([][]int64, before)}
	for i := range p.Count {
		p.Count[i] = make([]int64, after)
	}
	return p
}

// Moved returns the number of units whose shard changes, in [0, Total].
func (p *Plan) Moved() int64 {
	var n int64
	for from, row := range p.Count {
		for to, c := range row {
			if from != to {
				n += c
			}
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

// Move is one key that changes shard.
type Move struct {
	Key      string
	From, To int
}

// PlanKeys counts, for every key of keys, its shard under before and under after. A key
// that appears twice is counted twice. before and after must be two distinct sharders (one
// resized copy of the other, typically); neither is modified. It is as safe for concurrent
// use as the two sharders' Locate.
func PlanKeys(before, after shard.Sharder, keys iter.Seq[string]) *Plan {
	p := newPlan(before.Shards(), after.Shards())
	for k := range keys {
		p.Count[before.Locate(k)][after.Locate(k)]++
		p.Total++
	}
	return p
}

// Moves yields the keys of keys whose shard differs between before and after, in the order
// of keys, each with its shard before and after.
func Moves(before, after shard.Sharder, keys iter.Seq[string]) iter.Seq[Move] {
	return func(yield func(Move) bool) {
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
	nb, err := tableShards("before", before)
	if err != nil {
		return nil, nil, err
	}
	na, err := tableShards("after", after)
	if err != nil {
		return nil, nil, err
	}
	p := newPlan(nb, na)
	var moves []shard.PartitionMove
	for i, from := range before {
		to := after[i]
		p.Count[from][to]++
		if from != to {
			moves = append(moves, shard.PartitionMove{Partition: i, From: from, To: to})
		}
	}
	p.Total = int64(len(before))
	return p, moves, nil
}

// tableShards returns 1 + the highest shard of table, checking that no shard is negative.
func tableShards(which string, table []int) (int, error) {
	n := 0
	for i, s := range table {
		if s < 0 {
			return 0, fmt.Errorf("rebalance: partition table %s: partition %d on shard %d: shards are >= 0: %w", which, i, s, ErrLayout)
		}
		n = max(n, s+1)
	}
	return n, nil
}

// HashRange is a range of 64-bit key hashes [First, Last], both ends included so that a
// range can end at 2^64-1, that changes shard.
type HashRange struct {
	First, Last uint64
	From, To    int
}

// Fraction returns the share of the key space the range covers, in (0, 1].
func (r HashRange) Fraction() float64 {
	return (float64(r.Last-r.First) + 1) / (1 << 64)
}

// LeafPlan is what moves when a trie's leaves change, measured in shares of the key space.
// It is a plain value: safe to read concurrently, not to modify.
type LeafPlan struct {
	// Share[from][to] is the share of the key space on shard from before and on shard to
	// after; the diagonal is what stays. The whole matrix sums to 1.
	Share [][]float64
	// Ranges are the hash ranges that change shard, in increasing order; adjacent ranges
	// with the same From and To are merged.
	Ranges []HashRange
}

// Fraction returns the share of the key space that changes shard, in [0, 1].
func (p *LeafPlan) Fraction() float64 {
	f := 0.0
	for _, r := range p.Ranges {
		f += r.Fraction()
	}
	return f
}

// PlanLeaves compares two sets of trie leaves and returns the hash ranges that change
// shard. Each set must cover the key space exactly once: every leaf has Depth in [0, 64],
// Path < 2^Depth and Shard >= 0, and no two leaves overlap. The order of the leaves does not
// matter; the slices are not modified.
func PlanLeaves(before, after []shard.Leaf) (*LeafPlan, error) {
	b, nb, err := leafRanges("before", before)
	if err != nil {
		return nil, err
	}
	a, na, err := leafRanges("after", after)
	if err != nil {
		return nil, err
	}
	p := &LeafPlan{Share: make([][]float64, nb)}
	for i := range p.Share {
		p.Share[i] = make([]float64, na)
	}
	// Both lists tile [0, 2^64-1] in order: walk them together, cutting at every boundary.
	for i, j := 0, 0; i < len(b) && j < len(a); {
		first := max(b[i].First, a[j].First)
		last := min(b[i].Last, a[j].Last)
		r := HashRange{First: first, Last: last, From: b[i].Shard, To: a[j].Shard}
		p.Share[r.From][r.To] += r.Fraction()
		if r.From != r.To {
			if n := len(p.Ranges); n > 0 && p.Ranges[n-1].Last+1 == first &&
				p.Ranges[n-1].From == r.From && p.Ranges[n-1].To == r.To {
				p.Ranges[n-1].Last = last
			} else {
				p.Ranges = append(p.Ranges, r)
			}
		}
		if b[i].Last == last {
			i++
		}
		if a[j].Last == last {
			j++
		}
	}
	return p, nil
}

type leafRange struct {
	First, Last uint64
	Shard       int
}

// leafRanges converts leaves to hash ranges in increasing order and checks that they tile
// the key space; it also returns 1 + the highest shard.
func leafRanges(which string, leaves []shard.Leaf) ([]leafRange, int, error) {
	if len(leaves) == 0 {
		return nil, 0, fmt.Errorf("rebalance: leaves %s: none: the leaves must cover the key space: %w", which, ErrLayout)
	}
	rs := make([]leafRange, len(leaves))
	n := 0
	for i, l := range leaves {
		if l.Depth < 0 || l.Depth > 64 || (l.Depth < 64 && l.Path >= 1<<l.Depth) || l.Shard < 0 {
			return nil, 0, fmt.Errorf("rebalance: leaves %s: leaf %+v: want Depth in [0, 64], Path < 2^Depth, Shard >= 0: %w", which, l, ErrLayout)
		}
		first := l.Path << (64 - l.Depth) // a shift by 64 (Depth 0) is 0 in Go
		rs[i] = leafRange{First: first, Last: first | math.MaxUint64>>l.Depth, Shard: l.Shard}
		n = max(n, l.Shard+1)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
	var next uint64 // the first hash not covered yet
	for i, r := range rs {
		if r.First != next || (i > 0 && rs[i-1].Last == math.MaxUint64) {
			return nil, 0, fmt.Errorf("rebalance: leaves %s: hash %#016x: %s: %w", which, next, gapOrOverlap(r.First, next), ErrLayout)
		}
		next = r.Last + 1
	}
	if last := rs[len(rs)-1].Last; last != math.MaxUint64 {
		return nil, 0, fmt.Errorf("rebalance: leaves %s: hashes from %#016x on are in no leaf: %w", which, last+1, ErrLayout)
	}
	return rs, n, nil
}

func gapOrOverlap(first, next uint64) string {
	if first > next {
		return "in no leaf"
	}
	return "in two leaves"
}
