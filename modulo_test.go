package shard

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModuloContract(t *testing.T) {
	checkContract(t, contract{
		name:          "modulo",
		newSharder:    func(n int) (Sharder, error) { return NewModulo(n) },
		sizes:         []int{1, 2, 7, 10, 64, 1000},
		tooMany:       above(maxModulo),
		resizeIsFresh: true,
		batch:         true,
	})
}

// Growing by an integer factor keeps a key or moves it to s + j*n (the sharding lecture
// [003]).
func TestModuloDoubling(t *testing.T) {
	keys := randomKeys(2, 10000, 16)
	for _, n := range []int{1, 5, 10} {
		m, err := NewModulo(n)
		require.NoError(t, err)
		before := placement(m, keys)
		for _, factor := range []int{2, 3} {
			require.NoError(t, m.Resize(factor*n))
			for i, s := range placement(m, keys) {
				require.Equalf(t, before[i], s%n, "%d -> %d moved %q from %d to %d", n, factor*n, keys[i], before[i], s)
			}
		}
	}
}

func TestModuloLocateID(t *testing.T) {
	m, err := NewModulo(5)
	require.NoError(t, err)
	for id := uint64(0); id < 20; id++ {
		require.Equal(t, int(id%5), m.LocateID(id))
	}
	require.Equal(t, int(uint64(1<<64-1)%5), m.LocateID(1<<64-1))
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = m.LocateID(12345) }))
}

func TestModuloRegress(t *testing.T) {
	var b strings.Builder
	for _, n := range []int{1, 3, 10, 1000} {
		m, err := NewModulo(n)
		require.NoError(t, err)
		for _, k := range append(randomKeys(3, 20, 12), adversarialKeys()[:12]...) {
			fmt.Fprintf(&b, "%d %q %d\n", n, k, m.Locate(k))
		}
	}
	checkRegress(t, "regress/modulo.txt", b.String())
}
