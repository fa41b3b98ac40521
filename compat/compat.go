// Package compat places keys exactly where other systems place them: a preset per system
// takes that system's own configuration text (a nutcracker.yml pool, a libmemcached client
// configuration, ...) and returns a [pool.Pool] that gives every key the server the system
// gives it, quirks included. Golden vectors made by running each real system
// (testdata/compat/<system>, with a README per system that states its rule step by step)
// pin every preset.
//
// Every preset is listed by [Presets]; each system also has a typed configuration and
// constructor for Go code (for example [Twemproxy] and [NewTwemproxy]).
//
// The pools are pool.Ring or pool.Modula underneath, with the system's rule for points or
// slots, key hash and server order; Locate and AppendN keep their contract (no lock, no
// allocation). Add, Remove and SetWeight change the server list and rebuild the placement as
// the system does when its configuration changes that way: a node added through Add is a
// server written with that name and weight in the system's vocabulary. A server listed twice
// is one node of the pool, and counts twice where the system counts it twice. Nodes reports
// each server's weight clamped to [1, pool.MaxWeight]; the exact weights are in the typed
// configurations.
//
// A configuration the system refuses is refused, and so is one the system accepts but cannot
// place keys with (random distributions, an empty continuum, arithmetic that overflows its
// buffers): the error names the line, starts with "compat: <system>: " and wraps ErrConfig.
package compat

import (
	"errors"
	"fmt"

	"github.com/shardkit/shard/pool"
)

// ErrConfig reports a configuration that a system refuses, or one it accepts but cannot
// place keys with. Errors of the parsers and constructors wrap it; test with errors.Is.
var ErrConfig = errors.New("invalid configuration")

// A Preset builds the pool of one system from that system's own configuration text.
type Preset struct {
	System string // "twemproxy", "libmemcached", "spymemcached", "hashring", "nginx", "haproxy", "goredis", "jedis"
	Doc    string // one line: what configuration text it takes
	// New parses config and returns the pool named name in it ("" when the text holds one).
	New func(config []byte, name string) (pool.Pool, error)
}

// Presets returns one entry per system, in a fixed order.
func Presets() []Preset {
	out := make([]Preset, len(presets))
	copy(out, presets)
	return out
}

// lineError returns an error naming the system and the line of its configuration text.
func lineError(system string, line int, format string, args ...any) error {
	return fmt.Errorf("compat: %s: line %d: %s: %w", system, line, fmt.Sprintf(format, args...), ErrConfig)
}

// configError returns an error naming the system, for what no line of text holds (a typed
// configuration, a change through the Pool interface).
func configError(system string, format string, args ...any) error {
	return fmt.Errorf("compat: %s: %s: %w", system, fmt.Sprintf(format, args...), ErrConfig)
}

// singleConfig checks that a preset of a system whose text holds one configuration was not
// asked for a named one.
func singleConfig(system, name string) error {
	if name != "" {
		return configError(system, "the configuration text holds one client; asked for %q: give no name", name)
	}
	return nil
}
