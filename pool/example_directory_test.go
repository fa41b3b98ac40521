package pool

import "fmt"

// The example runs on the tests' reference pool (weighted rendezvous, computed the slow way);
// any Pool works the same way.
func ExampleNewDirectory() {
	p, err := newRefPool([]Node{{Name: "cache-a"}, {Name: "cache-b"}, {Name: "cache-c"}})
	if err != nil {
		panic(err)
	}
	d := NewDirectory(p, nil)
	fmt.Println(d.Locate("user:42"), d.AppendN(nil, "user:42", 3))
	if err := d.Pin("user:42", "cache-c"); err != nil { // a hot owner gets its own node
		panic(err)
	}
	fmt.Println(d.Locate("user:42"), d.AppendN(nil, "user:42", 3))
	fmt.Println(d.Remove("cache-c"))
	text, _ := d.MarshalText()
	fmt.Print(string(text))
	// Output:
	// cache-a [cache-a cache-c cache-b]
	// cache-c [cache-c cache-a cache-b]
	// pool: directory: remove "cache-c": owner "user:42" is pinned to it (owners pinned to the nodes to remove: 1): repin or unpin them first: invalid node
	// directory entries=1
	// "user:42" "cache-c"
}
