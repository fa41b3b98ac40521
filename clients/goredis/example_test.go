package goredis_test

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shardkit/shard/clients/goredis"
	"github.com/shardkit/shard/pool"
)

// go-redis's Ring with Maglev in place of its own rendezvous hash. The Ring calls the
// function again with the live shards whenever one goes down or comes back.
func ExampleNewConsistentHash() {
	maglev := func(nodes []pool.Node) (pool.Pool, error) { return pool.NewMaglev(nodes, pool.MaglevOptions{}) }
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:             map[string]string{"shard1": "10.0.0.1:6379", "shard2": "10.0.0.2:6379"},
		NewConsistentHash: goredis.NewConsistentHash(maglev),
	})
	defer ring.Close()

	// What the Ring does with the shards it finds live:
	hash := goredis.NewConsistentHash(maglev)
	fmt.Println(hash([]string{"shard1", "shard2"}).Get("user1000"))
	fmt.Println(hash([]string{"shard2"}).Get("user1000"))
	// Output:
	// shard1
	// shard2
}
