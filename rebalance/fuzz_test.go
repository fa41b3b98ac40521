package rebalance

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard"
)

// The seed corpora in testdata/fuzz hold the extreme shard numbers (math.MaxInt and its
// neighbours, math.MinInt, -1) that made a dense plan overflow or run out of memory; plain
// go test runs them, go test -fuzz explores from them.

// ints parses the decimal ints of s, separated by spaces; ok is false if one is not an int.
func ints(s string) (out []int, ok bool) {
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

func FuzzPlanPartitions(f *testing.F) {
	f.Add("0 1 0 1", "0 1 2 1")
	f.Fuzz(func(t *testing.T, beforeText, afterText string) {
		before, ok1 := ints(beforeText)
		after, ok2 := ints(afterText)
		if !ok1 || !ok2 || len(before) > 1000 || len(after) > 1000 {
			return
		}
		plan, moves, err := PlanPartitions(before, after)
		valid := len(before) == len(after) && !slices.ContainsFunc(before, negative) && !slices.ContainsFunc(after, negative)
		if !valid {
			if !errors.Is(err, ErrLayout) || plan != nil || moves != nil {
				t.Fatalf("PlanPartitions(%v, %v) = %v, %v, %v: want an error wrapping ErrLayout", before, after, plan, moves, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("PlanPartitions(%v, %v): %v", before, after, err)
		}
		// The obvious way: count each flow by a scan of the tables.
		var wantMoves []shard.PartitionMove
		for i := range before {
			if before[i] != after[i] {
				wantMoves = append(wantMoves, shard.PartitionMove{Partition: i, From: before[i], To: after[i]})
			}
			n := int64(0)
			for j := range before {
				if before[j] == before[i] && after[j] == after[i] {
					n++
				}
			}
			if got := plan.Count(before[i], after[i]); got != n {
				t.Fatalf("PlanPartitions(%v, %v).Count(%d, %d) = %d, want %d", before, after, before[i], after[i], got, n)
			}
		}
		checkFlows(t, plan, int64(len(before)))
		if plan.Moved() != int64(len(wantMoves)) || !slices.Equal(moves, wantMoves) {
			t.Fatalf("PlanPartitions(%v, %v): moved %d, moves %v, want %v", before, after, plan.Moved(), moves, wantMoves)
		}
	})
}

func negative(n int) bool { return n < 0 }

// checkFlows checks that the flows are ordered, above zero, and add up to total.
func checkFlows(t *testing.T, p *Plan, total int64) {
	t.Helper()
	var sum int64
	for i, f := range p.Flows {
		if f.Count <= 0 || i > 0 && (pair{p.Flows[i-1].From, p.Flows[i-1].To}).compare(f.From, f.To) <= 0 {
			t.Fatalf("flows %v: want counts above zero, ordered by From then To", p.Flows)
		}
		sum += f.Count
	}
	if sum != total || p.Total != total {
		t.Fatalf("flows %v add up to %d, Total %d, want %d", p.Flows, sum, p.Total, total)
	}
}

// leaves parses "PATH:SHARD" fields: PATH is the leaf's bits ("" for the root), SHARD an int.
func leaves(s string) (out []shard.Leaf, ok bool) {
	for _, f := range strings.Fields(s) {
		path, num, found := strings.Cut(f, ":")
		n, err := strconv.Atoi(num)
		if !found || err != nil || len(path) > 65 { // 65: one too deep, which PlanLeaves rejects
			return nil, false
		}
		l := shard.Leaf{Depth: len(path), Shard: n}
		for _, c := range path {
			if c != '0' && c != '1' {
				return nil, false
			}
			l.Path = l.Path<<1 | uint64(c-'0')
		}
		out = append(out, l)
	}
	return out, true
}

// leafAt returns the shard of the leaf that holds hash h, by a scan, or -1.
func leafAt(ls []shard.Leaf, h uint64) int {
	for _, l := range ls {
		if l.Depth == 0 || h>>(64-l.Depth) == l.Path {
			return l.Shard
		}
	}
	return -1
}

func FuzzPlanLeaves(f *testing.F) {
	f.Add(":0", "0:0 1:1")
	f.Fuzz(func(t *testing.T, beforeText, afterText string) {
		before, ok1 := leaves(beforeText)
		after, ok2 := leaves(afterText)
		if !ok1 || !ok2 || len(before) > 200 || len(after) > 200 {
			return
		}
		plan, err := PlanLeaves(before, after)
		if err != nil {
			if !errors.Is(err, ErrLayout) || plan != nil {
				t.Fatalf("PlanLeaves(%v, %v) = %v, %v: want nil and an error wrapping ErrLayout", before, after, plan, err)
			}
			return
		}
		sum := 0.0
		for i, fl := range plan.Flows {
			if !(fl.Share > 0) || i > 0 && (pair{plan.Flows[i-1].From, plan.Flows[i-1].To}).compare(fl.From, fl.To) <= 0 {
				t.Fatalf("flows %v: want shares above zero, ordered by From then To", plan.Flows)
			}
			sum += fl.Share
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("flows %v add up to %v, want 1", plan.Flows, sum)
		}
		// Probe every boundary: each leaf's first and last hash on both sides, and each
		// range's ends; a probe is in a range exactly when its shard changes.
		var probes []uint64
		for _, l := range slices.Concat(before, after) {
			first := l.Path << (64 - l.Depth)
			probes = append(probes, first, first|math.MaxUint64>>l.Depth)
		}
		for i, r := range plan.Ranges {
			if r.From == r.To || r.First > r.Last || i > 0 && plan.Ranges[i-1].Last >= r.First {
				t.Fatalf("ranges %v: want shard changes, ordered, not overlapping", plan.Ranges)
			}
			probes = append(probes, r.First, r.Last)
		}
		for _, h := range probes {
			from, to := leafAt(before, h), leafAt(after, h)
			if from < 0 || to < 0 || !(plan.Share(from, to) > 0) {
				t.Fatalf("hash %#x: shard %d -> %d, share %v", h, from, to, plan.Share(from, to))
			}
			i, found := slices.BinarySearchFunc(plan.Ranges, h, func(r HashRange, h uint64) int {
				if r.Last < h {
					return -1
				}
				if r.First > h {
					return 1
				}
				return 0
			})
			if found != (from != to) || found && (plan.Ranges[i].From != from || plan.Ranges[i].To != to) {
				t.Fatalf("hash %#x: shard %d -> %d, in range %v: %v", h, from, to, found, plan.Ranges)
			}
		}
	})
}
