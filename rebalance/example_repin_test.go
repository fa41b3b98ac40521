package rebalance_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

func ExampleNewRepin() {
	ctx := context.Background()
	rule, _ := shard.NewJump(3)
	d := shard.NewDirectory(rule, nil)
	store := &mapStore{marks: map[[2]string]rebalance.Mark{}}
	for range 3 {
		store.shards = append(store.shards, map[string][]string{})
	}
	owners := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	was := map[string]int{}
	for _, o := range owners {
		was[o] = d.Locate(o)
		store.add(was[o], o, o+"'s row")
	}

	again, _ := shard.NewJump(3) // a second instance of the rule, for the batches' clones
	r, err := rebalance.NewRepin("repin-1", d, again, store, rebalance.Options{})
	if err != nil {
		panic(err)
	}
	// alice is hot: give her shard 0 (her rows move first, then her entry is written).
	if err := r.Move(ctx, map[string]int{"alice": 0}); err != nil {
		panic(err)
	}
	// Drain shard 2, two owners at a time, to where a Jump of 2 shards places them.
	two, _ := shard.NewJump(2)
	if err := r.Drain(ctx, 2, slices.Values(owners), 2, two.Locate); err != nil {
		panic(err)
	}
	fmt.Println("shard 2 holds", len(store.shards[2]), "owners")
	// Nothing is left on shard 2: the directory can shrink without moving anyone.
	if err := r.Resize(ctx, 2); err != nil {
		panic(err)
	}
	for _, o := range owners {
		_, pinned := d.Pinned(o)
		_ = r.Do(ctx, o, func(shard int) error {
			fmt.Println(o, was[o], "->", shard, store.shards[shard][o], "pinned:", pinned)
			return nil
		})
	}
	// Output:
	// shard 2 holds 0 owners
	// alice 1 -> 0 [alice's row] pinned: true
	// bob 2 -> 1 [bob's row] pinned: true
	// carol 1 -> 1 [carol's row] pinned: false
	// dave 2 -> 1 [dave's row] pinned: true
	// erin 2 -> 1 [erin's row] pinned: true
	// frank 2 -> 0 [frank's row] pinned: true
	// grace 1 -> 1 [grace's row] pinned: false
	// heidi 1 -> 1 [heidi's row] pinned: false
}
