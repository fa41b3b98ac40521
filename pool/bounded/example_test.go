package bounded_test

import (
	"fmt"

	"github.com/shardkit/shard/pool"
	"github.com/shardkit/shard/pool/bounded"
)

// Connections for one hot key: consistent hashing alone would put all six on the key's
// owner; with c = 1.25 over three nodes the owner holds at most ceil(1.25 × total / 3) of
// them (1, 1, 2, 2, 3, 3 as the total grows) and the others go to the next node of the key's
// preference order.
func ExampleNew() {
	ring, err := pool.NewRing([]pool.Node{{Name: "cache-a"}, {Name: "cache-b"}, {Name: "cache-c"}}, pool.RingOptions{})
	if err != nil {
		panic(err)
	}
	b, err := bounded.New(ring, bounded.Options{Factor: 1.25})
	if err != nil {
		panic(err)
	}
	var leases []bounded.Lease
	var nodes []string
	for range 6 {
		l, err := b.Acquire("video:42")
		if err != nil {
			panic(err)
		}
		leases = append(leases, l)
		nodes = append(nodes, l.Node())
	}
	fmt.Println(nodes)
	for _, l := range leases {
		if err := l.Release(); err != nil {
			panic(err)
		}
	}
	fmt.Println(leases[0].Release())
	// Output:
	// [cache-b cache-a cache-b cache-a cache-b cache-a]
	// bounded: release of a lease on "cache-b": lease already released
}

// Tenants of very different sizes on three databases, none above 1.25 times its share.
func ExampleAssign() {
	ring, err := pool.NewRing([]pool.Node{{Name: "db-1"}, {Name: "db-2"}, {Name: "db-3"}}, pool.RingOptions{})
	if err != nil {
		panic(err)
	}
	items := []bounded.Item{
		{Key: "acme", Weight: 40}, {Key: "globex", Weight: 30}, {Key: "initech", Weight: 20},
		{Key: "umbrella", Weight: 10}, {Key: "hooli", Weight: 10}, {Key: "stark", Weight: 10},
	}
	nodes, err := bounded.Assign(ring, items, bounded.Options{})
	if err != nil {
		panic(err)
	}
	load := map[string]int64{}
	for i, it := range items {
		fmt.Println(it.Key, "->", nodes[i])
		load[nodes[i]] += it.Weight
	}
	fmt.Println("loads:", load["db-1"], load["db-2"], load["db-3"], "cap: ceil(1.25 × 120 / 3) = 50")
	// Output:
	// acme -> db-1
	// globex -> db-2
	// initech -> db-2
	// umbrella -> db-3
	// hooli -> db-3
	// stark -> db-3
	// loads: 40 50 30 cap: ceil(1.25 × 120 / 3) = 50
}
