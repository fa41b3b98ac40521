module github.com/shardkit/shard/testdata/compat/haproxy/bounded/gen

go 1.26
