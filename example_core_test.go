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
