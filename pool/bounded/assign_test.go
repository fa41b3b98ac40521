package bounded

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

// slowAssign is Assign the obvious way: sort by weight then key, the whole AppendN order of
// each item, capacities in big.Rat.
func slowAssign(p pool.Pool, items []Item, c float64) []string {
	nodes := p.Nodes()
	var total uint64
	for _, it := range items {
		total += uint64(max(it.Weight, 1))
	}
	sum, room := 0, map[string]uint64{}
	for _, n := range nodes {
		sum += n.Weight
	}
	for _, n := range nodes {
		room[n.Name] = slowCap(c, total, n.Weight, sum)
	}
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b Item) int {
		if wa, wb := max(a.Weight, 1), max(b.Weight, 1); wa != wb {
			return int(wb - wa)
		}
		return strings.Compare(a.Key, b.Key)
	})
	at := map[string]string{}
	for _, it := range sorted {
		x := uint64(max(it.Weight, 1))
		for _, name := range p.AppendN(nil, it.Key, len(nodes)) {
			if room[name] >= x {
				room[name] -= x
				at[it.Key] = name
				break
			}
		}
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = at[it.Key]
	}
	return out
}

func unitItems(n int) []Item {
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{Key: fmt.Sprint("tenant-", i)}
	}
	return items
}

// zipfItems returns n items whose weights follow Zipf(s): a few heavy tenants, many light.
func zipfItems(n int, s float64) []Item {
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{Key: fmt.Sprint("tenant-", i), Weight: int64(math.Ceil(50 / math.Pow(float64(i+1), s)))}
	}
	return items
}

// loads returns each node's load under an assignment, and the capacity of each.
func checkWithinCap(t *testing.T, p pool.Pool, items []Item, got []string, c float64) {
	t.Helper()
	load := map[string]uint64{}
	var total uint64
	for i, it := range items {
		load[got[i]] += uint64(max(it.Weight, 1))
		total += uint64(max(it.Weight, 1))
	}
	nodes := p.Nodes()
	sum := 0
	for _, n := range nodes {
		sum += n.Weight
	}
	member := map[string]bool{}
	for _, n := range nodes {
		member[n.Name] = true
		limit := slowCap(c, total, n.Weight, sum)
		require.LessOrEqual(t, load[n.Name], limit, "load of %s (weight %d of %d), total %d, c=%v", n.Name, n.Weight, sum, total, c)
	}
	for name := range load {
		require.True(t, member[name], "assigned to %q, not a member", name)
	}
}

func TestAssign(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, weighted := range []bool{false, true} {
		for name, p := range pools(t, nodesN(9, weighted)) {
			for _, c := range []float64{0, 1.05, 1.25, 2} {
				for itemsName, items := range map[string][]Item{"unit": unitItems(3000), "zipf": zipfItems(3000, 1.1)} {
					t.Run(fmt.Sprintf("%s/weighted=%v/c=%v/%s", name, weighted, c, itemsName), func(t *testing.T) {
						got, err := Assign(p, items, Options{Factor: c})
						require.NoError(t, err)
						checkWithinCap(t, p, items, got, max(c, DefaultFactor*btof(c == 0)))
						require.Equal(t, slowAssign(p, items, c), got, "fast path against the obvious one")
						// Any order of the items gives the same nodes.
						perm := r.Perm(len(items))
						shuffled := make([]Item, len(items))
						for i, j := range perm {
							shuffled[i] = items[j]
						}
						again, err := Assign(p, shuffled, Options{Factor: c})
						require.NoError(t, err)
						for i, j := range perm {
							require.Equal(t, got[j], again[i], "item %q in another order", items[j].Key)
						}
					})
				}
			}
		}
	}
}

func btof(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// The keys whose owner has room stay with their owner: with a factor so large that no node
// fills up, Assign is the pool's Locate.
func TestAssignUnboundedIsLocate(t *testing.T) {
	for name, p := range pools(t, nodesN(5, true)) {
		items := unitItems(500)
		got, err := Assign(p, items, Options{Factor: MaxFactor})
		require.NoError(t, err)
		for i, it := range items {
			require.Equal(t, p.Locate(it.Key), got[i], "%s: %s", name, it.Key)
		}
	}
}

func TestAssignRefused(t *testing.T) {
	ring, err := pool.NewRing(nodesN(4, false), pool.RingOptions{})
	require.NoError(t, err)
	cases := map[string]struct {
		items []Item
		want  error
		msg   string
	}{
		"negative":  {[]Item{{Key: "a", Weight: -1}}, ErrItem, "weight -1"},
		"too heavy": {[]Item{{Key: "a", Weight: MaxTotal + 1}}, ErrItem, "allowed range"},
		"total":     {[]Item{{Key: "a", Weight: MaxTotal}, {Key: "b", Weight: 1}}, ErrItem, "add up to more than"},
		"duplicate": {[]Item{{Key: "a"}, {Key: "b"}, {Key: "a"}}, ErrItem, `items 0 and 2 have the same key "a"`},
		// One item of 100 among 4 nodes: cap = ceil(1.25 × 103 / 4) = 33.
		"infeasible": {[]Item{{Key: "big", Weight: 100}, {Key: "x"}, {Key: "y"}, {Key: "z"}}, ErrInfeasible, `item "big" of weight 100`},
		"long key":   {[]Item{{Key: strings.Repeat("k", 1000)}, {Key: strings.Repeat("k", 1000)}}, ErrItem, "kkk..."},
	}
	for name, tc := range cases {
		_, err := Assign(ring, tc.items, Options{})
		require.ErrorIs(t, err, tc.want, name)
		require.Contains(t, err.Error(), tc.msg, name)
		require.True(t, strings.HasPrefix(err.Error(), "bounded: assign: "), name)
		require.Less(t, len(err.Error()), 400, "%s: the message quotes an excerpt", name)
	}
	got, err := Assign(ring, nil, Options{})
	require.NoError(t, err)
	require.Empty(t, got)
}

// The documented guarantee: no item of at most (c-1)/(n-1) of the total fails, in any order
// of heavy and light items.
func TestAssignFeasibleBelowBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for run := range 200 {
		n := 2 + r.IntN(8)
		c := 1 + r.Float64()
		ring, err := pool.NewRing(nodesN(n, run%2 == 0), pool.RingOptions{})
		require.NoError(t, err)
		items := make([]Item, 1+r.IntN(60))
		var total int64
		for i := range items {
			items[i] = Item{Key: fmt.Sprint(run, "-", i), Weight: 1 + r.Int64N(50)}
			total += items[i].Weight
		}
		limit := (c - 1) * float64(total) / float64(n-1)
		light := items[:0:0]
		for _, it := range items {
			if float64(it.Weight) <= limit {
				light = append(light, it)
			}
		}
		if len(light) == 0 {
			continue
		}
		// The bound is relative to the total of the items given.
		var lt int64
		for _, it := range light {
			lt += it.Weight
		}
		ok := true
		for _, it := range light {
			ok = ok && float64(it.Weight) <= (c-1)*float64(lt)/float64(n-1)
		}
		if !ok {
			continue
		}
		_, err = Assign(ring, light, Options{Factor: c})
		require.NoError(t, err, "run %d: n=%d c=%v", run, n, c)
	}
}

// FuzzAssign: fuzzed weights and factors, checked against the obvious implementation and the
// capacities; an item that fits nowhere must be one the guarantee does not cover.
func FuzzAssign(f *testing.F) {
	f.Add([]byte{1, 2, 3, 200, 7, 7, 7, 1}, uint8(25))
	f.Add([]byte{255, 1, 1, 1}, uint8(1))
	f.Fuzz(func(t *testing.T, weights []byte, slack uint8) {
		if len(weights) > 300 {
			weights = weights[:300]
		}
		c := 1 + float64(slack%200+1)/100
		items := make([]Item, len(weights))
		var total int64
		for i, w := range weights {
			items[i] = Item{Key: fmt.Sprint("k", i), Weight: int64(w)}
			total += max(int64(w), 1)
		}
		ring, err := pool.NewRing(nodesN(5, len(weights)%2 == 0), pool.RingOptions{})
		require.NoError(t, err)
		got, err := Assign(ring, items, Options{Factor: c})
		if err != nil {
			require.ErrorIs(t, err, ErrInfeasible)
			heaviest := int64(0)
			for _, it := range items {
				heaviest = max(heaviest, max(it.Weight, 1))
			}
			require.Greater(t, float64(heaviest), (c-1)*float64(total)/4, "an item within the guarantee failed: %v", err)
			return
		}
		checkWithinCap(t, ring, items, got, c)
		require.Equal(t, slowAssign(ring, items, c), got)
	})
}
