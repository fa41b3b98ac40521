package pool_test

import (
	"fmt"

	"github.com/shardkit/shard/pool"
)

// Weighted modulo: cache-b fills two of the four slots, so it takes half the keys; every
// change moves most keys, as modulo does.
func ExampleNewModula() {
	p, err := pool.NewModula([]pool.Node{{Name: "cache-a"}, {Name: "cache-b", Weight: 2}, {Name: "cache-c"}}, pool.ModulaOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("user:1"), p.AppendN(nil, "user:1", 2))
	// Output: cache-c [cache-c cache-a]
}
