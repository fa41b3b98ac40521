package compat

import (
	"bytes"
	"math"
	"strings"
	"sync/atomic"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/internal/keyhash"
)

// This file places keys on the partitions of a Kafka topic as the producers of the Kafka
// clients do: the Java client, librdkafka (and the clients built on it), franz-go, sarama
// and kafkajs. testdata/compat/kafka/README.md states each client's rule with its source and
// holds the vectors made by running each client's own partitioner.

// MaxKafkaPartitions is the most partitions a Kafka placement takes: partition numbers are
// int32 in the Kafka protocol and in every client.
const MaxKafkaPartitions = math.MaxInt32

// kafkaSign is how a partitioner turns a 32-bit hash into a partition of n.
type kafkaSign uint8

const (
	// kafkaMask clears the sign bit, then takes the remainder: the Java client's
	// Utils.toPositive(hash) % n (a hash of MinInt32 gives 0 % n).
	kafkaMask kafkaSign = iota
	// kafkaUnsigned takes the remainder of the hash read as unsigned: librdkafka's
	// consistent (uint32 % partition_cnt).
	kafkaUnsigned
	// kafkaAbs takes the remainder of the hash read as int32, negated when negative:
	// sarama's NewHashPartitioner, and librdkafka's fnv1a, which takes the absolute value
	// of the int32 first; both give 2^31 % n for a hash of MinInt32.
	kafkaAbs
)

// KafkaPartitioner is the rule by which one Kafka producer's partitioner places a record
// with a key: a 32-bit hash of the key's bytes and a way to reduce it to a partition. The
// zero KafkaPartitioner is "murmur2", the Java client's. Its methods are safe for
// concurrent use and never allocate.
//
// A record without a key (a null key, which a Go string cannot be) is placed by no
// partitioner here: every client sends it to a partition of its own choosing (sticky,
// random or round robin), except librdkafka's consistent, murmur2 and fnv1a, which hash it
// as the empty key.
type KafkaPartitioner struct {
	name string
	hash keyhash.Kafka
	sign kafkaSign
}

// kafkaPartitioners are the partitioner names, each with the clients that place keys by its
// rule (the names librdkafka's "partitioner" property takes, and more).
var kafkaPartitioners = []KafkaPartitioner{
	// The Java client's default (BuiltInPartitioner.partitionForKey), librdkafka's murmur2,
	// franz-go's default (StickyKeyPartitioner(nil), KafkaHasher(murmur2)), sarama's
	// NewMurmur2Partitioner, kafkajs's DefaultPartitioner.
	{"murmur2", keyhash.KafkaMurmur2, kafkaMask},
	// librdkafka's murmur2_random: murmur2 for every key but a null one.
	{"murmur2_random", keyhash.KafkaMurmur2, kafkaMask},
	// librdkafka's consistent; sarama's NewConsistentCRCHashPartitioner; franz-go's
	// SaramaHasher(crc32.ChecksumIEEE).
	{"consistent", keyhash.KafkaCRC32, kafkaUnsigned},
	// librdkafka's default, consistent_random: consistent, but the empty key goes to a
	// random partition, which no placement can reproduce; Locate gives it consistent's
	// partition, 0.
	{"consistent_random", keyhash.KafkaCRC32, kafkaUnsigned},
	// librdkafka's fnv1a; sarama's default, NewHashPartitioner; franz-go's
	// SaramaCompatHasher(fnv32a), and SaramaHasher(fnv32a) on 32-bit platforms.
	{"fnv1a", keyhash.KafkaFNV1a, kafkaAbs},
	// librdkafka's fnv1a_random: fnv1a for every key but a null one.
	{"fnv1a_random", keyhash.KafkaFNV1a, kafkaAbs},
	// sarama's NewReferenceHashPartitioner: FNV-1a with the Java client's sign rule.
	{"fnv1a_reference", keyhash.KafkaFNV1a, kafkaMask},
	// franz-go's SaramaHasher(fnv32a) on 64-bit platforms: FNV-1a read as unsigned.
	{"fnv1a_unsigned", keyhash.KafkaFNV1a, kafkaUnsigned},
	// kafkajs's LegacyPartitioner, its default before 2.0.0: a murmur2 computed in
	// float64 (see keyhash.KafkaJSLegacy), with the Java client's sign rule.
	{"kafkajs_legacy", keyhash.KafkaJSLegacy, kafkaMask},
}

// KafkaPartitioners returns the names NewKafkaPartitioner takes, in a fixed order.
func KafkaPartitioners() []string {
	names := make([]string, len(kafkaPartitioners))
	for i, p := range kafkaPartitioners {
		names[i] = p.name
	}
	return names
}

// kafkaNames lists the partitioner names for an error, whole (a msg is never cut).
func kafkaNames() msg { return msg(strings.Join(KafkaPartitioners(), ", ")) }

// NewKafkaPartitioner returns the partitioner called name:
//
//	murmur2            the Java client's default, librdkafka's murmur2, franz-go's default,
//	                   sarama's NewMurmur2Partitioner, kafkajs's DefaultPartitioner:
//	                   (murmur2(key) & 0x7fffffff) % n
//	murmur2_random     librdkafka: murmur2 (a null key goes to a random partition)
//	consistent         librdkafka, sarama's NewConsistentCRCHashPartitioner, franz-go's
//	                   SaramaHasher(crc32.ChecksumIEEE): uint32 crc32(key) % n
//	consistent_random  librdkafka's default: consistent, but the empty key goes to a random
//	                   partition; Locate gives it consistent's partition, 0
//	fnv1a              librdkafka, sarama's default NewHashPartitioner, franz-go's
//	                   SaramaCompatHasher(fnv32a): |int32(fnv1a(key)) % n|
//	fnv1a_random       librdkafka: fnv1a (a null key goes to a random partition)
//	fnv1a_reference    sarama's NewReferenceHashPartitioner: (fnv1a(key) & 0x7fffffff) % n
//	fnv1a_unsigned     franz-go's SaramaHasher(fnv32a) on 64-bit platforms: uint32 fnv1a(key) % n
//	kafkajs_legacy     kafkajs's LegacyPartitioner: kafkajs's float64 murmur2, & 0x7fffffff, % n
//
// Any other name returns a *ConfigError wrapping ErrConfig.
func NewKafkaPartitioner(name string) (KafkaPartitioner, error) {
	for _, p := range kafkaPartitioners {
		if p.name == name {
			return p, nil
		}
	}
	return KafkaPartitioner{}, configErr("kafka", 0, "unknown partitioner %q: want one of %s", name, kafkaNames())
}

// Name returns the partitioner's name, "murmur2" for the zero KafkaPartitioner.
func (p KafkaPartitioner) Name() string {
	if p.name == "" {
		return "murmur2"
	}
	return p.name
}

// Partition returns the partition in [0, n) of a record whose key is key (nil places as the
// empty key: see the type's documentation for null keys). It panics if n is not in
// [1, MaxKafkaPartitions]: a client never calls its partitioner with no partitions.
func (p KafkaPartitioner) Partition(key []byte, n int) int {
	if n < 1 || n > MaxKafkaPartitions {
		panic("compat: KafkaPartitioner.Partition: partition count out of range [1, MaxInt32]")
	}
	return p.reduce(p.hashOr().Sum32Bytes(key), int32(n))
}

// hashOr returns the key hash, murmur2 for the zero KafkaPartitioner.
func (p KafkaPartitioner) hashOr() keyhash.Kafka {
	if p.hash == 0 {
		return keyhash.KafkaMurmur2
	}
	return p.hash
}

// reduce turns hash h into a partition of n >= 1 by the partitioner's sign rule.
func (p KafkaPartitioner) reduce(h uint32, n int32) int {
	switch p.sign {
	case kafkaUnsigned:
		return int(h % uint32(n))
	case kafkaAbs:
		r := int32(h) % n // in (-n, n): never MinInt32, so the negation cannot overflow
		if r < 0 {
			r = -r
		}
		return int(r)
	}
	return int(int32(h&0x7fffffff) % n)
}

// Kafka places keys on the partitions of one Kafka topic, numbered 0..Shards()-1, exactly as
// a producer with the given partitioner sends records with those keys. It implements
// shard.Sharder: Resize is a change of the topic's partition count (Kafka can only add
// partitions; Resize also shrinks, which places keys as a topic of fewer partitions does).
// Every client places a key by its hash modulo the count, so a resize moves most keys.
//
// Locate never allocates, takes no lock and is safe for concurrent use with Resize. The zero
// Kafka has no partitions and its Locate returns 0; Resize makes it usable, with the
// murmur2 partitioner.
type Kafka struct {
	p KafkaPartitioner
	n atomic.Int32
}

// NewKafka returns the placement of a topic of partitions partitions by the partitioner
// called partitioner (see NewKafkaPartitioner for the names). An unknown name returns a
// *ConfigError wrapping ErrConfig; a partition count outside [1, MaxKafkaPartitions] returns
// one that wraps shard.ErrShardCount too.
func NewKafka(partitioner string, partitions int) (*Kafka, error) {
	p, err := NewKafkaPartitioner(partitioner)
	if err != nil {
		return nil, err
	}
	return NewKafkaWith(p, partitions)
}

// NewKafkaWith is NewKafka with a partitioner already chosen.
func NewKafkaWith(p KafkaPartitioner, partitions int) (*Kafka, error) {
	if err := checkKafkaPartitions(partitions); err != nil {
		return nil, err
	}
	k := &Kafka{p: p}
	k.n.Store(int32(partitions))
	return k, nil
}

func checkKafkaPartitions(n int) error {
	if n >= 1 && n <= MaxKafkaPartitions {
		return nil
	}
	return &ConfigError{System: "kafka", Msg: string(sprintf("%d partitions: allowed range is [1, %d]", n, MaxKafkaPartitions)), Err: shard.ErrShardCount}
}

// Locate returns the partition in [0, Shards()) of a record whose key is key.
func (k *Kafka) Locate(key string) int {
	n := k.n.Load()
	if n == 0 {
		return 0
	}
	return k.p.reduce(k.p.hashOr().Sum32(key), n)
}

// Resize changes the partition count to n. A count outside [1, MaxKafkaPartitions] returns
// an error wrapping shard.ErrShardCount and ErrConfig, and changes nothing.
func (k *Kafka) Resize(n int) error {
	if err := checkKafkaPartitions(n); err != nil {
		return err
	}
	k.n.Store(int32(n))
	return nil
}

// Shards returns the partition count.
func (k *Kafka) Shards() int { return int(k.n.Load()) }

// Partitioner returns the partitioner that places the keys.
func (k *Kafka) Partitioner() KafkaPartitioner { return k.p }

// javaDefaultPartitioner is the one partitioner.class that places records by the built-in
// rule; the Java client's other partitioners place records without their key.
const javaDefaultPartitioner = "org.apache.kafka.clients.producer.internals.DefaultPartitioner"

// ParseKafka reads the partitioner of a Kafka producer's configuration, written as a
// properties file (key=value or key: value lines; # and ! start comments; a line that ends
// with an odd number of backslashes goes on to the next). It reads:
//
//   - partitioner: librdkafka's topic property, one of the names of NewKafkaPartitioner
//     (librdkafka itself takes only murmur2, consistent, fnv1a and their _random forms,
//     and random, which is refused here);
//   - partitioner.class: the Java client's; only its DefaultPartitioner, which places keyed
//     records by the built-in rule (murmur2), is taken: its other partitioners
//     (RoundRobinPartitioner, UniformStickyPartitioner) ignore keys, and a class of one's
//     own has a rule of its own;
//   - partitioner.ignore.keys: the Java client's; true (keys ignored) is refused.
//
// Other properties (bootstrap.servers, acks, ...) do not place keys and are skipped, as
// are the Java client's partitioner.adaptive.partitioning.enable and
// partitioner.availability.timeout.ms, which only place records without a key; any other
// property whose name begins with "partitioner" is refused as unknown, and so is a
// partitioner property given twice. A text that names no partitioner gives "murmur2", the
// Java client's default (librdkafka's default is consistent_random: name it). A property
// name of other bytes than letters, digits, '.', '_' and '-' is refused: the text is not a
// client's configuration.
func ParseKafka(config []byte) (KafkaPartitioner, error) {
	var (
		chosen  KafkaPartitioner
		seen    = map[string]int{} // partitioner property -> its line
		logical []byte             // a property, its continued lines joined
		cont    bool               // logical goes on on the next line
		first   int                // the line logical starts on
		lineNo  int
	)
	for rest := config; len(rest) > 0; {
		var raw []byte
		raw, rest, _ = bytes.Cut(rest, []byte("\n"))
		lineNo++
		raw = bytes.TrimLeft(bytes.TrimRight(raw, "\r"), " \t\f")
		if !cont {
			if len(raw) == 0 || raw[0] == '#' || raw[0] == '!' {
				continue
			}
			first, logical = lineNo, logical[:0]
		}
		if cont = trailingBackslashes(raw)%2 == 1; cont {
			raw = raw[:len(raw)-1]
		}
		logical = append(logical, raw...)
		if !cont {
			if err := kafkaProperty(logical, first, seen, &chosen); err != nil {
				return KafkaPartitioner{}, err
			}
		}
	}
	if cont {
		if err := kafkaProperty(logical, first, seen, &chosen); err != nil {
			return KafkaPartitioner{}, err
		}
	}
	if chosen.name == "" {
		chosen = kafkaPartitioners[0]
	}
	return chosen, nil
}

// trailingBackslashes counts the backslashes that end b.
func trailingBackslashes(b []byte) int {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	return n
}

// isPropertyByte reports whether r may be in the name of a client property: Kafka's and
// librdkafka's are lowercase words joined by dots, sometimes with '_' or '-'.
func isPropertyByte(r rune) bool {
	return r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// kafkaProperty reads one property of ParseKafka's text, which starts on line, into chosen.
func kafkaProperty(property []byte, line int, seen map[string]int, chosen *KafkaPartitioner) error {
	// The key ends at the first '=', ':' or blank; one '=' or ':' may follow the blanks.
	k := bytes.IndexAny(property, "=: \t\f")
	if k < 0 {
		k = len(property)
	}
	key, value := string(property[:k]), bytes.TrimLeft(property[k:], " \t\f")
	if len(value) > 0 && (value[0] == '=' || value[0] == ':') {
		value = value[1:]
	}
	val := string(bytes.Trim(value, " \t\f"))
	if k == 0 || strings.IndexFunc(key, func(r rune) bool { return !isPropertyByte(r) }) >= 0 {
		return configErr("kafka", line, "%q is not a property name (letters, digits, '.', '_' and '-')", key)
	}
	if !strings.HasPrefix(key, "partitioner") {
		return nil
	}
	switch key {
	case "partitioner.adaptive.partitioning.enable", "partitioner.availability.timeout.ms":
		return nil // they only place records without a key
	case "partitioner", "partitioner.class", "partitioner.ignore.keys":
	default:
		return configErr("kafka", line, "unknown property %q: the partitioner properties are partitioner (librdkafka) and partitioner.class, partitioner.ignore.keys (Java)", key)
	}
	if l, dup := seen[key]; dup {
		return configErr("kafka", line, "%s is set twice (also on line %d)", key, l)
	}
	seen[key] = line
	other := map[string]string{"partitioner": "partitioner.class", "partitioner.class": "partitioner"}[key]
	if l, both := seen[other]; both {
		return configErr("kafka", line, "%s and %s (line %d) name the partitioners of two clients: keep the one of the client that produces", key, other, l)
	}
	switch key {
	case "partitioner":
		if val == "random" {
			return configErr("kafka", line, "partitioner=random places records without their key")
		}
		p, err := NewKafkaPartitioner(val)
		if err != nil {
			return configErr("kafka", line, "partitioner=%q: want one of %s", val, kafkaNames())
		}
		*chosen = p
	case "partitioner.class":
		switch val {
		case javaDefaultPartitioner:
			*chosen = kafkaPartitioners[0]
		case "org.apache.kafka.clients.producer.RoundRobinPartitioner", "org.apache.kafka.clients.producer.UniformStickyPartitioner":
			return configErr("kafka", line, "partitioner.class=%s places records without their key", val)
		default:
			return configErr("kafka", line, "partitioner.class=%q: a partitioner of one's own has a rule of its own; only %s (or no partitioner.class) places keys by the built-in rule", val, javaDefaultPartitioner)
		}
	case "partitioner.ignore.keys":
		switch strings.ToLower(val) {
		case "false":
		case "true":
			return configErr("kafka", line, "partitioner.ignore.keys=true: the Java client then places records without their key")
		default:
			return configErr("kafka", line, "partitioner.ignore.keys=%q: want true or false", val)
		}
	}
	return nil
}

var kafkaPreset = PartitionPreset{
	System: "kafka",
	Doc: "a Kafka producer's properties (partitioner=NAME as librdkafka's, or partitioner.class as the Java client's), " +
		"or no -config for murmur2, the Java client's default; -partitions gives the topic's partition count",
	New: func(config []byte, partitions int) (shard.Sharder, error) {
		p, err := ParseKafka(config)
		if err != nil {
			return nil, err
		}
		return NewKafkaWith(p, partitions)
	},
	Checked: 267993,
}
