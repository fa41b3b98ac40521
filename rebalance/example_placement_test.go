package rebalance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// A shard knows which placement it serves: a mover's claim records it, and an access routed
// by another one is refused, even for an owner that never had a fence there.
func ExamplePlacementOf() {
	ctx := context.Background()
	store := rebalance.NewMemShared(3)
	two, _ := shard.NewModulo(2)
	three, _ := shard.NewModulo(3)
	owners := []string{"alice", "bob", "carol"}

	mover, _ := rebalance.NewShared("grow-2-3", two, three, store, rebalance.SharedOptions{})
	_ = mover.Run(ctx, slices.Values(owners))
	fmt.Println("finish:", mover.Finish(ctx, slices.Values(owners)))

	// A process configured with 4 shards by mistake: its placement is not the one served.
	four, _ := shard.NewModulo(4)
	wrong := rebalance.PlacementOf("grow-2-3", two, four)
	fmt.Println(wrong == mover.Placement())
	err := store.Access(ctx, wrong, "dave", 2, func(*rebalance.MemTx) error { return nil })
	fmt.Println(errors.Is(err, rebalance.ErrPlacement))

	// The next migration, from 3 shards, is served before its mover claims: it starts where
	// the finished one ended.
	next := rebalance.PlacementOf("grow-3-4", three, four)
	fmt.Println(store.Access(ctx, next, "dave", 2, func(*rebalance.MemTx) error { return nil }))
	// Output:
	// finish: <nil>
	// false
	// true
	// <nil>
}
