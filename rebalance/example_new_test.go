package rebalance_test

import (
	"errors"
	"fmt"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// New checks its arguments before the store is touched: a migration needs an ID, which names
// its marks, and two sharders, the second a new one with the new count (resizing the first
// would change both sides at once).
func ExampleNew() {
	before, _ := shard.NewModulo(5)
	after, _ := shard.NewModulo(10)
	store := &mapStore{marks: map[[2]string]rebalance.Mark{}}

	_, err := rebalance.New("", before, after, store, rebalance.Options{})
	fmt.Println(err)
	_, err = rebalance.New("grow-5-to-10", before, before, store, rebalance.Options{})
	fmt.Println(errors.Is(err, rebalance.ErrConfig))

	m, err := rebalance.New("grow-5-to-10", before, after, store, rebalance.Options{Mode: rebalance.Lazy})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.ID())
	// Output:
	// rebalance: empty migration ID: invalid migration
	// true
	// grow-5-to-10
}
