package shard

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allocated runs f and returns the bytes it allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestPagedHeaderLimits: a header announces a page count, which is checked against the
// limit before the list of pages is made. "partitions=16777216 pagesize=1" in 51 bytes took
// 1.5 GB; it is refused in a few kilobytes, and the largest list a header may ask for takes
// 2 MiB.
func TestPagedHeaderLimits(t *testing.T) {
	for _, text := range []string{
		"hash=xxh64 partitions=16777216 pagesize=1 shards=1",
		"hash=xxh64 partitions=16777216 pagesize=128 shards=1\npage=0 version=1\n0-127 0\n",
	} {
		var q PagedPartitions
		var err error
		got := allocated(func() { err = q.LoadPages([]byte(text)) })
		require.ErrorIs(t, err, ErrPartitionTable, text)
		assert.ErrorContains(t, err, "pages: at most 65536")
		assert.LessOrEqual(t, got, uint64(4<<10), "%q: bytes allocated", text)
		got = allocated(func() { err = q.UnmarshalText([]byte(text)) })
		require.ErrorIs(t, err, ErrPartitionTable, text)
		assert.LessOrEqual(t, got, uint64(4<<10), "%q: bytes allocated", text)
	}
	var q PagedPartitions
	var err error
	got := allocated(func() {
		err = q.LoadPages([]byte("hash=xxh64 partitions=16777216 pagesize=256 shards=1\npage=7 version=1\n0-255 0\n"))
	})
	require.NoError(t, err)
	assert.LessOrEqual(t, got, uint64(8<<20), "65536 pages: bytes allocated (the list is made three times: parsed, loaded, published)")
	assert.Zero(t, q.Shards(), "one page of 65536 loaded")

	_, err = NewPagedPartitions(1, 1<<24, 1)
	require.ErrorIs(t, err, ErrPartitionCount)
	assert.EqualError(t, err, "shard: paged partitions: 16777216 partitions in pages of 1 make 16777216 pages: at most 65536: partition count out of range")
	_, err = NewPagedPartitions(1, 1<<24, 256)
	require.NoError(t, err)
}
