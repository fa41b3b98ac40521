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
// Memory: 12 bytes per point (a record of position and owner that lookups read, and the
// position's low bits that they almost never need; see Table) and 8 to 16 bytes of index per
// point (22.5 bytes per point in all at 1.6M points); New takes the points in a slice it
// sorts in place and does not keep (16 bytes per point).
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
//
// Layout: a point is one 64-bit record, its position with the low b bits replaced by its
// owner, b the bit length of the largest owner; the low bits of the position go to a side
// array that lookups almost never read. Records order as positions do except within one
// span of 2^b positions, so a lookup scans records for the first whose high bits reach the
// key's and reads the owner from it. Only when the key falls in the same 2^b span as a point
// (odds about 2^b / 2^64 per lookup, b <= 22) does it compare the low bits. (One lookup at a
// time is no faster than with separate position and owner arrays, measured at 1.6M points:
// the processor predicts the scan and fetches both at once. Batches gain, see LocateBatch.)
//
// Most lookups read no record at all: a 4-byte entry per bucket holds the owner of the first
// point at or after the bucket's start, whether it is the bucket's only point, and the high
// bits of its position, as many as fit. They answer every key below that point, in a bucket
// without points, or (with the next entry, mostly in the same cache line) above the bucket's
// only point: 82 to 94 percent of uniform keys, with one cache miss where the index of the
// bucket's records and the records would add a second and a third. The entries add 4 bytes
// a bucket, 5.2 bytes per point at 1.6M points (17.2 to 22.5 in all).
type Table struct {
	// rec holds the records in order, then a sentinel with the largest high bits and the
	// owner of rec[0], which stops every scan and wraps the ring around, then padding that
	// no key is above.
	rec []uint64
	// low holds the low b bits of each position.
	low  []uint32
	mask uint64 // 1<<b - 1: the owner bits of a record
	// idx[k] answers most lookups in bucket k, the positions with top bits k, alone: it holds
	// the owner of the first point >= k<<shift (point 0's for none) in bits [1, 1+ob), in
	// bit 0 whether that point is the bucket's only one, and above them the bits of that
	// point's position just below the bucket's top bits, as many as fit (all ones when the
	// point is in a later bucket). A key below that point, in a bucket without points, or
	// above the bucket's only point (then idx[k+1]'s owner) is answered without a record;
	// see indexed. idx[len(idx)-1] has point 0's owner.
	idx []uint32
	// start[k] is the index of the first point >= k<<shift; start[len(start)-1] = Len().
	start []uint32
	shift uint   // 64 minus the bits of a bucket number, in [41, 63]
	lowE  uint32 // 1<<(ob+1) - 1: the owner and flag bits of an entry

	branchless bool // search counts records without branching (small tables)

	distinct int   // distinct positions
	owners   int   // distinct owners
	maxOwner int32 // the largest owner
}

// countMax is the most points of a bucket that a lookup in a small table counts without
// branching (larger buckets, 0.4% of them at one to two buckets per point, are scanned);
// scanMax the most a lookup scans, beyond which (only where a hash piles points together)
// it binary-searches.
const (
	countMax = 4
	scanMax  = 16
)

// branchlessMax is the most points for which lookups count records without branching: the
// table's records and index (1 MB at most) stay within a core's cache. Measured side by side at
// 160 points per node, the branchless count was 0.65x the scan's time up to 300 nodes,
// 1.1x at 1000 and 1.3x at 10000.
const branchlessMax = 1 << 16

// New returns the table of points. It sorts points in place (see Sort) and does not keep
// the slice. It returns an error wrapping ErrNoPoints, ErrTooMany (more than MaxPoints) or
// ErrOwner (an owner outside [0, MaxPoints)).
func New(points []Point) (*Table, error) {
	switch {
	case len(points) == 0:
		return nil, ErrNoPoints
	case len(points) > MaxPoints:
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooMany, len(points), MaxPoints)
	}
	n := len(points)
	t := &Table{maxOwner: -1}
	for _, p := range points {
		if p.Owner < 0 || p.Owner >= MaxPoints {
			return nil, fmt.Errorf("%w: %d, want [0, %d)", ErrOwner, p.Owner, MaxPoints)
		}
		t.maxOwner = max(t.maxOwner, p.Owner)
	}
	Sort(points)

	t.mask = 1<<max(bits.Len32(uint32(t.maxOwner)), 1) - 1
	t.rec = make([]uint64, n+countMax) // the points, the sentinel, padding for search // the points, the sentinel, padding for search
	t.low = make([]uint32, n)
	seen := make([]uint64, t.maxOwner/64+1)
	for i, p := range points {
		t.rec[i], t.low[i] = p.Pos&^t.mask|uint64(p.Owner), uint32(p.Pos&t.mask)
		if i == 0 || p.Pos != points[i-1].Pos {
			t.distinct++
		}
		if w, bit := p.Owner/64, uint64(1)<<(p.Owner%64); seen[w]&bit == 0 {
			seen[w] |= bit
			t.owners++
		}
	}
	t.rec[n] = math.MaxUint64&^t.mask | uint64(points[0].Owner)
	for i := n + 1; i < len(t.rec); i++ {
		t.rec[i] = math.MaxUint64
	}

	// 2^b buckets, between one and two per point, so a bucket holds about one point; at
	// least two buckets so the shift stays below 64.
	b := max(bits.Len(uint(n)), 1)
	t.branchless = n <= branchlessMax
	t.shift = uint(64 - b)
	t.lowE = 1<<(bits.OnesCount64(t.mask)+1) - 1
	t.start = make([]uint32, 1<<b+1)
	i := 0
	for k := range 1 << b {
		start := uint64(k) << t.shift
		for i < n && points[i].Pos < start {
			i++
		}
		t.start[k] = uint32(i)
	}
	t.start[1<<b] = uint32(n)
	t.idx = make([]uint32, 1<<b+1)
	for k := range 1 << b {
		t.idx[k] = t.entry(k)
	}
	t.idx[1<<b] = uint32(t.rec[n]&t.mask) << 1 // rec[Len()] has point 0's owner
	return t, nil
}

// entry returns idx[k], given start.
func (t *Table) entry(k int) uint32 {
	i, j := t.start[k], t.start[k+1]
	top := uint32(math.MaxUint32) // no point in the bucket: no key is at or above it
	if i < j {
		// The bits of rec[i] below the bucket number; the owner bits that reach the top
		// half (b+ob > 32) fall within lowE.
		top = uint32(t.rec[i] << (64 - t.shift) >> 32)
	}
	var one uint32
	if j-i == 1 {
		one = 1
	}
	return top&^t.lowE | uint32(t.rec[i]&t.mask)<<1 | one
}

// Len returns the number of points, in [1, MaxPoints], counting those a tie hides.
func (t *Table) Len() int { return len(t.low) }

// Distinct returns the number of distinct positions, in [1, Len()].
func (t *Table) Distinct() int { return t.distinct }

// Owners returns the number of distinct owners, in [1, Len()].
func (t *Table) Owners() int { return t.owners }

// MaxOwner returns the largest owner of any point.
func (t *Table) MaxOwner() int32 { return t.maxOwner }

// Bytes returns the memory the table holds, for reports of bytes per point.
func (t *Table) Bytes() int { return cap(t.rec)*8 + cap(t.low)*4 + cap(t.idx)*4 + cap(t.start)*4 }

// Position returns the position of point i, i in [0, Len()).
func (t *Table) Position(i int) uint64 { return t.rec[i]&^t.mask | uint64(t.low[i]) }

// Owner returns the owner of point i, i in [0, Len()).
func (t *Table) Owner(i int) int32 { return int32(t.rec[i] & t.mask) }

// Locate returns the owner of the successor of h: Owner(Successor(h)), a little faster.
func (t *Table) Locate(h uint64) int32 {
	k := h >> (t.shift & 63)
	if o, ok := t.indexed(t.idx[k], k, h); ok {
		return o
	}
	return int32(t.rec[t.searchIn(t.start[k], t.start[k+1], h)] & t.mask)
}

// indexed returns the owner of h's successor and true where e = idx[k], k = h's bucket, and
// the next entry tell it without a record: when h is below the bucket's first point or the
// bucket has none (e's owner), or h is above the bucket's only point (the next entry's
// owner). With n points in 2^b buckets, λ = n/2^b in [1/2, 1), that is about e^-λ (no
// point) + λe^-λ (one point) + a third of the rest (keys before the first of two or more):
// 82 to 94 percent of uniform keys. Otherwise (also when h's bits in e equal the point's,
// odds 2^-9 at most and 2^-17 at 10^4 owners) it returns false.
func (t *Table) indexed(e uint32, k, h uint64) (int32, bool) {
	hk := uint32(h<<((64-t.shift)&63)>>32) | t.lowE // h's bits below the bucket number, placed as an entry's
	if hk < e {
		return int32(e>>1) & int32(t.mask), true
	}
	if e&1 != 0 && hk > e|t.lowE {
		return int32(t.idx[k+1]>>1) & int32(t.mask), true
	}
	return 0, false
}

// search returns the index of the first point >= h in [0, Len()], Len() being the sentinel.
func (t *Table) search(h uint64) int {
	k := h >> (t.shift & 63)
	return t.searchIn(t.start[k], t.start[k+1], h)
}

// searchIn is search given the index entries of h's bucket: points [i, j) are the bucket's.
func (t *Table) searchIn(i, j uint32, h uint64) int {
	hm := h &^ t.mask
	// A record is below hm exactly when its position's high bits are below h's: those of
	// the bucket form a prefix of it, and every record from j on (a later bucket, the
	// sentinel, the padding) is >= hm, so a scan stops by j.
	switch {
	case t.branchless && j-i <= countMax:
		// The answer is i plus how many of the countMax records from i are below hm.
		// Without a branch on the data nothing is mispredicted, which pays while the table
		// is in cache (a third faster at 1600 points, measured); out of cache a predicted
		// scan is faster, because the processor runs ahead to the next lookup's loads.
		r := t.rec[i : i+countMax : i+countMax]
		i += below(r[0], hm) + below(r[1], hm) + below(r[2], hm) + below(r[3], hm)
	case j-i <= scanMax:
		for t.rec[i] < hm {
			i++
		}
	default:
		for i < j { // first index in [i, j] with record >= hm
			m := i + (j-i)/2
			if t.rec[m] < hm {
				i = m + 1
			} else {
				j = m
			}
		}
	}
	if t.rec[i]&^t.mask == hm { // h shares the point's high bits: compare the low ones
		return t.searchLow(int(i), h)
	}
	return int(i)
}

// Batch is the number of positions LocateBatch works on at a time; callers that hash keys
// for it hash this many into an array on their stack.
const Batch = 32

// LocateBatch sets owners[i] = Locate(hs[i]) for every i in [0, len(hs)); owners must be
// at least as long as hs. It reads the index entries of Batch positions, then answers each
// from them or its records: the cache misses of one step are independent and overlap, where
// one Locate after another waits for each key's misses in turn.
func (t *Table) LocateBatch(hs []uint64, owners []int32) {
	owners = owners[:len(hs)]
	if t.branchless { // in cache: nothing to overlap, and the steps would cost more than they save
		for m, h := range hs {
			owners[m] = t.Locate(h)
		}
		return
	}
	for len(hs) > 0 {
		g := min(len(hs), Batch)
		var e [Batch]uint32
		for m, h := range hs[:g] {
			e[m] = t.idx[h>>(t.shift&63)]
		}
		// The entries answer most; for the others read where their bucket's points start,
		// then the first of them, each step for all before any search needs one, so that
		// those misses overlap as well.
		var rest [Batch]uint8
		n := 0
		for m, h := range hs[:g] {
			o, ok := t.indexed(e[m], h>>(t.shift&63), h)
			owners[m], rest[n] = o, uint8(m)
			if !ok {
				n++
			}
		}
		var lo, hi [Batch]uint32
		for r, m := range rest[:n] {
			k := hs[m] >> (t.shift & 63)
			lo[r], hi[r] = t.start[k], t.start[k+1]
		}
		var first [Batch]uint64
		for r := range n {
			first[r] = t.rec[lo[r]]
		}
		for r, m := range rest[:n] {
			i := lo[r]
			if first[r] < hs[m]&^t.mask { // the first point is below h's high bits: not the one
				i++
			}
			owners[m] = int32(t.rec[t.searchIn(i, hi[r], hs[m])] & t.mask)
		}
		hs, owners = hs[g:], owners[g:]
	}
}

// below returns 1 if r < hm, else 0, without a branch.
func below(r, hm uint64) uint32 {
	var x uint32
	if r < hm {
		x = 1
	}
	return x
}

// searchLow returns the first index from i whose point is >= h, given that point i is the
// first whose high bits are not below h's. Out of line: almost no lookup comes here.
//
//go:noinline
func (t *Table) searchLow(i int, h uint64) int {
	for i < t.Len() && t.rec[i]&^t.mask == h&^t.mask && uint64(t.low[i]) < h&t.mask {
		i++
	}
	return i
}

// Successor returns the index of the first point at or after h, or 0 if every point is
// before h: the point whose arc holds h, the winner of its position.
func (t *Table) Successor(h uint64) int {
	i := t.search(h)
	if i == t.Len() {
		return 0
	}
	return i
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
	for i > 0 && t.Position(i-1) == t.Position(i) {
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
	if h-t.Position(prev) <= t.Position(next)-h {
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
	if h-t.Position(prev) <= t.Position(next)-h {
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
		o := int32(t.rec[i] & t.mask)
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
		return Arc{First: t.Position(n-1) + 1, Last: math.MaxUint64, Owner: t.Owner(0)}
	case i == 0:
		return Arc{First: 0, Last: t.Position(0), Owner: t.Owner(0)}
	}
	return Arc{First: t.Position(i-1) + 1, Last: t.Position(i), Owner: t.Owner(i)}
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
