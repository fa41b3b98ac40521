package pool

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/internal/keyhash"
)

func newModulaPool(opts ModulaOptions) func([]Node) (Pool, error) {
	return func(nodes []Node) (Pool, error) { return NewModula(nodes, opts) }
}

// Modula places by join order and table size: no movement guarantee, nothing order-free.
func TestModulaContract(t *testing.T) {
	checkContract(t, contract{name: "modula", newPool: newModulaPool(ModulaOptions{})})
}

// holeSlots is a Slots option with holes: node i fills Weight slots, and a hole of its
// weight follows every node whose name ends in an odd digit, as nginx leaves the weight of a
// `down` server.
func holeSlots(dst []int32, nodes []Node) []int32 {
	for i, n := range nodes {
		for range n.Weight {
			dst = append(dst, int32(i))
		}
		if c := n.Name[len(n.Name)-1]; c >= '0' && c <= '9' && c%2 == 1 {
			for range n.Weight {
				dst = append(dst, -1)
			}
		}
	}
	return dst
}

// rehashAdd is nginx's rule in miniature: the next value adds a hash of the probe number and
// the key.
func rehashAdd(key string, probe int, h uint64) uint64 {
	return h + mum(keyhash.XXH64(key)+uint64(probe))&0x7fff
}

func TestModulaContractHoles(t *testing.T) {
	checkContract(t, contract{name: "modula with holes", newPool: newModulaPool(ModulaOptions{Slots: holeSlots, Rehash: rehashAdd})})
	checkContract(t, contract{name: "modula with holes, no rehash", newPool: newModulaPool(ModulaOptions{Slots: holeSlots})})
}

func FuzzModula(f *testing.F) {
	fuzzSeeds(f)
	c := contract{name: "modula", newPool: newModulaPool(ModulaOptions{Slots: holeSlots, Rehash: rehashAdd, MaxMisses: 3})}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOps(t, c, data) })
}

// refModula is the obvious modulo pool: the table as names, probed one step at a time.
func refModulaAppendN(nodes []Node, opts ModulaOptions, key string, n int) []string {
	hash := opts.Hash
	if hash == nil {
		hash = keyhash.XXH64
	}
	maxMisses := opts.MaxMisses
	if maxMisses == 0 {
		maxMisses = 20
	}
	var table []string
	if opts.Slots == nil {
		for _, nd := range nodes {
			for range max(nd.Weight, 1) {
				table = append(table, nd.Name)
			}
		}
	} else {
		for _, s := range opts.Slots(nil, nodes) {
			name := ""
			if s >= 0 {
				name = nodes[s].Name
			}
			table = append(table, name)
		}
	}
	var got []string
	slotted := 0
	for _, nd := range nodes {
		if slices.Contains(table, nd.Name) {
			slotted++
		}
	}
	h := hash(key)
	slot := int(h % uint64(len(table)))
	probes, misses := 0, 0
	for len(got) < min(n, slotted) {
		if name := table[slot]; name != "" && !slices.Contains(got, name) {
			got = append(got, name)
			if len(got) == min(n, slotted) {
				break
			}
		} else {
			misses++
		}
		if opts.Rehash != nil && misses <= maxMisses {
			probes++
			h = opts.Rehash(key, probes, h)
			slot = int(h % uint64(len(table)))
		} else {
			slot = (slot + 1) % len(table)
		}
	}
	for _, nd := range nodes {
		if len(got) < n && !slices.Contains(table, nd.Name) {
			got = append(got, nd.Name)
		}
	}
	return got
}

// Every lookup agrees with the obvious modulo pool, with and without holes and rehashes, and
// with a miss limit small enough that walks happen.
func TestModulaAgainstReference(t *testing.T) {
	keys := testKeys(3000)
	// Slots that leave node "odd-last" without a slot, so AppendN must add it at the end.
	sparse := func(dst []int32, nodes []Node) []int32 {
		for i, n := range nodes {
			if !strings.HasPrefix(n.Name, "odd") {
				dst = append(dst, int32(i), -1)
			}
		}
		return dst
	}
	for _, tc := range []struct {
		name string
		opts ModulaOptions
	}{
		{"default", ModulaOptions{}},
		{"holes", ModulaOptions{Slots: holeSlots}},
		{"holes rehash", ModulaOptions{Slots: holeSlots, Rehash: rehashAdd}},
		{"holes rehash 2 misses", ModulaOptions{Slots: holeSlots, Rehash: rehashAdd, MaxMisses: 2}},
		{"sparse", ModulaOptions{Slots: sparse, Rehash: rehashAdd, MaxMisses: 1}},
	} {
		for _, size := range []int{1, 3, 10} {
			nodes := numbered(size)
			if tc.name == "sparse" {
				nodes = append(nodes, Node{Name: "odd-last", Weight: 1})
			}
			p, err := NewModula(nodes, tc.opts)
			require.NoError(t, err)
			members := p.Nodes()
			for _, k := range keys {
				for _, n := range []int{1, 2, 3, len(nodes)} {
					want := refModulaAppendN(members, tc.opts, k, n)
					got := p.AppendN(nil, k, n)
					require.Equalf(t, want, got, "%s, %d nodes: AppendN(%q, %d)", tc.name, size, k, n)
				}
				require.Equalf(t, p.AppendN(nil, k, 1)[0], p.Locate(k), "%s, %d nodes: Locate(%q)", tc.name, size, k)
			}
		}
	}
}

// The default table gives each node exactly its weight's share of the slots.
func TestModulaShares(t *testing.T) {
	nodes := []Node{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}}
	p, err := NewModula(nodes, ModulaOptions{})
	require.NoError(t, err)
	checkShares(t, p, testKeys(100_000), 0.03)
	assert.Equal(t, uint64(10), p.state.Load().size)
}

func TestModulaBadOptions(t *testing.T) {
	for _, tc := range []struct {
		what string
		opts ModulaOptions
		want error
	}{
		{"a slot of an unknown node", ModulaOptions{Slots: func(dst []int32, nodes []Node) []int32 { return append(dst, int32(len(nodes))) }}, ErrNode},
		{"a slot below -1", ModulaOptions{Slots: func(dst []int32, _ []Node) []int32 { return append(dst, -2) }}, ErrNode},
		{"only holes", ModulaOptions{Slots: func(dst []int32, _ []Node) []int32 { return append(dst, -1, -1) }}, ErrEmpty},
		{"no slots", ModulaOptions{Slots: func(dst []int32, _ []Node) []int32 { return dst }}, ErrEmpty},
		{"too many slots", ModulaOptions{Slots: func(dst []int32, _ []Node) []int32 { return make([]int32, maxModulaSlots+1) }}, ErrLimit},
		{"negative MaxMisses", ModulaOptions{MaxMisses: -1}, ErrLimit},
	} {
		_, err := NewModula(numbered(3), tc.opts)
		require.ErrorIsf(t, err, tc.want, "%s", tc.what)
		assert.Truef(t, strings.HasPrefix(err.Error(), "pool: modula: "), "error %q lacks the prefix", err)
	}
	// Too many slots by weight, and a failed change leaves the pool as it was.
	nodes := make([]Node, 65)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprint("n", i), Weight: MaxWeight}
	}
	_, err := NewModula(nodes, ModulaOptions{})
	require.ErrorIs(t, err, ErrLimit)
	p, err := NewModula(nodes[:64], ModulaOptions{})
	require.NoError(t, err)
	before := owners(p, testKeys(100))
	require.ErrorIs(t, p.Add(nodes[64]), ErrLimit)
	require.Equal(t, before, owners(p, testKeys(100)))
	require.Len(t, p.Nodes(), 64)
}

// A modulo pool keeps its slots where the join order puts them: a change in the middle moves
// most keys, one at the end moves some, as modulo does.
func TestModulaMovesAsModulo(t *testing.T) {
	keys := testKeys(20_000)
	p, err := NewModula(numbered(10), ModulaOptions{})
	require.NoError(t, err)
	before := owners(p, keys)
	require.NoError(t, p.Remove("node-00"))
	moved := 0
	for i, o := range owners(p, keys) {
		if o != before[i] {
			moved++
		}
	}
	assert.Greater(t, moved, len(keys)/2, "removing the first node of a modulo pool should move most keys")
}
