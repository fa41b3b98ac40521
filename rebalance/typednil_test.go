package rebalance

import (
	"testing"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// TestTypedNilRefused: a nil pointer in an interface (a *memStore or a *MemShared declared
// but never made, say) is refused up front with ErrConfig, as nil is, instead of failing at
// the first call of a running migration.
func TestTypedNilRefused(t *testing.T) {
	before, err := shard.NewJump(3)
	require.NoError(t, err)
	after, err := shard.NewJump(4)
	require.NoError(t, err)
	var store *memStore
	_, err = New("m", before, after, store, Options{})
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "nil sharder or store")

	var shared *MemShared
	_, err = NewShared("m", before, after, SharedStore[*MemTx](shared), SharedOptions{})
	require.ErrorIs(t, err, ErrConfig)

	var nilJump *shard.Jump
	_, err = New("m", nilJump, after, newMemStore(4), Options{})
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewShared("m", before, nilJump, SharedStore[*MemTx](NewMemShared(4)), SharedOptions{})
	require.ErrorIs(t, err, ErrConfig)
}
