package compat

import "github.com/shardkit/shard/pool"

var (
	jedisPreset   = Preset{System: "jedis", New: func([]byte, string) (pool.Pool, error) { return nil, nil }}
)
