package compat

import "github.com/shardkit/shard/pool"

var (
	goredisPreset = Preset{System: "goredis", New: func([]byte, string) (pool.Pool, error) { return nil, nil }}
	jedisPreset   = Preset{System: "jedis", New: func([]byte, string) (pool.Pool, error) { return nil, nil }}
)
