package pool

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/internal/ring"
)

// Ring is a consistent-hash ring of named, weighted nodes (Karger et al.; the sharding lecture
// [003]): each node owns points on a circle of 64-bit positions, Vnodes points per unit of
// weight, and a key belongs to the owner of the first point at or after the key's position,
// wrapping around to the smallest point. It shares its engine with shard.Ring: the same
// sorted points and top-bits index, so Locate reads one index entry and scans one or two
// points.
//
// With the default options, point i of node "cache-a" sits at XXH64("cache-a-i") (i in
// decimal; the name is unambiguous because i has no '-', so the text after the last '-' is
// always i), and placement depends only on the members' names and weights, never on the order
// they joined. Adding or removing any node moves only the keys to or from that node; after
// Remove(owner) a key goes to the second node AppendN gave it; raising a node's weight adds
// points of that node only (indices weight*Vnodes and up), so keys move only to it, and
// lowering it removes only its highest points. A node's share of the keys is its share of
// the circle, which varies around weight/total by about 1/sqrt(weight*Vnodes) relative.
//
// Points at the same position: the node with the smaller name wins by default (RingOptions.
// Ties). The point it hides stays behind it, so AppendN and a removal agree.
//
// Options let a ring reproduce other systems (package compat builds on them): a key hash,
// point names, a point generator for systems whose points depend on the whole membership,
// the lookup rule (the successor, or the nearest point in either direction as HAProxy
// does), and the tie rule.
//
// Memory: about 34 bytes per point, 5.4 KB per node of weight 1 with the default 160 points
// (BenchmarkPoolBuild): the table the lookups read and the sorted points a change reuses. A change costs time linear in the
// number of points (a merge and a new index), plus hashing the new points' names.
//
// Make one with NewRing; the zero Ring has no nodes (Locate returns "", AppendN appends
// nothing, changes fail with ErrEmpty). Locate and AppendN take no lock and are
// safe for concurrent use with each other and with Add, Remove and SetWeight, which are
// serialized.
type Ring struct {
	mu    sync.Mutex // serializes changes and guards the fields below state
	state atomic.Pointer[ringState]

	m             *members
	opts          RingOptions
	kind          ringHash
	defaultPoints bool // default names and hash: appendPoints hashes without allocating
	// The default generator keeps every point, sorted by position, with its node's slot as
	// the owner; a slot is a node's index in names and keeps it while the node is a member.
	all   []ring.Point
	slots map[string]int32
	free  []int32 // slots of removed nodes, for reuse
	names []string
}

// ringState is what a lookup reads: one immutable table and the names of its owners.
type ringState struct {
	table   *ring.Table
	names   []string // slot -> node name
	lookup  RingLookup
	members int
	// pointless holds the slots of members that own no point (only a point generator can
	// leave one so); AppendN gives them after the walk, in join order.
	pointless []int32
}

// RingOptions configure NewRing. The zero value is a ring of 160 points per unit of weight,
// named "<node>-<i>", placed by XXH64, the successor rule and the smaller name winning ties.
type RingOptions struct {
	// Hash returns the position of a key, and of a point from its name (with the default
	// generator); positions are ordered as unsigned 64-bit integers. It must be deterministic
	// and safe for concurrent use, and should not allocate. Nil means XXH64 (seed 0). A
	// system with 32-bit positions shifts them to the top bits (h << 32), which keeps their
	// order and lets the index use the bits that vary.
	Hash func(key string) uint64
	// Vnodes is the number of points per unit of weight, in [1, 4194304]. Zero means 160.
	// A node of weight w owns w*Vnodes points, i in [0, w*Vnodes).
	Vnodes int
	// PointName returns the name of point i of node; the point's position is
	// Hash(PointName(node, i)). Distinct (node, i) pairs should get distinct names. Nil means
	// node + "-" + strconv.Itoa(i).
	PointName func(node string, i int) string
	// Points, when set, replaces the default generator (and Vnodes and PointName): it
	// appends to dst every point of the members, nodes in join order, and returns the
	// extended slice. For systems whose points depend on the whole membership (ketama's
	// share of total weight, HAProxy's server ids); every change calls it again for all
	// nodes, so a change can move any key. It must be deterministic; it is called under the
	// ring's lock, one call at a time. Its points must name nodes in [0, len(nodes)) and
	// number at most 4194304. A node with no points owns no key.
	Points func(dst []RingPoint, nodes []Node) []RingPoint
	// Lookup chooses the point that owns a key (RingSuccessor, RingNearest,
	// RingNearestPoint, RingAfter or RingAfterClamped).
	Lookup RingLookup
	// Ties chooses which point wins a position that several points share.
	Ties RingTies
}

// RingPoint is a point that RingOptions.Points generates: a position on the circle and the
// index of its node in the nodes it was given.
type RingPoint struct {
	Node int
	Pos  uint64
}

// RingLookup chooses the point that owns a key's position h.
type RingLookup uint8

const (
	// RingSuccessor gives a key to the first point at or after h, wrapping around to the
	// smallest (Karger et al.; ketama, Jedis, nginx).
	RingSuccessor RingLookup = iota
	// RingNearest gives a key to the nearer of the first point at or after h and the last
	// point before it, measured around the circle, the one before on equal distance: what
	// HAProxy's consistent hash does. AppendN then walks clockwise from that point, and a
	// removal can move a key to the other neighbour, not to AppendN's second node. A position
	// that several points share is its winner's from both sides (see RingNearestPoint).
	RingNearest
	// RingNearestPoint is RingNearest without merging the points of a position: the point
	// before the successor is the one just before it in tie order, so a shared position below
	// the key belongs to its last point. That is HAProxy's rule exactly (its tree keeps equal
	// points in insertion order; use it with TieFirstPoint); it differs from RingNearest only
	// where points share a position.
	RingNearestPoint
	// RingAfter gives a key to the first point strictly after h, wrapping around to the
	// smallest: a key at a point's position goes to the next position's winner. It is a
	// binary search with Python's bisect.bisect (bisect_right) over the sorted points, as
	// uhashring does. AppendN walks clockwise from that point.
	RingAfter
	// RingAfterClamped is RingAfter without the wrap: a key at or after the largest position
	// goes to that position's winner (bisect_right clamped to the last index, as
	// redis-shard's HashRing does), so the largest point's arc takes in the ring's top end,
	// and the smallest point's arc starts at 0.
	RingAfterClamped
)

// RingTies chooses which of the points at one position wins it; the others stay behind it in
// that order, for AppendN.
type RingTies uint8

const (
	// TieSmallerName: the point of the node whose name sorts first (byte-wise) wins. It
	// keeps placement independent of the order nodes joined.
	TieSmallerName RingTies = iota
	// TieFirstPoint: the point generated first wins (nodes in join order, then each node's
	// points in order): a stable sort followed by a search for the first point >= h, as the
	// C proxies and clients that sort their points with a stable sort do.
	TieFirstPoint
	// TieLastPoint: the point generated last wins: Java's TreeMap.put, point by point.
	TieLastPoint
)

// ringHash tells Locate whether to call the default hash directly.
type ringHash uint8

const (
	customRingHash ringHash = iota
	xxhRingHash
)

const defaultRingVnodes = 160

// NewRing returns a ring of the nodes with the given options. Nodes are validated as the
// package documentation says; a ring of more than 4194304 points, or Vnodes outside
// [1, 4194304], returns an error wrapping ErrLimit.
func NewRing(nodes []Node, opts RingOptions) (*Ring, error) {
	r := &Ring{opts: opts, kind: customRingHash, slots: map[string]int32{}}
	if r.opts.Hash == nil {
		r.opts.Hash, r.kind = keyhash.XXH64, xxhRingHash
	}
	if r.opts.Vnodes == 0 {
		r.opts.Vnodes = defaultRingVnodes
	}
	if r.opts.PointName == nil {
		r.opts.PointName, r.defaultPoints = defaultPointName, r.kind == xxhRingHash
	}
	if v := r.opts.Vnodes; v < 1 || v > ring.MaxPoints {
		return nil, fmt.Errorf("pool: ring: %d vnodes per unit of weight: allowed range is [1, %d]: %w", v, ring.MaxPoints, ErrLimit)
	}
	if r.opts.Lookup > RingAfterClamped || r.opts.Ties > TieLastPoint {
		return nil, fmt.Errorf("pool: ring: lookup rule %d, tie rule %d: unknown", r.opts.Lookup, r.opts.Ties)
	}
	m, err := newMembers("ring", nodes)
	if err != nil {
		return nil, err
	}
	if err := r.apply(m, m.nodes, nil); err != nil {
		return nil, err
	}
	return r, nil
}

func defaultPointName(node string, i int) string { return node + "-" + strconv.Itoa(i) }

// Locate returns the name of the node that owns key.
func (r *Ring) Locate(key string) string {
	s := r.state.Load()
	if s == nil { // the zero Ring
		return ""
	}
	h := r.position(key)
	if s.lookup != RingSuccessor {
		return s.names[s.table.Owner(s.owner(h))]
	}
	return s.names[s.table.Locate(h)]
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys). It hashes 32 keys, then looks all of them up together, so their
// cache misses overlap.
func (r *Ring) LocateBatch(keys []string, dst []string) {
	dst = batchDst(keys, dst)
	s := r.state.Load()
	if s == nil { // the zero Ring
		clear(dst)
		return
	}
	if s.lookup != RingSuccessor {
		for i, k := range keys {
			dst[i] = s.names[s.table.Owner(s.owner(r.position(k)))]
		}
		return
	}
	var hs [ring.Batch]uint64
	var owners [ring.Batch]int32
	for len(keys) > 0 {
		g := min(len(keys), ring.Batch)
		for m, k := range keys[:g] {
			hs[m] = r.position(k)
		}
		s.table.LocateBatch(hs[:g], owners[:g])
		for m, o := range owners[:g] {
			dst[m] = s.names[o]
		}
		keys, dst = keys[g:], dst[g:]
	}
}

// Position returns key's position on the ring, the 64-bit value that Locate looks up and
// that Arcs are ranges of: RingOptions.Hash(key), XXH64 by default. A store that keeps each
// row's Position can move a ring's changed arcs by range. It never allocates (unless
// RingOptions.Hash does) and is safe for concurrent use. It returns 0 for the zero Ring.
func (r *Ring) Position(key string) uint64 {
	if r.state.Load() == nil { // the zero Ring
		return 0
	}
	return r.position(key)
}

// Arc is a range of ring positions [First, Last], both ends included, whose keys all belong
// to the node named Node.
type Arc struct {
	First, Last uint64
	Node        string
}

// Arcs yields the ring's arcs in increasing order of positions, from the one that holds 0 to
// the one that holds math.MaxUint64, every position in exactly one: a key belongs to the node
// of the arc that holds Position(key), under the ring's lookup rule. Two consecutive arcs
// never have the same node. Under RingSuccessor a point's arc ends at the point, so a ring of
// p points has at most p+1 arcs; under RingNearest and RingNearestPoint the gap between two
// positions is split at its midpoint, so there are at most 2p+1 (3p+1 with shared positions
// under RingNearestPoint), and Arcs holds 24 bytes per point while it runs; under RingAfter
// and RingAfterClamped a point's arc ends just before it, at most p+1 arcs, and Arcs holds 8
// bytes per point while it runs. Arcs reads the ring
// as it was when called and is safe for concurrent use, also with changes. The zero Ring has
// no arcs.
func (r *Ring) Arcs() iter.Seq[Arc] {
	s := r.state.Load()
	return func(yield func(Arc) bool) {
		if s == nil { // the zero Ring
			return
		}
		var cur Arc
		started := false
		// emit merges an arc into cur, and yields cur when the node changes.
		emit := func(first, last uint64, owner int32) bool {
			if name := s.names[owner]; !started || name != cur.Node {
				if started && !yield(cur) {
					return false
				}
				cur, started = Arc{First: first, Node: name}, true
			}
			cur.Last = last
			return true
		}
		if s.lookup == RingSuccessor {
			for a := range s.table.Arcs() {
				if !emit(a.First, a.Last, a.Owner) {
					return
				}
			}
		} else {
			starts := s.afterStarts()
			if s.lookup == RingNearest || s.lookup == RingNearestPoint {
				starts = s.nearestStarts()
			}
			for i, first := range starts {
				last := uint64(math.MaxUint64)
				if i+1 < len(starts) {
					last = starts[i+1] - 1
				}
				// The owner is the same across [first, last]: ask the lookup itself.
				if !emit(first, last, s.table.Owner(s.owner(first))) {
					return
				}
			}
		}
		yield(cur)
	}
}

// nearestStarts returns, in increasing order and each once, the positions from which the
// owner under a nearest rule may differ from the position before: 0; every point's position
// and the one after it (where RingNearestPoint hands a shared position's keys from its
// winner to its last point); and, in every gap (a, b] between consecutive positions, the
// wrap-around gap included, a+floor((b-a)/2)+1, the first position nearer to b than to a.
func (s *ringState) nearestStarts() []uint64 {
	t := s.table
	n := t.Len()
	starts := make([]uint64, 1, 3*t.Distinct()+1) // starts[0] = 0
	for i := 0; i < n; {
		p := t.Position(i)
		j := i + 1
		for j < n && t.Position(j) == p {
			j++
		}
		gap := t.Position(j%n) - p // modulo 2^64; 0 when p is the only position
		half := gap / 2
		if gap == 0 {
			half = 1 << 63
		}
		starts = append(starts, p, p+1, p+half+1)
		i = j
	}
	slices.Sort(starts)
	return slices.Compact(starts)
}

// afterStarts returns the positions from which the owner under RingAfter or
// RingAfterClamped may differ from the position before: 0 and every distinct position (a key
// at a position already belongs to the next one), in increasing order.
func (s *ringState) afterStarts() []uint64 {
	t := s.table
	starts := make([]uint64, 1, t.Distinct()+1) // starts[0] = 0
	for i := range t.Len() {
		if p := t.Position(i); p != starts[len(starts)-1] {
			starts = append(starts, p)
		}
	}
	return starts
}

// position returns the key's position, calling the default hash directly so it inlines.
func (r *Ring) position(key string) uint64 {
	if r.kind == xxhRingHash {
		return keyhash.XXH64(key)
	}
	return r.opts.Hash(key)
}

// owner returns the index of the point that owns position h.
func (s *ringState) owner(h uint64) int {
	switch s.lookup {
	case RingNearest:
		return s.table.Nearest(h)
	case RingNearestPoint:
		return s.table.NearestPoint(h)
	case RingAfter:
		return s.table.Successor(h + 1) // h+1 wraps to 0 from the top: point 0, as the wrap does
	case RingAfterClamped:
		if last := s.table.Len() - 1; h >= s.table.Position(last) {
			return s.table.Prev(0) // the winner of the largest position
		}
		return s.table.Successor(h + 1)
	}
	return s.table.Successor(h)
}

// AppendN appends to dst the names of min(n, len(Nodes())) distinct nodes for key: the
// owner, then the owners of the points met clockwise from the owner's point, each once (the
// replicas of the ring's usual "next distinct nodes" rule). It allocates only when dst lacks
// room, or past 16 nodes (a set to remember them).
func (r *Ring) AppendN(dst []string, key string, n int) []string {
	s := r.state.Load()
	if s == nil { // the zero Ring
		return dst
	}
	n = min(n, s.members)
	if n <= 0 {
		return dst
	}
	end := len(dst) + n
	s.table.Walk(s.owner(r.position(key)), func(o int32) bool {
		dst = append(dst, s.names[o])
		return len(dst) < end
	})
	for _, o := range s.pointless[:min(len(s.pointless), end-len(dst))] {
		dst = append(dst, s.names[o])
	}
	return dst
}

// Add adds nodes to the ring, all or none.
func (r *Ring) Add(nodes ...Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		return zeroError("ring", "NewRing")
	}
	m, err := r.m.add("ring", nodes)
	if err != nil {
		return err
	}
	return r.apply(m, m.nodes[len(r.m.nodes):], nil)
}

// Remove removes the named nodes, all or none; the ring never becomes empty.
func (r *Ring) Remove(names ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		return zeroError("ring", "NewRing")
	}
	m, err := r.m.remove("ring", names)
	if err != nil {
		return err
	}
	return r.apply(m, nil, names)
}

// SetWeight sets the weight of the named node, in [0, MaxWeight] (0 means 1). With the
// default generator only that node's points change: the keys it gains come from the others,
// those it loses go to the others, no other key moves.
func (r *Ring) SetWeight(name string, weight int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		return zeroError("ring", "NewRing")
	}
	m, err := r.m.setWeight("ring", name, weight)
	if err != nil {
		return err
	}
	return r.apply(m, nil, nil)
}

// Nodes returns a copy of the members in the order they joined.
func (r *Ring) Nodes() []Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.copyNodes()
}

// apply builds and publishes the table of membership m, which differs from r.m by the added
// nodes, the removed names, or weights. On error nothing changes.
func (r *Ring) apply(m *members, added []Node, removed []string) error {
	if r.opts.Points != nil {
		return r.generate(m)
	}
	var total int64 // in 64 bits: a weight times Vnodes overflows a 32-bit int
	for _, n := range m.nodes {
		total += int64(n.Weight) * int64(r.opts.Vnodes)
		if total > ring.MaxPoints {
			return r.tooMany(total)
		}
	}
	// Work on copies: nothing of r changes until the table is built.
	slots, free, names := r.slots, slices.Clone(r.free), slices.Clone(r.names)
	if added != nil || removed != nil {
		slots = make(map[string]int32, len(m.nodes))
		for name, s := range r.slots {
			slots[name] = s
		}
	}
	var drop []bool // by slot: every point of the node goes
	for _, name := range removed {
		s := slots[name]
		drop = growTo(drop, s)
		drop[s] = true
		delete(slots, name)
		names[s] = ""
		free = append(free, s)
	}
	var fresh []ring.Point
	for _, n := range added {
		var s int32
		if len(free) > 0 {
			s, free = free[len(free)-1], free[:len(free)-1]
			names[s] = n.Name
		} else {
			s = int32(len(names))
			names = append(names, n.Name)
		}
		slots[n.Name] = s
		fresh = r.appendPoints(fresh, n.Name, s, 0, n.Weight*r.opts.Vnodes)
	}
	// A weight change adds the node's points above its old count, or removes them.
	lowered := map[ring.Point]int{} // points of a lowered node that go, with multiplicity
	for i, n := range m.nodes {
		if added != nil || removed != nil {
			break // weights do not change with membership
		}
		was, now := r.m.nodes[i].Weight*r.opts.Vnodes, n.Weight*r.opts.Vnodes
		if now > was {
			fresh = r.appendPoints(fresh, n.Name, slots[n.Name], was, now)
		}
		if now < was {
			for _, p := range r.appendPoints(nil, n.Name, slots[n.Name], now, was) {
				lowered[p]++
			}
		}
	}
	all := make([]ring.Point, 0, total)
	for _, p := range r.all {
		if int(p.Owner) < len(drop) && drop[p.Owner] {
			continue
		}
		if c := lowered[ring.Point{Pos: p.Pos, Owner: p.Owner}]; c > 0 {
			lowered[ring.Point{Pos: p.Pos, Owner: p.Owner}] = c - 1
			continue
		}
		all = append(all, p)
	}
	ring.Sort(fresh)
	all = mergePoints(all, fresh)

	// Ranks: every point of a node gets the node's rank, which only ties between nodes need.
	rank := make([]uint32, len(names))
	order := slices.Clone(m.nodes)
	if r.opts.Ties == TieSmallerName {
		slices.SortFunc(order, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	}
	for i, n := range order {
		rank[slots[n.Name]] = uint32(i)
		if r.opts.Ties == TieLastPoint {
			rank[slots[n.Name]] = math.MaxUint32 - uint32(i)
		}
	}
	for i := range all {
		all[i].Rank = rank[all[i].Owner]
	}
	t, err := ring.New(all) // sorted by position already: New's sort fixes ties in linear time
	if err != nil {
		return fmt.Errorf("pool: ring: %w", err) // unreachable: the count is checked above
	}
	r.state.Store(&ringState{table: t, names: names, lookup: r.opts.Lookup, members: len(m.nodes)})
	r.m, r.all, r.slots, r.free, r.names = m, all, slots, free, names
	return nil
}

// appendPoints appends points [from, to) of the named node, owned by slot.
func (r *Ring) appendPoints(dst []ring.Point, name string, slot int32, from, to int) []ring.Point {
	if r.defaultPoints {
		// XXH64 of the default names, built in one buffer: no string per point.
		buf := append([]byte(name), '-')
		for i := from; i < to; i++ {
			dst = append(dst, ring.Point{Pos: xxhash.Sum64(strconv.AppendInt(buf, int64(i), 10)), Owner: slot})
		}
		return dst
	}
	for i := from; i < to; i++ {
		dst = append(dst, ring.Point{Pos: r.opts.Hash(r.opts.PointName(name, i)), Owner: slot})
	}
	return dst
}

// generate builds the table of membership m from RingOptions.Points: slots are the nodes'
// places in join order, ranks the points' places in the generated order.
func (r *Ring) generate(m *members) error {
	gen := r.opts.Points(nil, m.nodes)
	if len(gen) > ring.MaxPoints {
		return r.tooMany(int64(len(gen)))
	}
	names := make([]string, len(m.nodes))
	for i, n := range m.nodes {
		names[i] = n.Name
	}
	rank := make([]uint32, len(m.nodes))
	if r.opts.Ties == TieSmallerName {
		order := make([]int, len(m.nodes))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
		for i, node := range order {
			rank[node] = uint32(i)
		}
	}
	has := make([]bool, len(m.nodes))
	points := make([]ring.Point, len(gen))
	for i, p := range gen {
		if p.Node < 0 || p.Node >= len(m.nodes) {
			return fmt.Errorf("pool: ring: the point generator gave point %d to node %d of %d: %w", i, p.Node, len(m.nodes), ErrNode)
		}
		has[p.Node] = true
		points[i] = ring.Point{Pos: p.Pos, Owner: int32(p.Node)}
		switch r.opts.Ties {
		case TieSmallerName:
			points[i].Rank = rank[p.Node]
		case TieFirstPoint:
			points[i].Rank = uint32(i)
		case TieLastPoint:
			points[i].Rank = math.MaxUint32 - uint32(i)
		}
	}
	var pointless []int32
	for i, ok := range has {
		if !ok {
			pointless = append(pointless, int32(i))
		}
	}
	if len(pointless) == len(m.nodes) {
		return fmt.Errorf("pool: ring: the point generator gave no point: %w", ErrEmpty)
	}
	t, err := ring.New(points)
	if err != nil {
		return fmt.Errorf("pool: ring: %w", err) // unreachable: count and owners are checked
	}
	r.state.Store(&ringState{table: t, names: names, lookup: r.opts.Lookup, members: len(m.nodes), pointless: pointless})
	r.m = m
	return nil
}

func (r *Ring) tooMany(points int64) error {
	return fmt.Errorf("pool: ring: %d points or more: at most %d: %w", points, ring.MaxPoints, ErrLimit)
}

// growTo returns b extended so that b[i] exists.
func growTo(b []bool, i int32) []bool {
	if int(i) < len(b) {
		return b
	}
	return append(b, make([]bool, int(i)+1-len(b))...)
}

// mergePoints merges two lists sorted by position into a new one.
func mergePoints(a, b []ring.Point) []ring.Point {
	if len(b) == 0 {
		return a
	}
	out := make([]ring.Point, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].Pos <= b[0].Pos {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}
