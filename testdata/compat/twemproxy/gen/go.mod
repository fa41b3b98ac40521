module github.com/shardkit/shard/testdata/compat/twemproxy/gen

go 1.26
