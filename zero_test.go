package shard_test

import (
	"testing"

	"github.com/shardkit/shard"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroValues holds every strategy's zero value to the promise of the Sharder docs: no
// method panics, Locate returns 0 (the zero Trie has one shard), and Resize either makes the
// sharder usable or fails with an error and changes nothing.
func TestZeroValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      shard.Sharder
		shards int   // Shards() of the zero value
		usable bool  // whether Resize(3) works on it
		err    error // else what its error wraps
	}{
		{"Modulo", &shard.Modulo{}, 0, true, nil},
		{"FirstByteSHA1", &shard.FirstByteSHA1{}, 0, true, nil},
		{"Jump", &shard.Jump{}, 0, true, nil},
		{"Rendezvous", &shard.Rendezvous{}, 0, true, nil},
		{"Ring", &shard.Ring{}, 0, false, shard.ErrShardCount},
		{"Trie", &shard.Trie{}, 1, true, nil},
		{"Partitions", &shard.Partitions{}, 0, false, shard.ErrPartitionTable},
		{"Prefixed", &shard.Prefixed{}, 0, false, shard.ErrShardCount},
		{"Tagged", &shard.Tagged{}, 0, false, shard.ErrShardCount},
		{"JumpBack", &shard.JumpBack{}, 0, true, nil},
		{"PagedPartitions", &shard.PagedPartitions{}, 0, false, shard.ErrPartitionTable},
		{"Directory", &shard.Directory{}, 0, false, shard.ErrShardCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			require.NotPanics(t, func() {
				assert.Equal(t, tc.shards, s.Shards())
				for _, k := range []string{"", "user:1", "{tag}x", "1-A1"} {
					assert.Zero(t, s.Locate(k), "Locate(%q)", k)
				}
			})
			assert.Zero(t, testing.AllocsPerRun(10, func() { s.Locate("user:1") }))
			if b, ok := s.(shard.BatchLocator); ok {
				keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} // past the 4-wide paths
				dst := make([]int, len(keys)+1)
				for i := range dst {
					dst[i] = 7
				}
				require.NotPanics(t, func() { b.LocateBatch(keys, dst) })
				assert.Equal(t, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 7}, dst, "LocateBatch on the zero value")
			}
			err := s.Resize(3)
			if !tc.usable {
				require.ErrorIs(t, err, tc.err)
				assert.Equal(t, tc.shards, s.Shards(), "a failed Resize changes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, 3, s.Shards())
			for _, k := range []string{"", "a", "b", "c", "d"} {
				assert.Less(t, s.Locate(k), 3)
			}
		})
	}
}

// TestZeroValueExtras covers the methods beyond Sharder that the zero values have.
func TestZeroValueExtras(t *testing.T) {
	var m shard.Modulo
	assert.Zero(t, m.LocateID(7))

	var r shard.Ring
	assert.Zero(t, r.Points())

	var p shard.Partitions
	assert.Zero(t, p.Partition("user:1"))
	assert.Zero(t, p.NumPartitions())
	assert.Nil(t, p.Table())
	_, err := p.MarshalText()
	assert.ErrorIs(t, err, shard.ErrPartitionTable)
	_, err = p.PlanResize(2)
	assert.ErrorIs(t, err, shard.ErrPartitionTable)
	assert.ErrorIs(t, p.Move(0, 0), shard.ErrPartitionTable)
	// Owner panics on a partition out of range, like indexing a slice; for the zero
	// Partitions every partition is out of range, and the message says so.
	assert.PanicsWithValue(t, "shard: Partitions.Owner(0): partition out of range [0, 0)", func() { p.Owner(0) })
	require.NoError(t, p.UnmarshalText([]byte("hash=xxh64 partitions=4 shards=2\n0-1 0\n2-3 1\n")))
	assert.Equal(t, 2, p.Shards())

	var tr shard.Trie
	text, err := tr.MarshalText()
	require.NoError(t, err)
	assert.Equal(t, "- 0\n", string(text))

	var a shard.IDAllocator
	_, err = a.Next()
	assert.ErrorIs(t, err, shard.ErrIDPartition)
	assert.Zero(t, a.Last())
}
