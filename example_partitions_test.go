package shard_test

import (
	"fmt"

	"github.com/shardkit/shard"
)

func ExampleNewPartitions() {
	// 12 partitions among 3 shards: shard i owns the i-th contiguous range.
	p, err := shard.NewPartitions(3, 12)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Table())
	for _, key := range []string{"user:1000", "user:1001", "user:1002"} {
		fmt.Printf("%s: partition %d, shard %d\n", key, p.Partition(key), p.Locate(key))
	}
	// Output:
	// [0 0 0 0 1 1 1 1 2 2 2 2]
	// user:1000: partition 3, shard 0
	// user:1001: partition 6, shard 1
	// user:1002: partition 11, shard 2
}

func ExamplePartitions_Resize() {
	p, err := shard.NewPartitions(3, 12)
	if err != nil {
		panic(err)
	}
	// Growing to 4 shards: each old shard gives its last partition to the new one, the
	// fewest moves that leave every shard with 3 partitions.
	moves, err := p.PlanResize(4)
	if err != nil {
		panic(err)
	}
	for _, m := range moves {
		fmt.Printf("partition %d: shard %d -> %d\n", m.Partition, m.From, m.To)
	}
	if err := p.Resize(4); err != nil {
		panic(err)
	}
	fmt.Println(p.Table())
	text, _ := p.MarshalText()
	fmt.Print(string(text))
	// Output:
	// partition 3: shard 0 -> 3
	// partition 7: shard 1 -> 3
	// partition 11: shard 2 -> 3
	// [0 0 0 3 1 1 1 3 2 2 2 3]
	// hash=xxh64 partitions=12 shards=4
	// 0-2 0
	// 3 3
	// 4-6 1
	// 7 3
	// 8-10 2
	// 11 3
}

func ExampleNewRedisCluster() {
	// The masters given to redis-cli --cluster create, in that order, are shards 0, 1, 2.
	c, err := shard.NewRedisCluster(3)
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"foo", "bar", "{user1000}.following", "{user1000}.followers"} {
		fmt.Printf("%s: slot %d, master %d\n", key, c.Partition(key), c.Locate(key))
	}
	text, _ := c.MarshalText()
	fmt.Print(string(text))
	// Output:
	// foo: slot 12182, master 2
	// bar: slot 5061, master 0
	// {user1000}.following: slot 3443, master 0
	// {user1000}.followers: slot 3443, master 0
	// hash=redis partitions=16384 shards=3
	// 0-5460 0
	// 5461-10922 1
	// 10923-16383 2
}

func ExampleRedisSlot() {
	fmt.Println(shard.RedisSlot("123456789")) // CRC16 0x31C3, the specification's check value
	fmt.Println(shard.RedisSlot("foo"))
	fmt.Println(shard.RedisSlot("{user1000}.following"), shard.RedisSlot("{user1000}.followers"))
	fmt.Println(shard.RedisSlot("foo{}{bar}"))    // "{}" is no tag: the whole key is hashed
	fmt.Println(shard.RedisSlot("foo{{bar}}zap")) // the tag is "{bar"
	// Output:
	// 12739
	// 12182
	// 3443 3443
	// 8363
	// 4015
}
