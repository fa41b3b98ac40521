// Package sarama places the messages of sarama's producers (github.com/IBM/sarama) on the
// partitions another Kafka client would pick: [NewPartitioner] returns a
// sarama.PartitionerConstructor, for Config.Producer.Partitioner, that sends a message with
// a key where the partitioner of the Java client, librdkafka, franz-go or kafkajs sends it, by
// the rules of package compat (compat.NewKafkaPartitioner), which are checked against those
// clients' own code (testdata/compat/kafka).
//
// sarama's default, NewHashPartitioner, hashes keys with FNV-1a and agrees with librdkafka's
// fnv1a partitioner only: a topic written by the Java client (murmur2), by librdkafka's
// default (consistent_random, CRC-32) or by kafkajs holds each key on another partition. To
// produce next to those clients with sarama without moving keys, name their partitioner:
//
//	cfg := sarama.NewConfig()
//	cfg.Producer.Partitioner, err = saramapart.NewPartitioner("murmur2") // as the Java client
//
// (sarama v1.61.1 also ships NewMurmur2Partitioner, which places as "murmur2" does.)
package sarama

import (
	"github.com/IBM/sarama"

	"github.com/shardkit/shard/compat"
)

// NewPartitioner returns a sarama.PartitionerConstructor whose partitioners send a message
// with a key (Key not nil: an empty key and a ByteEncoder(nil) are keys, hashed as empty) to
// the partition that the client partitioner called name picks for it among all the topic's
// partitions (compat.NewKafkaPartitioner lists the names: "murmur2" is the Java client's,
// "consistent_random" librdkafka's default, "fnv1a" sarama's own default), and a message
// without a key to a random partition, as sarama's hash partitioners do. An unknown name
// returns an error wrapping compat.ErrConfig.
//
// The one key no rule can follow is librdkafka's consistent_random's empty key, which
// librdkafka sends to a random partition: these partitioners send it to partition 0.
func NewPartitioner(name string) (sarama.PartitionerConstructor, error) {
	p, err := compat.NewKafkaPartitioner(name)
	if err != nil {
		return nil, err
	}
	return PartitionerWith(p), nil
}

// PartitionerWith is NewPartitioner with a partitioner already chosen; the zero
// compat.KafkaPartitioner is the Java client's.
//
// Its partitioners require consistency for a keyed message (sarama's
// DynamicConsistencyPartitioner: the producer then counts all the topic's partitions, not
// only the writable ones, and waits for the chosen one) and not for a message without a
// key. A key that fails to encode returns the encoder's error, which sarama reports for the
// message.
func PartitionerWith(p compat.KafkaPartitioner) sarama.PartitionerConstructor {
	return func(topic string) sarama.Partitioner {
		return &partitioner{p: p, random: sarama.NewRandomPartitioner(topic)}
	}
}

type partitioner struct {
	p      compat.KafkaPartitioner
	random sarama.Partitioner
}

func (q *partitioner) Partition(m *sarama.ProducerMessage, n int32) (int32, error) {
	if m.Key == nil {
		return q.random.Partition(m, n)
	}
	key, err := m.Key.Encode()
	if err != nil {
		return -1, err
	}
	return int32(q.p.Partition(key, int(n))), nil
}

func (*partitioner) RequiresConsistency() bool { return true }

func (*partitioner) MessageRequiresConsistency(m *sarama.ProducerMessage) bool { return m.Key != nil }
