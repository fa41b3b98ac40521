package catalog_test

import (
	"fmt"

	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/pool"
)

// Every strategy by name, with the most shards it takes under the default options.
func ExampleAll() {
	for _, s := range catalog.All() {
		fmt.Printf("%-16s up to %d shards\n", s.Name, s.MaxShards(catalog.Options{}))
	}
	// Output:
	// modulo           up to 2147483647 shards
	// first-byte-sha1  up to 10 shards
	// jump             up to 2147483647 shards
	// jump-back        up to 2147483647 shards
	// rendezvous       up to 65536 shards
	// jedis-ring       up to 26214 shards
	// murmur-ring      up to 4194 shards
	// trie             up to 1048576 shards
	// partitions       up to 16384 shards
	// redis-cluster    up to 16384 shards
	// paged-partitions up to 16384 shards
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

// Every pool strategy by name, each placing one key on three named nodes.
func ExamplePools() {
	nodes := []pool.Node{{Name: "cache-a"}, {Name: "cache-b", Weight: 2}, {Name: "cache-c"}}
	for _, s := range catalog.Pools() {
		p, err := s.New(nodes, catalog.Options{})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-11s user:1 -> %s\n", s.Name, p.Locate("user:1"))
	}
	// Output:
	// ring        user:1 -> cache-c
	// rendezvous  user:1 -> cache-b
	// maglev      user:1 -> cache-a
	// memento     user:1 -> cache-b
	// multi-probe user:1 -> cache-b
	// modula      user:1 -> cache-c
}

// A pool strategy chosen by name.
func ExampleFindPool() {
	s, ok := catalog.FindPool("rendezvous")
	if !ok {
		panic("no rendezvous pool")
	}
	p, err := s.New([]pool.Node{{Name: "a"}, {Name: "b"}, {Name: "c"}}, catalog.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.AppendN(nil, "user:1", 2)) // the owner, then its replica
	// Output:
	// [a c]
}

// The presets by name.
func ExamplePresets() {
	for _, p := range catalog.Presets() {
		fmt.Println(p.Name)
	}
	// Output:
	// twemproxy
	// libmemcached
	// spymemcached
	// hashring
	// nginx
	// haproxy
	// goredis
	// jedis
	// grpc
	// vitess
	// pymemcache
	// uhashring
	// python-memcache
	// redis-shard
	// kafka
}

// A preset places keys as another system does, from that system's own configuration.
func ExampleFindPreset() {
	p, ok := catalog.FindPreset("nginx")
	if !ok {
		panic("no nginx preset")
	}
	config := []byte(`
upstream cache {
    hash $key consistent;
    server 10.0.0.1:11211;
    server 10.0.0.2:11211 weight=2;
}
`)
	pl, err := p.New(config, "cache")
	if err != nil {
		panic(err)
	}
	fmt.Println(pl.Locate("user:1"))

	_, err = p.New([]byte("upstream cache {\n    hash $key consistent;\n    server 10.0.0.1:99999;\n}\n"), "cache")
	fmt.Println(err)
	// Output:
	// 10.0.0.1:11211
	// compat: nginx: line 3: invalid port in upstream "10.0.0.1:99999"
}
