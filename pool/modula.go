package pool

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/internal/ring"
)

// Modula places a key on slot Hash(key) % len(slots) of a table in which each node fills
// slots in an order its options choose: weighted modulo, what memcached clients call
// "modula" and proxies "map-based" (twemproxy's modula, libmemcached's MODULA, spymemcached's
// ArrayModNodeLocator, nginx's `hash` without `consistent`, HAProxy's `hash-type map-based`).
// By default node i of the join order fills Weight consecutive slots, so a node's share of the
// keys is exactly its share of the total weight, up to the key hash's uniformity.
//
// Almost every change moves almost every key: a new table size changes Hash(key) % len(slots)
// for most keys. Use Modula to place keys as a system that does so; for a pool that changes,
// Ring, Rendezvous or the others move only what they must.
//
// Holes. A table may leave slots to no node (the Slots option fills them with -1), as nginx
// does with the weight of a server marked `down`: a key whose slot is a hole is probed
// again, at Rehash(key, 1, h) % len(slots), then Rehash(key, 2, ...), and so on, as nginx
// rehashes; without Rehash, or after MaxMisses probes that missed, at the following slots
// in order, wrapping around. AppendN continues the same probes past the nodes it already gave,
// which is the order in which such a system tries servers when one fails; a node with no slot
// comes after every node that has one, in join order.
//
// Lookups read one slot (plus the probes of a hole): a division and a load. Memory: 4 bytes
// per slot. Placement depends on the join order and the weights (with the default slots), so
// other processes need the members in the same order.
//
// Make one with NewModula; the zero Modula has no nodes (Locate returns "", AppendN appends
// nothing, changes fail with ErrEmpty). Locate and AppendN take no lock and
// are safe for concurrent use with each other and with Add, Remove and SetWeight, which are
// serialized.
type Modula struct {
	mu    sync.Mutex // serializes changes and guards m
	state atomic.Pointer[modulaTable]
	m     *members
	opts  ModulaOptions
	dflt  bool // the default hash: called directly so it inlines
}

// ModulaOptions configure NewModula. The zero value hashes keys with XXH64 and gives node i
// of the join order Weight consecutive slots.
type ModulaOptions struct {
	// Hash returns the value whose remainder by the table size picks a key's slot. It must be
	// deterministic and safe for concurrent use, and should not allocate. Nil means XXH64
	// (seed 0).
	Hash func(key string) uint64
	// Slots appends to dst the table of the members, nodes given in join order: one entry
	// per slot, the index of the slot's node in nodes, or -1 for a hole that no node takes.
	// It is called for every change with all the members, under the pool's lock, one call at
	// a time, and must be deterministic. At most 4194304 slots; at least one not a hole. Nil
	// means node i fills nodes[i].Weight consecutive slots, in join order.
	Slots func(dst []int32, nodes []Node) []int32
	// Rehash, when set, gives the value of probe p (1, 2, ...) of a key from the value h of
	// probe p-1 (Hash(key) for probe 0); the probe takes slot Rehash(key, p, h) %
	// len(slots). A probe misses when its slot is a hole, or a node AppendN already gave.
	// Like Hash it must be deterministic and safe for concurrent use.
	Rehash func(key string, probe int, h uint64) uint64
	// MaxMisses is how many probes may miss before the pool takes the following slots in
	// order instead of rehashing; nginx gives up after 20. Zero means 20. Unused without
	// Rehash.
	MaxMisses int
}

// modulaTable is what a lookup reads.
type modulaTable struct {
	slots     []int32
	size      uint64 // len(slots)
	names     []string
	members   int
	slotted   int     // members that own a slot
	pointless []int32 // members without a slot, join order
}

// maxModulaSlots bounds a table as the ring engine bounds its points.
const maxModulaSlots = ring.MaxPoints

const defaultMaxMisses = 20

// NewModula returns a modulo pool of the nodes. Nodes are validated as the package
// documentation says; a table of more than 4194304 slots returns an error wrapping ErrLimit,
// one whose slots name no node (or name one outside the members) an error wrapping ErrEmpty
// (ErrNode).
func NewModula(nodes []Node, opts ModulaOptions) (*Modula, error) {
	p := &Modula{opts: opts, dflt: opts.Hash == nil}
	if p.opts.Hash == nil {
		p.opts.Hash = keyhash.XXH64
	}
	if p.opts.MaxMisses == 0 {
		p.opts.MaxMisses = defaultMaxMisses
	}
	if p.opts.MaxMisses < 0 {
		return nil, fmt.Errorf("pool: modula: MaxMisses %d: must not be negative: %w", p.opts.MaxMisses, ErrLimit)
	}
	m, err := newMembers("modula", nodes)
	if err != nil {
		return nil, err
	}
	if err := p.apply(m); err != nil {
		return nil, err
	}
	return p, nil
}

// apply builds and publishes the table of membership m; on error nothing changes.
func (p *Modula) apply(m *members) error {
	var slots []int32
	if p.opts.Slots != nil {
		slots = p.opts.Slots(nil, m.nodes)
	} else {
		total := 0
		for _, n := range m.nodes {
			if total += n.Weight; total > maxModulaSlots {
				break
			}
		}
		if total <= maxModulaSlots {
			slots = make([]int32, 0, total)
			for i, n := range m.nodes {
				for range n.Weight {
					slots = append(slots, int32(i))
				}
			}
		} else {
			return fmt.Errorf("pool: modula: %d slots or more: at most %d: %w", total, maxModulaSlots, ErrLimit)
		}
	}
	if len(slots) > maxModulaSlots {
		return fmt.Errorf("pool: modula: %d slots: at most %d: %w", len(slots), maxModulaSlots, ErrLimit)
	}
	has := make([]bool, len(m.nodes))
	for i, s := range slots {
		if s < -1 || int(s) >= len(m.nodes) {
			return fmt.Errorf("pool: modula: the slot generator gave slot %d to node %d of %d: %w", i, s, len(m.nodes), ErrNode)
		}
		if s >= 0 {
			has[s] = true
		}
	}
	t := &modulaTable{slots: slices.Clip(slots), size: uint64(len(slots)), members: len(m.nodes)}
	t.names = make([]string, len(m.nodes))
	for i, n := range m.nodes {
		t.names[i] = n.Name
		if has[i] {
			t.slotted++
		} else {
			t.pointless = append(t.pointless, int32(i))
		}
	}
	if t.slotted == 0 {
		return fmt.Errorf("pool: modula: the slot generator gave no slot to any node: %w", ErrEmpty)
	}
	p.state.Store(t)
	p.m = m
	return nil
}

// hash returns Hash(key), calling the default directly so it inlines.
func (p *Modula) hash(key string) uint64 {
	if p.dflt {
		return keyhash.XXH64(key)
	}
	return p.opts.Hash(key)
}

// Locate returns the name of the node that owns key: the node of slot Hash(key) %
// len(slots), or, for a hole, of the first probe that finds a node.
func (p *Modula) Locate(key string) string {
	t := p.state.Load()
	if t == nil { // the zero Modula
		return ""
	}
	h := p.hash(key)
	if s := t.slots[h%t.size]; s >= 0 {
		return t.names[s]
	}
	pr := p.start(t, h)
	p.miss(&pr)
	return t.names[p.next(t, &pr, key, nil)]
}

// modulaProbe is where a key's probes are: the value and slot of the last probe, how many
// probes there were and how many missed, and whether they walk the slots in order now.
type modulaProbe struct {
	h, slot        uint64
	probes, misses int
	walking        bool
}

// start returns the first probe of a key of hash h.
func (p *Modula) start(t *modulaTable, h uint64) modulaProbe {
	return modulaProbe{h: h, slot: h % t.size, walking: p.opts.Rehash == nil}
}

// miss counts a probe that missed; after MaxMisses of them the probes walk.
func (p *Modula) miss(pr *modulaProbe) {
	if pr.misses++; pr.misses > p.opts.MaxMisses {
		pr.walking = true
	}
}

// next probes on from pr's slot until it finds a node not yet picked, and returns it. The
// caller guarantees that one exists among the nodes with slots.
func (p *Modula) next(t *modulaTable, pr *modulaProbe, key string, taken *picked) int32 {
	for {
		if pr.walking {
			if pr.slot++; pr.slot == t.size {
				pr.slot = 0
			}
		} else {
			pr.probes++
			pr.h = p.opts.Rehash(key, pr.probes, pr.h)
			pr.slot = pr.h % t.size
		}
		if s := t.slots[pr.slot]; s >= 0 && (taken == nil || !taken.has(s)) {
			return s
		}
		p.miss(pr)
	}
}

// AppendN appends to dst the names of min(n, len(Nodes())) distinct nodes for key: the owner,
// then the nodes the probes find next (see Modula), then the nodes without a slot. It
// allocates only when dst lacks room, or past 16 nodes.
func (p *Modula) AppendN(dst []string, key string, n int) []string {
	t := p.state.Load()
	if t == nil { // the zero Modula
		return dst
	}
	n = min(n, t.members)
	if n <= 0 {
		return dst
	}
	var taken picked
	pr := p.start(t, p.hash(key))
	s := t.slots[pr.slot]
	if s < 0 {
		p.miss(&pr)
		s = p.next(t, &pr, key, nil)
	}
	for {
		dst = append(dst, t.names[s])
		taken.add(s, 0, t.members)
		if taken.len() == n || taken.len() == t.slotted {
			break
		}
		s = p.next(t, &pr, key, &taken)
	}
	for _, o := range t.pointless[:min(len(t.pointless), n-taken.len())] {
		dst = append(dst, t.names[o])
	}
	return dst
}

// Add adds nodes to the pool, all or none.
func (p *Modula) Add(nodes ...Node) error {
	return p.change(func(m *members) (*members, error) { return m.add("modula", nodes) })
}

// Remove removes the named nodes, all or none; the pool never becomes empty.
func (p *Modula) Remove(names ...string) error {
	return p.change(func(m *members) (*members, error) { return m.remove("modula", names) })
}

// SetWeight sets the weight of the named node, in [0, MaxWeight] (0 means 1). With the
// default slots the table changes size, so most keys move.
func (p *Modula) SetWeight(name string, weight int) error {
	return p.change(func(m *members) (*members, error) { return m.setWeight("modula", name, weight) })
}

func (p *Modula) change(f func(*members) (*members, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		return zeroError("modula", "NewModula")
	}
	m, err := f(p.m)
	if err != nil {
		return err
	}
	return p.apply(m)
}

// Nodes returns a copy of the members in the order they joined.
func (p *Modula) Nodes() []Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.copyNodes()
}
