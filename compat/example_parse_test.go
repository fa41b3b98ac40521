package compat_test

import (
	"fmt"

	"github.com/shardkit/shard/compat"
)

// The service config a grpc-go client is given, with the endpoints its resolver returns.
func ExampleParseGRPC() {
	cfg, err := compat.ParseGRPC([]byte(`{
  "loadBalancingConfig": [{"ring_hash_experimental": {"requestHashHeader": "x-user", "minRingSize": 64}}],
  "endpoints": [{"address": "10.0.0.1:50051", "weight": 2}, {"address": "10.0.0.2:50051"}]
}`))
	if err != nil {
		panic(err)
	}
	p, err := compat.NewGRPC(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.RequestHashHeader, cfg.MinRingSize, len(cfg.Endpoints), p.Locate("alice"))
	// Output: x-user 64 2 10.0.0.1:50051
}

// A uhashring HashRing's arguments: nodes with weights, ketama's point rule.
func ExampleParseUhashring() {
	cfg, err := compat.ParseUhashring([]byte(`{"nodes": {"cache-a": 1, "cache-b": {"weight": 2}}, "hash_fn": "ketama"}`))
	if err != nil {
		panic(err)
	}
	p, err := compat.NewUhashring(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Ketama, len(cfg.Nodes), p.Locate("user:1"))
	// Output: true 2 cache-b
}

// A python-memcached Client's servers, one with a weight.
func ExampleParsePythonMemcache() {
	servers, err := compat.ParsePythonMemcache([]byte(`["10.0.0.1:11211", ["10.0.0.2:11211", 3]]`))
	if err != nil {
		panic(err)
	}
	p, err := compat.NewPythonMemcache(servers)
	if err != nil {
		panic(err)
	}
	fmt.Println(servers, p.Locate("user:1"))
	// Output: [{10.0.0.1:11211 1} {10.0.0.2:11211 3}] 10.0.0.2:11211
}

// RedisShardAPI's arguments, with md5 as its hash and bytes keys.
func ExampleParseRedisShard() {
	cfg, err := compat.ParseRedisShard([]byte(`{"servers": ["redis://10.0.0.1:6379/0?name=node1", "redis://10.0.0.2:6379/0?name=node2"], "hash_method": "md5", "keys": "bytes"}`))
	if err != nil {
		panic(err)
	}
	p, err := compat.NewRedisShard(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.HashMethod, cfg.BytesKeys, p.Locate("user:1"))
	// Output: md5 true node2
}

// A vindex type and a keyspace's shards, as a vschema and the keyspace name them.
func ExampleParseVitess() {
	cfg, err := compat.ParseVitess([]byte(`{"vindex": "xxhash", "shards": ["-80", "80-"]}`))
	if err != nil {
		panic(err)
	}
	k, err := compat.NewVitess(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Vindex, cfg.Shards, k.Locate("42"))
	// Output: xxhash [-80 80-] 80-
}
