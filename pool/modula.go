package pool

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
)

// Modula places a key on slot Hash(key) % len(slots) of a table in which each node fills
// slots in an order its options choose.
//
// With the default options node i, in join order, fills Weight consecutive slots: weights 3,
// 1 and 2 give the table A A A B C C, and a key goes to A when its hash is 0, 1 or 2 modulo
// 6. That is weighted modulo as twemproxy's modula distribution lays it out; libmemcached's
// MODULA, spymemcached's ArrayModNodeLocator, nginx's hash without consistent and HAProxy's
// map-based hash fill their tables in their own orders, which package compat gives through
// ModulaOptions.Slots. Each node's share is its share of the slots, exactly, up to the
// hash's own unevenness.
//
// It is the fastest placement of all (one hash, one division, one table read) and the worst
// at change: any Add, Remove or SetWeight changes the number of slots, and then almost every
// key moves (from n to n+1 nodes of weight 1, n/(n+1) of the keys). Placement depends on the
// join order, since the order fills the slots. AppendN gives the owner, then the owners of
// the slots that follow the owner's slot, wrapping around, each node once (with the default
// slots, the nodes that joined after the owner, then those before it); nodes without a slot
// come last, in join order.
//
// Memory: 4 bytes per slot, plus the names. A change rebuilds the table, in time linear in
// the number of slots. A table holds at most 4194304 slots: with the default slots, the sum
// of the weights.
//
// Make one with NewModula; the zero Modula is not usable. Locate and AppendN take no lock
// and are safe for concurrent use with each other and with Add, Remove and SetWeight, which
// are serialized.
type Modula struct {
	mu    sync.Mutex // serializes changes and guards m
	state atomic.Pointer[modulaTable]
	m     *members
	opts  ModulaOptions
	xxh   bool // the default hash: called directly so it inlines
}

// ModulaOptions configure NewModula. The zero value hashes keys with XXH64 and lets each
// node fill Weight consecutive slots, nodes in join order.
type ModulaOptions struct {
	// Hash returns the hash of a key, of which Modula takes the remainder modulo the number
	// of slots. It must be deterministic and safe for concurrent use, and should not
	// allocate. Nil means XXH64 (seed 0). A system with 32-bit hashes returns them as they
	// are: the remainder of a 32-bit value is the same in 64 bits.
	Hash func(key string) uint64
	// Slots appends to dst the table of slots of the nodes, each slot holding the index of
	// its node in nodes (given in join order, weights normalised), and returns the extended
	// slice. It must be deterministic; every change calls it again for all nodes, under the
	// pool's lock, one call at a time. Its slots must name nodes in [0, len(nodes)) and
	// number at most 4194304; a node may fill any number of slots, none included (such a
	// node owns no key). Nil means node i fills Weight consecutive slots, nodes in join
	// order.
	Slots func(dst []int32, nodes []Node) []int32
}

// maxModulaSlots is the most slots a table holds: 16 MB of table.
const maxModulaSlots = 1 << 22

// modulaTable is what a lookup reads: the slots and the names of their nodes.
type modulaTable struct {
	slots []int32
	names []string // node index (join order) -> name
	// slotless holds the nodes that fill no slot, in join order; AppendN gives them last.
	slotless []int32
}

// NewModula returns a weighted modulo pool of the nodes. Nodes are validated as the package
// documentation says; a table of more than 4194304 slots returns an error wrapping ErrLimit,
// and a Slots function that names a node out of range or fills no slot at all an error
// wrapping ErrNode or ErrEmpty.
func NewModula(nodes []Node, opts ModulaOptions) (*Modula, error) {
	p := &Modula{opts: opts, xxh: opts.Hash == nil}
	m, err := newMembers("modula", nodes)
	if err != nil {
		return nil, err
	}
	if err := p.publish(m); err != nil {
		return nil, err
	}
	return p, nil
}

// hash returns Hash(key), calling the default directly so it inlines.
func (p *Modula) hash(key string) uint64 {
	if p.xxh {
		return keyhash.XXH64(key)
	}
	return p.opts.Hash(key)
}

// slot returns the slot of hash h in t: h modulo the number of slots, in 32 bits when both
// fit, where the division is cheaper.
func (t *modulaTable) slot(h uint64) int {
	n := uint64(len(t.slots))
	if h>>32 == 0 {
		return int(uint32(h) % uint32(n)) // n <= maxModulaSlots fits 32 bits
	}
	return int(h % n)
}

// Locate returns the name of the node that owns key.
func (p *Modula) Locate(key string) string {
	t := p.state.Load()
	return t.names[t.slots[t.slot(p.hash(key))]]
}

// modulaSmall is how many nodes AppendN remembers in a fixed array before it allocates a set.
const modulaSmall = 16

// AppendN appends to dst the names of min(n, len(Nodes())) distinct nodes for key: the
// owner, then the owners of the slots after its slot, wrapping around, each once, then the
// nodes that fill no slot. It allocates only when dst lacks room, or past 16 nodes (a set
// to remember them).
func (p *Modula) AppendN(dst []string, key string, n int) []string {
	t := p.state.Load()
	n = min(n, len(t.names))
	if n <= 0 {
		return dst
	}
	var (
		small [modulaSmall]int32
		big   []uint64 // a bit per node, once more than modulaSmall were found
		found int
	)
	withSlots := len(t.names) - len(t.slotless) // what the walk can find
	s := t.slot(p.hash(key))
	last := int32(-1)
	for steps := 0; steps < len(t.slots) && found < n && found < withSlots; steps++ {
		o := t.slots[s]
		if s++; s == len(t.slots) {
			s = 0
		}
		if o == last { // the common case with consecutive slots
			continue
		}
		last = o
		if big == nil {
			if slices.Contains(small[:min(found, modulaSmall)], o) {
				continue
			}
			if found < modulaSmall {
				small[found] = o
			} else {
				big = make([]uint64, (len(t.names)+63)/64)
				for _, x := range small {
					big[x/64] |= 1 << (x % 64)
				}
			}
		}
		if big != nil {
			if big[o/64]&(1<<(o%64)) != 0 {
				continue
			}
			big[o/64] |= 1 << (o % 64)
		}
		found++
		dst = append(dst, t.names[o])
	}
	for _, o := range t.slotless[:min(len(t.slotless), n-found)] {
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
// default slots the node fills that many slots from then on, which changes the number of
// slots: almost every key moves.
func (p *Modula) SetWeight(name string, weight int) error {
	return p.change(func(m *members) (*members, error) { return m.setWeight("modula", name, weight) })
}

// Nodes returns a copy of the members in the order they joined.
func (p *Modula) Nodes() []Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.copyNodes()
}

func (p *Modula) change(f func(*members) (*members, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := f(p.m)
	if err != nil {
		return err
	}
	return p.publish(m)
}

// publish builds the table of m and makes it the one lookups read; on error nothing changes.
func (p *Modula) publish(m *members) error {
	var slots []int32
	if p.opts.Slots != nil {
		slots = p.opts.Slots(nil, m.nodes)
	} else {
		total := 0
		for _, n := range m.nodes {
			total += n.Weight
		}
		if total > maxModulaSlots {
			return p.tooMany(total)
		}
		slots = make([]int32, 0, total)
		for i, n := range m.nodes {
			for range n.Weight {
				slots = append(slots, int32(i))
			}
		}
	}
	if len(slots) > maxModulaSlots {
		return p.tooMany(len(slots))
	}
	has := make([]bool, len(m.nodes))
	for i, o := range slots {
		if o < 0 || int(o) >= len(m.nodes) {
			return fmt.Errorf("pool: modula: the slot function gave slot %d to node %d of %d: %w", i, o, len(m.nodes), ErrNode)
		}
		has[o] = true
	}
	if len(slots) == 0 {
		return fmt.Errorf("pool: modula: the slot function gave no slot: %w", ErrEmpty)
	}
	t := &modulaTable{slots: slots, names: make([]string, len(m.nodes))}
	for i, n := range m.nodes {
		t.names[i] = n.Name
		if !has[i] {
			t.slotless = append(t.slotless, int32(i))
		}
	}
	p.state.Store(t)
	p.m = m
	return nil
}

func (p *Modula) tooMany(slots int) error {
	return fmt.Errorf("pool: modula: %d slots: at most %d: %w", slots, maxModulaSlots, ErrLimit)
}
