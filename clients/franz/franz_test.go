package franz

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/internal/kafkavectors"
)

// clients pairs partitioner names with the vector file of a client that places keys by that
// rule, made by running that client's own partitioner (testdata/compat/kafka).
var clients = []kafkavectors.Pair{
	{Partitioner: "murmur2", File: "java-default"},
	{Partitioner: "consistent_random", File: "librdkafka-consistent_random"},
	{Partitioner: "fnv1a", File: "sarama-hash"},
	{Partitioner: "fnv1a_reference", File: "sarama-referencehash"},
	{Partitioner: "kafkajs_legacy", File: "kafkajs-legacy"},
}

func read(t *testing.T) ([][]byte, map[string]*kafkavectors.File) {
	keys, files, err := kafkavectors.Load("../../testdata/compat", clients...)
	require.NoError(t, err)
	return keys, files
}

// TestPartitionerMatchesClients asks the kgo.TopicPartitioner of each name, as a kgo.Client
// does, for every key and partition count of another client's vectors.
func TestPartitionerMatchesClients(t *testing.T) {
	keys, files := read(t)
	total := 0
	for _, c := range clients {
		p, err := NewPartitioner(c.Partitioner)
		require.NoError(t, err)
		tp := p.ForTopic("t")
		f := files[c.File]
		for _, n := range f.Counts {
			want, ok := f.Column(n)
			require.True(t, ok)
			for k, part := range want {
				r := &kgo.Record{Topic: "t", Key: keys[k]}
				require.True(t, tp.RequiresConsistency(r), "a keyed record waits for its partition")
				require.Equal(t, part, tp.Partition(r, n), "%s: key %d %q, %d partitions (%s)", c.Partitioner, k, keys[k], n, c.File)
				total++
			}
		}
	}
	// java-default, sarama-hash and sarama-referencehash 16000 each, consistent_random 15993
	// (7 random), kafkajs-legacy 14000.
	require.Equal(t, 3*16000+15993+14000, total)
}

// A record without a key goes to the sticky partition, in range, and does not wait for it.
func TestNilKey(t *testing.T) {
	tp := PartitionerWith(compatMurmur2(t)).ForTopic("t")
	r := &kgo.Record{Topic: "t"}
	require.False(t, tp.RequiresConsistency(r))
	for _, n := range []int{1, 3, 1000} {
		p := tp.Partition(r, n)
		require.True(t, p >= 0 && p < n, "%d of %d", p, n)
	}
}

func TestUnknownName(t *testing.T) {
	_, err := NewPartitioner("murmur3")
	require.ErrorContains(t, err, `compat: kafka: unknown partitioner "murmur3"`)
}

func TestAllocateNothing(t *testing.T) {
	tp := PartitionerWith(compatMurmur2(t)).ForTopic("t")
	r := &kgo.Record{Topic: "t", Key: []byte("user:1000")}
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = tp.Partition(r, 12) }))
}

// TestProduceThroughClient produces every key through a real kgo.Client, with the partitioner
// as kgo.RecordPartitioner, to franz-go's fake Kafka cluster (kfake, on 127.0.0.1), and
// requires the partition each record was written to to be the one the other client picks.
func TestProduceThroughClient(t *testing.T) {
	keys, files := read(t)
	counts := []int{1, 3, 12, 64}
	var topics []string
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	for _, n := range counts {
		topic := fmt.Sprintf("p%d", n)
		topics = append(topics, topic)
		opts = append(opts, kfake.SeedTopics(int32(n), topic))
	}
	cluster, err := kfake.NewCluster(opts...)
	require.NoError(t, err)
	defer cluster.Close()

	total := 0
	for _, c := range clients[:3] {
		p, err := NewPartitioner(c.Partitioner)
		require.NoError(t, err)
		cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(p))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for i, n := range counts {
			want, ok := files[c.File].Column(n)
			require.True(t, ok)
			var records []*kgo.Record
			index := map[*kgo.Record]int{}
			for k := range want {
				r := &kgo.Record{Topic: topics[i], Key: keys[k], Value: []byte("v")}
				records = append(records, r)
				index[r] = k
			}
			results := cl.ProduceSync(ctx, records...)
			require.NoError(t, results.FirstErr())
			require.Len(t, results, len(want))
			for _, res := range results {
				k := index[res.Record]
				require.EqualValues(t, want[k], res.Record.Partition, "%s: key %d %q produced to %s", c.Partitioner, k, keys[k], topics[i])
				total++
			}
		}
		cancel()
		cl.Close()
	}
	require.Equal(t, 3*4*2000-3, total) // consistent_random's empty key is random for 3 counts above 1
}

func compatMurmur2(t *testing.T) compat.KafkaPartitioner {
	p, err := compat.NewKafkaPartitioner("murmur2")
	require.NoError(t, err)
	return p
}
