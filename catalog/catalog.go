// Package catalog lists every placement strategy of package shard with its name and
// constructor, so that the benchmarks, the comparison program and the peer comparison
// measure one and the same set. A new strategy is added here and nowhere else.
package catalog

import (
	"github.com/shardkit/shard"
)

// Defaults for the strategies that take a parameter besides the shard count.
const (
	// DefaultVnodes is the Murmur ring's points per shard: document 002's curve flattens
	// near 1000, where the deviation is about 3% of the mean.
	DefaultVnodes = 1000
	// DefaultPartitions is the partition count of the general Partitions strategy, as many
	// as Redis Cluster has slots, so up to 16384 shards can be addressed.
	DefaultPartitions = 16384
	// DefaultPageSize is the page size of the paged-partitions strategy: 16 pages of the
	// default 16384 partitions, 1024 pages of 2^20.
	DefaultPageSize = 1024
)

// Options are the parameters some strategies take; a zero field means its default.
type Options struct {
	Vnodes     int // points per shard on the Murmur ring (DefaultVnodes)
	Partitions int // partitions of the Partitions strategy (DefaultPartitions)
}

func (o Options) vnodes() int {
	if o.Vnodes == 0 {
		return DefaultVnodes
	}
	return o.Vnodes
}

func (o Options) partitions() int {
	if o.Partitions == 0 {
		return DefaultPartitions
	}
	return o.Partitions
}

// Strategy is one placement strategy.
type Strategy struct {
	Name string // short and stable, used in benchmark names: "modulo", "jump", ...
	// New builds the strategy with n shards.
	New func(n int, o Options) (shard.Sharder, error)
	// max returns the largest shard count New accepts with the options o.
	max func(o Options) int
}

// MaxShards returns the largest shard count the strategy accepts with the options o: a
// count above it makes New fail with an error wrapping shard.ErrShardCount.
func (s Strategy) MaxShards(o Options) int { return s.max(o) }

// Fits reports whether the strategy accepts n shards with the options o.
func (s Strategy) Fits(n int, o Options) bool {
	return n >= 1 && n <= s.max(o)
}

// The shard count limits of package shard's constructors, as their docs state them.
const (
	maxInt32      = 1<<31 - 1 // Modulo, Jump and JumpBack
	maxFirstByte  = 10
	maxRendezvous = 1 << 16
	maxRingPoints = 1 << 22 // shards * vnodes of every ring
	jedisVnodes   = 160
	maxTrie       = 1 << shard.MaxTrieDepth
	redisSlots    = 16384
	// maxPagedShards: PagedPartitions keeps shard numbers in 16 bits.
	maxPagedShards = 1 << 16
)

// fixed returns a max function for a limit that no option changes.
func fixed(n int) func(Options) int { return func(Options) int { return n } }

// All returns every strategy, the cheapest first. The slice is new on every call.
func All() []Strategy {
	return []Strategy{
		{Name: "modulo", max: fixed(maxInt32), New: func(n int, _ Options) (shard.Sharder, error) { return shard.NewModulo(n) }},
		{Name: "first-byte-sha1", max: fixed(maxFirstByte), New: func(n int, _ Options) (shard.Sharder, error) { return shard.NewFirstByteSHA1(n) }},
		{Name: "jump", max: fixed(maxInt32), New: func(n int, _ Options) (shard.Sharder, error) { return shard.NewJump(n) }},
		{Name: "jump-back", max: fixed(maxInt32), New: func(n int, _ Options) (shard.Sharder, error) { return shard.NewJumpBack(n) }},
		{Name: "rendezvous", max: fixed(maxRendezvous), New: func(n int, _ Options) (shard.Sharder, error) { return shard.NewRendezvous(n) }},
		{Name: "jedis-ring", max: fixed(maxRingPoints / jedisVnodes), New: func(n int, _ Options) (shard.Sharder, error) { return shard.NewJedisRing(n) }},
		{Name: "murmur-ring", max: func(o Options) int { return maxRingPoints / o.vnodes() }, New: func(n int, o Options) (shard.Sharder, error) { return shard.NewMurmurRing(n, o.vnodes()) }},
		{Name: "trie", max: fixed(maxTrie), New: func(n int, _ Options) (shard.Sharder, error) { return shard.NewTrie(n) }},
		{Name: "partitions", max: Options.partitions, New: func(n int, o Options) (shard.Sharder, error) { return shard.NewPartitions(n, o.partitions()) }},
		{Name: "redis-cluster", max: fixed(redisSlots), New: func(n int, _ Options) (shard.Sharder, error) { return shard.NewRedisCluster(n) }},
		{Name: "paged-partitions", max: func(o Options) int { return min(o.partitions(), maxPagedShards) }, New: func(n int, o Options) (shard.Sharder, error) {
			return shard.NewPagedPartitions(n, o.partitions(), DefaultPageSize)
		}},
	}
}

// Find returns the strategy called name, and whether there is one.
func Find(name string) (Strategy, bool) {
	for _, s := range All() {
		if s.Name == name {
			return s, true
		}
	}
	return Strategy{}, false
}
