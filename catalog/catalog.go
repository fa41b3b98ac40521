// Package catalog lists every placement strategy by name: the dense strategies of package
// shard ([All]), the named pools of package pool ([Pools]) and the presets of package compat
// that read another system's own configuration ([Presets]). The benchmarks, the shard
// command and the peer comparison measure and offer one and the same set through it. A new
// strategy or pool is added here, one entry in one list, and nowhere else; a new preset is
// added to package compat's list, as follows.
//
// # Adding a preset
//
// A preset of package compat registers with one line in the list compat.Presets returns
// (compat/presets.go): a compat.Preset with its System name, a Doc line that says what
// configuration text it takes and what the name picks in it, and New, which parses that
// text and returns a [pool.Pool] placing every key as the system does, or an error naming
// the line at fault. [Presets] lists them all under their System names, so the shard command
// takes -preset SYSTEM -config FILE [-pool NAME] for a new preset, and the catalog tests
// check it, with no change here.
package catalog

import (
	"github.com/shardkit/shard"
	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

// Defaults for the strategies that take a parameter besides the shard count.
const (
	// DefaultVnodes is the Murmur ring's points per shard: the consistent-hash homework's
	// [002] curve flattens near 1000, where the deviation is about 3% of the mean.
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
	// Vnodes is the points per shard of the Murmur ring (DefaultVnodes), and the points per
	// unit of weight of the pool ring (the pool's own default, 160).
	Vnodes     int
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

// Preset places keys exactly as another system does, configured by that system's own
// configuration text: a preset of package compat under its name.
type Preset struct {
	// Name is short and stable, the command's -preset value: "nginx", "haproxy", ...
	Name string
	// Doc says what configuration text New takes and what its name argument picks in it.
	Doc string
	// New parses config and returns the placement of the group called name in it (an
	// nginx upstream, an HAProxy backend; "" when the text holds one). Errors name the line.
	// It is nil for a preset of numbered partitions, which has Partitions instead.
	New func(config []byte, name string) (pool.Pool, error)
	// Partitions, for a system whose shards are a topic's numbered partitions (kafka),
	// parses config (which may be empty) and returns the placement over partitions
	// partitions; nil for the other presets.
	Partitions func(config []byte, partitions int) (shard.Sharder, error)
	// Checked is how many placements made by the real system the preset reproduces.
	Checked int
}

// Presets returns every preset of package compat, in its order. The slice is new on every
// call.
func Presets() []Preset {
	var out []Preset
	for _, p := range compat.Presets() {
		out = append(out, Preset{Name: p.System, Doc: p.Doc, New: p.New, Checked: p.Checked})
	}
	for _, p := range compat.PartitionPresets() {
		out = append(out, Preset{Name: p.System, Doc: p.Doc, Partitions: p.New, Checked: p.Checked})
	}
	return out
}

// FindPreset returns the preset called name, and whether there is one.
func FindPreset(name string) (Preset, bool) {
	for _, p := range Presets() {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// PoolStrategy is one strategy of package pool: it places keys on named, weighted nodes.
type PoolStrategy struct {
	Name string // short and stable: "ring", "rendezvous", ...
	// New builds the pool with nodes as its members, in join order. Options.Vnodes, where
	// the strategy has points, is per node of weight 1; zero means the strategy's default.
	New func(nodes []pool.Node, o Options) (pool.Pool, error)
}

// Pools returns every strategy of package pool with its default options. The slice is new
// on every call.
func Pools() []PoolStrategy {
	return []PoolStrategy{
		{Name: "ring", New: func(nodes []pool.Node, o Options) (pool.Pool, error) {
			return pool.NewRing(nodes, pool.RingOptions{Vnodes: o.Vnodes})
		}},
		{Name: "rendezvous", New: func(nodes []pool.Node, _ Options) (pool.Pool, error) {
			return pool.NewRendezvous(nodes, pool.RendezvousOptions{})
		}},
		{Name: "maglev", New: func(nodes []pool.Node, _ Options) (pool.Pool, error) {
			return pool.NewMaglev(nodes, pool.MaglevOptions{})
		}},
		{Name: "memento", New: func(nodes []pool.Node, _ Options) (pool.Pool, error) {
			return pool.NewMemento(nodes)
		}},
		{Name: "multi-probe", New: func(nodes []pool.Node, _ Options) (pool.Pool, error) {
			return pool.NewMultiProbe(nodes, pool.MultiProbeOptions{})
		}},
		{Name: "modula", New: func(nodes []pool.Node, _ Options) (pool.Pool, error) {
			return pool.NewModula(nodes, pool.ModulaOptions{})
		}},
	}
}

// FindPool returns the pool strategy called name, and whether there is one.
func FindPool(name string) (PoolStrategy, bool) {
	for _, s := range Pools() {
		if s.Name == name {
			return s, true
		}
	}
	return PoolStrategy{}, false
}
