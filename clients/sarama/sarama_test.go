package sarama

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/internal/kafkavectors"
)

// clients pairs partitioner names with the vector file of a client that places keys by that
// rule, made by running that client's own partitioner (testdata/compat/kafka).
var clients = []kafkavectors.Pair{
	{Partitioner: "murmur2", File: "java-default"},
	{Partitioner: "consistent_random", File: "librdkafka-consistent_random"},
	{Partitioner: "fnv1a_unsigned", File: "franz-saramahasher-fnv1a"},
	{Partitioner: "kafkajs_legacy", File: "kafkajs-legacy"},
}

func read(t *testing.T) ([][]byte, map[string]*kafkavectors.File) {
	keys, files, err := kafkavectors.Load("../../testdata/compat", clients...)
	require.NoError(t, err)
	return keys, files
}

// TestPartitionerMatchesClients asks each name's partitioner, as sarama's producer does, for
// every key and partition count of another client's vectors.
func TestPartitionerMatchesClients(t *testing.T) {
	keys, files := read(t)
	total := 0
	for _, c := range clients {
		newPartitioner, err := NewPartitioner(c.Partitioner)
		require.NoError(t, err)
		p := newPartitioner("t")
		dyn, ok := p.(sarama.DynamicConsistencyPartitioner)
		require.True(t, ok)
		f := files[c.File]
		for _, n := range f.Counts {
			want, ok := f.Column(n)
			require.True(t, ok)
			for k, part := range want {
				m := &sarama.ProducerMessage{Topic: "t", Key: sarama.ByteEncoder(keys[k])}
				require.True(t, dyn.MessageRequiresConsistency(m))
				got, err := p.Partition(m, int32(n))
				require.NoError(t, err)
				require.EqualValues(t, part, got, "%s: key %d %q, %d partitions (%s)", c.Partitioner, k, keys[k], n, c.File)
				total++
			}
		}
	}
	require.Equal(t, 2*16000+15993+14000, total)
}

func TestNilKeyAndEncoderError(t *testing.T) {
	p := PartitionerWith(compat.KafkaPartitioner{})("t")
	m := &sarama.ProducerMessage{Topic: "t"}
	require.False(t, p.(sarama.DynamicConsistencyPartitioner).MessageRequiresConsistency(m))
	for _, n := range []int32{1, 3, 1000} {
		got, err := p.Partition(m, n)
		require.NoError(t, err)
		require.True(t, got >= 0 && got < n, "%d of %d", got, n)
	}
	// ByteEncoder(nil) is a key (sarama hashes it as empty): partition 9 of 12, as "".
	got, err := p.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(nil)}, 12)
	require.NoError(t, err)
	require.EqualValues(t, 9, got)
	_, err = p.Partition(&sarama.ProducerMessage{Key: failing{}}, 12)
	require.ErrorIs(t, err, errEncode)

	_, err = NewPartitioner("murmur3")
	require.ErrorIs(t, err, compat.ErrConfig)
}

var errEncode = errors.New("cannot encode")

type failing struct{}

func (failing) Encode() ([]byte, error) { return nil, errEncode }
func (failing) Length() int             { return 0 }

func TestAllocateNothing(t *testing.T) {
	p := PartitionerWith(compat.KafkaPartitioner{})("t")
	m := &sarama.ProducerMessage{Topic: "t", Key: sarama.ByteEncoder("user:1000")}
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = p.Partition(m, 12) }))
}

// TestProduceThroughProducer sends every key through a real sarama.SyncProducer, with the
// partitioner as Config.Producer.Partitioner, to sarama's mock broker (on 127.0.0.1) holding
// topics of 1, 3, 12 and 64 partitions, and requires the partition each message was written
// to to be the one the other client picks.
func TestProduceThroughProducer(t *testing.T) {
	keys, files := read(t)
	counts := []int{1, 3, 12, 64}
	broker := sarama.NewMockBroker(t, 1)
	defer broker.Close()
	metadata := sarama.NewMockMetadataResponse(t).SetBroker(broker.Addr(), broker.BrokerID())
	for _, n := range counts {
		for p := range n {
			metadata.SetLeader(fmt.Sprintf("p%d", n), int32(p), broker.BrokerID())
		}
	}
	broker.SetHandlerByMap(map[string]sarama.MockResponse{
		"MetadataRequest": metadata,
		"ProduceRequest":  sarama.NewMockProduceResponse(t),
	})

	total := 0
	for _, c := range clients[:2] {
		cfg := sarama.NewConfig()
		cfg.Producer.Return.Successes = true
		// The mock broker answers the requests of this protocol version; which version
		// carries the messages does not change where the partitioner sends them.
		cfg.ApiVersionsRequest = false
		cfg.Version = sarama.V1_0_0_0
		var err error
		cfg.Producer.Partitioner, err = NewPartitioner(c.Partitioner)
		require.NoError(t, err)
		producer, err := sarama.NewSyncProducer([]string{broker.Addr()}, cfg)
		require.NoError(t, err)
		for _, n := range counts {
			want, ok := files[c.File].Column(n)
			require.True(t, ok)
			var msgs []*sarama.ProducerMessage
			index := map[*sarama.ProducerMessage]int{}
			for k := range want {
				m := &sarama.ProducerMessage{Topic: fmt.Sprintf("p%d", n), Key: sarama.ByteEncoder(keys[k]), Value: sarama.StringEncoder("v")}
				msgs = append(msgs, m)
				index[m] = k
			}
			require.NoError(t, producer.SendMessages(msgs))
			for _, m := range msgs {
				k := index[m]
				require.EqualValues(t, want[k], m.Partition, "%s: key %d %q sent to %s", c.Partitioner, k, keys[k], m.Topic)
				total++
			}
		}
		require.NoError(t, producer.Close())
	}
	require.Equal(t, 2*4*2000-3, total) // consistent_random's empty key is random for 3 counts above 1
}
