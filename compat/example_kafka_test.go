package compat_test

import (
	"fmt"

	"github.com/shardkit/shard/compat"
)

// A topic of 12 partitions: where the Java producer (and librdkafka's murmur2, franz-go and
// kafkajs by default) sends records with these keys.
func ExampleNewKafka() {
	k, err := compat.NewKafka("murmur2", 12)
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"user:1000", "order-42", ""} {
		fmt.Printf("%q -> partition %d\n", key, k.Locate(key))
	}
	// Adding partitions to the topic moves most keys: every client places by hash modulo count.
	_ = k.Resize(16)
	fmt.Printf("%q -> partition %d of %d\n", "user:1000", k.Locate("user:1000"), k.Shards())
	// Output:
	// "user:1000" -> partition 5
	// "order-42" -> partition 0
	// "" -> partition 9
	// "user:1000" -> partition 1 of 16
}

// sarama's default partitioner and librdkafka's fnv1a place keys alike.
func ExampleNewKafkaPartitioner() {
	p, err := compat.NewKafkaPartitioner("fnv1a")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Name(), p.Partition([]byte("user:1000"), 12))
	// Output: fnv1a 1
}

func ExampleNewKafkaWith() {
	var java compat.KafkaPartitioner // the zero partitioner is the Java client's
	k, err := compat.NewKafkaWith(java, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println(k.Partitioner().Name(), k.Locate("user:1000"))
	// Output: murmur2 2
}

// A librdkafka producer's properties name its partitioner.
func ExampleParseKafka() {
	p, err := compat.ParseKafka([]byte("bootstrap.servers=127.0.0.1:9092\npartitioner=consistent_random\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Name())
	_, err = compat.ParseKafka([]byte("partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner\n"))
	fmt.Println(err)
	// Output:
	// consistent_random
	// compat: kafka: line 1: partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner places records without their key
}

func ExamplePartitionPresets() {
	for _, p := range compat.PartitionPresets() {
		s, err := p.New([]byte("partitioner=fnv1a\n"), 12)
		if err != nil {
			panic(err)
		}
		fmt.Println(p.System, s.Shards(), s.Locate("user:1000"))
	}
	// Output: kafka 12 1
}
