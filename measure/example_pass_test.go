package measure_test

import (
	"fmt"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/measure"
)

// A pass looks every key up once and returns the sum of the shards, which keeps the lookups
// alive while RacePasses times them. The three kinds see the same placement.
func ExampleLocatePass() {
	s, _ := shard.NewJump(10)
	keys := measure.Keys(1, 1000, 16)
	fmt.Println(measure.LocatePass(s)(keys))
	// Output:
	// 4482
}

// LocateBatch in calls of 64 keys sums to what the Locate loop does.
func ExampleBatchPass() {
	s, _ := shard.NewJump(10)
	keys := measure.Keys(1, 1000, 16)
	fmt.Println(measure.BatchPass(s, 64)(keys) == measure.LocatePass(s)(keys))
	// Output:
	// true
}

// Two goroutines look every key up: twice the lookups, twice the sum.
func ExampleParallelPass() {
	s, _ := shard.NewJump(10)
	keys := measure.Keys(1, 1000, 16)
	fmt.Println(measure.ParallelPass(s, 2)(keys) == 2*measure.LocatePass(s)(keys))
	// Output:
	// true
}
