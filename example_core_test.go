package shard_test

import (
	"fmt"

	"github.com/shardkit/shard"
)

func ExampleNewFirstByteSHA1() {
	s, err := shard.NewFirstByteSHA1(3)
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"user:1", "user:2", "user:3"} {
		fmt.Println(key, s.Locate(key))
	}
	_, err = shard.NewFirstByteSHA1(11)
	fmt.Println(err)
	// Output:
	// user:1 1
	// user:2 0
	// user:3 1
	// shard: first-byte SHA-1: 11 shards: allowed range is [1, 10]: shard count out of range
}

func ExampleNewJump() {
	s, err := shard.NewJump(10)
	if err != nil {
		panic(err)
	}
	keys := []string{"user:1", "user:2", "user:3", "user:4", "user:5", "user:6"}
	before := make([]int, len(keys))
	for i, key := range keys {
		before[i] = s.Locate(key)
	}
	// Growing to 11 shards moves about 1 key in 11, and only to the new shard 10.
	if err := s.Resize(11); err != nil {
		panic(err)
	}
	for i, key := range keys {
		fmt.Println(key, before[i], "->", s.Locate(key))
	}
	// Output:
	// user:1 2 -> 2
	// user:2 0 -> 0
	// user:3 1 -> 1
	// user:4 4 -> 4
	// user:5 5 -> 10
	// user:6 4 -> 4
}

func ExampleJumpHash() {
	// The same buckets as Guava's Hashing.consistentHash(key, n).
	for _, n := range []int{1, 2, 10, 1000} {
		fmt.Println(n, shard.JumpHash(0xdeadbeef, n))
	}
	// Output:
	// 1 0
	// 2 1
	// 10 5
	// 1000 285
}

func ExampleNewJumpBack() {
	s, err := shard.NewJumpBack(1_000_000) // a lookup costs about the same as with 10 shards
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"user:1", "user:2", "user:3"} {
		fmt.Println(key, s.Locate(key))
	}
	// Output:
	// user:1 688092
	// user:2 305790
	// user:3 559908
}

func ExampleJumpBackHash() {
	// The same buckets as hash4j's ConsistentHashing.jumpBackHashSplitMix64().getBucket(key, n).
	for _, n := range []int{1, 2, 10, 1000, 1_000_000} {
		fmt.Println(n, shard.JumpBackHash(0xdeadbeef, n))
	}
	// Output:
	// 1 0
	// 2 0
	// 10 7
	// 1000 923
	// 1000000 387995
}

func ExampleLocateBatch() {
	s, err := shard.NewJump(1000)
	if err != nil {
		panic(err)
	}
	keys := []string{"user:1", "user:2", "user:3", "user:4", "user:5"}
	shards := make([]int, len(keys)) // reuse it across batches: LocateBatch never allocates
	shard.LocateBatch(s, keys, shards)
	for i, key := range keys {
		fmt.Println(key, shards[i], s.Locate(key))
	}
	// Output:
	// user:1 182 182
	// user:2 377 377
	// user:3 907 907
	// user:4 62 62
	// user:5 608 608
}

func ExampleNewRendezvous() {
	s, err := shard.NewRendezvous(5)
	if err != nil {
		panic(err)
	}
	keys := []string{"user:1", "user:2", "user:3", "user:4", "user:5", "user:6"}
	before := make([]int, len(keys))
	for i, key := range keys {
		before[i] = s.Locate(key)
	}
	// Removing shard 4 moves only the keys it held; they spread over the others.
	if err := s.Resize(4); err != nil {
		panic(err)
	}
	for i, key := range keys {
		fmt.Println(key, before[i], "->", s.Locate(key))
	}
	// Output:
	// user:1 0 -> 0
	// user:2 2 -> 2
	// user:3 1 -> 1
	// user:4 1 -> 1
	// user:5 0 -> 0
	// user:6 4 -> 1
}
