package pool

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/internal/keyhash"
)

func newModulaPool(opts ModulaOptions) func([]Node) (Pool, error) {
	return func(nodes []Node) (Pool, error) { return NewModula(nodes, opts) }
}

// Modula's placement depends on the join order and a change moves almost every key: it
// passes the contract without its three guarantees.
func TestModulaContract(t *testing.T) {
	checkContract(t, contract{name: "modula", newPool: newModulaPool(ModulaOptions{})})
}

// interleaved fills slots round-robin over the nodes that still have weight left, the
// way a system that spreads each node's slots lays out its table: weights 3, 1, 2 give
// A B C A C A.
func interleaved(dst []int32, nodes []Node) []int32 {
	left := make([]int, len(nodes))
	total := 0
	for i, n := range nodes {
		left[i] = n.Weight
		total += n.Weight
	}
	for len(dst) < total {
		for i := range nodes {
			if left[i] > 0 {
				dst = append(dst, int32(i))
				left[i]--
			}
		}
	}
	return dst
}

func TestModulaContractInterleaved(t *testing.T) {
	checkContract(t, contract{name: "interleaved modula", newPool: newModulaPool(ModulaOptions{Slots: interleaved})})
}

func FuzzModula(f *testing.F) {
	fuzzSeeds(f)
	c := contract{name: "modula", newPool: newModulaPool(ModulaOptions{})}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOps(t, c, data) })
}

// refModula is the obvious weighted modulo: the table written out node by node, and the
// replicas found by walking it and skipping the nodes already taken.
type refModula struct{ table []string }

func newRefModula(nodes []Node, slots func([]int32, []Node) []int32) refModula {
	var r refModula
	for _, s := range slots(nil, nodes) {
		r.table = append(r.table, nodes[s].Name)
	}
	return r
}

func (r refModula) appendN(key string, hash func(string) uint64, n int, nodes []Node) []string {
	var out []string
	start := int(hash(key) % uint64(len(r.table)))
	for i := range r.table {
		if name := r.table[(start+i)%len(r.table)]; len(out) < n && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, node := range nodes { // nodes without a slot, in join order
		if len(out) < n && !slices.Contains(r.table, node.Name) {
			out = append(out, node.Name)
		}
	}
	return out
}

func defaultSlots(dst []int32, nodes []Node) []int32 {
	for i, n := range nodes {
		for range n.Weight {
			dst = append(dst, int32(i))
		}
	}
	return dst
}

// Locate and AppendN against the table written out, for default and custom slots, 64-bit
// and 32-bit hashes, and a slot function that leaves nodes out.
func TestModulaAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 33))
	keys := testKeys(3000)
	hash32 := func(s string) uint64 { return uint64(uint32(keyhash.XXH64(s))) }
	skipOdd := func(dst []int32, nodes []Node) []int32 { // every other node fills no slot
		for i, n := range nodes {
			for j := 0; j < n.Weight && i%2 == 0; j++ {
				dst = append(dst, int32(i))
			}
		}
		return dst
	}
	for trial := range 40 {
		nodes := make([]Node, 1+r.IntN(40))
		for i := range nodes {
			nodes[i] = Node{Name: fmt.Sprintf("n%d-%d", trial, i), Weight: 1 + r.IntN(5)}
		}
		for _, tc := range []struct {
			name  string
			opts  ModulaOptions
			slots func([]int32, []Node) []int32
			hash  func(string) uint64
		}{
			{"default", ModulaOptions{}, defaultSlots, keyhash.XXH64},
			{"interleaved 32-bit", ModulaOptions{Hash: hash32, Slots: interleaved}, interleaved, hash32},
			{"slotless nodes", ModulaOptions{Slots: skipOdd}, skipOdd, keyhash.XXH64},
		} {
			p, err := NewModula(nodes, tc.opts)
			require.NoError(t, err)
			ref := newRefModula(nodes, tc.slots)
			for _, k := range keys[:300] {
				want := ref.appendN(k, tc.hash, len(nodes)+1, nodes)
				require.Equalf(t, want[0], p.Locate(k), "%s, %d nodes: Locate(%q)", tc.name, len(nodes), k)
				for _, n := range []int{1, 2, 3, 17, len(nodes)} {
					require.Equalf(t, want[:min(n, len(want))], p.AppendN(nil, k, n), "%s, %d nodes: AppendN(%q, %d)", tc.name, len(nodes), k, n)
				}
			}
		}
	}
}

// The slots as twemproxy's modula lays them out: weights 3, 1, 2 give A A A B C C, and
// every hash value's slot is its remainder modulo 6.
func TestModulaDefaultTable(t *testing.T) {
	identity := func(s string) uint64 { var h uint64; fmt.Sscan(s, &h); return h }
	p, err := NewModula([]Node{{"A", 3}, {"B", 1}, {"C", 2}}, ModulaOptions{Hash: identity})
	require.NoError(t, err)
	for h, want := range []string{"A", "A", "A", "B", "C", "C", "A", "A", "A", "B", "C", "C"} {
		require.Equalf(t, want, p.Locate(fmt.Sprint(h)), "hash %d", h)
	}
	require.Equal(t, "A", p.Locate(fmt.Sprint(uint64(1)<<63)), "2^63 mod 6 = 2") // 64-bit remainder
	require.Equal(t, []string{"B", "C", "A"}, p.AppendN(nil, "3", 5))
	require.Equal(t, []string{"C", "A", "B"}, p.AppendN(nil, "5", 3))
}

func TestModulaBadSlots(t *testing.T) {
	nodes := []Node{{Name: "a"}, {Name: "b"}}
	for _, tc := range []struct {
		name  string
		slots func([]int32, []Node) []int32
		want  error
	}{
		{"out of range", func(dst []int32, _ []Node) []int32 { return append(dst, 0, 2) }, ErrNode},
		{"negative", func(dst []int32, _ []Node) []int32 { return append(dst, -1) }, ErrNode},
		{"none", func(dst []int32, _ []Node) []int32 { return dst }, ErrEmpty},
		{"too many", func(dst []int32, _ []Node) []int32 { return make([]int32, maxModulaSlots+1) }, ErrLimit},
	} {
		_, err := NewModula(nodes, ModulaOptions{Slots: tc.slots})
		require.ErrorIsf(t, err, tc.want, "%s", tc.name)
		require.Regexpf(t, "^pool: modula: ", err.Error(), "%s", tc.name)
	}

	// Too many slots by weight: refused at construction and on a change, which changes nothing.
	heavy := make([]Node, maxModulaSlots/MaxWeight+1)
	for i := range heavy {
		heavy[i] = Node{Name: fmt.Sprint(i), Weight: MaxWeight}
	}
	_, err := NewModula(heavy, ModulaOptions{})
	require.ErrorIs(t, err, ErrLimit)
	p, err := NewModula(heavy[1:], ModulaOptions{})
	require.NoError(t, err)
	require.ErrorIs(t, p.Add(Node{Name: "one more"}), ErrLimit)
	require.Len(t, p.Nodes(), len(heavy)-1)
}

// A 32-bit hash modulo the slots takes the 32-bit path; it must agree with the 64-bit one.
func TestModulaSlotArithmetic(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 44))
	all := make([]int32, maxModulaSlots) // slot reads only the length
	for range 100000 {
		n := 1 + r.IntN(maxModulaSlots)
		tb := &modulaTable{slots: all[:n]}
		h := r.Uint64()
		if r.IntN(2) == 0 {
			h >>= 32
		}
		require.Equalf(t, int(h%uint64(n)), tb.slot(h), "%d mod %d", h, n)
	}
}
