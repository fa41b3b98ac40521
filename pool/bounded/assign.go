package bounded

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/shardkit/shard/pool"
)

// Item is a key to assign and its load.
type Item struct {
	Key string
	// Weight is the item's load, in [0, MaxTotal]: a tenant's rows, a partition's
	// messages per second. Zero means 1.
	Weight int64
}

// Assign returns the node of every item, nodes[i] for items[i], with every node's load (the
// weights of its items) within its capacity for the total weight: ceil(c × total × its
// weight / total node weight) under the default rule. Items go in a canonical order, the
// heaviest first and equal weights by key (byte-wise), each to the first node of its
// preference order (the pool's AppendN order) with room for it; so the result depends only
// on the pool's placement and the set of items, not on their order in the slice, and a key
// whose owner has room stays where consistent hashing puts it.
//
// Assign reads the pool once and does not change it; it is safe for concurrent use with
// other lookups. It returns an error wrapping ErrFactor for a bad opts.Factor, ErrEmpty for
// a nil or empty pool, ErrItem for a weight out of range, a key given twice or weights
// adding up to more than MaxTotal, and ErrInfeasible when an item fits on no node. That
// cannot happen, in any order, while every item weighs at most (c-1)/(n-1) of the total
// weight, n nodes, and c the factor: placing an item of weight x fails only if every node
// has more than cap - x, so the loads placed add up to more than c × total - n × x, which
// is less than total - x only if x > (c-1) × total / (n-1). The error names the item.
func Assign(p pool.Pool, items []Item, opts Options) ([]string, error) {
	rule, err := opts.capRule("assign")
	if err != nil {
		return nil, err
	}
	nodes, err := checkPool("assign", p)
	if err != nil {
		return nil, err
	}
	weights, total, err := checkItems(items)
	if err != nil {
		return nil, err
	}
	capOf := rule(nodes)
	index := make(map[string]int, len(nodes))
	room := make([]uint64, len(nodes)) // capacity left
	for i, n := range nodes {
		index[n.Name] = i
		room[i] = capOf(i, total)
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(weights[b], weights[a]); c != 0 {
			return c
		}
		return cmp.Compare(items[a].Key, items[b].Key)
	})
	out := make([]string, len(items))
	w := &walker{p: p, n: len(nodes)}
	for _, it := range order {
		x := weights[it]
		w.each(items[it].Key, false, func(name string) bool {
			if i, ok := index[name]; ok && room[i] >= x {
				room[i] -= x
				out[it] = name
				return true
			}
			return false
		})
		if out[it] == "" {
			return nil, fmt.Errorf("bounded: assign: item %q of weight %d fits on no node within capacity (total weight %d, %d nodes; an item of at most (c-1)/(n-1) of the total always fits): %w",
				excerpt(items[it].Key), x, total, len(nodes), ErrInfeasible)
		}
	}
	return out, nil
}

// checkItems returns the items' weights (0 becomes 1) and their total, or an error wrapping
// ErrItem.
func checkItems(items []Item) (weights []uint64, total uint64, err error) {
	weights = make([]uint64, len(items))
	seen := make(map[string]int, len(items))
	for i, it := range items {
		if it.Weight < 0 || it.Weight > MaxTotal {
			return nil, 0, fmt.Errorf("bounded: assign: item %d (%q): weight %d: allowed range is [0, %d]: %w", i, excerpt(it.Key), it.Weight, int64(MaxTotal), ErrItem)
		}
		if j, dup := seen[it.Key]; dup {
			return nil, 0, fmt.Errorf("bounded: assign: items %d and %d have the same key %q: %w", j, i, excerpt(it.Key), ErrItem)
		}
		seen[it.Key] = i
		weights[i] = uint64(max(it.Weight, 1))
		if total += weights[i]; total > MaxTotal {
			return nil, 0, fmt.Errorf("bounded: assign: the weights of items 0..%d add up to more than %d: %w", i, int64(MaxTotal), ErrItem)
		}
	}
	return weights, total, nil
}

// excerpt returns at most 64 bytes of key, for error messages.
func excerpt(key string) string {
	if len(key) > 64 {
		return key[:64] + "..."
	}
	return key
}
