package pool

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// picked against a slice: positions and values as added, before and after it outgrows its
// array.
func TestPicked(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 33))
	const slots = 100
	var p picked
	var order []int32
	for _, s := range r.Perm(slots)[:40] {
		slot := int32(s)
		require.False(t, p.has(slot))
		p.add(slot, 7*slot, slots)
		order = append(order, slot)
		require.Equal(t, len(order), p.len())
		for s := range int32(slots) {
			pos, aux := p.find(s)
			want := slices.Index(order, s)
			require.Equalf(t, want, pos, "find(%d) after %d added", s, len(order))
			if want >= 0 {
				require.Equal(t, 7*s, aux)
			}
		}
	}
}

// AppendN allocates nothing up to the number of nodes each strategy's doc promises.
func TestAppendNAllocs(t *testing.T) {
	nodes := numbered(40)
	for _, tc := range []struct {
		c     contract
		upTo  int
		after func(p Pool) error
	}{
		{maglevContract, pickedSmall, nil},
		{multiProbeContract, pickedSmall, nil},
		{mementoContract, pickedSmall + 1, func(p Pool) error { return p.Remove("node-07", "node-33") }},
	} {
		p, err := tc.c.newPool(nodes)
		require.NoError(t, err)
		if tc.after != nil {
			require.NoError(t, tc.after(p))
		}
		dst := make([]string, 0, len(nodes))
		require.Zerof(t, testing.AllocsPerRun(20, func() { dst = p.AppendN(dst[:0], "user:1", tc.upTo) }), "%s: AppendN of %d", tc.c.name, tc.upTo)
		all := p.AppendN(nil, "user:1", len(nodes))
		require.Len(t, all, len(p.Nodes()), "%s: past %d nodes it allocates but still answers", tc.c.name, tc.upTo)
		require.Equal(t, all[:tc.upTo], p.AppendN(nil, "user:1", tc.upTo), tc.c.name)
	}
}
