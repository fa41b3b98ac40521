package rebalance

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/internal/keyhash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	return keys
}

func TestPlanKeysAgainstBruteForce(t *testing.T) {
	before, err := shard.NewModulo(5)
	require.NoError(t, err)
	after, err := shard.NewModulo(7)
	require.NoError(t, err)
	keys := testKeys(10000)

	dense := make([][]int64, 5) // the obvious way: a dense matrix
	for i := range dense {
		dense[i] = make([]int64, 7)
	}
	var wantMoves []Move
	for _, k := range keys {
		from, to := int(keyhash.XXH64(k)%5), int(keyhash.XXH64(k)%7)
		dense[from][to]++
		if from != to {
			wantMoves = append(wantMoves, Move{k, from, to})
		}
	}

	got := PlanKeys(before, after, slices.Values(keys))
	checkAgainstDense(t, got, dense)
	assert.Equal(t, int64(len(keys)), got.Total)
	assert.Equal(t, int64(len(wantMoves)), got.Moved())
	assert.InDelta(t, float64(len(wantMoves))/float64(len(keys)), got.Fraction(), 1e-12)
	assert.InDelta(t, 6.0/7, got.Fraction(), 0.02, "n -> m modulo keeps a key only if both remainders agree")
	assert.Equal(t, wantMoves, slices.Collect(Moves(before, after, slices.Values(keys))))
	assert.Zero(t, PlanKeys(before, after, slices.Values([]string(nil))).Fraction())
	assert.Equal(t, &Plan{Flows: []Flow{}}, PlanKeys(before, after, nil), "a nil sequence is empty")
	assert.Empty(t, slices.Collect(Moves(before, after, nil)))
}

// checkAgainstDense checks a sparse plan against the dense matrix of its counts: Flows are
// the entries above zero in row-major order, and Count reads every entry, zeros included.
func checkAgainstDense(t *testing.T, p *Plan, dense [][]int64) {
	t.Helper()
	var want []Flow
	var total int64
	for from, row := range dense {
		for to, n := range row {
			if n > 0 {
				want = append(want, Flow{From: from, To: to, Count: n})
			}
			total += n
			require.Equal(t, n, p.Count(from, to), "Count(%d, %d)", from, to)
		}
	}
	require.Equal(t, want, p.Flows)
	require.Equal(t, total, p.Total)
	require.Zero(t, p.Count(-1, 0))
	require.Zero(t, p.Count(len(dense), 0))
}

// tableSharder routes like a partition table: partition = xxhash64(key) mod len(table).
type tableSharder []int

func (t tableSharder) Locate(k string) int { return t[keyhash.XXH64(k)%uint64(len(t))] }
func (t tableSharder) Resize(int) error    { return nil }
func (t tableSharder) Shards() int         { return slices.Max(t) + 1 }

func TestPlanPartitionsAgainstKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	before, after := make([]int, 256), make([]int, 256)
	for i := range before {
		before[i] = i % 5
		after[i] = before[i]
		if r.IntN(3) == 0 { // a third of the partitions go to the 5 new shards
			after[i] = 5 + r.IntN(5)
		}
	}
	plan, moves, err := PlanPartitions(before, after)
	require.NoError(t, err)
	dense := make([][]int64, 5)
	for i := range dense {
		dense[i] = make([]int64, 10)
	}
	for i := range before {
		dense[before[i]][after[i]]++
	}
	checkAgainstDense(t, plan, dense)
	assert.Equal(t, int64(256), plan.Total)
	assert.Equal(t, int64(len(moves)), plan.Moved())

	moved := map[int]shard.PartitionMove{}
	for _, m := range moves {
		assert.Equal(t, before[m.Partition], m.From)
		assert.Equal(t, after[m.Partition], m.To)
		moved[m.Partition] = m
	}
	keys := testKeys(20000)
	for _, k := range keys {
		p := int(keyhash.XXH64(k) % 256)
		from, to := tableSharder(before).Locate(k), tableSharder(after).Locate(k)
		m, ok := moved[p]
		require.Equal(t, from != to, ok, "key %q in partition %d", k, p)
		if ok {
			require.Equal(t, shard.PartitionMove{Partition: p, From: from, To: to}, m)
		}
	}
	byKeys := PlanKeys(tableSharder(before), tableSharder(after), slices.Values(keys))
	assert.InDelta(t, plan.Fraction(), byKeys.Fraction(), 0.02, "equal partitions hold equal shares of the keys")
}

func TestPlanPartitionsRejects(t *testing.T) {
	for _, tc := range []struct{ before, after []int }{
		{[]int{0, 1}, []int{0, 1, 2}},
		{[]int{0, -1}, []int{0, 1}},
		{[]int{0, 1}, []int{-3, 1}},
	} {
		_, _, err := PlanPartitions(tc.before, tc.after)
		assert.ErrorIs(t, err, ErrLayout, "%v -> %v", tc.before, tc.after)
		assert.ErrorContains(t, err, "rebalance: partition table")
	}
}

// leafSharder routes like a trie: the leaf whose Path is the top Depth bits of xxhash64(key).
type leafSharder []shard.Leaf

func (l leafSharder) Locate(k string) int {
	h := keyhash.XXH64(k)
	for _, leaf := range l {
		if h>>(64-leaf.Depth) == leaf.Path { // a shift by 64 (Depth 0) is 0
			return leaf.Shard
		}
	}
	return -1 // leaves that do not cover the key space: the test fails on it
}
func (l leafSharder) Resize(int) error { return nil }
func (l leafSharder) Shards() int {
	n := 0
	for _, leaf := range l {
		n = max(n, leaf.Shard+1)
	}
	return n
}

// randomLeaves splits a random leaf splits times and puts each leaf on a random shard.
func randomLeaves(r *rand.Rand, splits, shards int) []shard.Leaf {
	leaves := []shard.Leaf{{}}
	for range splits {
		i := r.IntN(len(leaves))
		l := leaves[i]
		if l.Depth == 64 {
			continue
		}
		leaves[i] = shard.Leaf{Path: l.Path << 1, Depth: l.Depth + 1}
		leaves = append(leaves, shard.Leaf{Path: l.Path<<1 | 1, Depth: l.Depth + 1})
	}
	for i := range leaves {
		leaves[i].Shard = r.IntN(shards)
	}
	r.Shuffle(len(leaves), func(i, j int) { leaves[i], leaves[j] = leaves[j], leaves[i] })
	return leaves
}

func TestPlanLeavesAgainstKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	keys := testKeys(5000)
	for round := range 20 {
		before, after := randomLeaves(r, 1+r.IntN(40), 4), randomLeaves(r, 1+r.IntN(40), 6)
		plan, err := PlanLeaves(before, after)
		require.NoError(t, err, "round %d", round)
		sum := 0.0
		for i, f := range plan.Flows {
			require.Positive(t, f.Share)
			require.Equal(t, f.Share, plan.Share(f.From, f.To))
			if i > 0 {
				prev := plan.Flows[i-1]
				require.True(t, prev.From < f.From || prev.From == f.From && prev.To < f.To, "flows out of order: %v", plan.Flows)
			}
			sum += f.Share
		}
		assert.InDelta(t, 1, sum, 1e-9)
		moved := 0.0
		for _, rg := range plan.Ranges {
			moved += rg.Fraction()
		}
		assert.InDelta(t, moved, plan.Fraction(), 1e-12)
		for i, rg := range plan.Ranges {
			require.NotEqual(t, rg.From, rg.To)
			require.LessOrEqual(t, rg.First, rg.Last)
			if i > 0 {
				require.Less(t, plan.Ranges[i-1].Last, rg.First)
			}
		}
		for _, k := range keys {
			h := keyhash.XXH64(k)
			from, to := leafSharder(before).Locate(k), leafSharder(after).Locate(k)
			i, found := slices.BinarySearchFunc(plan.Ranges, h, func(rg HashRange, h uint64) int {
				switch {
				case rg.Last < h:
					return -1
				case rg.First > h:
					return 1
				}
				return 0
			})
			require.Equal(t, from != to, found, "round %d key %q hash %#x: %d -> %d", round, k, h, from, to)
			if found {
				require.Equal(t, from, plan.Ranges[i].From)
				require.Equal(t, to, plan.Ranges[i].To)
			}
		}
		byKeys := PlanKeys(leafSharder(before), leafSharder(after), slices.Values(keys))
		assert.InDelta(t, plan.Fraction(), byKeys.Fraction(), 0.05, "round %d", round)
	}
}

func TestPlanLeavesSplitRoot(t *testing.T) {
	plan, err := PlanLeaves(
		[]shard.Leaf{{Path: 0, Depth: 0, Shard: 0}},
		[]shard.Leaf{{Path: 1, Depth: 1, Shard: 1}, {Path: 0, Depth: 1, Shard: 0}})
	require.NoError(t, err)
	assert.Equal(t, []HashRange{{First: 1 << 63, Last: math.MaxUint64, From: 0, To: 1}}, plan.Ranges)
	assert.Equal(t, []LeafFlow{{From: 0, To: 0, Share: 0.5}, {From: 0, To: 1, Share: 0.5}}, plan.Flows)
	assert.Zero(t, plan.Share(1, 0))
	assert.Equal(t, 0.5, plan.Fraction())

	// The right spine down to depth 64: leaves 0, 10, 110, ... and the single hash 2^64-1,
	// which alone moves.
	var spine []shard.Leaf
	for d := 1; d <= 64; d++ {
		spine = append(spine, shard.Leaf{Path: math.MaxUint64 >> (64 - d) &^ 1, Depth: d})
	}
	spine = append(spine, shard.Leaf{Path: math.MaxUint64, Depth: 64, Shard: 1})
	plan, err = PlanLeaves([]shard.Leaf{{}}, spine)
	require.NoError(t, err)
	assert.Equal(t, []HashRange{{First: math.MaxUint64, Last: math.MaxUint64, From: 0, To: 1}}, plan.Ranges)
	assert.Equal(t, 0x1p-64, plan.Fraction())
	assert.Equal(t, []LeafFlow{{From: 0, To: 0, Share: 1 - 0x1p-64}, {From: 0, To: 1, Share: 0x1p-64}}, plan.Flows)
}

func TestPlanLeavesRejects(t *testing.T) {
	root := []shard.Leaf{{}}
	for name, leaves := range map[string][]shard.Leaf{
		"none":           nil,
		"gap":            {{Path: 0, Depth: 1}},
		"gap at the end": {{Path: 0, Depth: 1}, {Path: 2, Depth: 2}},
		"overlap":        {{Path: 0, Depth: 1}, {Path: 1, Depth: 1}, {Path: 3, Depth: 2}},
		"two roots":      {{}, {}},
		"deep":           {{Depth: 65}},
		"negative depth": {{Depth: -1}},
		"path too big":   {{Path: 2, Depth: 1}, {Path: 0, Depth: 1}},
		"negative shard": {{Shard: -1}},
	} {
		_, err := PlanLeaves(root, leaves)
		assert.ErrorIs(t, err, ErrLayout, name)
		assert.ErrorContains(t, err, "rebalance: leaves after", name)
		_, err = PlanLeaves(leaves, root)
		assert.ErrorIs(t, err, ErrLayout, name)
	}
}

// TestPlanExtremeShards plans with the highest shard numbers an int holds: the plans are
// exact and take memory for the pairs seen only.
func TestPlanExtremeShards(t *testing.T) {
	const top = math.MaxInt
	plan, moves, err := PlanPartitions([]int{top, 0, top - 1, top}, []int{0, top, top - 1, top})
	require.NoError(t, err)
	assert.Equal(t, []Flow{{0, top, 1}, {top - 1, top - 1, 1}, {top, 0, 1}, {top, top, 1}}, plan.Flows)
	assert.Equal(t, int64(2), plan.Moved())
	assert.Equal(t, int64(1), plan.Count(top, 0))
	assert.Equal(t, []shard.PartitionMove{{Partition: 0, From: top, To: 0}, {Partition: 1, From: 0, To: top}}, moves)

	leaves, err := PlanLeaves([]shard.Leaf{{Shard: top}},
		[]shard.Leaf{{Path: 0, Depth: 1, Shard: top}, {Path: 1, Depth: 1, Shard: top - 1}})
	require.NoError(t, err)
	assert.Equal(t, []LeafFlow{{top, top - 1, 0.5}, {top, top, 0.5}}, leaves.Flows)
	assert.Equal(t, []HashRange{{First: 1 << 63, Last: math.MaxUint64, From: top, To: top - 1}}, leaves.Ranges)
}

// allocated returns the bytes fn allocates on the heap (all goroutines: the tests of this
// package do not run in parallel).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestPlanMemory plans the resizes that took gigabytes with a dense before x after matrix
// (PlanKeys 20000 -> 20001 shards: 3.1 GiB; Jump 100000 -> 100001 and 65536 partitions on
// 65536 -> 65535 shards: out of memory) within a memory bound that grows with the keys,
// partitions or leaves planned.
func TestPlanMemory(t *testing.T) {
	const limit = 64 << 20
	keys := testKeys(100_000)
	resized := func(newSharder func(int) (shard.Sharder, error), n int) (shard.Sharder, shard.Sharder) {
		before, err := newSharder(n)
		require.NoError(t, err)
		after, err := newSharder(n + 1)
		require.NoError(t, err)
		return before, after
	}
	modulo := func(n int) (shard.Sharder, error) { return shard.NewModulo(n) }
	jump := func(n int) (shard.Sharder, error) { return shard.NewJump(n) }
	for _, tc := range []struct {
		name       string
		newSharder func(int) (shard.Sharder, error)
		shards     int
	}{{"modulo", modulo, 20000}, {"jump", jump, 100_000}} {
		before, after := resized(tc.newSharder, tc.shards)
		var plan *Plan
		n := allocated(func() { plan = PlanKeys(before, after, slices.Values(keys)) })
		assert.Less(t, n, uint64(limit), "%s %d -> %d shards, %d keys: %d bytes", tc.name, tc.shards, tc.shards+1, len(keys), n)
		assert.Equal(t, int64(len(keys)), plan.Total)
		t.Logf("PlanKeys %s %d -> %d shards on %d keys: %.1f MiB allocated, %d flows", tc.name, tc.shards, tc.shards+1, len(keys), float64(n)/(1<<20), len(plan.Flows))
	}

	redis := func(n, _ int) (*shard.Partitions, error) { return shard.NewRedisCluster(n) }
	for _, tc := range []struct {
		name          string
		newPartitions func(n, partitions int) (*shard.Partitions, error)
		partitions, n int
	}{{"redis cluster", redis, 16384, 16384}, {"partitions", shard.NewPartitions, 65536, 65536}} {
		p, err := tc.newPartitions(tc.n, tc.partitions)
		require.NoError(t, err)
		before := p.Table()
		require.NoError(t, p.Resize(tc.n-1))
		after := p.Table()
		var plan *Plan
		n := allocated(func() { plan, _, err = PlanPartitions(before, after) })
		require.NoError(t, err)
		assert.Less(t, n, uint64(limit), "%s %d -> %d shards: %d bytes", tc.name, tc.n, tc.n-1, n)
		assert.Equal(t, int64(tc.partitions), plan.Total)
		t.Logf("PlanPartitions %s %d -> %d shards: %.1f MiB allocated", tc.name, tc.n, tc.n-1, float64(n)/(1<<20))
	}

	r := rand.New(rand.NewPCG(5, 6))
	before, after := randomLeaves(r, 20000, 20000), randomLeaves(r, 20000, 20001)
	n := allocated(func() { _, err := PlanLeaves(before, after); require.NoError(t, err) })
	assert.Less(t, n, uint64(limit), "PlanLeaves on tries of %d and %d leaves: %d bytes", len(before), len(after), n)
	t.Logf("PlanLeaves on %d and %d leaves: %.1f MiB allocated", len(before), len(after), float64(n)/(1<<20))
}

// wildSharder breaks the Sharder contract: it claims shards shards and places a key on
// place(key), anywhere in int.
type wildSharder struct {
	shards int
	place  func(string) int
}

func (w wildSharder) Locate(k string) int { return w.place(k) }
func (w wildSharder) Resize(int) error    { return nil }
func (w wildSharder) Shards() int         { return w.shards }

// TestPlanKeysAnyShard: PlanKeys counts exactly whatever shards the sharders return, in or
// out of the range they claim, with no panic and no matrix of their size.
func TestPlanKeysAnyShard(t *testing.T) {
	keys := testKeys(3000)
	spread := func(k string) int { return int(keyhash.XXH64(k)%7) - 2 } // -2..4
	for name, tc := range map[string]struct{ before, after wildSharder }{
		"out of range":  {wildSharder{3, spread}, wildSharder{4, func(k string) int { return spread(k) + 1 }}},
		"maxint shards": {wildSharder{math.MaxInt, func(string) int { return math.MaxInt - 1 }}, wildSharder{math.MaxInt, spread}},
		"no shards":     {wildSharder{0, spread}, wildSharder{-1, spread}},
	} {
		want := map[pair]int64{}
		for _, k := range keys {
			want[pair{tc.before.Locate(k), tc.after.Locate(k)}]++
		}
		var plan *Plan
		require.NotPanics(t, func() { plan = PlanKeys(tc.before, tc.after, slices.Values(keys)) }, name)
		checkFlows(t, plan, int64(len(keys)))
		require.Len(t, plan.Flows, len(want), name)
		for k, n := range want {
			require.Equal(t, n, plan.Count(k.from, k.to), "%s: Count(%d, %d)", name, k.from, k.to)
		}
	}
}
