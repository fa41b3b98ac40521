package franz_test

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardkit/shard/clients/franz"
	"github.com/shardkit/shard/compat"
)

// A franz-go producer that keeps sarama's placement (its default NewHashPartitioner).
func ExampleNewPartitioner() {
	p, err := franz.NewPartitioner("fnv1a")
	if err != nil {
		panic(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), kgo.RecordPartitioner(p))
	if err != nil {
		panic(err)
	}
	defer cl.Close()

	// The partitioner the client calls, for a topic of 12 partitions:
	topic := p.ForTopic("orders")
	fmt.Println(topic.Partition(&kgo.Record{Key: []byte("user:1000")}, 12))
	// Output: 1
}

func ExamplePartitionerWith() {
	legacy, err := compat.NewKafkaPartitioner("kafkajs_legacy") // kafkajs before 2.0.0
	if err != nil {
		panic(err)
	}
	p := franz.PartitionerWith(legacy).ForTopic("orders")
	fmt.Println(p.Partition(&kgo.Record{Key: []byte("user:1000")}, 12))
	// Output: 4
}
