package pool_test

import (
	"fmt"

	"github.com/shardkit/shard/pool"
)

// A ring of three cache servers, one twice as big: the owner of a key and a replica, and
// what happens to the key when its owner leaves.
func ExampleNewRing() {
	r, err := pool.NewRing([]pool.Node{
		{Name: "10.0.0.7:6379"},
		{Name: "10.0.0.8:6379", Weight: 2},
		{Name: "10.0.0.9:6379"},
	}, pool.RingOptions{})
	if err != nil {
		panic(err)
	}
	replicas := r.AppendN(nil, "user:1000", 2)
	fmt.Println("owner and replica:", replicas)

	if err := r.Remove(replicas[0]); err != nil {
		panic(err)
	}
	fmt.Println("after the owner leaves:", r.Locate("user:1000"))
	// Output:
	// owner and replica: [10.0.0.9:6379 10.0.0.8:6379]
	// after the owner leaves: 10.0.0.8:6379
}

// Weighted rendezvous: every node's share of the keys is its share of the total weight.
func ExampleNewRendezvous() {
	r, err := pool.NewRendezvous([]pool.Node{
		{Name: "cache-a", Weight: 1},
		{Name: "cache-b", Weight: 3},
	}, pool.RendezvousOptions{})
	if err != nil {
		panic(err)
	}
	count := map[string]int{}
	for i := range 100000 {
		count[r.Locate(fmt.Sprint("key-", i))]++
	}
	fmt.Printf("cache-a %.2f, cache-b %.2f\n", float64(count["cache-a"])/100000, float64(count["cache-b"])/100000)
	fmt.Println("user:1000 ->", r.AppendN(nil, "user:1000", 2))
	// Output:
	// cache-a 0.25, cache-b 0.75
	// user:1000 -> [cache-a cache-b]
}
