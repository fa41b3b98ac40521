package compat

import "github.com/shardkit/shard/pool"

var (
	haproxyPreset = Preset{System: "haproxy", New: func([]byte, string) (pool.Pool, error) { return nil, nil }}
	goredisPreset = Preset{System: "goredis", New: func([]byte, string) (pool.Pool, error) { return nil, nil }}
	jedisPreset   = Preset{System: "jedis", New: func([]byte, string) (pool.Pool, error) { return nil, nil }}
)
