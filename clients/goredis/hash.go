// Package goredis places the keys of go-redis's Ring (github.com/redis/go-redis/v9) with any
// pool of package shard: [NewConsistentHash] returns the function that
// redis.RingOptions.NewConsistentHash takes, so the Ring sends every key to the shard the pool
// names, Maglev's or a ring's instead of the Ring's own rendezvous hash, or the placement of
// another client that shares the servers (a compat preset).
//
// The Ring calls NewConsistentHash whenever the set of live shards changes (its heartbeat
// marks a shard down after three failed pings and up again after one answer, and SetAddrs
// changes the shards), with the names of the live shards, and routes every key through the
// result until the next change. So the pool is built anew over the live names each time, and
// placement follows the pool's rule for that membership: with pool.NewRing or
// pool.NewRendezvous a shard that goes down gives up only its own keys, and takes them back
// when it comes up.
package goredis

import (
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/shardkit/shard/pool"
)

// NewConsistentHash returns a function for redis.RingOptions.NewConsistentHash that builds
// newPool's pool over the live shards: the nodes are the shard names (the keys of
// RingOptions.Addrs), sorted, weight 0 (which pools read as 1), so the pool does not depend
// on the order the Ring lists them in. newPool may change the weights; it must place keys by
// the membership alone, as every pool but Memento and Directory does, since each change
// builds it anew.
//
// The Ring hands the hash a key's hash tag, not the key ("user1000" for
// "{user1000}.following", compat.GoRedisHashTag), so keys with one tag share a shard: a key
// is on newPool(live shards).Locate(compat.GoRedisHashTag(key)). Get takes no lock and does
// not allocate.
//
// When no shard is live, or newPool returns an error, the hash answers "" for every key, and
// the Ring fails each command with "redis: all ring shards are down".
func NewConsistentHash(newPool func(nodes []pool.Node) (pool.Pool, error)) func(shards []string) redis.ConsistentHash {
	return func(shards []string) redis.ConsistentHash {
		if len(shards) == 0 {
			return poolHash{}
		}
		names := slices.Clone(shards)
		slices.Sort(names)
		nodes := make([]pool.Node, len(names))
		for i, name := range names {
			nodes[i] = pool.Node{Name: name}
		}
		p, err := newPool(nodes)
		if err != nil {
			return poolHash{}
		}
		return poolHash{p}
	}
}

// poolHash is a redis.ConsistentHash over a pool; the zero poolHash has no shard.
type poolHash struct{ p pool.Pool }

func (h poolHash) Get(key string) string {
	if h.p == nil {
		return ""
	}
	return h.p.Locate(key)
}
