package compat_test

import (
	"fmt"

	"github.com/shardkit/shard/compat"
)

func ExamplePresets() {
	for _, p := range compat.Presets() {
		fmt.Println(p.System)
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
}

func ExampleNewNginx() {
	// upstream backend { hash $request_uri consistent; server ...; server ... weight=2; server ... down; }
	p, err := compat.NewNginx(compat.NginxUpstream{
		Name:       "backend",
		Consistent: true,
		Servers: []compat.NginxServer{
			{Address: "10.0.0.1:8080"},
			{Address: "10.0.0.2:8080", Weight: 2},
			{Address: "10.0.0.3:8080", Down: true},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("/index.html"), p.Locate("/about"))
	// Output: 10.0.0.1:8080 10.0.0.2:8080
}

func ExampleParseNginx() {
	conf := `
http {
    upstream cache {
        hash $arg_key;
        server 10.0.0.1;
        server 10.0.0.2 weight=3;
    }
}`
	u, err := compat.ParseNginx([]byte(conf), "cache", nil)
	if err != nil {
		panic(err)
	}
	p, err := compat.NewNginx(u)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("user:1"))
	_, err = compat.ParseNginx([]byte("upstream u { hash $key; server 10.0.0.1 weight=0; }"), "", nil)
	fmt.Println(err)
	// Output:
	// 10.0.0.2
	// compat: nginx: line 1: invalid parameter "weight=0"
}

func ExampleNewHAProxy() {
	// backend app: balance uri; hash-type consistent; three servers, one with an explicit id.
	p, err := compat.NewHAProxy(compat.HAProxyBackend{
		Name:       "app",
		Consistent: true,
		Avalanche:  true, // `hash-type consistent` alone means sdbm with avalanche
		Servers: []compat.HAProxyServer{
			{Name: "web1", Weight: 1},
			{Name: "web2", Weight: 1, ID: 10},
			{Name: "web3", Weight: 2},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("/index.html"), p.Locate("/about"))
	// Output: web2 web3
}

func ExampleParseHAProxy() {
	conf := `
defaults
    mode http
    hash-type map-based djb2

backend app
    balance url_param user
    server web1 10.0.0.1:80 check
    server web2 10.0.0.2:80 check weight 3
`
	b, err := compat.ParseHAProxy([]byte(conf), "app")
	if err != nil {
		panic(err)
	}
	p, err := compat.NewHAProxy(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(b.Function, p.Locate("alice"), p.Locate("bob"))
	// Output: djb2 web2 web1
}

func ExampleNewGoRedis() {
	// The Addrs of a go-redis redis.RingOptions.
	p, err := compat.NewGoRedis(map[string]string{
		"shard1": "10.0.0.1:6379",
		"shard2": "10.0.0.2:6379",
		"shard3": "10.0.0.3:6379",
	})
	if err != nil {
		panic(err)
	}
	// Keys with one hash tag go to one shard, as in the Ring.
	fmt.Println(p.Locate("{user:1000}.following"), p.Locate("{user:1000}.followers"), p.Locate("user:1001"))
	// Output: shard1 shard1 shard2
}

func ExampleNewJedis() {
	// new ShardedJedis(shards, Hashing.MURMUR_HASH, Sharded.DEFAULT_KEY_TAG_PATTERN) with two
	// named shards and one unnamed one.
	p, err := compat.NewJedis(compat.JedisConfig{
		KeyTagPattern: compat.JedisDefaultKeyTag,
		Shards: []compat.JedisShard{
			{Host: "10.0.0.1", Port: 6379, Name: "a", Weight: 1},
			{Host: "10.0.0.2", Port: 6379, Name: "b", Weight: 2},
			{Host: "10.0.0.3", Port: 6379, Weight: 1},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("{cart}:1"), p.Locate("{cart}:2"), p.Locate("session:9"))
	// Output: b b a
}

func ExampleParseGoRedis() {
	addrs, err := compat.ParseGoRedis([]byte(`{"shard1": "10.0.0.1:6379", "shard2": "10.0.0.2:6379"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(addrs), addrs["shard2"])
	_, err = compat.ParseGoRedis([]byte("{\n  \"a\": \"10.0.0.1:6379\",\n  \"a\": \"10.0.0.2:6379\"\n}"))
	fmt.Println(err)
	// Output:
	// 2 10.0.0.2:6379
	// compat: goredis: line 3: shard "a" is named twice (also on line 2): a Go map keeps one of them
}

func ExampleParseJedis() {
	c, err := compat.ParseJedis([]byte(`{
  "jedis": "2.9.3",
  "hashing": "MD5",
  "keyTagPattern": "^([^:]+):",
  "shards": [
    {"host": "10.0.0.1", "port": 6379, "name": "a", "weight": 2},
    {"host": "10.0.0.2", "port": 6380}
  ]
}`))
	if err != nil {
		panic(err)
	}
	p, err := compat.NewJedis(c)
	if err != nil {
		panic(err)
	}
	fmt.Println(c.OldNaming, p.Nodes())
	// Output: true [{a 2} {10.0.0.2:6380 1}]
}

func ExampleRingOf() {
	// A nutcracker.yml pool of three memcached servers, ketama and fnv1a_64 by default.
	p, err := compat.NewTwemproxy(compat.Twemproxy{Servers: []compat.TwemproxyServer{
		{Addr: "10.0.0.1:11211", Weight: 1}, {Addr: "10.0.0.2:11211", Weight: 1}, {Addr: "10.0.0.3:11211", Weight: 1},
	}})
	if err != nil {
		panic(err)
	}
	r := compat.RingOf(p) // the ketama continuum: 160 points per server
	arcs := 0
	for range r.Arcs() {
		arcs++ // a range of positions (r.Position) that one server holds
	}
	fmt.Printf("pool: %s, ring: %s, %d arcs\n", p.Locate("user:1"), r.Locate("user:1"), arcs)
	// Output: pool: 10.0.0.3, ring: 10.0.0.3, 317 arcs
}
