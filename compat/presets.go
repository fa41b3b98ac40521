package compat

// presets lists every system, one line each (in the order of Preset.System's doc).
var presets = []Preset{
	twemproxyPreset,
	libmemcachedPreset,
	spymemcachedPreset,
	hashringPreset,
}
