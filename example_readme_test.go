package shard_test

import (
	"fmt"
	"log"

	"github.com/shardkit/shard"
)

// The README's first task: route keys to ten shards, then grow to eleven.
func Example_routeKeys() {
	s, err := shard.NewJump(10) // 10 shards, numbered 0..9
	if err != nil {
		log.Fatal(err)
	}
	keys := []string{"user:1", "user:2", "user:3", "user:4", "user:5", "user:6"}
	before := make([]int, len(keys))
	for i, key := range keys {
		before[i] = s.Locate(key) // in [0, 10), the same in every process: index your databases with it
	}

	// Growing to 11 shards moves about 1 key in 11, each to the new shard 10.
	if err := s.Resize(11); err != nil {
		log.Fatal(err)
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
