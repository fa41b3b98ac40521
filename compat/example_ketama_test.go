package compat_test

import (
	"fmt"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

// A preset from the list, given a system's own configuration text: here a nutcracker.yml,
// whose pool cache hashes keys with md5 onto a ketama ring, the key's {tag} alone.
func ExamplePresets_twemproxy() {
	nutcrackerYML := []byte(`
cache:
  listen: 127.0.0.1:22121
  hash: md5
  hash_tag: "{}"
  distribution: ketama
  servers:
   - 10.0.0.7:6379:1
   - 10.0.0.8:6379:1
   - 10.0.0.9:6379:2
`)
	for _, preset := range compat.Presets() {
		if preset.System != "twemproxy" {
			continue
		}
		p, err := preset.New(nutcrackerYML, "cache")
		if err != nil {
			panic(err)
		}
		fmt.Println(p.Locate("user:1000"))
		fmt.Println(p.Locate("{user:1000}:cart") == p.Locate("user:1000"))
	}
	// Output:
	// 10.0.0.9:6379
	// true
}

// A pool from Go: nutcracker names servers host:port (the host alone on port 11211) unless
// they have a name, and orders them by name, the shorter first.
func ExampleNewTwemproxy() {
	p, err := compat.NewTwemproxy(compat.Twemproxy{
		Hash:    "fnv1a_64",
		Servers: []compat.TwemproxyServer{{Addr: "10.0.0.7:11211", Weight: 1}, {Addr: "10.0.0.8:11211", Weight: 1, Name: "b"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Nodes())
	fmt.Println(p.Locate("user:1000"))
	// Output:
	// [{b 1} {10.0.0.7 1}]
	// b
}

// A libmemcached client from its configuration string: the weights turn the weighted
// ketama continuum on because the distribution is consistent when the servers join.
func ExampleNewLibmemcached() {
	cfg, err := compat.ParseLibmemcached([]byte("--DISTRIBUTION=consistent --HASH=MD5 --SERVER=10.0.0.7:11211/?1 --SERVER=10.0.0.8:11211/?3"))
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Distribution, cfg.Hash, cfg.Weighted)
	p, err := compat.NewLibmemcached(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("user:1000"))
	// Output:
	// CONSISTENT MD5 true
	// 10.0.0.8:11211
}

// A spymemcached client with KetamaNodeLocator: a server added later takes its share of
// the keys from the others, here user:1000.
func ExampleNewSpymemcached() {
	p, err := compat.NewSpymemcached(compat.Spymemcached{
		Locator: "CONSISTENT",
		Hash:    "KETAMA_HASH",
		Servers: "10.0.0.7:11211 10.0.0.8:11211",
	})
	if err != nil {
		panic(err)
	}
	before := p.Locate("user:1000")
	if err := p.Add(pool.Node{Name: "10.0.0.9:11211"}); err != nil {
		panic(err)
	}
	fmt.Println(before, "->", p.Locate("user:1000"))
	// Output:
	// 10.0.0.7:11211 -> 10.0.0.9:11211
}

// npm hashring's constructor arguments: an object of weights, in hash_ring mode.
func ExampleNewHashring() {
	p, err := compat.NewHashring(compat.Hashring{
		Servers:       []compat.HashringServer{{Name: "10.0.0.7:11211", Weight: 1}, {Name: "10.0.0.8:11211", Weight: 2}},
		Compatibility: "hash_ring",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Locate("user:1000"), p.AppendN(nil, "user:1000", 2))
	// Output:
	// 10.0.0.7:11211 [10.0.0.7:11211 10.0.0.8:11211]
}

// The pools of a nutcracker.yml, as nutcracker reads them; nutcracker orders the servers by
// name when it builds the pool.
func ExampleParseTwemproxy() {
	pools, err := compat.ParseTwemproxy([]byte("alpha:\n  listen: 127.0.0.1:22121\n  hash: md5\n  servers:\n   - 10.0.0.8:11211:2\n   - 10.0.0.7:6379:1 cache-a\n"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %s %+v\n", pools[0].Name, pools[0].Hash, pools[0].Servers)
	_, err = compat.ParseTwemproxy([]byte("alpha:\n  listen: 127.0.0.1:22121\n  servers:\n   - 10.0.0.8:11211:0\n"))
	fmt.Println(err)
	// Output:
	// alpha md5 [{Addr:10.0.0.8:11211 Weight:2 Name:} {Addr:10.0.0.7:6379 Weight:1 Name:cache-a}]
	// compat: twemproxy: line 4: pool "alpha": directive "servers" has a zero weight in "hostname:port:weight [name]" format string: "10.0.0.8:11211:0"
}

// A libmemcached client's calls, in the order they are made: the weight above 1 does not
// turn the weighted continuum on, since the distribution was MODULA when the server joined.
func ExampleParseLibmemcached() {
	cfg, err := compat.ParseLibmemcached([]byte("server 10.0.0.7 11211 3\nbehavior HASH MD5\nbehavior DISTRIBUTION CONSISTENT\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Distribution, cfg.Hash, cfg.Weighted, cfg.Servers)
	// Output:
	// CONSISTENT MD5 false [{10.0.0.7 11211 3}]
}

// A spymemcached client's configuration: the weights only matter to KetamaConnectionFactory's
// consistent locator.
func ExampleParseSpymemcached() {
	cfg, err := compat.ParseSpymemcached([]byte("locator=CONSISTENT\nhash=KETAMA_HASH\nservers=10.0.0.7:11211, 10.0.0.8:11211\nweights=1 3\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Locator, cfg.Hash, cfg.Servers, cfg.Weights)
	// Output:
	// CONSISTENT KETAMA_HASH 10.0.0.7:11211, 10.0.0.8:11211 [1 3]
}

// hashring's arguments as JavaScript reads them: an object's integer-like keys come first.
func ExampleParseHashring() {
	cfg, err := compat.ParseHashring([]byte(`{"servers": {"cache-b": 2, "10": "3"}, "algorithm": "sha1", "options": {"vnode count": 80}}`))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v %s %v\n", cfg.Servers, cfg.Algorithm, cfg.VnodeCount)
	// Output:
	// [{Name:10 Weight:3 Vnodes:0} {Name:cache-b Weight:2 Vnodes:0}] sha1 80
}
