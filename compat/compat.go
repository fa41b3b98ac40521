// Package compat builds pools that place every key exactly where another system places it, from
// that system's own configuration text: a Preset per system takes what its users already run
// (an nginx upstream block, an HAProxy backend, a go-redis Addrs map, a Jedis shard list) and
// returns a pool.Pool whose Locate names the server that system would pick.
//
// Every preset is checked against golden vectors made by running the real system
// (testdata/compat/<system>, with a README per system that states its placement rule step by
// step and every quirk found). Each preset's documentation says what it reproduces, what the
// system does that a pool cannot (round robin, health checks), and what Add, Remove and
// SetWeight mean for it.
//
// Presets are built on the pool engines (pool.Ring, pool.Modula, pool.Rendezvous) with
// options, so lookups take no lock, never allocate, and are safe for concurrent use with
// changes, as every pool's are. The one exception is Vitess's: NewVitess returns a
// VitessKeyspace, which places values by the key ranges of a keyspace's shards (with the same
// lookup guarantees) and refuses Add, Remove and SetWeight, since shards change by resharding.
//
// One system places by load as well as by key: HAProxy's hash-balance-factor (consistent
// hashing with bounded loads). No pool can reproduce it; NewHAProxyBounded returns a
// pool/bounded Balancer that does, checked against event sequences recorded from HAProxy
// with connections held open (testdata/compat/haproxy/bounded).
//
// Kafka's producers place a record on one of the numbered partitions of its topic, not on a
// named server: NewKafka returns a shard.Sharder over the partitions that places keys as the
// partitioner of the Java client, librdkafka, franz-go, sarama or kafkajs does
// (testdata/compat/kafka), and PartitionPresets lists it for the shard command.
//
// A configuration the system itself refuses, or one this package cannot reproduce, returns an
// error of type *ConfigError that names the line ("compat: nginx: line 4: ...") and wraps
// ErrConfig, which callers test with errors.Is. The error quotes at most an excerpt of 80
// bytes of the text at fault, never the whole line.
//
// The parsers take time and memory in proportion to the configuration's text (and the
// servers it lists), whatever the text, so a configuration need not be trusted; they do not
// limit its size themselves: a caller that reads configurations from elsewhere should bound
// what it reads (the shard command reads at most 16 MiB, each line at most 1 MiB).
package compat

import (
	"errors"
	"fmt"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/pool"
)

// ErrConfig reports a configuration that the system refuses or that a preset cannot
// reproduce. Every error of a parser or a typed constructor of this package wraps it.
var ErrConfig = errors.New("compat: invalid configuration")

// A Preset builds the pool of one system from that system's own configuration text.
type Preset struct {
	System string // "twemproxy", "libmemcached", "spymemcached", "hashring", "nginx", "haproxy", "goredis", "jedis", "grpc", "vitess", "pymemcache", "uhashring", "python-memcache", "redis-shard"
	Doc    string // one line: what configuration text it takes, e.g. "a nutcracker.yml; -pool picks the pool"
	// New parses config and returns the pool named name in it ("" when the text holds one).
	New func(config []byte, name string) (pool.Pool, error)
	// Checked is how many placements made by the real system (testdata/compat/<System>)
	// the preset reproduces; the package's tests count them.
	Checked int
}

// A PartitionPreset builds the placement of a system whose shards are the numbered
// partitions of a topic (Kafka's), from that system's own configuration text and the
// partition count, which lives in the cluster rather than in the configuration.
type PartitionPreset struct {
	System string // "kafka"
	Doc    string // one line: what configuration text it takes
	// New parses config (which may be empty) and returns the placement over partitions
	// partitions, numbered 0..partitions-1.
	New func(config []byte, partitions int) (shard.Sharder, error)
	// Checked is how many placements made by the real clients (testdata/compat/<System>)
	// the preset reproduces; the package's tests count them.
	Checked int
}

// ConfigError is a configuration refused by a preset: the system, the line (1-based; 0 when
// no line applies, as for a configuration built in code) and what was wrong. It wraps
// ErrConfig, and the pool's own error when the pool refused the result (pool.ErrLimit for
// too many points, for instance).
type ConfigError struct {
	System string
	Line   int
	Msg    string
	Err    error // the pool's error, or nil
}

func (e *ConfigError) Error() string {
	s := "compat: " + e.System + ": "
	if e.Line > 0 {
		s += fmt.Sprintf("line %d: ", e.Line)
	}
	s += e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrConfig and the pool's error, if any, for errors.Is and errors.As.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrConfig, e.Err}
	}
	return []error{ErrConfig}
}

// configErr returns a *ConfigError of system at line.
func configErr(system string, line int, format string, args ...any) error {
	return &ConfigError{System: system, Line: line, Msg: string(sprintf(format, args...))}
}

// poolErr wraps an error of a pool constructor as a *ConfigError at line.
func poolErr(system string, line int, err error) error {
	return &ConfigError{System: system, Line: line, Msg: "the pool refuses it", Err: err}
}
