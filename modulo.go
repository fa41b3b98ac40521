package shard

import (
	"math"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
)

// Modulo places a key on shard xxhash64(key) % n, the rule of the sharding lecture [003].
//
// It is perfectly even and the fastest strategy, but a resize moves almost every key: from n
// to n+1 shards a key stays only if both remainders agree, so about n/(n+1) of all keys
// move. The one exception is growing by an integer factor: from n to k*n shards a key on
// shard s either stays or moves to s + j*n, and shrinking by a factor is the reverse.
//
// Make one with NewModulo. The zero Modulo has no shards: Shards, Locate and LocateID return
// 0 until Resize gives it some. All methods are safe for concurrent use: the count is one
// atomic word, so Resize needs no lock and a lookup sees the count before or after it.
type Modulo struct {
	n atomic.Uint64
}

// maxModulo bounds the shard count so that every result fits an int on 32-bit platforms.
const maxModulo = math.MaxInt32

// NewModulo returns a Modulo sharder over n shards, n in [1, 2^31-1].
func NewModulo(n int) (*Modulo, error) {
	if err := checkCount("modulo", n, maxModulo); err != nil {
		return nil, err
	}
	m := &Modulo{}
	m.n.Store(uint64(n))
	return m, nil
}

// Locate returns xxhash64(key) % n, in [0, Shards()).
func (m *Modulo) Locate(key string) int {
	n := m.n.Load()
	if n == 0 { // the zero Modulo
		return 0
	}
	return int(keyhash.XXH64(key) % n)
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys).
func (m *Modulo) LocateBatch(keys []string, dst []int) {
	dst = batchDst(keys, dst)
	n := m.n.Load()
	if n == 0 { // the zero Modulo
		clear(dst)
		return
	}
	for i, k := range keys {
		dst[i] = int(keyhash.XXH64(k) % n)
	}
}

// LocateID returns id % n, in [0, Shards()): the routing of raw integer IDs that documents
// 001 and 004 use (for example user_id % 5). Consecutive IDs go to consecutive shards.
func (m *Modulo) LocateID(id uint64) int {
	n := m.n.Load()
	if n == 0 { // the zero Modulo
		return 0
	}
	return int(id % n)
}

// Resize sets the number of shards to n. On error the shard count is unchanged.
func (m *Modulo) Resize(n int) error {
	if err := checkCount("modulo", n, maxModulo); err != nil {
		return err
	}
	m.n.Store(uint64(n))
	return nil
}

// Shards returns the current number of shards.
func (m *Modulo) Shards() int {
	return int(m.n.Load())
}
