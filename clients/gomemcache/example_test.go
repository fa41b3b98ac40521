package gomemcache_test

import (
	"fmt"
	"log"
	"net"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardkit/shard/clients/gomemcache"
	"github.com/shardkit/shard/compat"
)

// A gomemcache client that puts each key on the server libmemcached's ketama (and
// twemproxy's ketama with md5) picks for it.
func ExampleNewKetama() {
	sel, err := gomemcache.NewKetama("10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211")
	if err != nil {
		log.Fatal(err)
	}
	mc := memcache.NewFromSelector(sel) // mc.Set, mc.Get: each key on its ketama server
	_ = mc

	addr, _ := sel.PickServer("user:1000")
	fmt.Println(addr)
	// Output:
	// 10.0.0.3:11211
}

// Any pool, here a twemproxy pool from its nutcracker.yml, whose servers have names: Resolve
// gives their addresses.
func ExampleNew() {
	pools, err := compat.ParseTwemproxy([]byte(`
cache:
  listen: 127.0.0.1:22121
  hash: md5
  distribution: ketama
  servers:
   - 10.0.0.1:11211:1 cache-a
   - 10.0.0.2:11211:1 cache-b
`))
	if err != nil {
		log.Fatal(err)
	}
	p, err := compat.NewTwemproxy(pools[0])
	if err != nil {
		log.Fatal(err)
	}
	addrs := map[string]string{"cache-a": "10.0.0.1:11211", "cache-b": "10.0.0.2:11211"}
	sel, err := gomemcache.New(p, gomemcache.Options{
		Resolve: func(name string) (net.Addr, error) { return net.ResolveTCPAddr("tcp", addrs[name]) },
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"user:1", "user:2", "user:3", "user:4"} {
		addr, _ := sel.PickServer(key)
		fmt.Println(key, p.Locate(key), addr)
	}
	// Output:
	// user:1 cache-a 10.0.0.1:11211
	// user:2 cache-b 10.0.0.2:11211
	// user:3 cache-a 10.0.0.1:11211
	// user:4 cache-a 10.0.0.1:11211
}
