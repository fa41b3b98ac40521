package pool_test

import (
	"fmt"

	"github.com/shardkit/shard/pool"
)

func ExampleNewMultiProbe() {
	p, err := pool.NewMultiProbe([]pool.Node{
		{Name: "cache-a"}, {Name: "cache-b"}, {Name: "cache-c", Weight: 3},
	}, pool.MultiProbeOptions{}) // 21 probes
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, key := range []string{"user:1000", "user:1001", "user:1002"} {
		fmt.Println(key, p.AppendN(nil, key, 3)) // every node, nearest first
	}
	if err := p.Add(pool.Node{Name: "cache-d"}); err != nil {
		fmt.Println(err)
	}
	fmt.Println("user:1002 after an Add:", p.Locate("user:1002")) // unchanged, or cache-d
	// Output:
	// user:1000 [cache-c cache-a cache-b]
	// user:1001 [cache-c cache-a cache-b]
	// user:1002 [cache-a cache-c cache-b]
	// user:1002 after an Add: cache-a
}
