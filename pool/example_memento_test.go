package pool_test

import (
	"fmt"

	"github.com/shardkit/shard/pool"
)

func ExampleNewMemento() {
	p, err := pool.NewMemento([]pool.Node{{Name: "cache-a"}, {Name: "cache-b"}, {Name: "cache-c", Weight: 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	keys := []string{"user:2", "user:3", "user:4", "user:16"}
	for _, key := range keys {
		fmt.Println(key, p.AppendN(nil, key, 2)) // the owner, then the next owner
	}

	// A node in the middle leaves: only its keys move, each to its second node.
	if err := p.Remove("cache-b"); err != nil {
		fmt.Println(err)
	}
	for _, key := range keys {
		fmt.Println(key, "now on", p.Locate(key))
	}

	// Placement depends on the history: save the state so that other processes agree.
	text, err := p.MarshalText()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(text))
	var other pool.Memento
	if err := other.UnmarshalText(text); err != nil {
		fmt.Println(err)
	}
	fmt.Println("another process puts user:16 on", other.Locate("user:16"))
	// Output:
	// user:2 [cache-a cache-c]
	// user:3 [cache-b cache-c]
	// user:4 [cache-c cache-b]
	// user:16 [cache-b cache-a]
	// user:2 now on cache-a
	// user:3 now on cache-c
	// user:4 now on cache-c
	// user:16 now on cache-a
	// # MementoHash state of a pool.Memento: load it with UnmarshalText to place keys the same way.
	// memento v1
	// buckets 4
	// node "cache-a" weight 1 buckets 0
	// node "cache-c" weight 2 buckets 2-3
	// removed 1
	// another process puts user:16 on cache-a
}
