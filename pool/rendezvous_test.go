package pool

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/internal/keyhash"
)

func newRendezvousPool(opts RendezvousOptions) func([]Node) (Pool, error) {
	return func(nodes []Node) (Pool, error) { return NewRendezvous(nodes, opts) }
}

func TestRendezvousContract(t *testing.T) {
	checkContract(t, contract{name: "rendezvous", newPool: newRendezvousPool(RendezvousOptions{}), orderFree: true, minimal: true, nextOnRemove: true})
}

// A score of 8 bits makes ties of score and of -w/ln(u) common, which the tie rule (larger
// score, then smaller name) must settle without depending on the join order.
func TestRendezvousContractTies(t *testing.T) {
	checkContract(t, contract{name: "rendezvous with ties", newPool: newRendezvousPool(RendezvousOptions{Score: coarseScore}),
		orderFree: true, minimal: true, nextOnRemove: true})
}

func coarseScore(k, n uint64) uint64 { return mum(k^n) &^ (1<<56 - 1) }

// coarseKeyScore scores from the key and the name themselves, in 8 bits.
func coarseKeyScore(key, name string) uint64 {
	return mum(keyhash.XXH64(key)^keyhash.XXH64(name)) &^ (1<<56 - 1)
}

// With a score of the key and the name and the larger name winning ties (pymemcache's rule),
// changes stay minimal and independent of the join order.
func TestRendezvousContractKeyScore(t *testing.T) {
	checkContract(t, contract{name: "rendezvous by key and name", newPool: newRendezvousPool(RendezvousOptions{KeyScore: coarseKeyScore, LargerNameWins: true}),
		orderFree: true, minimal: true, nextOnRemove: true})
}

func FuzzRendezvous(f *testing.F) {
	fuzzSeeds(f)
	c := contract{name: "rendezvous", newPool: newRendezvousPool(RendezvousOptions{Score: coarseScore}), orderFree: true, minimal: true, nextOnRemove: true}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOps(t, c, data) })
}

// refRendezvous ranks every member by the definition: the smaller -ln(u)/weight, then the
// larger score, then the smaller name. It takes -ln(u) from negLog, which TestNegLog checks
// against math.Log: placement is defined by negLog's bits, and math.Log's can differ from
// them in the last place, which reorders two nodes whose values agree to 1e-16.
func refRendezvous(nodes []Node, opts RendezvousOptions, key string) []string {
	score := opts.Score
	if score == nil {
		score = func(k, n uint64) uint64 { return mum(k ^ n) }
	}
	type ranked struct {
		name string
		w, s uint64
	}
	all := make([]ranked, len(nodes))
	for i, n := range nodes {
		all[i] = ranked{n.Name, uint64(n.Weight), score(keyhash.XXH64(key), keyhash.XXH64(n.Name))}
		if opts.KeyScore != nil {
			all[i].s = opts.KeyScore(key, n.Name)
		}
	}
	value := func(r ranked) float64 { return negLog(r.s) / float64(r.w) } // -ln(u)/weight
	slices.SortFunc(all, func(a, b ranked) int {
		switch va, vb := value(a), value(b); {
		case va != vb:
			return cmpFloat(va, vb)
		case a.s != b.s:
			return -cmpFloat(float64(a.s), float64(b.s))
		}
		if opts.LargerNameWins {
			return strings.Compare(b.name, a.name)
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, len(all))
	for i, r := range all {
		out[i] = r.name
	}
	return out
}

// Every lookup ranks the nodes as the definition does, with one logarithm per weight instead
// of one per node, for n below and above the fixed arrays, with and without ties.
func TestRendezvousCrossCheck(t *testing.T) {
	keys := testKeys(1000)
	r := rand.New(rand.NewPCG(4, 44))
	for _, opts := range []RendezvousOptions{{}, {Score: coarseScore}, {KeyScore: coarseKeyScore, LargerNameWins: true}, {Score: coarseScore, LargerNameWins: true}} {
		for _, size := range []int{1, 2, 7, 40} {
			nodes := make([]Node, size)
			for i := range nodes {
				nodes[i] = Node{Name: fmt.Sprintf("n%d", r.IntN(1000)*1000+i), Weight: 1 + r.IntN(4)}
			}
			if size == 7 {
				for i := range nodes {
					nodes[i].Weight = 3 // one weight: no logarithm at all
				}
			}
			p, err := NewRendezvous(nodes, opts)
			require.NoError(t, err)
			for _, k := range keys {
				want := refRendezvous(p.Nodes(), opts, k)
				require.Equalf(t, want[0], p.Locate(k), "%d nodes: Locate(%q)", size, k)
				for _, n := range []int{1, 2, 3, 8, 9, size} {
					require.Equalf(t, want[:min(n, size)], p.AppendN(nil, k, n), "%d nodes: AppendN(%q, %d)", size, k, n)
				}
			}
		}
	}
}

// negLog agrees with math.Log within its stated error everywhere, edges included, and gives
// the pinned bits on every platform (the regress test pins placements that depend on it).
func TestNegLog(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 55))
	scores := []uint64{0, 1, 1 << 12, 1<<13 - 1, math.MaxUint64, math.MaxUint64 - 1<<12, 1 << 63, 1<<63 - 1}
	for range 200_000 {
		scores = append(scores, r.Uint64(), r.Uint64()>>r.IntN(64))
	}
	for _, s := range scores {
		want := -math.Log((float64(s>>12) + 0.5) / (1 << 52))
		got := negLog(s)
		if math.Abs(got-want) > 1e-14*want+2e-16 {
			t.Fatalf("negLog(%#x) = %v, want %v", s, got, want)
		}
	}
	require.Equal(t, uint64(0x40425e4f7b2737fa), math.Float64bits(negLog(0)), "-ln(2^-53) = 53 ln 2")
	for j, want := range map[int]uint64{0: 0, 1: 0x3f7fe02a6b106789, 64: 0x3fd9f323ecbf984c, 127: 0x3fe60e32f44788d9} {
		require.Equalf(t, want, math.Float64bits(lnTable[j]), "lnTable[%d] = %v", j, lnTable[j])
	}
}

// go-redis v9's Ring with dgryski/go-rendezvous: the node whose xorshiftMult64(xxhash(key) xor
// xxhash(name)) is largest. The options reproduce it (checked here against a transcription
// of that rule; benchmarks/peers runs the package itself).
func TestRendezvousGoRedisScore(t *testing.T) {
	xorshiftMult64 := func(x uint64) uint64 {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		return x * 2685821657736338717
	}
	names := []string{"shard-a", "shard-b", "shard-c", "10.0.0.7:6379", "cache"}
	nodes := make([]Node, len(names))
	for i, n := range names {
		nodes[i] = Node{Name: n}
	}
	p, err := NewRendezvous(nodes, RendezvousOptions{Score: func(k, n uint64) uint64 { return xorshiftMult64(k ^ n) }})
	require.NoError(t, err)
	for _, k := range testKeys(5000) {
		kh, best, bestScore := keyhash.XXH64(k), 0, uint64(0)
		for i, n := range names {
			if s := xorshiftMult64(kh ^ keyhash.XXH64(n)); i == 0 || s > bestScore {
				best, bestScore = i, s
			}
		}
		require.Equalf(t, names[best], p.Locate(k), "Locate(%q)", k)
	}
}

// The placements of the default options, weighted and not, pinned: they also pin negLog's
// bits on every platform that runs the tests.
func TestRendezvousRegress(t *testing.T) {
	var b strings.Builder
	keys := testKeys(60)
	for _, nodes := range [][]Node{
		{{"10.0.0.7:6379", 1}, {"cache-b", 1}, {"cache-c", 1}},
		{{"10.0.0.7:6379", 1}, {"cache-b", 2}, {"cache-c", 3}, {"日本", 1}, {"x", 400}},
	} {
		p, err := NewRendezvous(nodes, RendezvousOptions{})
		require.NoError(t, err)
		for _, k := range keys {
			fmt.Fprintf(&b, "%d %.40q %q\n", len(nodes), k, p.AppendN(nil, k, 3))
		}
	}
	checkRegress(t, "pool-rendezvous.txt", b.String())
}
