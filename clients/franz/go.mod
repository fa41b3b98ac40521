module github.com/shardkit/shard/clients/franz

go 1.26.0

replace github.com/shardkit/shard => ../..

require (
	github.com/shardkit/shard v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/spaolacci/murmur3 v1.1.0 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
