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
	}
}
