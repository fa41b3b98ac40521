package pool_test

import (
	"fmt"

	"github.com/shardkit/shard/pool"
)

func ExampleNewMaglev() {
	p, err := pool.NewMaglev([]pool.Node{
		{Name: "10.0.0.7:6379"},
		{Name: "10.0.0.8:6379", Weight: 2}, // twice the capacity
		{Name: "10.0.0.9:6379"},
	}, pool.MaglevOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("table size:", p.TableSize())
	for _, key := range []string{"user:1000", "user:1001", "user:1002"} {
		fmt.Println(key, p.AppendN(nil, key, 2)) // the owner, then a replica
	}
	if err := p.Remove("10.0.0.8:6379"); err != nil {
		fmt.Println(err)
	}
	fmt.Println("user:1001 after a removal:", p.Locate("user:1001"))
	// Output:
	// table size: 65537
	// user:1000 [10.0.0.7:6379 10.0.0.9:6379]
	// user:1001 [10.0.0.8:6379 10.0.0.7:6379]
	// user:1002 [10.0.0.7:6379 10.0.0.9:6379]
	// user:1001 after a removal: 10.0.0.7:6379
}
