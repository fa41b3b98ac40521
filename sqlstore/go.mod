module github.com/shardkit/shard/sqlstore

go 1.26.0

replace github.com/shardkit/shard => ..

require github.com/shardkit/shard v0.0.0-00010101000000-000000000000

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/spaolacci/murmur3 v1.1.0 // indirect
)
