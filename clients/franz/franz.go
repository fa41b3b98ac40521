// Package franz places the records of franz-go's producer (github.com/twmb/franz-go/pkg/kgo)
// on the partitions another Kafka client would pick: [NewPartitioner] returns a
// kgo.Partitioner, for kgo.RecordPartitioner, that sends a record with a key where the
// partitioner of the Java client, librdkafka, sarama or kafkajs sends it, by the rules of
// package compat (compat.NewKafkaPartitioner), which are checked against those clients' own
// code (testdata/compat/kafka).
//
// franz-go's default partitioner already places keyed records as the Java client does. The
// others do not: a topic written by librdkafka's default (consistent_random, CRC-32, the
// default of confluent-kafka-go and of most non-Java clients), by sarama's default (FNV-1a)
// or by kafkajs before 2.0.0 holds each key on another partition. To move such a producer to
// franz-go without moving its keys, name its partitioner:
//
//	p, err := franz.NewPartitioner("consistent_random") // as librdkafka's default
//	cl, err := kgo.NewClient(kgo.SeedBrokers(...), kgo.RecordPartitioner(p))
package franz

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardkit/shard/compat"
)

// NewPartitioner returns a kgo.Partitioner that sends a record with a key (Key not nil, an
// empty key included) to the partition that the client partitioner called name picks for it
// among all the topic's partitions (compat.NewKafkaPartitioner lists the names: "murmur2" is
// the Java client's, "consistent_random" librdkafka's default, "fnv1a" sarama's default), and
// a record without a key (Key nil) to franz-go's sticky partition, as franz-go's default
// partitioner does: no client places those by key. An unknown name returns an error wrapping
// compat.ErrConfig.
//
// The one key no rule can follow is librdkafka's consistent_random's empty key, which
// librdkafka sends to a random partition: this partitioner sends it to partition 0.
func NewPartitioner(name string) (kgo.Partitioner, error) {
	p, err := compat.NewKafkaPartitioner(name)
	if err != nil {
		return nil, err
	}
	return PartitionerWith(p), nil
}

// PartitionerWith is NewPartitioner with a partitioner already chosen; the zero
// compat.KafkaPartitioner is the Java client's.
//
// It is kgo.StickyKeyPartitioner with p's rule as the hasher, so the client treats it as its
// own key partitioner: a keyed record requires consistency (it waits for its partition rather
// than go to another one), and the partition count is that of all the topic's partitions. The
// partitioner is safe for concurrent use as franz-go requires, and places a key without
// allocating.
func PartitionerWith(p compat.KafkaPartitioner) kgo.Partitioner {
	return kgo.StickyKeyPartitioner(func(key []byte, n int) int { return p.Partition(key, n) })
}
