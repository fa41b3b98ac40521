module github.com/shardkit/shard/clients/gomemcache

go 1.26.0

replace github.com/shardkit/shard => ../..

require (
	github.com/bradfitz/gomemcache v0.0.0-20260422231931-4d751bb6e37c
	github.com/shardkit/shard v0.0.0-00010101000000-000000000000
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/spaolacci/murmur3 v1.1.0 // indirect
)
