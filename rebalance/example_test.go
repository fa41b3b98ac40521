package rebalance_test

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

func ExamplePlanKeys() {
	before, _ := shard.NewModulo(5)
	after, _ := shard.NewModulo(10)
	var users []string
	for id := range 1000 {
		users = append(users, strconv.Itoa(id))
	}
	plan := rebalance.PlanKeys(before, after, slices.Values(users))
	fmt.Printf("%d of %d users move (%.0f%%)\n", plan.Moved(), plan.Total, 100*plan.Fraction())
	// Output:
	// 507 of 1000 users move (51%)
}

func ExamplePlanPartitions() {
	// Eight partitions on two shards; a third shard takes partitions 2 and 5.
	plan, moves, err := rebalance.PlanPartitions(
		[]int{0, 1, 0, 1, 0, 1, 0, 1},
		[]int{0, 1, 2, 1, 0, 2, 0, 1})
	fmt.Println(plan.Fraction(), moves, err)
	// Output:
	// 0.25 [{2 0 2} {5 1 2}] <nil>
}

func ExamplePlanLeaves() {
	// The root leaf splits: the half of the key space whose hash starts with 1 moves.
	plan, err := rebalance.PlanLeaves(
		[]shard.Leaf{{Path: 0, Depth: 0, Shard: 0}},
		[]shard.Leaf{{Path: 0, Depth: 1, Shard: 0}, {Path: 1, Depth: 1, Shard: 1}})
	if err != nil {
		panic(err)
	}
	for _, r := range plan.Ranges {
		fmt.Printf("hashes %#016x..%#016x: shard %d -> %d, %.0f%% of the keys\n", r.First, r.Last, r.From, r.To, 100*r.Fraction())
	}
	// Output:
	// hashes 0x8000000000000000..0xffffffffffffffff: shard 0 -> 1, 50% of the keys
}

func ExamplePlan() {
	before, _ := shard.NewJump(3)
	after, _ := shard.NewJump(4)
	var users []string
	for id := range 1000 {
		users = append(users, "user"+strconv.Itoa(id))
	}
	// Rows per source -> destination: what each shard sends, and what it keeps.
	plan := rebalance.PlanKeys(before, after, slices.Values(users))
	for _, f := range plan.Flows {
		fmt.Printf("%d -> %d: %d\n", f.From, f.To, f.Count)
	}
	fmt.Println("shard 0 sends shard 3:", plan.Count(0, 3), "and shard 1:", plan.Count(0, 1))
	// Output:
	// 0 -> 0: 257
	// 0 -> 3: 80
	// 1 -> 1: 232
	// 1 -> 3: 94
	// 2 -> 2: 248
	// 2 -> 3: 89
	// shard 0 sends shard 3: 80 and shard 1: 0
}
