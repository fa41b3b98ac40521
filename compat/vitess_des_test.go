package compat

import (
	"crypto/des"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// desZeroKey is DES under the zero key, as crypto/des computes it, on edge and random blocks.
func TestVitessDESMatchesCryptoDES(t *testing.T) {
	block, err := des.NewCipher(make([]byte, 8))
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(7, 8))
	inputs := []uint64{0, 1, 1 << 63, ^uint64(0), 0x0123456789abcdef}
	for range 20000 {
		inputs = append(inputs, r.Uint64())
	}
	for _, in := range inputs {
		var src, dst [8]byte
		binary.BigEndian.PutUint64(src[:], in)
		block.Encrypt(dst[:], src[:])
		require.Equal(t, binary.BigEndian.Uint64(dst[:]), desZeroKey(in), "block %#x", in)
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = desZeroKey(42) }))
}
