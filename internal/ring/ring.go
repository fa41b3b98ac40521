// Package ring is the one consistent-hash ring engine of this module: an immutable table of
// points on a circle of 64-bit positions (ordered as unsigned integers), each point owned by
// a small non-negative integer, a shard number or a node slot, with an O(1) index for the
// question every ring asks: which point is the first at or after position h, wrapping around
// to the smallest point.
//
// shard.Ring (the Jedis, Cassandra and custom rings) and pool.Ring (named, weighted nodes and
// the compatibility presets built on it) differ only in how they make points; they share
// this table, so every ring answers with the same code.
//
// Ties. Points may share a position. The table keeps all of them, ordered by (Pos, Rank,
// Owner), and the first of a position wins it: the lowest Rank, then the lowest Owner. Callers
// encode their system's rule in Rank: "the later put wins" (Java's TreeMap.put, point by
// point) is Rank = MaxUint32 - insertion order; "the first in configuration order wins" (a
// stable sort, then the first point >= h) is Rank = configuration order; "the smaller name
// wins" is Rank = the node's place in name order. The points a tie hides stay in the table
// behind the winner, so a walk for replicas meets their owners where removing the winner
// would bring them forward.
//
// Memory: 12 bytes per point (position and owner) and 4 to 8 bytes of index per point; New
// takes the points in a slice it sorts in place and does not keep (16 bytes per point).
//
// A Table is immutable once New returns it; every method is safe for concurrent use, and
// none allocates except where its doc says so.
package ring

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"slices"
)

// Point is one point given to New: its position on the circle, its owner and its rank among
// points at the same position.
type Point struct {
	Pos   uint64 // position on the circle, ordered as an unsigned integer
	Owner int32  // the shard or node slot the point stands for, in [0, MaxPoints)
	Rank  uint32 // at an equal position the lowest Rank wins, then the lowest Owner
}

// MaxPoints is the most points a table holds: 4M points take about 80 MB with the index, and
// indices and owners fit 32 bits.
const MaxPoints = 1 << 22

// Errors of New. Callers check their own bounds first and wrap these in their own sentinels
// where a caller's input could reach them.
var (
	ErrNoPoints = errors.New("ring: no points")
	ErrTooMany  = errors.New("ring: too many points")
	ErrOwner    = errors.New("ring: owner out of range")
)

// Compare orders points as a table does: by position, then rank, then owner.
func Compare(a, b Point) int {
	if c := cmp.Compare(a.Pos, b.Pos); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Rank, b.Rank); c != 0 {
		return c
	}
	return cmp.Compare(a.Owner, b.Owner)
}

// Sort sorts points as a table orders them, by (Pos, Rank, Owner). Points already in order
// take one pass; others are spread into about len/64 buckets by the top bits of their
// positions, each bucket sorted on its own where it fits in cache, which needs a copy of the
// points for the time of the call.
func Sort(points []Point) {
	if slices.IsSortedFunc(points, Compare) {
		return
	}
	var or, and uint64 = 0, math.MaxUint64
	for _, p := range points {
		or, and = or|p.Pos, and&p.Pos
	}
	varies := or &^ and // the bits above the highest varying one are the same in all
	b := min(max(bits.Len(uint(len(points)/64)), 1), 16)
	if len(points) < 1024 || varies == 0 {
		slices.SortFunc(points, Compare)
		return
	}
	shift := max(bits.Len64(varies)-b, 0)
	mask := uint64(1)<<b - 1
	start := make([]int, 1<<b+1)
	for _, p := range points {
		start[p.Pos>>shift&mask+1]++
	}
	for d := 1; d < len(start); d++ {
		start[d] += start[d-1]
	}
	sorted := make([]Point, len(points))
	next := slices.Clone(start[:1<<b])
	for _, p := range points {
		d := p.Pos >> shift & mask
		sorted[next[d]] = p
		next[d]++
	}
	for d := range 1 << b {
		slices.SortFunc(sorted[start[d]:start[d+1]], Compare)
	}
	copy(points, sorted)
}

// Table is an immutable ring: the points in (Pos, Rank, Owner) order, indexed by the top bits
// of their positions. Indices i in [0, Len()) name points in that order.
type Table struct {
	// pos holds the positions in order, then a sentinel math.MaxUint64 that stops every scan.
	pos []uint64
	// owner[i] owns pos[i]; the sentinel's owner is owner[0], which wraps the ring around.
	owner []int32
	// idx[k] is the index of the first point >= k<<shift; idx[len(idx)-1] is the sentinel's.
	idx   []uint32
	shift uint8

	distinct int   // distinct positions
	owners   int   // distinct owners
	maxOwner int32 // the largest owner
}

// scanMax is the longest bucket Successor scans point by point; longer ones, which only a
// hash that piles points together produces, are binary-searched.
const scanMax = 8

// New returns the table of points. It sorts points in place (see Sort) and does not keep
// the slice. It returns an error wrapping
// ErrNoPoints, ErrTooMany (more than MaxPoints) or ErrOwner (an owner outside [0, MaxPoints)).
func New(points []Point) (*Table, error) {
	switch {
	case len(points) == 0:
		return nil, ErrNoPoints
	case len(points) > MaxPoints:
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooMany, len(points), MaxPoints)
	}
	n := len(points)
	t := &Table{pos: make([]uint64, n+1), owner: make([]int32, n+1), maxOwner: -1}
	for _, p := range points {
		if p.Owner < 0 || p.Owner >= MaxPoints {
			return nil, fmt.Errorf("%w: %d, want [0, %d)", ErrOwner, p.Owner, MaxPoints)
		}
		t.maxOwner = max(t.maxOwner, p.Owner)
	}
	Sort(points)
	seen := make([]uint64, t.maxOwner/64+1)
	for i, p := range points {
		t.pos[i], t.owner[i] = p.Pos, p.Owner
		if i == 0 || p.Pos != points[i-1].Pos {
			t.distinct++
		}
		if w, bit := p.Owner/64, uint64(1)<<(p.Owner%64); seen[w]&bit == 0 {
			seen[w] |= bit
			t.owners++
		}
	}
	t.pos[n], t.owner[n] = math.MaxUint64, t.owner[0]

	// 2^b buckets, between one and two per point, so a bucket holds about one point; at
	// least two buckets so the shift stays below 64.
	b := max(bits.Len(uint(n)), 1)
	t.shift = uint8(64 - b)
	t.idx = make([]uint32, 1<<b+1)
	i := 0
	for k := range 1 << b {
		start := uint64(k) << t.shift
		for i < n && t.pos[i] < start {
			i++
		}
		t.idx[k] = uint32(i)
	}
	t.idx[1<<b] = uint32(n)
	return t, nil
}

// Len returns the number of points, in [1, MaxPoints], counting those a tie hides.
func (t *Table) Len() int { return len(t.pos) - 1 }

// Distinct returns the number of distinct positions, in [1, Len()].
func (t *Table) Distinct() int { return t.distinct }

// Owners returns the number of distinct owners, in [1, Len()].
func (t *Table) Owners() int { return t.owners }

// MaxOwner returns the largest owner of any point.
func (t *Table) MaxOwner() int32 { return t.maxOwner }

// Bytes returns the memory the table holds, for reports of bytes per point.
func (t *Table) Bytes() int { return cap(t.pos)*8 + cap(t.owner)*4 + cap(t.idx)*4 }

// Position returns the position of point i, i in [0, Len()).
func (t *Table) Position(i int) uint64 { return t.pos[i] }

// Owner returns the owner of point i, i in [0, Len()).
func (t *Table) Owner(i int) int32 { return t.owner[i] }

// Locate returns the owner of the successor of h: Owner(Successor(h)), a little faster.
func (t *Table) Locate(h uint64) int32 { return t.owner[t.search(h)] }

// Successor returns the index of the first point at or after h, or 0 if every point is
// before h: the point whose arc holds h, the winner of its position.
func (t *Table) Successor(h uint64) int {
	i := t.search(h)
	if i == t.Len() {
		return 0
	}
	return i
}

// search returns the index of the first point >= h in [0, Len()], Len() being the sentinel.
func (t *Table) search(h uint64) int {
	k := h >> t.shift
	i, j := t.idx[k], t.idx[k+1]
	// Every point in [i, j) is in h's bucket, and pos[j] is beyond it (or the sentinel), so
	// pos[j] >= h and the scan stops by j.
	if j-i <= scanMax {
		for t.pos[i] < h {
			i++
		}
		return int(i)
	}
	for i < j { // first index in [i, j] with pos >= h
		m := i + (j-i)/2
		if t.pos[m] < h {
			i = m + 1
		} else {
			j = m
		}
	}
	return int(i)
}

// Prev returns the index of the winner of the position before point i's, wrapping around
// from the smallest position to the largest; with one distinct position it returns 0.
func (t *Table) Prev(i int) int {
	i = t.first(i)
	if i == 0 {
		i = t.Len()
	}
	return t.first(i - 1)
}

// first returns the index of the winner of point i's position.
func (t *Table) first(i int) int {
	for i > 0 && t.pos[i-1] == t.pos[i] {
		i--
	}
	return i
}

// Nearest returns the index of the point nearest h in either direction, measured around the
// circle: the successor's winner or the predecessor's, the predecessor when both are equally
// far (HAProxy's consistent hash picks so among its two neighbours).
func (t *Table) Nearest(h uint64) int {
	next := t.Successor(h)
	prev := t.Prev(next)
	if h-t.pos[prev] <= t.pos[next]-h {
		return prev
	}
	return next
}

// NearestPoint returns the index of the point nearest h in either direction as Nearest does,
// but without merging the points of a position: the candidates are the successor (the first
// point at or after h, or point 0) and the point just before it in table order (the last
// point, from point 0), so a shared position below h is reached at its last point, not its
// winner. HAProxy's consistent hash does so: its tree walks equal keys in insertion order,
// and the lookup compares the first node at or after the key with the node just before it.
// The predecessor wins on equal distance.
func (t *Table) NearestPoint(h uint64) int {
	next := t.Successor(h)
	prev := next - 1
	if next == 0 {
		prev = t.Len() - 1
	}
	if h-t.pos[prev] <= t.pos[next]-h {
		return prev
	}
	return next
}

// walkSmall is how many owners Walk remembers in a fixed array before it allocates a set.
const walkSmall = 16

// Walk calls yield with the owners of the points from point i clockwise, i in [0, Len()),
// each owner once, until yield returns false or every owner has been yielded; the replicas
// of position h are Walk(Successor(h), ...). Owners hidden by a tie are met after the
// winner, in tie order. Walk allocates only after yielding walkSmall (16) owners: a set of
// MaxOwner()+1 bits.
func (t *Table) Walk(i int, yield func(owner int32) bool) {
	n := t.Len()
	var small [walkSmall]int32
	var big []uint64
	found := 0
	for steps := 0; steps < n; steps++ {
		o := t.owner[i]
		if i++; i == n {
			i = 0
		}
		if big == nil {
			if slices.Contains(small[:min(found, walkSmall)], o) {
				continue
			}
			if found == walkSmall {
				big = make([]uint64, t.maxOwner/64+1)
				for _, s := range small {
					big[s/64] |= 1 << (s % 64)
				}
			} else {
				small[found] = o
			}
		}
		if big != nil {
			w, bit := o/64, uint64(1)<<(o%64)
			if big[w]&bit != 0 {
				continue
			}
			big[w] |= bit
		}
		found++
		if !yield(o) || found == t.owners {
			return
		}
	}
}

// Arc is the range of positions [First, Last] whose successor is one point: every h in it
// goes to Owner.
type Arc struct {
	First, Last uint64
	Owner       int32
}

// ArcAt returns the arc that holds h: from just after the previous position to the position
// of h's successor. The arc of the smallest position is cut in two at the wrap, so arcs never
// wrap: [0, smallest] and [largest+1, math.MaxUint64] (when largest < math.MaxUint64) both
// belong to the smallest position's winner.
func (t *Table) ArcAt(h uint64) Arc {
	i := t.search(h)
	n := t.Len()
	switch {
	case i == n: // past the largest position
		return Arc{First: t.pos[n-1] + 1, Last: math.MaxUint64, Owner: t.owner[0]}
	case i == 0:
		return Arc{First: 0, Last: t.pos[0], Owner: t.owner[0]}
	}
	return Arc{First: t.pos[i-1] + 1, Last: t.pos[i], Owner: t.owner[i]}
}

// Arcs yields every arc in increasing order of positions, from the one that holds 0 to the
// one that holds math.MaxUint64: Distinct() arcs, one more when the largest position is below
// math.MaxUint64. Two tables are compared arc by arc by walking both from 0 with ArcAt.
func (t *Table) Arcs() iter.Seq[Arc] {
	return func(yield func(Arc) bool) {
		for h := uint64(0); ; {
			a := t.ArcAt(h)
			if !yield(a) || a.Last == math.MaxUint64 {
				return
			}
			h = a.Last + 1
		}
	}
}
