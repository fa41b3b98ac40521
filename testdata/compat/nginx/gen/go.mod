module github.com/shardkit/shard/testdata/compat/nginx/gen

go 1.26
