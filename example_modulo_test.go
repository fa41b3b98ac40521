package shard_test

import (
	"fmt"

	"github.com/shardkit/shard"
)

func ExampleNewModulo() {
	four, err := shard.NewModulo(4)
	if err != nil {
		panic(err)
	}
	eight, err := shard.NewModulo(8)
	if err != nil {
		panic(err)
	}
	// Doubling keeps a key on its shard s or moves it to s+4; growing by one shard instead
	// would move most keys.
	for _, key := range []string{"user:1", "user:2", "user:3", "user:4", "user:5", "user:6"} {
		fmt.Println(key, four.Locate(key), "->", eight.Locate(key))
	}
	_, err = shard.NewModulo(0)
	fmt.Println(err)
	// Output:
	// user:1 3 -> 3
	// user:2 2 -> 2
	// user:3 1 -> 1
	// user:4 1 -> 5
	// user:5 0 -> 0
	// user:6 3 -> 3
	// shard: modulo: 0 shards: allowed range is [1, 2147483647]: shard count out of range
}

func ExampleModulo_LocateID() {
	// The ID-features article [001] routes integer IDs as user_id % 5: consecutive IDs take
	// turns.
	s, err := shard.NewModulo(5)
	if err != nil {
		panic(err)
	}
	for _, id := range []uint64{1, 2, 3, 4, 5, 6, 1000} {
		fmt.Println(id, s.LocateID(id))
	}
	// Output:
	// 1 1
	// 2 2
	// 3 3
	// 4 4
	// 5 0
	// 6 1
	// 1000 0
}
