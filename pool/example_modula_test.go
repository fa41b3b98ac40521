package pool_test

import (
	"fmt"

	"github.com/shardkit/shard/pool"
)

// Weighted modulo: each node fills as many slots as its weight, and a key goes to slot
// hash(key) % slots. Fast and exact in its shares, but adding a node moves most keys.
func ExampleNewModula() {
	m, err := pool.NewModula([]pool.Node{
		{Name: "cache-a", Weight: 3},
		{Name: "cache-b", Weight: 1},
	}, pool.ModulaOptions{})
	if err != nil {
		panic(err)
	}
	count := map[string]int{}
	keys := make([]string, 100000)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
		count[m.Locate(keys[i])]++
	}
	fmt.Printf("cache-a %.2f, cache-b %.2f\n", float64(count["cache-a"])/100000, float64(count["cache-b"])/100000)
	fmt.Println("user:1000 ->", m.AppendN(nil, "user:1000", 2))

	before := make([]string, len(keys))
	for i, k := range keys {
		before[i] = m.Locate(k)
	}
	if err := m.Add(pool.Node{Name: "cache-c"}); err != nil {
		panic(err)
	}
	moved := 0
	for i, k := range keys {
		if m.Locate(k) != before[i] {
			moved++
		}
	}
	fmt.Printf("adding cache-c moved %.0f%% of the keys\n", 100*float64(moved)/float64(len(keys)))
	// Output:
	// cache-a 0.75, cache-b 0.25
	// user:1000 -> [cache-a cache-b]
	// adding cache-c moved 50% of the keys
}
