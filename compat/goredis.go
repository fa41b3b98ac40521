package compat

import (
	"slices"
	"strings"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

var goredisPreset = Preset{
	System: "goredis",
	Doc:    "a go-redis v9 RingOptions.Addrs map as a JSON object of shard name to address",
	New: func(config []byte, name string) (pool.Pool, error) {
		if name != "" {
			return nil, configErr("goredis", 0, "an Addrs map holds one ring: no name to pick (got %q)", name)
		}
		addrs, err := ParseGoRedis(config)
		if err != nil {
			return nil, err
		}
		return NewGoRedis(addrs)
	},
	Checked: 16000,
}

// NewGoRedis returns a pool that places keys as go-redis v9's Ring does with RingOptions.Addrs
// set to addrs and its default NewConsistentHash (go-redis 9.0 to 9.18 through
// github.com/dgryski/go-rendezvous, later releases with the same code inlined): rendezvous
// hashing over the shard names, where a key goes to the name with the largest
// GoRedisScore(XXH64(GoRedisHashTag(key)), XXH64(name)). Addresses place nothing; only the
// names do.
//
// The nodes are the names, weight 1. It is a pool.Rendezvous, so Add and Remove move only
// the keys to or from the shard, exactly as go-redis does when a shard joins or when its
// heartbeat marks it down; SetWeight gives a shard a weight, which go-redis has no
// counterpart for (a weighted pool no longer matches go-redis). Two names with equal scores
// for a key would need equal XXH64 hashes; go-redis then takes the first in its (random)
// shard list, this pool the smaller name.
//
// An empty name is refused: go-redis takes the winner "" for "no shard" and fails every key it
// would own with "redis: all ring shards are down".
func NewGoRedis(addrs map[string]string) (pool.Pool, error) {
	names := make([]string, 0, len(addrs))
	for name := range addrs {
		if name == "" {
			return nil, configErr("goredis", 0, `an empty shard name: go-redis takes it for "no shard" and fails the keys it would own`)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, configErr("goredis", 0, "no shards: go-redis fails every key with \"redis: all ring shards are down\"")
	}
	slices.Sort(names)
	nodes := make([]pool.Node, len(names))
	for i, n := range names {
		nodes[i] = pool.Node{Name: n}
	}
	p, err := pool.NewRendezvous(nodes, pool.RendezvousOptions{
		Hash:     func(key string) uint64 { return keyhash.XXH64(GoRedisHashTag(key)) },
		NodeHash: keyhash.XXH64,
		Score:    GoRedisScore,
	})
	if err != nil {
		return nil, poolErr("goredis", 0, err)
	}
	return p, nil
}

// GoRedisHashTag returns the part of key that go-redis's Ring hashes (hashtag.Key, the same
// rule as Redis Cluster's key slot): the bytes between the first '{' and the first '}' after
// it, when there is such a '}' and it does not follow the '{' at once; otherwise the whole key.
// So "{user1000}.following" hashes "user1000", and "{}", "foo{}{bar}" and "a{b" hash whole.
// It returns a substring of key and never allocates.
func GoRedisHashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// GoRedisScore is the score go-redis's rendezvous hashing gives a shard for a key from their
// XXH64 hashes: xorshiftMult64 of their xor (x ^= x>>12; x ^= x<<25; x ^= x>>27;
// x * 2685821657736338717), the largest score winning.
func GoRedisScore(key, node uint64) uint64 {
	x := key ^ node
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	return x * 2685821657736338717
}

// ParseGoRedis reads a go-redis RingOptions.Addrs map written as a JSON object of shard name
// to address. It refuses what go-redis would not place: a name given twice (a Go map keeps one;
// encoding/json would keep the last silently), an empty name, an address that is not a
// string, an empty map.
func ParseGoRedis(config []byte) (map[string]string, error) {
	v, err := parseJSON("goredis", config)
	if err != nil {
		return nil, err
	}
	if v.kind != 'o' {
		return nil, configErr("goredis", v.line, "want a JSON object of shard name to address, not %s", v.kindName())
	}
	addrs := make(map[string]string, len(v.obj))
	line := make(map[string]int, len(v.obj))
	for _, m := range v.obj {
		switch {
		case m.key == "":
			return nil, configErr("goredis", m.line, `an empty shard name: go-redis takes it for "no shard" and fails the keys it would own`)
		case m.val.kind != 's':
			return nil, configErr("goredis", m.val.line, "shard %q: the address is %s, not a string", m.key, m.val.kindName())
		}
		if l, dup := line[m.key]; dup {
			return nil, configErr("goredis", m.line, "shard %q is named twice (also on line %d): a Go map keeps one of them", m.key, l)
		}
		addrs[m.key], line[m.key] = m.val.str, m.line
	}
	if len(addrs) == 0 {
		return nil, configErr("goredis", v.line, "no shards: go-redis fails every key with \"redis: all ring shards are down\"")
	}
	return addrs, nil
}
