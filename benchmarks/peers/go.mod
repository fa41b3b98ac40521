module github.com/shardkit/shard/benchmarks/peers

go 1.26

replace github.com/shardkit/shard => ../..

require (
	github.com/buraksezer/consistent v0.10.0
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/dgryski/go-jump v0.0.0-20170409065014-e1f439676b57
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f
	github.com/golang/groupcache v0.0.0-20241129210726-2c02b8208cf8
	github.com/lithammer/go-jump-consistent-hash v1.0.2
	github.com/serialx/hashring v0.0.0-20200727003509-22c0c7ab6b1b
	github.com/shardkit/shard v0.0.0-00010101000000-000000000000
	stathat.com/c/consistent v1.0.0
)

require github.com/spaolacci/murmur3 v1.1.0 // indirect
