package bounded

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

// slowCap is the capacity rule the obvious way, in exact rational arithmetic:
// ceil(c × total × w / W).
func slowCap(c float64, total uint64, w, sum int) uint64 {
	if c == 0 {
		c = DefaultFactor
	}
	r := new(big.Rat).SetFloat64(c)
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Mul(new(big.Int).SetUint64(total), big.NewInt(int64(w)))))
	r.Quo(r, new(big.Rat).SetInt64(int64(sum)))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsUint64() {
		return math.MaxUint64
	}
	return q.Uint64()
}

// The exact fixed-point capacity against big.Rat, over factors near 1, powers of two,
// HAProxy's percentages and random ones, and totals up to MaxTotal.
func TestCapacityCrossCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	factors := []float64{0, 1.25, 1.1, 1.01, 1 + 0x1p-52, 2, 3, 1.5, 100, MaxFactor, math.Nextafter(MaxFactor, 0)}
	for range 200 {
		factors = append(factors, 1+r.Float64()*r.Float64()*10, 1+float64(r.IntN(900)+1)/100)
	}
	totals := []uint64{1, 2, 3, 4, 5, 7, 100, 1 << 20, MaxTotal - 1, MaxTotal}
	for range 50 {
		totals = append(totals, r.Uint64N(MaxTotal)+1, r.Uint64N(1000)+1)
	}
	for _, c := range factors {
		f, err := newFactor("test", c)
		require.NoError(t, err, "factor %v", c)
		for _, total := range totals {
			w := r.IntN(pool.MaxWeight) + 1
			sum := w + r.IntN(1<<30)
			if r.IntN(3) == 0 {
				w, sum = 1, r.IntN(100)+1
			}
			got := f.ceilShare(total*uint64(w), uint64(sum))
			want := slowCap(c, total, w, sum)
			if got != want {
				t.Fatalf("cap(c=%v, total=%d, w=%d, W=%d) = %d, want %d", c, total, w, sum, got, want)
			}
		}
	}
}

func TestFactorRefused(t *testing.T) {
	ring, err := pool.NewRing([]pool.Node{{Name: "a"}}, pool.RingOptions{})
	require.NoError(t, err)
	for _, c := range []float64{1, 0.5, -1, math.NaN(), math.Inf(1), math.Inf(-1), MaxFactor + 1, math.SmallestNonzeroFloat64} {
		_, err := New(ring, Options{Factor: c})
		require.ErrorIs(t, err, ErrFactor, "New with factor %v", c)
		require.Contains(t, err.Error(), "bounded: new: factor")
		_, err = Assign(ring, []Item{{Key: "k"}}, Options{Factor: c})
		require.ErrorIs(t, err, ErrFactor, "Assign with factor %v", c)
	}
}

func TestEmptyPool(t *testing.T) {
	for name, p := range map[string]pool.Pool{"nil": nil, "zero ring": &pool.Ring{}, "zero rendezvous": &pool.Rendezvous{}} {
		_, err := New(p, Options{})
		require.ErrorIs(t, err, ErrEmpty, name)
		_, err = Assign(p, []Item{{Key: "k"}}, Options{})
		require.ErrorIs(t, err, ErrEmpty, name)
	}
	var b Balancer
	_, err := b.Acquire("k")
	require.ErrorIs(t, err, ErrEmpty)
	require.ErrorIs(t, b.Add(pool.Node{Name: "a"}), ErrEmpty)
	require.ErrorIs(t, b.Remove("a"), ErrEmpty)
	require.ErrorIs(t, b.SetWeight("a", 2), ErrEmpty)
	b.Sync()
	require.Nil(t, b.Nodes())
	require.Zero(t, b.Capacity("a", 1))
	var l Lease
	require.ErrorIs(t, l.Release(), ErrReleased)
	require.Empty(t, l.Node())
}

// pools returns the pools the tests run over: the wrapper works over any pool.Pool.
func pools(t testing.TB, nodes []pool.Node) map[string]pool.Pool {
	ring, err := pool.NewRing(nodes, pool.RingOptions{})
	require.NoError(t, err)
	rdv, err := pool.NewRendezvous(nodes, pool.RendezvousOptions{})
	require.NoError(t, err)
	mag, err := pool.NewMaglev(nodes, pool.MaglevOptions{})
	require.NoError(t, err)
	return map[string]pool.Pool{"ring": ring, "rendezvous": rdv, "maglev": mag}
}

func nodesN(n int, weighted bool) []pool.Node {
	nodes := make([]pool.Node, n)
	for i := range nodes {
		nodes[i] = pool.Node{Name: fmt.Sprintf("node-%02d", i)}
		if weighted {
			nodes[i].Weight = 1 + i%3
		}
	}
	return nodes
}
