package compat_test

import (
	"fmt"

	"github.com/shardkit/shard/compat"
)

// HashClient([("10.0.0.1", 11211), ("10.0.0.2", 11211), "10.0.0.3"]): the nodes are named
// "host:port", a server without a port gets 11211.
func ExampleNewPymemcache() {
	servers, err := compat.ParsePymemcache([]byte(`[["10.0.0.1", 11211], ["10.0.0.2", 11211], "10.0.0.3"]`))
	if err != nil {
		panic(err)
	}
	p, err := compat.NewPymemcache(servers)
	if err != nil {
		panic(err)
	}
	fmt.Println(servers, p.Locate("user:1"))
	// Output: [10.0.0.1:11211 10.0.0.2:11211 10.0.0.3:11211] 10.0.0.2:11211
}

// HashRing({"cache-a": 1, "cache-b": 2}, hash_fn="ketama").
func ExampleNewUhashring() {
	p, err := compat.NewUhashring(compat.Uhashring{
		Ketama: true,
		Nodes:  []compat.UhashringNode{{Name: "cache-a", Weight: 1}, {Name: "cache-b", Weight: 2}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("user:1"), p.Locate("user:5"))
	// Output: cache-b cache-a
}

// memcache.Client(["10.0.0.1:11211", ("10.0.0.2:11211", 3)]): four buckets.
func ExampleNewPythonMemcache() {
	p, err := compat.NewPythonMemcache([]compat.PythonMemcacheServer{
		{Name: "10.0.0.1:11211", Weight: 1}, {Name: "10.0.0.2:11211", Weight: 3},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(compat.PythonMemcacheHash("user:1")%4, p.Locate("user:1"))
	// Output: 1 10.0.0.2:11211
}

// RedisShardAPI(["redis://10.0.0.1:6379/0?name=node1", ...]): a str key is placed by its
// hash tag.
func ExampleNewRedisShard() {
	cfg, err := compat.ParseRedisShard([]byte(`{"servers": [
  "redis://10.0.0.1:6379/0?name=node1",
  "redis://10.0.0.2:6379/0?name=node2",
  "redis://10.0.0.3:6379/0?name=node3"
]}`))
	if err != nil {
		panic(err)
	}
	p, err := compat.NewRedisShard(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("user:1"), p.Locate("{user:1}:cart"), compat.RedisShardHashTag("a{b}c"))
	// Output: node3 node3 b
}
