package compat

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"

	"github.com/shardkit/shard/pool"
)

// This file holds what the memcached-family presets (twemproxy, libmemcached, spymemcached,
// npm hashring) share: a system's server list kept behind a pool engine (pool.Ring or
// pool.Modula), whose point or slot generator reads the list.
//
// Add, Remove and SetWeight change the server list and rebuild the placement as the system
// does when its configuration changes that way: a node given to Add is a server written with
// that name and weight in the system's vocabulary, appended to the list (and ordered as the
// system orders). A server listed twice is one node of the pool and counts twice where the
// system counts it twice; Remove removes every entry of a name. Nodes reports each server's
// weight clamped to [1, pool.MaxWeight]; the exact weights are in the typed configurations.

// server is one entry of a system's server list. Each system uses the fields it needs.
type server struct {
	name   string // what Locate returns; two entries may share it (a server listed twice)
	host   string // libmemcached: sorts by host, then port, and names points after them
	port   int
	weight float64 // the weight as the system reads it, exactly
	point  string  // the base of the server's point names, where it differs from name
	vnodes float64 // hashring: the server's own vnode count, 0 if none
	addr   string  // spymemcached: the resolved address that keys its weight map
}

// serverList is the state a system's placement depends on beyond its settings.
type serverList struct {
	servers []server
	// weighted is libmemcached's weighted-ketama flag, which adding a server of weight
	// above 1 to a consistent distribution turns on.
	weighted bool
	// changed is set by any change through the Pool interface: libmemcached then rebuilds
	// its continuum with the current key hash (see libmemcached.go).
	changed bool
}

func (l *serverList) clone() *serverList {
	c := *l
	c.servers = slices.Clone(l.servers)
	return &c
}

// rules are what a system's preset supplies to the shared pool.
type rules struct {
	system string
	// fromNode returns the server that a node given to Add or SetWeight stands for (its
	// name and weight written in the system's vocabulary); it may set flags of l, which is
	// the list being changed.
	fromNode func(l *serverList, n pool.Node) (server, error)
	// reorder puts l in the system's order after a change; nil keeps the order of the list
	// (new servers last).
	reorder func(l *serverList)
	// check refuses a list the system cannot place keys with, saying why (without the
	// package prefix); nil accepts all.
	check func(l *serverList) error
	// points appends the ring points of l, each naming its server by index in l.servers
	// (for a Ring); slots appends the slots of l likewise (for a Modula).
	points func(dst []pool.RingPoint, l *serverList) []pool.RingPoint
	slots  func(dst []int32, l *serverList) []int32
	// line is the line of the configuration text that lists the last server, 0 if none:
	// where an error about the whole list, such as too many points, is reported.
	line int
}

// servers holds a system's server list behind its engine. Changes are serialized by mu;
// during one, next is the list the engine's generator reads (the generator runs inside the
// engine's change, on the same goroutine).
type servers struct {
	mu   sync.Mutex
	r    *rules
	cur  *serverList
	next *serverList
}

// newPool returns the pool of list, which the caller has checked: a Ring when the rules
// have points, with the key hash and tie rule of ring (its Points are the rules'), else a
// Modula with the key hash hash.
func newPool(r *rules, list *serverList, ring pool.RingOptions, hash func(string) uint64) (pool.Pool, error) {
	s := &servers{r: r, cur: list, next: list}
	nodes := list.nodes()
	if r.points != nil {
		ring.Points = s.ringPoints
		p, err := pool.NewRing(nodes, ring)
		if err != nil {
			return nil, poolErr(r.system, r.line, err)
		}
		return &ringPool{Ring: p, s: s}, nil
	}
	p, err := pool.NewModula(nodes, pool.ModulaOptions{Hash: hash, Slots: s.modulaSlots})
	if err != nil {
		return nil, poolErr(r.system, r.line, err)
	}
	return &modulaPool{Modula: p, s: s}, nil
}

// wrapPoolError prefixes an error of the engine with the system, keeping its sentinel.
func wrapPoolError(system string, err error) error {
	if err == nil {
		return nil
	}
	return errorf("compat: %s: %w", system, err)
}

// nodes returns the distinct servers of l as pool nodes, in the order they first appear,
// each with its first entry's weight clamped to [1, pool.MaxWeight].
func (l *serverList) nodes() []pool.Node {
	nodes := make([]pool.Node, 0, len(l.servers))
	seen := make(map[string]bool, len(l.servers))
	for _, s := range l.servers {
		if !seen[s.name] {
			seen[s.name] = true
			nodes = append(nodes, pool.Node{Name: s.name, Weight: poolWeight(s.weight)})
		}
	}
	return nodes
}

// poolWeight is a system's weight as a pool reports it: clamped to [1, pool.MaxWeight].
func poolWeight(w float64) int { return int(min(max(math.Round(w), 1), pool.MaxWeight)) }

// members returns the engine's nodes (in the order they joined) with the weights of the
// list: a change of one server can change another's (spymemcached's weight map is keyed
// by address, and two names can be one address).
func (s *servers) members(engineNodes func() []pool.Node) []pool.Node {
	s.mu.Lock() // held across the engine's Nodes, as a change holds it across the engine's
	defer s.mu.Unlock()
	engine := engineNodes()
	weight := make(map[string]float64, len(s.cur.servers))
	for _, srv := range slices.Backward(s.cur.servers) {
		weight[srv.name] = srv.weight // the first entry of a name wins
	}
	for i := range engine {
		engine[i].Weight = poolWeight(weight[engine[i].Name])
	}
	return engine
}

// ringPoints is the Ring's point generator: the rules' points of the list being built,
// renumbered from list entries to the engine's nodes. A change made on the Ring itself (one
// that RingOf exposes) leaves the list behind, and the list's servers then differ from the
// engine's nodes: ringPoints gives a point to no node, so the Ring refuses the change
// (pool.ErrNode) rather than place keys by a list that is not its own.
func (s *servers) ringPoints(dst []pool.RingPoint, nodes []pool.Node) []pool.RingPoint {
	index := nodeIndex(nodes)
	listed := s.next.nodes()
	if len(listed) != len(nodes) || slices.ContainsFunc(listed, func(n pool.Node) bool { _, ok := index[n.Name]; return !ok }) {
		return append(dst, pool.RingPoint{Node: -1})
	}
	start := len(dst)
	dst = s.r.points(dst, s.next)
	for i := start; i < len(dst); i++ {
		dst[i].Node = index[s.next.servers[dst[i].Node].name]
	}
	return dst
}

// modulaSlots is the Modula's slot function, renumbered likewise.
func (s *servers) modulaSlots(dst []int32, nodes []pool.Node) []int32 {
	start := len(dst)
	dst = s.r.slots(dst, s.next)
	index := nodeIndex(nodes)
	for i := start; i < len(dst); i++ {
		dst[i] = int32(index[s.next.servers[dst[i]].name])
	}
	return dst
}

func nodeIndex(nodes []pool.Node) map[string]int {
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		index[n.Name] = i
	}
	return index
}

// change edits a copy of the list, checks it, and applies the matching change to the
// engine, which rebuilds from the copy; on any error nothing changes. A change the engine
// refuses (refused: a bad or unknown name, a weight out of range, an empty pool) goes to
// the engine unedited, so every pool refuses bad input with the engine's error.
func (s *servers) change(refused func(l *serverList) bool, edit func(l *serverList) error, apply func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if refused(s.cur) {
		return wrapPoolError(s.r.system, apply())
	}
	next := s.cur.clone()
	next.changed = true
	if err := edit(next); err != nil {
		return err
	}
	if s.r.reorder != nil {
		s.r.reorder(next)
	}
	if s.r.check != nil {
		if err := s.r.check(next); err != nil {
			return configErr(s.r.system, 0, "%v", err)
		}
	}
	s.next = next
	if err := apply(); err != nil {
		s.next = s.cur
		return wrapPoolError(s.r.system, err)
	}
	s.cur = next
	return nil
}

func (l *serverList) has(name string) bool {
	return slices.ContainsFunc(l.servers, func(s server) bool { return s.name == name })
}

func goodWeight(w int) bool { return w >= 0 && w <= pool.MaxWeight }

func (s *servers) add(nodes []pool.Node, apply func(...pool.Node) error) error {
	return s.change(func(l *serverList) bool {
		seen := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			if n.Name == "" || !goodWeight(n.Weight) || l.has(n.Name) || seen[n.Name] {
				return true
			}
			seen[n.Name] = true
		}
		return false
	}, func(l *serverList) error {
		for _, n := range nodes {
			srv, err := s.r.fromNode(l, pool.Node{Name: n.Name, Weight: max(n.Weight, 1)})
			if err != nil {
				return err
			}
			l.servers = append(l.servers, srv)
		}
		return nil
	}, func() error { return apply(nodes...) })
}

func (s *servers) remove(names []string, apply func(...string) error) error {
	return s.change(func(l *serverList) bool {
		seen := make(map[string]bool, len(names))
		for _, name := range names {
			if !l.has(name) || seen[name] {
				return true
			}
			seen[name] = true
		}
		return len(seen) == len(l.nodes())
	}, func(l *serverList) error {
		l.servers = slices.DeleteFunc(l.servers, func(srv server) bool { return slices.Contains(names, srv.name) })
		return nil
	}, func() error { return apply(names...) })
}

func (s *servers) setWeight(name string, weight int, apply func(string, int) error) error {
	return s.change(func(l *serverList) bool {
		return !l.has(name) || !goodWeight(weight)
	}, func(l *serverList) error {
		srv, err := s.r.fromNode(l, pool.Node{Name: name, Weight: max(weight, 1)})
		if err != nil {
			return err
		}
		for i := range l.servers {
			if l.servers[i].name == name {
				l.servers[i].weight = srv.weight
			}
		}
		return nil
	}, func() error { return apply(name, weight) })
}

// ringPool is a system's pool on a Ring: lookups go straight to the Ring.
type ringPool struct {
	*pool.Ring
	s *servers
}

// Add adds servers, written as the system would write them, all or none.
func (p *ringPool) Add(nodes ...pool.Node) error { return p.s.add(nodes, p.Ring.Add) }

// Remove removes the named servers (every entry of each), all or none.
func (p *ringPool) Remove(names ...string) error { return p.s.remove(names, p.Ring.Remove) }

// SetWeight sets the weight of every entry of the named server.
func (p *ringPool) SetWeight(name string, weight int) error {
	return p.s.setWeight(name, weight, p.Ring.SetWeight)
}

// Nodes returns the servers in the order they joined, with their weights clamped to
// [1, pool.MaxWeight].
func (p *ringPool) Nodes() []pool.Node { return p.s.members(p.Ring.Nodes) }

// RingOf returns the pool.Ring that p places keys with, or nil if p places keys otherwise:
// p itself when it is a *pool.Ring (as the nginx and HAProxy consistent and the Jedis presets
// return), and the Ring under the pool of a memcached-family preset (twemproxy,
// libmemcached, spymemcached, hashring) in ketama mode, whose Locate, Position and Arcs are
// the pool's. It is there to read, for instance to plan a change by ranges of positions
// with rebalance.PlanPoolRing; change members through p. The memcached-family Ring refuses
// Add and Remove of its own (its points come from the preset's server list, which would not
// know of them), and its SetWeight changes no point; its Nodes reports the weights it was
// given, p's Nodes those of the server list. It is safe for concurrent use.
func RingOf(p pool.Pool) *pool.Ring {
	switch p := p.(type) {
	case *pool.Ring:
		return p
	case *ringPool:
		return p.Ring
	}
	return nil
}

// modulaPool is a system's pool on a Modula.
type modulaPool struct {
	*pool.Modula
	s *servers
}

// Add adds servers, written as the system would write them, all or none.
func (p *modulaPool) Add(nodes ...pool.Node) error { return p.s.add(nodes, p.Modula.Add) }

// Remove removes the named servers (every entry of each), all or none.
func (p *modulaPool) Remove(names ...string) error { return p.s.remove(names, p.Modula.Remove) }

// SetWeight sets the weight of every entry of the named server.
func (p *modulaPool) SetWeight(name string, weight int) error {
	return p.s.setWeight(name, weight, p.Modula.SetWeight)
}

// Nodes returns the servers in the order they joined, with their weights clamped to
// [1, pool.MaxWeight].
func (p *modulaPool) Nodes() []pool.Node { return p.s.members(p.Modula.Nodes) }

// appendDigestPoints appends the points that one digest gives a server: n points, point j
// being digest bytes 4j..4j+3 read as a little-endian uint32 (ketama, nc_ketama.c
// ketama_hash; hashring's hashValueHash), a byte past the digest's end reading as 0.
// Positions are 32-bit values moved to the top of the ring's 64 bits.
func appendDigestPoints(dst []pool.RingPoint, entry int, digest []byte, n int) []pool.RingPoint {
	for j := range n {
		var word [4]byte
		if 4*j < len(digest) {
			copy(word[:], digest[4*j:])
		}
		dst = append(dst, pool.RingPoint{Node: entry, Pos: uint64(binary.LittleEndian.Uint32(word[:])) << 32})
	}
	return dst
}

// top32 moves a 32-bit hash to the top of a ring position, which keeps its order.
func top32(h uint32) uint64 { return uint64(h) << 32 }

// oneClient is the New of a preset whose configuration text sets up one client: it refuses a
// name, parses the text with parse and builds the pool with build.
func oneClient[C any](system string, parse func([]byte) (C, error), build func(C) (pool.Pool, error)) func([]byte, string) (pool.Pool, error) {
	return func(config []byte, name string) (pool.Pool, error) {
		if err := singleConfig(system, name); err != nil {
			return nil, err
		}
		cfg, err := parse(config)
		if err != nil {
			return nil, err
		}
		return build(cfg)
	}
}

// singleConfig checks that a preset of a system whose text holds one configuration was not
// asked for a named one.
func singleConfig(system, name string) error {
	if name != "" {
		return configErr(system, 0, "the configuration text holds one client; asked for %q: give no name", name)
	}
	return nil
}
