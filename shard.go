// Package shard decides which shard owns a key.
//
// Every strategy implements [Sharder]: Locate maps a key to a shard number in [0, Shards()),
// Resize changes the number of shards, and each strategy documents which keys a resize moves.
// The strategies range from plain modulo to consistent-hash rings that place keys exactly as
// Jedis and Cassandra do, rendezvous hashing, jump hash and its constant-time successor
// JumpBackHash, a bit trie, fixed partitions (Redis Cluster's 16384 slots among them) and
// co-location by ID prefix. [LocateBatch] places many keys in one call.
//
// Placement never depends on the process: every hash is fixed and seedless (never
// hash/maphash), and golden vectors in testdata pin the outputs, so every process that routes
// with the same strategy and shard count agrees on every key.
//
// # Sources
//
// The documentation cites five source documents by number; the README's Sources section
// gives each one's title in its own language, author and date:
//
//   - [000] the two-algorithms post, «Делаем алгоритм шардинга. Два решения: простое и
//     красивое» (2014): first-byte SHA-1 and the Jedis MD5 ring;
//   - [001] the ID-features article, 《一种以ID特征为依据的数据分片(Sharding)策略》: IDs
//     per partition, prefix IDs, co-location;
//   - [002] the consistent-hash homework, 《架构师训练营第 5 周作业——一致性 Hash 算法》 by 在野
//     (2020): a Murmur ring and its deviation against the vnode count;
//   - [003] the sharding lecture, «Шардирование» by Илья Кокорин (Ilya Kokorin): modulo, the
//     bit trie, fixed sections, rendezvous, consistent and jump hashing;
//   - [004] the rebalancing post, «Ребалансировка данных при шардинге»: asynchronous and lazy
//     rebalancing.
package shard

import (
	"errors"
	"fmt"
)

// Sharder maps keys to shards numbered 0..Shards()-1.
//
// Locate never allocates, never panics and is safe for concurrent use by many goroutines,
// also while another goroutine calls Resize: implementations publish an immutable lookup
// table atomically and take no lock on the lookup path. The zero value of every strategy in
// this package is safe too: it has no shards and its Locate returns 0 (the zero Trie has one
// shard), and each type's documentation says whether Resize makes it usable.
//
// Resize calls are serialized; a lookup that runs concurrently with a Resize sees either the
// old or the new placement, never a mix.
//
// Growing adds shards at the end; shrinking removes the highest-numbered ones. A Resize that
// fails returns an error and leaves the sharder exactly as it was.
type Sharder interface {
	Locate(key string) int // the shard that owns key, in [0, Shards())
	Resize(n int) error    // change the number of shards to n
	Shards() int           // the current number of shards
}

// BatchLocator is implemented by sharders that place many keys in one call faster than one
// Locate per key. LocateBatch sets dst[i] to the shard of keys[i], exactly what Locate(keys[i])
// returns, for every i in [0, len(keys)), and leaves the rest of dst alone.
//
// Every key of one call sees the same placement: a Resize that runs concurrently takes effect
// before or after the whole batch. Like Locate, LocateBatch never allocates and takes no lock.
// It panics if len(dst) < len(keys): like an index out of range, that is a mistake in the
// calling code, not bad data.
type BatchLocator interface {
	LocateBatch(keys []string, dst []int)
}

// LocateBatch sets dst[i] to s.Locate(keys[i]) for every key, with s's own LocateBatch when s
// implements BatchLocator and one Locate per key otherwise (then each key sees the placement
// of the moment it is looked up). It panics if len(dst) < len(keys).
func LocateBatch(s Sharder, keys []string, dst []int) {
	if b, ok := s.(BatchLocator); ok {
		b.LocateBatch(keys, dst)
		return
	}
	dst = batchDst(keys, dst)
	for i, k := range keys {
		dst[i] = s.Locate(k)
	}
}

// batchDst returns dst[:len(keys)], or panics if dst is shorter than keys.
func batchDst(keys []string, dst []int) []int {
	if len(dst) < len(keys) {
		panicShortBatch(len(keys), len(dst))
	}
	return dst[:len(keys)]
}

// panicShortBatch is out of line so that batchDst stays small enough to inline.
//
//go:noinline
func panicShortBatch(keys, dst int) {
	panic(fmt.Sprintf("shard: LocateBatch: %d keys but room for %d shards in dst", keys, dst))
}

// ErrShardCount reports a shard count that a strategy cannot address: below 1, or above the
// strategy's own maximum. Errors returned by constructors and Resize wrap it, so callers can
// test for it with errors.Is.
var ErrShardCount = errors.New("shard count out of range")

// ErrShard reports a shard number outside [0, Shards()) given to an operation that names a
// shard, such as moving a partition to it or splitting its trie leaf.
var ErrShard = errors.New("shard out of range")

// checkCount returns nil if n is in [1, max], else an error wrapping ErrShardCount that
// names the strategy, the value and the allowed range.
func checkCount(strategy string, n, max int) error {
	if n >= 1 && n <= max {
		return nil
	}
	return fmt.Errorf("shard: %s: %d shards: allowed range is [1, %d]: %w", strategy, n, max, ErrShardCount)
}
