package catalog

import (
	"testing"

	"github.com/shardkit/shard"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAll(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All() {
		require.False(t, seen[s.Name], "duplicate name %q", s.Name)
		seen[s.Name] = true
		for _, n := range []int{1, 10} {
			sh, err := s.New(n, Options{})
			require.NoError(t, err, "%s(%d)", s.Name, n)
			assert.Equal(t, n, sh.Shards(), s.Name)
		}
		got, ok := Find(s.Name)
		require.True(t, ok)
		assert.Equal(t, s.Name, got.Name)
	}
	_, ok := Find("no such strategy")
	assert.False(t, ok)
}

// MaxShards must be each constructor's own limit: one more fails with ErrShardCount, and
// the limit itself is accepted (checked where building that many shards is cheap; a ring or
// trie at its limit holds millions of points or directory entries).
func TestMaxShards(t *testing.T) {
	cheap := map[string]bool{"modulo": true, "first-byte-sha1": true, "jump": true, "jump-back": true, "rendezvous": true, "partitions": true, "redis-cluster": true, "paged-partitions": true}
	for _, o := range []Options{{}, {Vnodes: 16, Partitions: 1000}, {Vnodes: 5000, Partitions: 1}} {
		for _, s := range All() {
			max := s.MaxShards(o)
			require.Positive(t, max, s.Name)
			assert.True(t, s.Fits(max, o), s.Name)
			assert.False(t, s.Fits(max+1, o), s.Name)
			assert.False(t, s.Fits(0, o), s.Name)
			_, err := s.New(max+1, o)
			require.ErrorIsf(t, err, shard.ErrShardCount, "%s(%d, %+v)", s.Name, max+1, o)
			if cheap[s.Name] {
				_, err := s.New(max, o)
				require.NoErrorf(t, err, "%s(%d, %+v)", s.Name, max, o)
			}
		}
	}
}
