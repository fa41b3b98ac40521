package pool

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/internal/ring"
)

// MultiProbe places keys by multi-probe consistent hashing (Ben Appleton and Michael
// O'Reilly, "Multi-Probe Consistent Hashing", 2015, https://arxiv.org/abs/1505.00062): each
// node has one point on a circle of 2^64 positions per unit of weight, each key is hashed to
// k probe positions, and the key goes to the node of the point that follows one of its
// probes most closely (the least clockwise distance over the k probes). Many probes do what
// many points per node do on a ring, evening out the arcs, with a node's points, not its
// probes, kept in memory.
//
// Hashes. Point j of a node (j < its weight) is output j of SplitMix64 seeded with
// xxhash64(name); probe i of a key is output i of SplitMix64 seeded with xxhash64(key). A
// position held by points of several nodes belongs to the first name in byte order; a tie
// in distance between probes goes to the first probe. So placement depends only on the
// members and their weights.
//
// Balance. With k = 21 probes (the default, the paper's choice) the paper reports a
// peak-to-mean load of 1.05; computed exactly from the points here (see
// TestMultiProbeBalance), the fullest of 100 or 1000 nodes of weight 1 holds 1.04 times the
// mean share. Multi-probe bounds the overload, not the underload: a point that follows
// another closely, its arc much shorter than 1/(k P) of the circle for P points, takes less
// than its share, and the emptiest of those 100 nodes holds 2% of the mean. A node of weight
// w holds w points and about w times the share of a node of weight 1: with weights 1 to 4
// over 100 nodes, no node held more than 6% above its weight's share, one held 36% below.
// More probes even it out, the peak near 1 + 1/k (measured over 1000 nodes: 1.22 at 5
// probes, 1.05 at 21, 1.01 at 64), and each probe costs a search.
//
// Movement. Adding a node, or raising its weight, only adds points: keys move only to it.
// Removing a node, or lowering its weight, only removes points: only its keys move.
//
// Replicas. AppendN ranks the nodes by their least distance from any probe to one of their
// points and lists the best first: the owner, then the node that would own the key if the
// owner were removed, and so on. After Remove(owner) a key goes to AppendN's second node.
//
// Cost. Locate makes k probes and k searches among the points, each O(1) on average in the
// ring engine's top-bits index (internal/ring, shared with the rings). Memory: 16 to 20 bytes
// per point and the names; a change rebuilds the points in O(P log P).
//
// Make one with NewMultiProbe; the zero MultiProbe has no nodes (Locate returns "", AppendN
// appends nothing, changes fail with ErrEmpty). Locate and AppendN take no
// lock and never allocate (AppendN allocates when n > 16); they are safe for concurrent use
// with each other and with the changes, which build a new table and publish it atomically.
// Changes are serialized.
type MultiProbe struct {
	probes int
	mu     sync.Mutex
	table  atomic.Pointer[multiProbeTable]
}

// MultiProbeOptions configures a MultiProbe pool. The zero value is the default.
type MultiProbeOptions struct {
	// Probes is the number of probes per key, in [1, MaxProbes]. Zero means 21, the paper's
	// choice for a peak-to-mean load of 1.05.
	Probes int
}

const (
	// MaxProbes is the most probes per key: AppendN keeps one cursor per probe on its stack.
	MaxProbes = 64
	// MaxMultiProbePoints is the most points, the sum of the weights, a MultiProbe pool holds:
	// the most the ring engine holds.
	MaxMultiProbePoints = ring.MaxPoints
	// defaultProbes is the paper's choice.
	defaultProbes = 21
)

// multiProbeTable is one immutable membership and its points.
type multiProbeTable struct {
	m      *members
	names  []string    // the members' names in name order: the points' owners index this
	points *ring.Table // one point per unit of weight, owned by the node's place in names
	probes int
}

// NewMultiProbe returns a MultiProbe pool of nodes. It returns an error wrapping ErrEmpty,
// ErrNode or ErrWeight for bad nodes, ErrOption for a probe count outside [0, MaxProbes],
// and ErrLimit if the weights add up to more than MaxMultiProbePoints.
func NewMultiProbe(nodes []Node, opts MultiProbeOptions) (*MultiProbe, error) {
	probes := cmp.Or(opts.Probes, defaultProbes)
	if probes < 1 || probes > MaxProbes {
		return nil, fmt.Errorf("pool: multiprobe: %d probes: allowed range is [1, %d], 0 for %d: %w", opts.Probes, MaxProbes, defaultProbes, ErrOption)
	}
	m, err := newMembers("multiprobe", nodes)
	if err != nil {
		return nil, err
	}
	t, err := newMultiProbeTable(m, probes)
	if err != nil {
		return nil, err
	}
	p := &MultiProbe{probes: probes}
	p.table.Store(t)
	return p, nil
}

// newMultiProbeTable places the points of m.
func newMultiProbeTable(m *members, probes int) (*multiProbeTable, error) {
	total := 0
	for _, n := range m.nodes {
		// Checked as it grows: the whole sum can pass a 32-bit int.
		if total += n.Weight; total > MaxMultiProbePoints {
			return nil, fmt.Errorf("pool: multiprobe: weights add up to %d points or more: allowed at most %d: %w", total, MaxMultiProbePoints, ErrLimit)
		}
	}
	t := &multiProbeTable{m: m, names: make([]string, len(m.nodes)), probes: probes}
	for i, n := range m.nodes {
		t.names[i] = n.Name
	}
	slices.Sort(t.names)
	points := make([]ring.Point, 0, total)
	for i, name := range t.names {
		seed := keyhash.XXH64(name)
		for j := range m.nodes[m.index[name]].Weight {
			// The owner is the node's place in name order, which ring ties rank by.
			points = append(points, ring.Point{Pos: splitMix64(seed, uint64(j)), Owner: int32(i)})
		}
	}
	var err error
	if t.points, err = ring.New(points); err != nil {
		return nil, fmt.Errorf("pool: multiprobe: %w", err) // not reached: the sizes are checked above
	}
	return t, nil
}

// Locate returns the name of the node that owns key.
func (p *MultiProbe) Locate(key string) string {
	t := p.table.Load()
	if t == nil { // the zero MultiProbe
		return ""
	}
	h := keyhash.XXH64(key)
	best, bestDist := 0, uint64(math.MaxUint64)
	for i := range t.probes {
		x := splitMix64(h, uint64(i))
		s := t.points.Successor(x)
		if d := t.points.Position(s) - x; i == 0 || d < bestDist {
			best, bestDist = s, d
		}
	}
	return t.names[t.points.Owner(best)]
}

// AppendN appends min(n, len(Nodes())) distinct node names for key to dst, ranked by their
// least distance from a probe (see MultiProbe), and returns the extended slice. It allocates
// nothing when dst has room and n <= 16.
func (p *MultiProbe) AppendN(dst []string, key string, n int) []string {
	t := p.table.Load()
	if t == nil { // the zero MultiProbe
		return dst
	}
	want := min(n, len(t.names))
	if want <= 0 {
		return dst
	}
	h := keyhash.XXH64(key)
	var (
		probe  [MaxProbes]uint64
		cursor [MaxProbes]int // each probe's first point not of a listed node
		seen   picked
	)
	for i := range t.probes {
		probe[i] = splitMix64(h, uint64(i))
		cursor[i] = t.points.Successor(probe[i])
	}
	for range want {
		best, bestDist := 0, uint64(math.MaxUint64)
		for i := range t.probes {
			c := cursor[i]
			for seen.has(t.points.Owner(c)) {
				if c++; c == t.points.Len() {
					c = 0
				}
			}
			cursor[i] = c
			if d := t.points.Position(c) - probe[i]; i == 0 || d < bestDist {
				best, bestDist = c, d
			}
		}
		owner := t.points.Owner(best)
		seen.add(owner, 0, len(t.names))
		dst = append(dst, t.names[owner])
	}
	return dst
}

// change applies f to the membership and publishes the new points, or returns f's error or
// the table's and changes nothing.
func (p *MultiProbe) change(f func(m *members) (*members, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.table.Load()
	if cur == nil {
		return zeroError("multi-probe", "NewMultiProbe")
	}
	m, err := f(cur.m)
	if err != nil {
		return err
	}
	t, err := newMultiProbeTable(m, p.probes)
	if err != nil {
		return err
	}
	p.table.Store(t)
	return nil
}

// Add adds nodes to the pool, all or none. Keys move only to the new nodes.
func (p *MultiProbe) Add(nodes ...Node) error {
	if len(nodes) == 0 {
		return nil
	}
	return p.change(func(m *members) (*members, error) { return m.add("multiprobe", nodes) })
}

// Remove removes the named nodes, all or none; a pool never becomes empty. Only their keys
// move.
func (p *MultiProbe) Remove(names ...string) error {
	if len(names) == 0 {
		return nil
	}
	return p.change(func(m *members) (*members, error) { return m.remove("multiprobe", names) })
}

// SetWeight changes the weight of one node, adding or removing its last points: keys move
// only to it when the weight grows, only from it when it shrinks.
func (p *MultiProbe) SetWeight(name string, weight int) error {
	return p.change(func(m *members) (*members, error) { return m.setWeight("multiprobe", name, weight) })
}

// Nodes returns a copy of the members in the order they joined.
func (p *MultiProbe) Nodes() []Node {
	if t := p.table.Load(); t != nil {
		return t.m.copyNodes()
	}
	return nil
}
