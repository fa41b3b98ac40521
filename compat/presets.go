package compat

// Presets returns one preset per system, in a fixed order. Keep one line per system.
func Presets() []Preset {
	return []Preset{
		twemproxyPreset,
		libmemcachedPreset,
		spymemcachedPreset,
		hashringPreset,
		nginxPreset,
		haproxyPreset,
		goredisPreset,
		jedisPreset,
		grpcPreset,
		vitessPreset,
		pymemcachePreset,
		uhashringPreset,
		pythonMemcachePreset,
		redisShardPreset,
	}
}

// PartitionPresets returns one preset per system that numbers its partitions, in a fixed
// order. Keep one line per system.
func PartitionPresets() []PartitionPreset {
	return []PartitionPreset{
		kafkaPreset,
	}
}
