package ring

import (
	"math"
	"math/rand/v2"
	"testing"
)

// checkIndexed compares the answer the index entries give at h, where they give one, and
// Locate's, with the owner of the point the full search finds (Successor reads the records);
// it reports whether the entries answered.
func checkIndexed(t *testing.T, name string, tab *Table, h uint64) bool {
	t.Helper()
	k := h >> (tab.shift & 63)
	want := tab.Owner(tab.Successor(h))
	o, ok := tab.indexed(tab.idx[k], k, h)
	if ok && o != want {
		t.Fatalf("%s: the index entries of bucket %d answer %d at %#x, the records %d", name, k, o, h, want)
	}
	if got := tab.Locate(h); got != want {
		t.Fatalf("%s: Locate(%#x) = %d, the records %d", name, h, got, want)
	}
	return ok
}

// indexProbes returns positions where the index entries' answer changes or could go wrong:
// both ends of buckets, and around points: on them, next to them, and at both ends of the
// span of positions that share a point's high bits (the bits an entry keeps). It takes
// every bucket and point of small tables and a sample of large ones.
func indexProbes(r *rand.Rand, tab *Table) []uint64 {
	ps := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
	sample := 4096
	if raceEnabled {
		sample = 512
	}
	buckets := uint64(len(tab.idx) - 1)
	for s := range min(buckets, uint64(sample)) {
		k := s
		if buckets > uint64(sample) {
			k = r.Uint64N(buckets)
		}
		start := k << (tab.shift & 63)
		ps = append(ps, start, start-1, start+1, start|(1<<tab.shift-1))
	}
	for s := range min(tab.Len(), sample) {
		i := s
		if tab.Len() > sample {
			i = r.IntN(tab.Len())
		}
		p := tab.Position(i)
		high, top := p&^tab.mask, p|tab.mask
		ps = append(ps, p, p-1, p+1, high, high-1, top, top+1)
	}
	return ps
}

// Where the index entries answer a lookup they agree with the records, on random tables of
// every shape (ties with different ranks and owners, piles in one bucket, points at both
// ends, positions that share their high bits), at bucket ends, on and around points, and at
// a million random positions; and they answer most lookups of uniform points, which is what
// they are for: the share is about (1-e^-λ)/λ + λe^-λ/2 for λ points per bucket, 0.82 to
// 0.94.
func TestIndexCrossCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	random := 100_000 // per table: 11 million in all
	if testing.Short() || raceEnabled {
		random = 10_000
	}
	for _, c := range tableCases() {
		for _, n := range []int{1, 2, 3, 7, 100, 1000, 5000, 40000, 200_000} {
			if n > 5000 && (raceEnabled || c.name != "uniform" && c.name != "low" && c.name != "top32") {
				continue // a lookup just above a pile of ties scans it: O(n) each (see searchLow)
			}
			for _, owners := range []int{3, 1 << 14} { // few owner bits and many
				points := randomPoints(r, c, n, min(owners, n), 4)
				rf := newRef(points)
				tab, err := New(points)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range indexProbes(r, tab) {
					checkIndexed(t, c.name, tab, h)
					if got, want := tab.Locate(h), rf[rf.successor(h)].Owner; got != want {
						t.Fatalf("%s: Locate(%#x) = %d, want %d", c.name, h, got, want)
					}
				}
				answered := 0
				for range random {
					if checkIndexed(t, c.name, tab, r.Uint64()) {
						answered++
					}
				}
				if share := float64(answered) / float64(random); c.name == "uniform" && n >= 100 && share < 0.8 {
					t.Errorf("%d uniform points, %d owners: the index answers %.3f of random lookups, want at least 0.8", n, owners, share)
				}
			}
		}
	}
}

// FuzzIndex decodes points as FuzzTable does and compares the index entries' answers with
// the records' at h, around it, and at every probe of indexProbes.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uint64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 8, 0x40, 0x80, 0, 0, 0, 3, 0xc1}, uint64(math.MaxUint64))
	f.Add([]byte{0x80, 0, 0, 0, 3, 1, 0x80, 0, 0, 0, 2, 2}, uint64(1<<63))
	f.Fuzz(func(t *testing.T, data []byte, h uint64) {
		points := fuzzPoints(data, func(b byte) int32 { return int32(b) * 4099 % MaxPoints })
		if len(points) == 0 {
			return
		}
		rf := newRef(points)
		tab, err := New(points)
		if err != nil {
			t.Fatal(err)
		}
		ps := append(indexProbes(rand.New(rand.NewPCG(h, 1)), tab), h, h-1, h+1, h&^tab.mask, h|tab.mask)
		for _, p := range ps {
			checkIndexed(t, "fuzz", tab, p)
			if got, want := tab.Locate(p), rf[rf.successor(p)].Owner; got != want {
				t.Fatalf("Locate(%#x) = %d, want %d", p, got, want)
			}
		}
	})
}
