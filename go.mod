module github.com/shardkit/shard

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/spaolacci/murmur3 v1.1.0
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
