package shard

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Error messages for bad input that read wrong or accepted too much (issue 11, item 6).

func TestZeroRingResizeSaysWhy(t *testing.T) {
	var r Ring
	err := r.Resize(3)
	require.ErrorIs(t, err, ErrShardCount)
	assert.EqualError(t, err, "shard: zero Ring: make rings with NewRing, NewJedisRing or NewMurmurRing: shard count out of range")
}

// TestPartitionsRejectLeadingZeros: one spelling per number, as the trie's parser.
func TestPartitionsRejectLeadingZeros(t *testing.T) {
	for _, text := range []string{
		"hash=xxh64 partitions=04 shards=2\n0-3 1\n",
		"hash=xxh64 partitions=4 shards=02\n0-3 1\n",
		"hash=xxh64 partitions=4 shards=2\n00-3 1\n",
		"hash=xxh64 partitions=4 shards=2\n0-03 1\n",
		"hash=xxh64 partitions=4 shards=2\n0-3 01\n",
	} {
		var p Partitions
		err := p.UnmarshalText([]byte(text))
		assert.ErrorIs(t, err, ErrPartitionTable, "%q", text)
	}
	var p Partitions
	require.NoError(t, p.UnmarshalText([]byte("hash=xxh64 partitions=4 shards=2\n0 0\n1-3 1\n")), "0 alone is a number")
}

func TestTrieErrorShowsRawByte(t *testing.T) {
	var tr Trie
	err := tr.UnmarshalText([]byte("\xff 0\n"))
	require.ErrorIs(t, err, ErrTrieShape)
	assert.Contains(t, err.Error(), `path has byte '\xff'`)
	assert.False(t, strings.Contains(err.Error(), "ÿ"), err.Error())
}
