package main

import (
	"fmt"
	"hash/crc32"
	"unsafe"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
	gojump "github.com/dgryski/go-jump"
	rendezvous "github.com/dgryski/go-rendezvous"
	"github.com/golang/groupcache/consistenthash"
	ljump "github.com/lithammer/go-jump-consistent-hash"
	"github.com/serialx/hashring"
	stathat "stathat.com/c/consistent"

	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/measure"
	"github.com/shardkit/shard/pool"
)

// A contestant is one way to place keys: one of ours or another package's. Every one is
// timed through the same single interface call (measure.Locator), so call overhead is
// equal for all.
type contestant struct {
	name string // "ours/jump", "dgryski/go-jump+xxhash", ...
	id   string // the name as a benchmark name element: "ours-jump", "go-jump", ...
	kind string // contestants of one kind are compared with each other
	ours bool
	// maxShards is the most shards it is timed with in the scaling table: its own limit, or
	// the most it can be built with in a few seconds.
	maxShards int
	// build returns the locator for n shards.
	build func(n int) (measure.Locator, error)
	// resize changes l to n shards, as the package's users would: ours by Resize (the
	// history-dependent strategies remember their shape), the peers by adding members.
	resize func(l measure.Locator, n int) (measure.Locator, error)
}

// Kinds: strategies of one kind make the same promise, so their speed compares directly.
const (
	kindModulo     = "hash % n"
	kindJump       = "jump"
	kindRendezvous = "rendezvous"
	kindRing       = "ring"
	kindTable      = "table" // ours only; compared with the bare hash % n
	// kindNamedModulo is hash % n returning a member's name, as a pool does: the baseline of
	// the pools whose lookup is a hash and a table (Maglev), or a hash and jump (Memento).
	kindNamedModulo = "names[hash % n]"
)

// kindOf says which peers each of our strategies competes with. A strategy missing here is
// compared with the bare baseline, as a table.
var kindOf = map[string]string{
	"modulo":          kindModulo,
	"first-byte-sha1": kindModulo,
	"jump":            kindJump,
	"jump-back":       kindJump,
	"rendezvous":      kindRendezvous,
	"murmur-ring":     kindRing,
	"jedis-ring":      kindRing,
	"trie":            kindTable,
	"partitions":      kindTable,
	"redis-cluster":   kindTable,
}

// nodeName names peer member i so that its index can be read back in a few instructions:
// turning a member name into a shard number with a map lookup would charge the peers for
// work that is ours, not theirs.
func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

func nodeIndex(s string) int {
	if len(s) < 5 {
		return 0
	}
	s = s[len(s)-5:]
	return int(s[0]-'0')*10000 + int(s[1]-'0')*1000 + int(s[2]-'0')*100 + int(s[3]-'0')*10 + int(s[4]-'0')
}

func nodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = nodeName(i)
	}
	return names
}

// bytesOf views s as a byte slice without copying, so that a peer whose API takes []byte
// is timed on its own work and not on a conversion the caller could avoid.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// The peers, each wrapped in a Locator. Pointer receivers, as ours have: a value receiver
// would add a wrapper call behind the interface call and slow the peer down.

type bareXXH struct{ n uint64 }

func (b *bareXXH) Locate(k string) int { return int(xxhash.Sum64String(k) % b.n) }

// namedXXH returns the name of member xxhash % n, read back as its index as every named
// contestant's is: what a pool's Locate costs at the least.
type namedXXH struct{ names []string }

func (b *namedXXH) Locate(k string) int {
	return nodeIndex(b.names[xxhash.Sum64String(k)%uint64(len(b.names))])
}

type goJump struct{ n int }

func (j *goJump) Locate(k string) int { return int(gojump.Hash(xxhash.Sum64String(k), j.n)) }

type lithJump struct{ n int32 }

func (j *lithJump) Locate(k string) int { return int(ljump.Hash(xxhash.Sum64String(k), j.n)) }

type goRendezvous struct{ r *rendezvous.Rendezvous }

func (r *goRendezvous) Locate(k string) int { return nodeIndex(r.r.Lookup(k)) }

type member string

func (m member) String() string { return string(m) }

type xxHasher struct{}

func (xxHasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

type buraksezer struct{ c *consistent.Consistent }

func (b *buraksezer) Locate(k string) int { return nodeIndex(b.c.LocateKey(bytesOf(k)).String()) }

type serialx struct{ r *hashring.HashRing }

func (s *serialx) Locate(k string) int {
	node, _ := s.r.GetNode(k)
	return nodeIndex(node)
}

type stathatRing struct{ c *stathat.Consistent }

func (s *stathatRing) Locate(k string) int {
	node, _ := s.c.Get(k)
	return nodeIndex(node)
}

type groupcache struct{ m *consistenthash.Map }

func (g *groupcache) Locate(k string) int { return nodeIndex(g.m.Get(k)) }

// contestants returns ours (every strategy in the catalog that accepts n shards, and the
// named pools) and the peers. vnodes is the points per shard of every ring that lets its
// user choose; burakMax the most members buraksezer/consistent is built with.
func contestants(vnodes, burakMax int) []contestant {
	fresh := func(build func(n int) (measure.Locator, error)) func(measure.Locator, int) (measure.Locator, error) {
		return func(_ measure.Locator, n int) (measure.Locator, error) { return build(n) }
	}
	var cs []contestant
	peer := func(name, id, kind string, maxShards int, build func(n int) (measure.Locator, error)) {
		cs = append(cs, contestant{name: name, id: id, kind: kind, maxShards: maxShards, build: build, resize: fresh(build)})
	}
	const maxInt32 = 1<<31 - 1
	peer("xxhash % n", "xxhash-mod", kindModulo, maxInt32, func(n int) (measure.Locator, error) { return &bareXXH{uint64(n)}, nil })
	peer("names[xxhash % n]", "xxhash-mod-named", kindNamedModulo, 99999, func(n int) (measure.Locator, error) {
		return &namedXXH{nodeNames(n)}, nil
	})
	peer("dgryski/go-jump+xxhash", "go-jump", kindJump, maxInt32, func(n int) (measure.Locator, error) { return &goJump{n}, nil })
	peer("lithammer/go-jump-consistent-hash+xxhash", "lithammer-jump", kindJump, maxInt32, func(n int) (measure.Locator, error) {
		return &lithJump{int32(n)}, nil
	})
	// O(n) lookups: at 10^4 members a pass over the timing keys takes a quarter second.
	peer("dgryski/go-rendezvous+xxhash", "go-rendezvous", kindRendezvous, 10000, func(n int) (measure.Locator, error) {
		return &goRendezvous{rendezvous.New(nodeNames(n), xxhash.Sum64String)}, nil
	})
	// Its New sorts all points again after adding each member: 1 s to build with 1000
	// members, 17 s with 4000, minutes with 10^4 (see -buraksezer-max). Built once per
	// count (buraksezerAt) and shared by every table.
	peer("buraksezer/consistent+xxhash", "buraksezer", kindRing, burakMax, func(n int) (measure.Locator, error) {
		c, err := buraksezerAt(n)
		return &buraksezer{c}, err
	})
	// 6 s to build with 10^4 members of 160 points.
	peer("serialx/hashring", "serialx", kindRing, 1000, func(n int) (measure.Locator, error) {
		w := make(map[string]int, n)
		for _, name := range nodeNames(n) {
			w[name] = vnodes // its weight is its number of points
		}
		return &serialx{hashring.NewWithWeights(w)}, nil
	})
	// It sorts its ring again after every member it adds: 30 s for 1000 members.
	peer("stathat/consistent", "stathat", kindRing, 100, func(n int) (measure.Locator, error) {
		c := stathat.New()
		c.NumberOfReplicas = vnodes
		c.Set(nodeNames(n))
		return &stathatRing{c}, nil
	})
	peer("golang/groupcache/consistenthash", "groupcache", kindRing, 10000, func(n int) (measure.Locator, error) {
		m := consistenthash.New(vnodes, crc32.ChecksumIEEE)
		m.Add(nodeNames(n)...)
		return &groupcache{m}, nil
	})

	for _, s := range catalog.All() {
		kind, ok := kindOf[s.Name]
		if !ok {
			kind = kindTable
		}
		build := func(n int) (measure.Locator, error) {
			return s.New(n, catalog.Options{Vnodes: vnodes})
		}
		cs = append(cs, contestant{
			name: "ours/" + s.Name, id: "ours-" + s.Name, kind: kind, ours: true, build: build,
			maxShards: s.MaxShards(catalog.Options{Vnodes: vnodes}),
			resize: func(l measure.Locator, n int) (measure.Locator, error) {
				sh := l.(interface{ Resize(int) error })
				return l, sh.Resize(n)
			},
		})
	}

	// The named pools, over the same member names as the peers, grown by adding a member.
	for _, p := range []struct {
		name, kind string
		maxShards  int
		new        func(nodes []pool.Node) (pool.Pool, error)
	}{
		{"pool-ring", kindRing, min(10000, 1<<22/vnodes), func(nodes []pool.Node) (pool.Pool, error) {
			return pool.NewRing(nodes, pool.RingOptions{Vnodes: vnodes})
		}},
		// O(n) lookups, as go-rendezvous's.
		{"pool-rendezvous", kindRendezvous, 10000, func(nodes []pool.Node) (pool.Pool, error) {
			return pool.NewRendezvous(nodes, pool.RendezvousOptions{})
		}},
		// Compared with names[hash % n]: one multiplication and two loads per lookup. Up to
		// 10^4 members, as many as nodeName numbers.
		{"pool-maglev", kindNamedModulo, 10000, func(nodes []pool.Node) (pool.Pool, error) {
			return pool.NewMaglev(nodes, pool.MaglevOptions{})
		}},
		// Jump with removals: compared with the jump peers.
		{"pool-memento", kindJump, 10000, func(nodes []pool.Node) (pool.Pool, error) {
			return pool.NewMemento(nodes)
		}},
	} {
		cs = append(cs, contestant{
			name: "ours/" + p.name, id: "ours-" + p.name, kind: p.kind, ours: true, maxShards: p.maxShards,
			build: func(n int) (measure.Locator, error) {
				nodes := make([]pool.Node, n)
				for i, name := range nodeNames(n) {
					nodes[i] = pool.Node{Name: name}
				}
				pl, err := p.new(nodes)
				return &named{pl}, err
			},
			resize: func(l measure.Locator, n int) (measure.Locator, error) {
				pl := l.(*named).p
				for m := len(pl.Nodes()); m < n; m++ {
					if err := pl.Add(pool.Node{Name: nodeName(m)}); err != nil {
						return nil, err
					}
				}
				return l, nil
			},
		})
	}
	return cs
}

// named is a pool of ours behind the Locator interface, its member names read back as
// indices the way the peers' are.
type named struct{ p pool.Pool }

func (n *named) Locate(k string) int { return nodeIndex(n.p.Locate(k)) }
