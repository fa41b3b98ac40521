package ring

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"
)

// ref is the obvious ring: the points sorted by (Pos, Rank, Owner), searched with sort.Search
// or a linear scan.
type ref []Point

func newRef(points []Point) ref {
	r := slices.Clone(points)
	slices.SortFunc(r, func(a, b Point) int {
		switch {
		case a.Pos != b.Pos:
			return cmpU64(a.Pos, b.Pos)
		case a.Rank != b.Rank:
			return cmpU64(uint64(a.Rank), uint64(b.Rank))
		}
		return int(a.Owner) - int(b.Owner)
	})
	return r
}

func cmpU64(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

func (r ref) successor(h uint64) int {
	i := sort.Search(len(r), func(i int) bool { return r[i].Pos >= h })
	if i == len(r) {
		return 0
	}
	return i
}

func (r ref) successorLinear(h uint64) int {
	for i, p := range r {
		if p.Pos >= h {
			return i
		}
	}
	return 0
}

// nearest picks, by brute force over all points, the point at the least clockwise distance
// from h (the first of its position) and the one at the least distance counter-clockwise
// from that point's position, and keeps the second when h is no nearer the first.
func (r ref) nearest(h uint64) int {
	next := 0
	for i, p := range r {
		if p.Pos-h < r[next].Pos-h {
			next = i
		}
	}
	prev := -1
	for i, p := range r {
		if p.Pos == r[next].Pos {
			continue
		}
		if prev < 0 || r[next].Pos-p.Pos < r[next].Pos-r[prev].Pos {
			prev = i
		}
	}
	if prev < 0 {
		return next
	}
	for prev > 0 && r[prev-1].Pos == r[prev].Pos {
		prev--
	}
	if h-r[prev].Pos <= r[next].Pos-h {
		return prev
	}
	return next
}

// nearestPoint compares the successor with the point just before it in the order of the
// points, by brute force over the distances.
func (r ref) nearestPoint(h uint64) int {
	next := r.successorLinear(h)
	prev := (next + len(r) - 1) % len(r)
	if h-r[prev].Pos <= r[next].Pos-h {
		return prev
	}
	return next
}

// walk lists the distinct owners clockwise from h's successor.
func (r ref) walk(h uint64) []int32 {
	var out []int32
	seen := map[int32]bool{}
	s := r.successor(h)
	for k := range r {
		o := r[(s+k)%len(r)].Owner
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// tableCase is a way to draw points: positions from a generator that makes ties, piles or
// edges, owners and ranks from small ranges so that ties meet different ranks and owners.
type tableCase struct {
	name string
	pos  func(r *rand.Rand) uint64
}

func tableCases() []tableCase {
	edges := []uint64{0, 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}
	return []tableCase{
		{"uniform", func(r *rand.Rand) uint64 { return r.Uint64() }},
		{"coarse", func(r *rand.Rand) uint64 { return r.Uint64() &^ (1<<58 - 1) }}, // 64 positions
		{"few", func(r *rand.Rand) uint64 { return uint64(r.IntN(3)) * 0x5555555555555555 }},
		{"one", func(*rand.Rand) uint64 { return 12345 }},
		{"low", func(r *rand.Rand) uint64 { return r.Uint64() >> 40 }}, // all in the first bucket
		{"edges", func(r *rand.Rand) uint64 { return edges[r.IntN(len(edges))] }},
		{"top32", func(r *rand.Rand) uint64 { return uint64(r.Uint32()>>20) << 32 }}, // 32-bit positions shifted up
	}
}

func randomPoints(r *rand.Rand, c tableCase, n, owners, ranks int) []Point {
	points := make([]Point, n)
	for i := range points {
		points[i] = Point{Pos: c.pos(r), Owner: int32(r.IntN(owners)), Rank: uint32(r.IntN(ranks))}
	}
	return points
}

func probes(r *rand.Rand, rf ref, random int) []uint64 {
	ps := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1, 1 << 63, 1<<63 - 1}
	for _, p := range rf {
		ps = append(ps, p.Pos-1, p.Pos, p.Pos+1)
	}
	for range random {
		ps = append(ps, r.Uint64())
	}
	return ps
}

// checkTable compares every lookup of t with the reference at the probes.
func checkTable(t *testing.T, name string, tab *Table, rf ref, ps []uint64, walks int) {
	t.Helper()
	if tab.Len() != len(rf) {
		t.Fatalf("%s: Len() = %d, want %d", name, tab.Len(), len(rf))
	}
	distinct, owners, maxOwner := 0, map[int32]bool{}, int32(-1)
	for i, p := range rf {
		if i == 0 || p.Pos != rf[i-1].Pos {
			distinct++
		}
		owners[p.Owner] = true
		maxOwner = max(maxOwner, p.Owner)
		if tab.Position(i) != p.Pos || tab.Owner(i) != p.Owner {
			t.Fatalf("%s: point %d = (%#x, %d), want (%#x, %d)", name, i, tab.Position(i), tab.Owner(i), p.Pos, p.Owner)
		}
	}
	if tab.Distinct() != distinct || tab.Owners() != len(owners) || tab.MaxOwner() != maxOwner {
		t.Fatalf("%s: Distinct, Owners, MaxOwner = %d, %d, %d, want %d, %d, %d", name,
			tab.Distinct(), tab.Owners(), tab.MaxOwner(), distinct, len(owners), maxOwner)
	}
	batch := make([]int32, len(ps)+1)
	batch[len(ps)] = -7
	tab.LocateBatch(ps, batch)
	if batch[len(ps)] != -7 {
		t.Fatalf("%s: LocateBatch wrote past len(hs)", name)
	}
	var got []int32
	for k, h := range ps {
		if want := rf[rf.successor(h)].Owner; batch[k] != want {
			t.Fatalf("%s: LocateBatch at %#x (%d of %d) = %d, want %d", name, h, k, len(ps), batch[k], want)
		}
		want := rf.successor(h)
		if got := tab.Successor(h); got != want {
			t.Fatalf("%s: Successor(%#x) = %d, want %d", name, h, got, want)
		}
		if got := tab.Locate(h); got != rf[want].Owner {
			t.Fatalf("%s: Locate(%#x) = %d, want %d", name, h, got, rf[want].Owner)
		}
		if got, want := tab.Nearest(h), rf.nearest(h); got != want {
			t.Fatalf("%s: Nearest(%#x) = %d, want %d", name, h, got, want)
		}
		if got, want := tab.NearestPoint(h), rf.nearestPoint(h); got != want {
			t.Fatalf("%s: NearestPoint(%#x) = %d, want %d", name, h, got, want)
		}
		if a := tab.ArcAt(h); a.First > h || a.Last < h || a.Owner != rf[want].Owner ||
			tab.Locate(a.First) != a.Owner || tab.Locate(a.Last) != a.Owner || a.Last != rf[want].Pos && a.Last != math.MaxUint64 {
			t.Fatalf("%s: ArcAt(%#x) = %+v, owner of h %d", name, h, a, rf[want].Owner)
		}
		if k < walks {
			got = got[:0]
			tab.Walk(tab.Successor(h), func(o int32) bool { got = append(got, o); return true })
			if want := rf.walk(h); !slices.Equal(got, want) {
				t.Fatalf("%s: Walk(%#x) = %v, want %v", name, h, got, want)
			}
		}
	}
}

// The index and every lookup answer what sort.Search and brute force answer, on random tables
// of every size class, with heavy ties, piles in one bucket and points at both ends.
func TestTableCrossCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 2, 3, 5, 17, 100, 1000, 20000, branchlessMax + 1}
	if !testing.Short() && !raceEnabled {
		sizes = append(sizes, 1<<18)
	}
	for _, c := range tableCases() {
		for _, n := range sizes {
			owners := min(n, 50)
			points := randomPoints(r, c, n, owners, 4)
			rf := newRef(points)
			tab, err := New(points)
			if err != nil {
				t.Fatal(err)
			}
			ps := probes(r, rf, 3000)
			if n > 1000 { // the brute-force nearest is O(n): fewer probes
				ps = ps[len(ps)-300_000_000/(n*len(tableCases())*10):]
			}
			for _, h := range ps[:min(len(ps), 500)] {
				if rf.successorLinear(h) != rf.successor(h) {
					t.Fatalf("reference disagrees with itself at %#x", h)
				}
			}
			checkTable(t, c.name, tab, rf, ps, max(10, 200_000/n)) // each walk is O(n) here
			tab.branchless = !tab.branchless                       // the other search, on the same table
			checkTable(t, c.name+" other search", tab, rf, ps[:min(len(ps), 1000)], 0)
		}
	}
}

// A table of MaxPoints points is accepted and searched like any other; one more is refused.
func TestTableLimits(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds a table of 4M points")
	}
	r := rand.New(rand.NewPCG(3, 4))
	points := randomPoints(r, tableCases()[0], MaxPoints, MaxPoints, 1)
	points[0].Owner = MaxPoints - 1
	tab, err := New(slices.Clone(points))
	if err != nil {
		t.Fatal(err)
	}
	rf := newRef(points)
	for range 20000 {
		h := r.Uint64()
		if got, want := tab.Locate(h), rf[rf.successor(h)].Owner; got != want {
			t.Fatalf("Locate(%#x) = %d, want %d", h, got, want)
		}
	}
	if _, err := New(append(points, Point{})); !errors.Is(err, ErrTooMany) {
		t.Fatalf("New(%d points) = %v, want ErrTooMany", MaxPoints+1, err)
	}
}

func TestNewErrors(t *testing.T) {
	for _, c := range []struct {
		points []Point
		want   error
	}{
		{nil, ErrNoPoints},
		{[]Point{{Owner: -1}}, ErrOwner},
		{[]Point{{Pos: 1}, {Owner: MaxPoints}}, ErrOwner},
	} {
		if _, err := New(c.points); !errors.Is(err, c.want) {
			t.Errorf("New(%v) = %v, want %v", c.points, err, c.want)
		}
	}
}

// The tie rule: of the points at one position the lowest rank wins, then the lowest owner;
// the hidden ones follow it in that order, and a walk meets them there.
func TestTies(t *testing.T) {
	tab, err := New([]Point{
		{Pos: 10, Owner: 3, Rank: 2}, {Pos: 10, Owner: 1, Rank: 7}, {Pos: 10, Owner: 2, Rank: 2},
		{Pos: 20, Owner: 4, Rank: 0}, {Pos: 20, Owner: 2, Rank: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		h    uint64
		want int32
	}{{0, 2}, {10, 2}, {11, 2}, {20, 2}, {21, 2}, {math.MaxUint64, 2}} {
		if got := tab.Locate(c.h); got != c.want {
			t.Errorf("Locate(%d) = %d, want %d", c.h, got, c.want)
		}
	}
	var got []int32
	tab.Walk(tab.Successor(11), func(o int32) bool { got = append(got, o); return true })
	if want := []int32{2, 4, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("Walk(11) = %v, want %v", got, want)
	}
	if got, want := tab.Distinct(), 2; got != want {
		t.Errorf("Distinct() = %d, want %d", got, want)
	}
	// Nearest: 14 is nearer 10 than 20; 15 is equally far and goes to the predecessor.
	for h, want := range map[uint64]int{14: 0, 15: 0, 16: 3, 20: 3, 10: 0, 0: 0, math.MaxUint64: 0} {
		if got := tab.Nearest(h); got != want {
			t.Errorf("Nearest(%d) = %d, want %d", h, got, want)
		}
	}
	// NearestPoint: from above, position 10 is met at its last point (index 2), position 20
	// at its last point (index 4) from 21 on; around the top of the circle 10 is far nearer.
	for h, want := range map[uint64]int{14: 2, 15: 2, 16: 3, 20: 3, 10: 0, 21: 4, 0: 0, 5: 0, math.MaxUint64: 0} {
		if got := tab.NearestPoint(h); got != want {
			t.Errorf("NearestPoint(%d) = %d, want %d", h, got, want)
		}
	}
}

// Walk stops when yield says so and yields every owner once, also past the 16 it keeps in a
// fixed array.
func TestWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	points := randomPoints(r, tableCases()[0], 5000, 300, 1)
	tab, err := New(slices.Clone(points))
	if err != nil {
		t.Fatal(err)
	}
	rf := newRef(points)
	for range 50 {
		h := r.Uint64()
		want := rf.walk(h)
		for _, n := range []int{1, 3, 16, 17, 100, len(want)} {
			var got []int32
			tab.Walk(tab.Successor(h), func(o int32) bool { got = append(got, o); return len(got) < n })
			if !slices.Equal(got, want[:n]) {
				t.Fatalf("Walk(%#x) first %d = %v, want %v", h, n, got, want[:n])
			}
		}
	}
}

// Arcs partition the circle in order, each arc's owner is the owner of every position in it,
// and walking two tables' arcs side by side finds exactly the positions whose owner differs.
func TestArcs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range tableCases() {
		points := randomPoints(r, c, 300, 7, 3)
		tab, err := New(slices.Clone(points))
		if err != nil {
			t.Fatal(err)
		}
		next, count := uint64(0), 0
		for a := range tab.Arcs() {
			if a.First != next || a.Last < a.First {
				t.Fatalf("%s: arc %+v after %#x", c.name, a, next)
			}
			if tab.Locate(a.First) != a.Owner || tab.Locate(a.Last) != a.Owner {
				t.Fatalf("%s: arc %+v owner", c.name, a)
			}
			count++
			next = a.Last + 1
		}
		if next != 0 {
			t.Fatalf("%s: arcs end at %#x, not math.MaxUint64", c.name, next-1)
		}
		want := tab.Distinct()
		if tab.Position(tab.Len()-1) != math.MaxUint64 {
			want++
		}
		if count != want {
			t.Fatalf("%s: %d arcs, want %d", c.name, count, want)
		}

		// A second table with some points removed: the arc walk's changed ranges hold
		// exactly the probes whose owner changed.
		other, err := New(slices.Clone(points[:250]))
		if err != nil {
			t.Fatal(err)
		}
		var changed []Arc
		for h := uint64(0); ; {
			a, b := tab.ArcAt(h), other.ArcAt(h)
			last := min(a.Last, b.Last)
			if a.Owner != b.Owner {
				changed = append(changed, Arc{First: h, Last: last, Owner: b.Owner})
			}
			if last == math.MaxUint64 {
				break
			}
			h = last + 1
		}
		for _, h := range probes(r, newRef(points), 2000) {
			in := slices.ContainsFunc(changed, func(a Arc) bool { return a.First <= h && h <= a.Last })
			if in != (tab.Locate(h) != other.Locate(h)) {
				t.Fatalf("%s: position %#x: in a changed arc %v, owners %d and %d", c.name, h, in, tab.Locate(h), other.Locate(h))
			}
		}
	}
}

func TestAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	tab, err := New(randomPoints(r, tableCases()[0], 16000, 100, 1))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	hs, owners := make([]uint64, 100), make([]int32, 100)
	for i := range hs {
		hs[i] = r.Uint64()
	}
	for name, f := range map[string]func(){
		"Locate":      func() { got += int(tab.Locate(r.Uint64())) },
		"Successor":   func() { got += tab.Successor(r.Uint64()) },
		"Nearest":     func() { got += tab.Nearest(r.Uint64()) },
		"LocateBatch": func() { tab.LocateBatch(hs, owners) },
		"Walk(3)": func() {
			n := 0
			tab.Walk(tab.Successor(r.Uint64()), func(o int32) bool { got += int(o); n++; return n < 3 })
		},
		"Walk(16)": func() {
			n := 0
			tab.Walk(tab.Successor(r.Uint64()), func(o int32) bool { got += int(o); n++; return n < walkSmall })
		},
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocs, want 0", name, a)
		}
	}
}

// FuzzTable decodes points from the input (positions from a few bytes so that they tie and
// pile up, owners and ranks from small ranges) and compares every lookup with the reference.
func FuzzTable(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uint64(0))
	f.Add([]byte{0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 1, 1, 1, 1}, uint64(math.MaxUint64))
	f.Add([]byte{0x80, 0, 0, 0, 3, 1}, uint64(1<<63))
	f.Fuzz(func(t *testing.T, data []byte, h uint64) {
		points := fuzzPoints(data, func(b byte) int32 { return int32(b % 9) })
		if len(points) == 0 {
			return
		}
		rf := newRef(points)
		tab, err := New(points)
		if err != nil {
			t.Fatal(err)
		}
		ps := []uint64{h, h + 1, h - 1, ^h, 0, math.MaxUint64}
		for _, p := range rf[:min(len(rf), 20)] {
			ps = append(ps, p.Pos, p.Pos-1, p.Pos+1)
		}
		checkTable(t, "fuzz", tab, rf, ps, len(ps))
		tab.branchless = !tab.branchless
		checkTable(t, "fuzz, other search", tab, rf, ps, 0)
	})
}

// BenchmarkLocate looks up positions at 10, 1000 and 10^4 nodes of 160 points: keys=pool
// cycles through 16384 positions, as the peers benchmark does (their index entries and
// records stay in cache from one round to the next), keys=fresh draws a new position every
// time (a Weyl sequence: no two the same, spread over every bucket), so at 10^4 nodes each
// lookup reads from memory.
func BenchmarkLocate(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1600, 160000, 1600000} {
		tab, err := New(randomPoints(r, tableCases()[0], n, n/160, 1))
		if err != nil {
			b.Fatal(err)
		}
		hs := make([]uint64, 1<<14)
		for i := range hs {
			hs[i] = r.Uint64()
		}
		b.Run("keys=pool/points="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			s := int32(0)
			for i := 0; b.Loop(); i++ {
				s += tab.Locate(hs[i&(len(hs)-1)])
			}
			sink = s
			b.ReportMetric(float64(tab.Bytes())/float64(tab.Len()), "B/point")
		})
		b.Run("keys=fresh/points="+strconv.Itoa(n), func(b *testing.B) {
			s, h := int32(0), r.Uint64()
			for b.Loop() {
				h += 0x9e3779b97f4a7c15
				s += tab.Locate(h)
			}
			sink = s
		})
	}
}

var sink int32

// BenchmarkLocateBatch looks up the 16384 positions of BenchmarkLocate's keys=pool, Batch at
// a time, per position: at 1000 nodes (the batch target's) and 10^4 nodes of 160 points.
func BenchmarkLocateBatch(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{160000, 1600000} {
		tab, err := New(randomPoints(r, tableCases()[0], n, n/160, 1))
		if err != nil {
			b.Fatal(err)
		}
		hs, owners := make([]uint64, 1<<14), make([]int32, Batch)
		for i := range hs {
			hs[i] = r.Uint64()
		}
		b.Run("points="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i += Batch {
				i &= len(hs) - 1
				tab.LocateBatch(hs[i:i+Batch], owners)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*Batch), "ns/position")
		})
	}
}

// Sort orders points as Compare does, whatever their order: random, sorted by position,
// reversed, piled on few positions, or 32-bit positions shifted up.
func TestSort(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, c := range tableCases() {
		for _, n := range []int{0, 1, 100, 511, 512, 5000, 70000} {
			points := randomPoints(r, c, n, 40, 5)
			want := slices.Clone(points)
			slices.SortFunc(want, Compare)
			byPos := slices.Clone(want)
			for k := 0; k+1 < len(byPos); k += 2 { // unsort ties only
				if byPos[k].Pos == byPos[k+1].Pos {
					byPos[k], byPos[k+1] = byPos[k+1], byPos[k]
				}
			}
			reversed := slices.Clone(want)
			slices.Reverse(reversed)
			for name, in := range map[string][]Point{"random": points, "ties unsorted": byPos, "reversed": reversed} {
				Sort(in)
				if !slices.Equal(in, want) {
					t.Fatalf("%s, %d points, %s: Sort differs from sorting with Compare", c.name, n, name)
				}
			}
		}
	}
}

// BenchmarkSort compares Sort with the standard library's sort on random points.
func BenchmarkSort(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1600, 1600000} {
		points := randomPoints(r, tableCases()[0], n, 10000, 1)
		work := make([]Point, n)
		for name, sort := range map[string]func([]Point){
			"engine": Sort,
			"slices": func(p []Point) { slices.SortFunc(p, Compare) },
		} {
			b.Run("sort="+name+"/points="+strconv.Itoa(n), func(b *testing.B) {
				for b.Loop() {
					copy(work, points)
					sort(work)
				}
			})
		}
	}
}

// fuzzPoints decodes up to 2000 points from data, 6 bytes each: 4 bytes of position spread
// over the ring, piled in its top bits, kept low or shifted up (by the top bits of byte 5),
// an owner made by owner from byte 4, and a rank from byte 5.
func fuzzPoints(data []byte, owner func(byte) int32) []Point {
	var points []Point
	for len(data) >= 6 && len(points) < 2000 {
		raw := binary.BigEndian.Uint32(data)
		var pos uint64
		switch data[5] >> 6 {
		case 0:
			pos = uint64(raw) * 0x9e3779b97f4a7c15
		case 1:
			pos = uint64(raw>>28) << 60
		case 2:
			pos = uint64(raw)
		default:
			pos = uint64(raw) << 32
		}
		points = append(points, Point{Pos: pos, Owner: owner(data[4]), Rank: uint32(data[5] % 3)})
		data = data[6:]
	}
	return points
}
