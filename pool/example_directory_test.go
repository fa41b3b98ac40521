package pool_test

import (
	"fmt"

	"github.com/shardkit/shard/pool"
)

func ExampleNewDirectory() {
	p, err := pool.NewRendezvous([]pool.Node{{Name: "cache-a"}, {Name: "cache-b"}, {Name: "cache-c"}}, pool.RendezvousOptions{})
	if err != nil {
		panic(err)
	}
	d := pool.NewDirectory(p, nil)
	fmt.Println(d.Locate("user:42"), d.AppendN(nil, "user:42", 3))
	if err := d.Pin("user:42", "cache-a"); err != nil { // a hot owner gets its own node
		panic(err)
	}
	fmt.Println(d.Locate("user:42"), d.AppendN(nil, "user:42", 3))
	fmt.Println(d.Remove("cache-a"))
	text, _ := d.MarshalText()
	fmt.Print(string(text))
	// Output:
	// cache-b [cache-b cache-c cache-a]
	// cache-a [cache-a cache-b cache-c]
	// pool: directory: remove "cache-a": owner "user:42" is pinned to it (owners pinned to the nodes to remove: 1): repin or unpin them first: invalid node
	// directory entries=1
	// "user:42" "cache-a"
}
