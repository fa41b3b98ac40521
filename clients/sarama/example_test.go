package sarama_test

import (
	"fmt"

	"github.com/IBM/sarama"

	saramapart "github.com/shardkit/shard/clients/sarama"
	"github.com/shardkit/shard/compat"
)

// A sarama producer that places keys as librdkafka's default partitioner (consistent_random)
// does, say next to a confluent-kafka-go producer.
func ExampleNewPartitioner() {
	cfg := sarama.NewConfig()
	var err error
	if cfg.Producer.Partitioner, err = saramapart.NewPartitioner("consistent_random"); err != nil {
		panic(err)
	}

	// The partitioner the producer calls, for a topic of 12 partitions:
	p := cfg.Producer.Partitioner("orders")
	fmt.Println(p.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder("user:1000")}, 12))
	// Output: 3 <nil>
}

func ExamplePartitionerWith() {
	var java compat.KafkaPartitioner // the zero partitioner is the Java client's
	p := saramapart.PartitionerWith(java)("orders")
	fmt.Println(p.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder("user:1000")}, 12))
	// Output: 5 <nil>
}
