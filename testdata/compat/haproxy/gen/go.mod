module github.com/shardkit/shard/testdata/compat/haproxy/gen

go 1.26
