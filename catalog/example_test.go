package catalog_test

import (
	"fmt"

	"github.com/shardkit/shard/catalog"
)

// Every strategy by name, with the most shards it takes under the default options.
func ExampleAll() {
	for _, s := range catalog.All() {
		fmt.Printf("%-15s up to %d shards\n", s.Name, s.MaxShards(catalog.Options{}))
	}
	// Output:
	// modulo          up to 2147483647 shards
	// first-byte-sha1 up to 10 shards
	// jump            up to 2147483647 shards
	// rendezvous      up to 65536 shards
	// jedis-ring      up to 26214 shards
	// murmur-ring     up to 4194 shards
	// trie            up to 1048576 shards
	// partitions      up to 16384 shards
	// redis-cluster   up to 16384 shards
}

// A strategy chosen by name, as a command-line flag or a configuration file names it.
func ExampleFind() {
	st, ok := catalog.Find("jump")
	if !ok {
		panic("no jump")
	}
	s, err := st.New(10, catalog.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Locate("user:1"))

	_, ok = catalog.Find("consistent")
	fmt.Println(ok)
	// Output:
	// 2
	// false
}
