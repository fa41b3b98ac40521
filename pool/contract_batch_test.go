package pool

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkLocateBatch: LocateBatch answers what Locate answers for every length (each remainder
// of the batches), writes nothing past len(keys), allocates nothing, and refuses a short dst.
func checkLocateBatch(t *testing.T, name string, newPool func([]Node) (Pool, error)) {
	keys := testKeys(3000)
	for _, size := range []int{1, 5, 37} {
		for _, nodes := range [][]Node{numbered(size), benchNodes(size)} { // mixed weights, and one weight
			p, err := newPool(nodes)
			require.NoError(t, err)
			_, ok := p.(BatchLocator)
			require.True(t, ok, "%s implements BatchLocator", name)
			want := owners(p, keys)
			for _, n := range []int{0, 1, 3, 4, 5, 31, 32, 33, 65, len(keys)} {
				dst := make([]string, n+1)
				dst[n] = "kept"
				LocateBatch(p, keys[:n], dst)
				require.Equalf(t, want[:n], dst[:n], "%s(%d nodes).LocateBatch of %d keys", name, size, n)
				require.Equal(t, "kept", dst[n], "LocateBatch wrote past len(keys)")
			}
			dst := make([]string, 100)
			require.Zerof(t, testing.AllocsPerRun(10, func() { LocateBatch(p, keys[:100], dst) }), "%s.LocateBatch allocates", name)
			require.PanicsWithValue(t, "pool: LocateBatch: 3 keys but room for 2 nodes in dst", func() { LocateBatch(p, keys[:3], dst[:2]) })
			require.True(t, slices.Equal(want[:100], dst[:100]))
		}
	}
}

func TestRingLocateBatch(t *testing.T) {
	checkLocateBatch(t, "ring", newRingPool(RingOptions{}))
	checkLocateBatch(t, "ring with ties", newRingPool(RingOptions{Hash: coarseHash, Vnodes: 20}))
	checkLocateBatch(t, "nearest ring", newRingPool(RingOptions{Lookup: RingNearest}))
}

func TestRendezvousLocateBatch(t *testing.T) {
	checkLocateBatch(t, "rendezvous", newRendezvousPool(RendezvousOptions{}))
	checkLocateBatch(t, "rendezvous with ties", newRendezvousPool(RendezvousOptions{Score: coarseScore}))
}
