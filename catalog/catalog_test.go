package catalog

import (
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"

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

func TestPools(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Pools() {
		require.False(t, seen[s.Name], "duplicate name %q", s.Name)
		seen[s.Name] = true
		for _, nodes := range [][]pool.Node{{{Name: "a"}}, {{Name: "a"}, {Name: "b", Weight: 3}, {Name: "c"}}} {
			p, err := s.New(nodes, Options{})
			require.NoError(t, err, s.Name)
			got := p.Nodes()
			require.Len(t, got, len(nodes), s.Name)
			for i, n := range nodes {
				assert.Equal(t, n.Name, got[i].Name, s.Name)
				assert.Equal(t, max(n.Weight, 1), got[i].Weight, s.Name)
			}
		}
		_, err := s.New(nil, Options{})
		require.ErrorIs(t, err, pool.ErrEmpty, s.Name)
		got, ok := FindPool(s.Name)
		require.True(t, ok)
		assert.Equal(t, s.Name, got.Name)
	}
	require.NotEmpty(t, seen)
	_, ok := FindPool("no such pool")
	assert.False(t, ok)
}

// Every preset entry is complete and named once, and refuses garbage; the command shows
// its Doc and calls New.
func TestPresets(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Presets() {
		require.NotEmpty(t, p.Name)
		require.False(t, seen[p.Name], "duplicate name %q", p.Name)
		seen[p.Name] = true
		assert.NotEmpty(t, p.Doc, p.Name)
		require.True(t, (p.New == nil) != (p.Partitions == nil), "%s: one of New and Partitions", p.Name)
		var err error
		if p.New != nil {
			_, err = p.New([]byte("\x00 not a configuration"), "")
		} else {
			_, err = p.Partitions([]byte("\x00 not a configuration"), 12)
		}
		assert.Error(t, err, "%s accepts garbage", p.Name)
		got, ok := FindPreset(p.Name)
		require.True(t, ok)
		assert.Equal(t, p.Name, got.Name)
	}
	require.Len(t, seen, len(compat.Presets())+len(compat.PartitionPresets()), "every compat preset is in the catalog")
	_, ok := FindPreset("no such preset")
	assert.False(t, ok)
}
