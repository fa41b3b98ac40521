package bounded

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/pool"
)

// Balancer is the live form: it places units of load (connections, streams, long requests)
// on the nodes of a pool with bounded loads, and counts them until they are released.
//
// Acquire and Release take no lock and are safe for concurrent use with each other and with
// Add, Remove, SetWeight and Sync, which are serialized: loads are atomic counters and the
// membership an immutable table that a change replaces atomically. Make membership changes
// through the Balancer (or call Sync after changing the pool directly): a node the
// Balancer does not know yet is skipped.
//
// Under concurrency an Acquire computes capacities with the total load it sees, which counts
// the Acquires in flight: each one still takes a node only within its capacity for that
// total. Make one with New; the zero Balancer has no nodes and its Acquire returns an error
// wrapping ErrEmpty.
type Balancer struct {
	mu       sync.Mutex // serializes changes; guards counters
	p        pool.Pool
	rule     func(nodes []pool.Node) func(int, uint64) uint64
	full     func(nodes []pool.Node) string
	counters map[string]*counter // by name: members, and departed nodes with leases out
	state    atomic.Pointer[liveState]
	total    atomic.Int64 // leases out, and Acquires in flight
	walkers  sync.Pool    // *walker, for keys whose owner is full
	records  sync.Pool    // *leaseRecord, released
}

// liveState is what an Acquire reads: the members, their counters and their capacities.
type liveState struct {
	index    map[string]int32 // name -> member
	load     []*counter
	cap      func(node int, total uint64) uint64
	n        int
	full     int32 // the member Options.Full names, or -1
	fullName string
}

// counter is one node's load, alone on its cache line: nodes are acquired from many cores.
type counter struct {
	n atomic.Int64
	b *Balancer
	_ [48]byte
}

// New returns a Balancer over p. The pool's members and weights are read now and after each
// change made through the Balancer. It returns an error wrapping ErrFactor for a bad
// opts.Factor and ErrEmpty for a nil pool or one with no nodes.
func New(p pool.Pool, opts Options) (*Balancer, error) {
	rule, err := opts.capRule("new")
	if err != nil {
		return nil, err
	}
	nodes, err := checkPool("new", p)
	if err != nil {
		return nil, err
	}
	b := &Balancer{p: p, rule: rule, counters: map[string]*counter{}}
	if opts.Capacity != nil {
		b.full = opts.Full
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publish(nodes)
	return b, nil
}

// publish builds the state of the members nodes, keeping the counters of the nodes that stay
// and of departed nodes that still have leases out. b.mu is held.
func (b *Balancer) publish(nodes []pool.Node) {
	s := &liveState{index: make(map[string]int32, len(nodes)), load: make([]*counter, len(nodes)), n: len(nodes)}
	member := make(map[string]bool, len(nodes))
	for i, n := range nodes {
		c := b.counters[n.Name]
		if c == nil {
			c = &counter{b: b}
			b.counters[n.Name] = c
		}
		s.index[n.Name], s.load[i] = int32(i), c
		member[n.Name] = true
	}
	for name, c := range b.counters {
		if !member[name] && c.n.Load() == 0 {
			delete(b.counters, name)
		}
	}
	s.cap, s.full = b.rule(nodes), -1
	if b.full != nil {
		name := b.full(nodes)
		if i, ok := s.index[name]; ok {
			s.full, s.fullName = i, name
		}
	}
	b.state.Store(s)
}

// Lease is one unit of load acquired on a node: a small value to keep until the work ends,
// then Release once. The zero Lease is no lease: its Release returns an error.
type Lease struct {
	rec  *leaseRecord
	gen  uint64 // rec.gen when acquired
	node string
}

// leaseRecord is the shared part of a lease, recycled through Balancer.records so that an
// Acquire does not allocate. Its generation counts the releases of the record: a Release
// succeeds only for the generation its lease was acquired with, and moves it on, so a second
// Release of the same lease, or one after the record was reused, finds another generation
// and changes nothing.
type leaseRecord struct {
	gen atomic.Uint64
	c   atomic.Pointer[counter]
}

// Node returns the name of the node the lease was acquired on.
func (l Lease) Node() string { return l.node }

// Release gives the lease's unit of load back. Only the first Release of a lease counts,
// also when called concurrently; every later one, and the Release of the zero Lease, returns
// an error wrapping ErrReleased and changes no count.
func (l Lease) Release() error {
	if l.rec == nil {
		return fmt.Errorf("bounded: release: not a lease from Acquire: %w", ErrReleased)
	}
	if !l.rec.gen.CompareAndSwap(l.gen, l.gen+1) {
		return fmt.Errorf("bounded: release of a lease on %q: %w", l.node, ErrReleased)
	}
	c := l.rec.c.Swap(nil)
	b := c.b
	// The node's load first, then the total: a concurrent Acquire never sees the loads add
	// up to more than the total (see Acquire).
	c.n.Add(-1)
	b.total.Add(-1)
	b.records.Put(l.rec)
	return nil
}

// lease takes a record for a lease on c.
func (b *Balancer) lease(c *counter, node string) Lease {
	r, _ := b.records.Get().(*leaseRecord)
	if r == nil {
		r = &leaseRecord{}
	}
	r.c.Store(c)
	return Lease{rec: r, gen: r.gen.Load(), node: node}
}

// Acquire places one unit of load for key on the first node of the key's preference order
// (the pool's AppendN order) whose load stays within its capacity once the total counts the
// new unit, and returns the lease. It does not allocate once released leases are there to
// recycle (a lease is a value; its shared record is reused); a key whose owner is full also
// reads the pool's AppendN, in batches of 4, 8, 16, ... nodes, into a recycled buffer.
//
// It returns an error wrapping ErrEmpty for the zero Balancer, and one wrapping
// ErrInfeasible when no node has room after a Sync: only a pool changed without Sync that
// names nodes the Balancer does not know, or an Options.Capacity rule without Full that
// leaves less room than the total, can cause that.
func (b *Balancer) Acquire(key string) (Lease, error) {
	s := b.state.Load()
	if s == nil {
		return Lease{}, fmt.Errorf("bounded: acquire: zero Balancer: make one with New: %w", ErrEmpty)
	}
	total := uint64(b.total.Add(1))
	for pass := 0; ; pass++ {
		if c, name, ok := b.place(s, key, total); ok {
			return b.lease(c, name), nil
		}
		if s.full >= 0 { // Options.Full: no room anywhere, and a rule for that
			c := s.load[s.full]
			c.n.Add(1)
			return b.lease(c, s.fullName), nil
		}
		// Every node was full for this total. Under the default rule the loads add up to
		// less than the total and the capacities to c times it or more, so for one snapshot
		// that cannot be: other Acquires and Releases ran between the reads and a fresh look
		// finds room, or the pool names nodes this Balancer does not know, or a Capacity
		// rule leaves less room than the total.
		switch pass {
		case 2:
			b.Sync()
		case 3:
			b.total.Add(-1)
			return Lease{}, fmt.Errorf("bounded: acquire %q: no node has room (a Capacity rule leaving less room than the total, or a pool changed without Sync): %w", key, ErrInfeasible)
		}
		s = b.state.Load()
		total = max(total, uint64(b.total.Load()))
	}
}

// place tries the key's nodes in order and takes the first with room for total.
func (b *Balancer) place(s *liveState, key string, total uint64) (*counter, string, bool) {
	owner := b.p.Locate(key)
	if i, ok := s.index[owner]; ok && s.take(int(i), total) {
		return s.load[i], owner, true
	}
	w, _ := b.walkers.Get().(*walker)
	if w == nil {
		w = &walker{}
	}
	w.p, w.n = b.p, s.n
	var got int32 = -1
	var gotName string
	w.each(key, true, func(name string) bool {
		if i, ok := s.index[name]; ok && s.take(int(i), total) {
			got, gotName = i, name
			return true
		}
		return false
	})
	w.p = nil
	b.walkers.Put(w)
	if got < 0 {
		return nil, "", false
	}
	return s.load[got], gotName, true
}

// take adds one to node i's load if it stays within the node's capacity for total.
func (s *liveState) take(i int, total uint64) bool {
	c, limit := s.load[i], s.cap(i, total)
	for {
		l := c.n.Load()
		if uint64(l)+1 > limit {
			return false
		}
		if c.n.CompareAndSwap(l, l+1) {
			return true
		}
	}
}

// Load returns the leases out on the named node, and whether the Balancer counts it (a
// member, or a departed node with leases out).
func (b *Balancer) Load(name string) (int64, bool) {
	b.mu.Lock()
	c := b.counters[name]
	b.mu.Unlock()
	if c == nil {
		return 0, false
	}
	return c.n.Load(), true
}

// Total returns the leases out, with the Acquires in flight.
func (b *Balancer) Total() int64 { return b.total.Load() }

// Capacity returns the most leases the named member may hold once the total, the new lease
// included, is total; 0 for a name that is not a member.
func (b *Balancer) Capacity(name string, total uint64) uint64 {
	s := b.state.Load()
	if s == nil {
		return 0
	}
	i, ok := s.index[name]
	if !ok {
		return 0
	}
	return s.cap(int(i), total)
}

// Add adds nodes to the pool (pool.Pool.Add) and starts counting them.
func (b *Balancer) Add(nodes ...pool.Node) error {
	return b.change(func(p pool.Pool) error { return p.Add(nodes...) })
}

// Remove removes nodes from the pool (pool.Pool.Remove). Their leases stay out and count in
// the total until released.
func (b *Balancer) Remove(names ...string) error {
	return b.change(func(p pool.Pool) error { return p.Remove(names...) })
}

// SetWeight changes a node's weight in the pool (pool.Pool.SetWeight) and its capacity.
func (b *Balancer) SetWeight(name string, weight int) error {
	return b.change(func(p pool.Pool) error { return p.SetWeight(name, weight) })
}

// Sync reads the pool's members and weights again, for changes made on the pool directly.
func (b *Balancer) Sync() {
	if b.p == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publish(b.p.Nodes())
}

// Nodes returns the pool's members.
func (b *Balancer) Nodes() []pool.Node {
	if b.p == nil {
		return nil
	}
	return b.p.Nodes()
}

func (b *Balancer) change(f func(pool.Pool) error) error {
	if b.p == nil {
		return fmt.Errorf("bounded: zero Balancer: make one with New: %w", ErrEmpty)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := f(b.p); err != nil {
		return err
	}
	b.publish(b.p.Nodes())
	return nil
}
