package shard

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/spaolacci/murmur3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/internal/ring"
)

func TestJedisRingContract(t *testing.T) {
	checkContract(t, contract{
		name:          "jedis ring",
		newSharder:    func(n int) (Sharder, error) { return NewJedisRing(n) },
		sizes:         []int{1, 2, 3, 10, 100},
		tooMany:       maxRingPoints/jedisVnodes + 1,
		resizeIsFresh: true,
		growOnlyToNew: true, // TestRingMovement bounds how many move
		minimalShrink: true,
		batch:         true,
	})
}

func TestMurmurRingContract(t *testing.T) {
	checkContract(t, contract{
		name:          "murmur ring",
		newSharder:    func(n int) (Sharder, error) { return NewMurmurRing(n, 160) },
		sizes:         []int{1, 2, 5, 10, 100},
		tooMany:       maxRingPoints/160 + 1,
		resizeIsFresh: true,
		growOnlyToNew: true, // TestRingMovement bounds how many move
		minimalShrink: true,
		batch:         true,
	})
}

func TestRingContract(t *testing.T) {
	checkContract(t, contract{
		name:          "ring",
		newSharder:    func(n int) (Sharder, error) { return NewRing(n, RingOptions{Vnodes: 50}) },
		sizes:         []int{1, 4, 10, 64},
		tooMany:       maxRingPoints/50 + 1,
		resizeIsFresh: true,
		growOnlyToNew: true, // TestRingMovement bounds how many move
		minimalShrink: true,
		batch:         true,
	})
}

// The contract's minimalGrow expects the new shard to take 1/(n+1) of the keys give or take
// binomial noise, but a ring's new shard takes the share of the circle its points cover,
// which itself varies by about 1/sqrt(vnodes). So this test checks what a ring promises:
// keys move only to the new shard, their number matches the new shard's exact arc share
// within binomial noise, and that share is 1/(n+1) within the arc-length spread.
func TestRingMovement(t *testing.T) {
	keys := append(randomKeys(1, 20000, 16), adversarialKeys()...)
	rings := []struct {
		name   string
		vnodes int
		new    func(n int) (*Ring, error)
	}{
		{"jedis ring", 160, NewJedisRing},
		{"murmur ring", 160, func(n int) (*Ring, error) { return NewMurmurRing(n, 160) }},
		{"ring", 50, func(n int) (*Ring, error) { return NewRing(n, RingOptions{Vnodes: 50}) }},
	}
	for _, c := range rings {
		for _, n := range []int{1, 2, 3, 9, 10, 50} {
			r, err := c.new(n)
			require.NoError(t, err)
			before := placement(r, keys)
			require.NoError(t, r.Resize(n+1))
			moved := countMoves(t, c.name, n, keys, before, placement(r, keys), true)
			share := arcShare(r.table.Load(), n)
			// Binomial noise of the keys around the exact share; six standard deviations.
			mean := share * float64(len(keys))
			require.InDeltaf(t, mean, float64(moved), 6*math.Sqrt(mean*(1-share))+1,
				"%s: %d -> %d moved %d keys, arc share %.4f", c.name, n, n+1, moved, share)
			// One shard's arcs among (n+1)*vnodes exponential-like gaps: share ~ Beta(v, n*v).
			p := 1 / float64(n+1)
			require.InDeltaf(t, p, share, 6*math.Sqrt(p*(1-p)/float64((n+1)*c.vnodes)),
				"%s: %d -> %d new shard covers %.4f of the ring", c.name, n, n+1, share)
		}
	}
}

// arcShare returns the fraction of the circle whose keys go to shard s: the arcs that end at
// s's points.
func arcShare(t *ringTable, s int) float64 {
	points := t.Len()
	total := 0.0
	for i := range points {
		if int(t.Owner(i)) != s {
			continue
		}
		if i == 0 { // the arc that wraps around past the largest point
			total += float64(t.Position(0)) + math.Exp2(64) - float64(t.Position(points-1))
		} else {
			total += float64(t.Position(i) - t.Position(i-1))
		}
	}
	return total / math.Exp2(64)
}

// readGolden returns the fields after word on a golden file's header line, and its other
// lines, each a decoded key and the fields that follow it.
func readGolden(t *testing.T, name, word string) (header []string, keys []string, rows [][]string) {
	t.Helper()
	for _, f := range readVectors(t, name) {
		if f[0] == word {
			header = f[1:]
			continue
		}
		keys = append(keys, hexKey(t, f[0]))
		rows = append(rows, f[1:])
	}
	require.NotEmpty(t, header)
	return header, keys, rows
}

// The vectors come from a Java program that follows Jedis's Sharded rules (testdata header).
func TestJedisRingGolden(t *testing.T) {
	header, keys, rows := readGolden(t, "testdata/jedis_ring.txt", "shards")
	require.Greater(t, len(keys), 3000)
	for c, h := range header {
		n := atoi(t, h)
		r, err := NewJedisRing(n)
		require.NoError(t, err)
		for i, k := range keys {
			require.Equalf(t, atoi(t, rows[i][c]), r.Locate(k), "NewJedisRing(%d).Locate(%q)", n, k)
		}
	}
}

// At 1000 shards two pairs of Jedis points collide; the later shard owns the position, and a
// shrink hands it back to the earlier one, exactly as a fresh ring does.
func TestJedisRingCollisions(t *testing.T) {
	r, err := NewJedisRing(1000)
	require.NoError(t, err)
	require.Equal(t, 1000*160-2, r.Points())
	for _, pair := range [][2]string{{"SHARD-216-NODE-75", "SHARD-418-NODE-30"}, {"SHARD-791-NODE-66", "SHARD-868-NODE-30"}} {
		require.Equal(t, keyhash.JedisMD5(pair[0]), keyhash.JedisMD5(pair[1]))
		require.Equalf(t, shardOfJedisName(t, pair[1]), r.Locate(pair[0]), "Locate(%q)", pair[0])
	}
	header, keys, rows := readGolden(t, "testdata/jedis_ring.txt", "shards")
	for c := len(header) - 1; c >= 0; c-- {
		require.NoError(t, r.Resize(atoi(t, header[c])))
		for i, k := range keys {
			require.Equalf(t, atoi(t, rows[i][c]), r.Locate(k), "Resize(%s).Locate(%q)", header[c], k)
		}
	}
}

func shardOfJedisName(t *testing.T, name string) int {
	var i, j int
	_, err := fmt.Sscanf(name, "SHARD-%d-NODE-%d", &i, &j)
	require.NoError(t, err)
	return i
}

// The tokens come from the Java hash3_x64_128 of the consistent-hash homework [002], the rings
// from a Java TreeMap.
func TestMurmurRingGolden(t *testing.T) {
	header, keys, rows := readGolden(t, "testdata/murmur_ring.txt", "rings")
	require.Greater(t, len(keys), 2000)
	highTail := 0
	for i, k := range keys {
		h1, err := strconv.ParseInt(rows[i][0], 10, 64)
		require.NoError(t, err)
		token, err := strconv.ParseInt(rows[i][1], 10, 64)
		require.NoError(t, err)
		got, _ := keyhash.Cassandra128(k)
		require.Equalf(t, h1, int64(got), "Cassandra128(%q) h1", k)
		require.Equalf(t, token, MurmurToken(k), "MurmurToken(%q)", k)
		// Reference MurmurHash3 agrees unless a tail byte is >= 0x80.
		ref, _ := murmur3.Sum128([]byte(k))
		if tailIsASCII(k) {
			require.Equalf(t, h1, int64(ref), "reference murmur3(%q)", k)
		} else if int64(ref) != h1 {
			highTail++
		}
	}
	// The vectors must exercise the signed tail, where Cassandra and the reference differ.
	require.Greater(t, highTail, 1000)

	for c, h := range header {
		var n, v int
		_, err := fmt.Sscanf(h, "%dx%d", &n, &v)
		require.NoError(t, err)
		r, err := NewMurmurRing(n, v)
		require.NoError(t, err)
		for i, k := range keys {
			require.Equalf(t, atoi(t, rows[i][2+c]), r.Locate(k), "NewMurmurRing(%d, %d).Locate(%q)", n, v, k)
		}
	}
}

func tailIsASCII(k string) bool {
	for i := len(k) - len(k)%16; i < len(k); i++ {
		if k[i] >= 0x80 {
			return false
		}
	}
	return true
}

func TestMurmurTokenEdges(t *testing.T) {
	assert.Equal(t, int64(math.MinInt64), MurmurToken(""), "Cassandra's empty key has the minimum token")
	assert.Equal(t, slowMurmurToken(nil), MurmurToken(""))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = MurmurToken("user:1000") }))
	// A key with token math.MinInt64 sorts after every other token, not before.
	r, err := NewMurmurRing(3, 16)
	require.NoError(t, err)
	tab := r.table.Load()
	assert.Equal(t, tab.Owner(0), tab.Locate(murmurPosition("")))
	assert.Equal(t, tab.Owner(0), tab.Locate(tab.Position(tab.Len()-1)+1), "past the largest token wraps")
}

// slowMurmurToken is Cassandra's token computed the obvious way: whole 16-byte blocks read
// byte by byte little-endian, tail bytes sign-extended as Java's (long) cast of a byte.
func slowMurmurToken(b []byte) int64 {
	if len(b) == 0 {
		return math.MinInt64
	}
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	rotl := func(v uint64, n uint) uint64 { return v<<n | v>>(64-n) }
	fmix := func(k uint64) uint64 {
		k ^= k >> 33
		k *= 0xff51afd7ed558ccd
		k ^= k >> 33
		k *= 0xc4ceb9fe1a85ec53
		return k ^ k>>33
	}
	var h1, h2 uint64
	nblocks := len(b) / 16
	word := func(i int) (w uint64) {
		for j := 7; j >= 0; j-- {
			w = w<<8 | uint64(b[i+j])
		}
		return w
	}
	for i := 0; i < nblocks; i++ {
		k1, k2 := word(16*i), word(16*i+8)
		h1 ^= rotl(k1*c1, 31) * c2
		h1 = (rotl(h1, 27)+h2)*5 + 0x52dce729
		h2 ^= rotl(k2*c2, 33) * c1
		h2 = (rotl(h2, 31)+h1)*5 + 0x38495ab5
	}
	tail := b[16*nblocks:]
	var k1, k2 uint64
	for i := len(tail) - 1; i >= 0; i-- {
		v := uint64(int64(int8(tail[i]))) << (8 * uint(i%8))
		if i >= 8 {
			k2 ^= v
		} else {
			k1 ^= v
		}
	}
	if len(tail) > 8 {
		h2 ^= rotl(k2*c2, 33) * c1
	}
	if len(tail) > 0 {
		h1 ^= rotl(k1*c1, 31) * c2
	}
	h1 ^= uint64(len(b))
	h2 ^= uint64(len(b))
	h1 += h2
	h2 += h1
	h1, h2 = fmix(h1), fmix(h2)
	h1 += h2
	if int64(h1) == math.MinInt64 {
		return math.MaxInt64
	}
	return int64(h1)
}

func FuzzMurmurToken(f *testing.F) {
	for _, k := range adversarialKeys() {
		f.Add([]byte(k))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := MurmurToken(string(b))
		if want := slowMurmurToken(b); got != want {
			t.Fatalf("MurmurToken(%x) = %d, want %d", b, got, want)
		}
		if len(b) > 0 && tailIsASCII(string(b)) {
			if ref, _ := murmur3.Sum128(b); int64(ref) != got && int64(ref) != math.MinInt64 {
				t.Fatalf("MurmurToken(%x) = %d, reference murmur3 h1 %d", b, got, int64(ref))
			}
		}
	})
}

// refRing is the obvious ring: every point of every shard in a map, the last put (the
// highest shard) winning a position, and sort.Search or a linear scan for the first point
// >= h.
type refRing struct {
	pos   []uint64
	owner []int
}

func newRefRing(n, vnodes int, hash func(string) uint64, name func(i, j int) string) refRing {
	owner := map[uint64]int{}
	for i := range n {
		for j := range vnodes {
			owner[hash(name(i, j))] = i // a later put replaces an equal earlier one
		}
	}
	var r refRing
	for p := range owner {
		r.pos = append(r.pos, p)
	}
	slices.Sort(r.pos)
	for _, p := range r.pos {
		r.owner = append(r.owner, owner[p])
	}
	return r
}

func (r refRing) locate(h uint64) int {
	i := sort.Search(len(r.pos), func(i int) bool { return r.pos[i] >= h })
	if i == len(r.pos) {
		return r.owner[0]
	}
	return r.owner[i]
}

func (r refRing) locateLinear(h uint64) int {
	for i, p := range r.pos {
		if p >= h {
			return r.owner[i]
		}
	}
	return r.owner[0]
}

// coarseHash keeps 10 bits of XXH64, so points collide often and pile into few buckets: it
// drives the tie rule and the binary-search path of the index.
func coarseHash(s string) uint64 { return keyhash.XXH64(s) &^ (1<<54 - 1) }

// lowHash leaves the top bits zero, so every point falls into the first bucket.
func lowHash(s string) uint64 { return keyhash.XXH64(s) >> 40 }

type ringCase struct {
	name   string
	n, v   int
	hash   func(string) uint64
	vname  func(i, j int) string
	newRng func() (*Ring, error)
}

func ringCases() []ringCase {
	jedisName := func(i, j int) string { return "SHARD-" + strconv.Itoa(i) + "-NODE-" + strconv.Itoa(j) }
	var cs []ringCase
	for _, n := range []int{1, 2, 7, 100} {
		cs = append(cs, ringCase{"jedis", n, 160, jedisPosition, jedisName, func() (*Ring, error) { return NewJedisRing(n) }})
		cs = append(cs, ringCase{"murmur", n, 16, murmurPosition, defaultVnodeName, func() (*Ring, error) { return NewMurmurRing(n, 16) }})
	}
	for _, c := range []struct {
		name string
		hash func(string) uint64
	}{{"coarse", coarseHash}, {"low", lowHash}, {"xxh64", keyhash.XXH64}} {
		for _, n := range []int{1, 5, 30} {
			cs = append(cs, ringCase{c.name, n, 40, c.hash, defaultVnodeName, func() (*Ring, error) {
				return NewRing(n, RingOptions{Hash: c.hash, Vnodes: 40})
			}})
		}
	}
	return cs
}

// The index must answer exactly what the linear scan answers: at random positions, at every
// point and one below and above it, and at both ends of the ring.
func TestRingIndexCrossCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range ringCases() {
		ring, err := c.newRng()
		require.NoError(t, err)
		ref := newRefRing(c.n, c.v, c.hash, c.vname)
		tab := ring.table.Load()
		require.Equalf(t, len(ref.pos), ring.Points(), "%s(%d).Points()", c.name, c.n)
		probes := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1, 1 << 63, 1<<63 - 1}
		for _, p := range ref.pos {
			probes = append(probes, p-1, p, p+1)
		}
		for range 5000 {
			probes = append(probes, r.Uint64())
		}
		for i, h := range probes {
			want := ref.locate(h)
			if i < 2000 { // the linear scan checks the reference itself
				require.Equalf(t, ref.locateLinear(h), want, "%s(%d): reference at %#x", c.name, c.n, h)
			}
			require.Equalf(t, want, int(tab.Locate(h)), "%s(%d).locate(%#x)", c.name, c.n, h)
		}
		for _, k := range append(randomKeys(7, 2000, 10), adversarialKeys()...) {
			require.Equalf(t, ref.locate(c.hash(k)), ring.Locate(k), "%s(%d).Locate(%q)", c.name, c.n, k)
		}
	}
}

// Growing adds shards' points in shard order and shrinking removes them, so any path of
// resizes ends where a fresh ring starts, also when points collide.
func TestRingResizePath(t *testing.T) {
	keys := randomKeys(8, 3000, 12)
	for _, c := range ringCases() {
		if c.name == "jedis" || c.name == "murmur" {
			continue
		}
		ring, err := NewRing(1, RingOptions{Hash: c.hash, Vnodes: 40})
		require.NoError(t, err)
		for _, n := range []int{3, 30, 2, 17, 1, 40, c.n} {
			require.NoError(t, ring.Resize(n))
			ref := newRefRing(n, 40, c.hash, defaultVnodeName)
			for _, k := range keys {
				require.Equalf(t, ref.locate(c.hash(k)), ring.Locate(k), "%s: Resize(%d).Locate(%q)", c.name, n, k)
			}
		}
	}
}

func TestRingOptionsZero(t *testing.T) {
	r, err := NewRing(3, RingOptions{})
	require.NoError(t, err)
	require.Equal(t, 3*defaultVnodes, r.Points())
	ref := newRefRing(3, defaultVnodes, keyhash.XXH64, defaultVnodeName)
	for _, k := range randomKeys(9, 1000, 8) {
		require.Equal(t, ref.locate(keyhash.XXH64(k)), r.Locate(k))
	}
	// A custom name is hashed as given.
	r, err = NewRing(2, RingOptions{Vnodes: 1, Name: func(i, j int) string { return []string{"a", "b"}[i] }})
	require.NoError(t, err)
	require.Equal(t, newRefRing(2, 1, keyhash.XXH64, func(i, j int) string { return []string{"a", "b"}[i] }).locate(keyhash.XXH64("k")), r.Locate("k"))
}

func TestRingBadInput(t *testing.T) {
	for _, v := range []int{0, -1, math.MinInt, maxRingPoints + 1, math.MaxInt} {
		_, err := NewMurmurRing(3, v)
		require.ErrorIsf(t, err, ErrVnodes, "NewMurmurRing(3, %d)", v)
		require.Containsf(t, err.Error(), "shard: murmur ring: "+strconv.Itoa(v)+" vnodes: allowed range is [1, 4194304]", "NewMurmurRing(3, %d)", v)
		if v != 0 {
			_, err = NewRing(3, RingOptions{Vnodes: v})
			require.ErrorIsf(t, err, ErrVnodes, "NewRing(3, Vnodes: %d)", v)
		}
	}
	_, err := NewMurmurRing(maxRingPoints/16+1, 16)
	require.ErrorIs(t, err, ErrShardCount)
	require.EqualError(t, err, "shard: murmur ring: 262145 shards: allowed range is [1, 262144]: shard count out of range")
	_, err = NewJedisRing(26215)
	require.EqualError(t, err, "shard: jedis ring: 26215 shards: allowed range is [1, 26214]: shard count out of range")
	r, err := NewMurmurRing(1, 16)
	require.NoError(t, err)
	require.ErrorIs(t, r.Resize(maxRingPoints/16+1), ErrShardCount)
	require.Equal(t, 1, r.Shards())
}

func TestRingRegress(t *testing.T) {
	var b strings.Builder
	keys := append(randomKeys(10, 20, 12), adversarialKeys()[:12]...)
	for _, n := range []int{1, 3, 10, 1000} {
		rings := map[string]func() (*Ring, error){
			"ring":      func() (*Ring, error) { return NewRing(n, RingOptions{}) },
			"murmur256": func() (*Ring, error) { return NewMurmurRing(n, 256) },
		}
		for _, name := range []string{"ring", "murmur256"} {
			r, err := rings[name]()
			require.NoError(t, err)
			for _, k := range keys {
				fmt.Fprintf(&b, "%s %d %q %d\n", name, n, k, r.Locate(k))
			}
		}
	}
	checkRegress(t, "regress/ring.txt", b.String())
}

func FuzzRingLocate(f *testing.F) {
	f.Add("user:1000", uint8(3), uint8(16), uint8(0))
	f.Add("", uint8(1), uint8(1), uint8(1))
	f.Add("\xff\xfe", uint8(30), uint8(200), uint8(2))
	hashes := []func(string) uint64{keyhash.XXH64, coarseHash, lowHash, jedisPosition, murmurPosition}
	f.Fuzz(func(t *testing.T, key string, n, v, hash uint8) {
		shards, vnodes := int(n%40)+1, int(v%64)+1
		hf := hashes[int(hash)%len(hashes)]
		r, err := NewRing(shards, RingOptions{Hash: hf, Vnodes: vnodes})
		if err != nil {
			t.Fatal(err)
		}
		ref := newRefRing(shards, vnodes, hf, defaultVnodeName)
		if got, want := r.Locate(key), ref.locateLinear(hf(key)); got != want {
			t.Fatalf("NewRing(%d, %d vnodes, hash %d).Locate(%q) = %d, want %d", shards, vnodes, hash, key, got, want)
		}
		h := hf(key)
		tab := r.table.Load()
		for _, p := range []uint64{h, h + 1, h - 1, ^h} {
			if got, want := int(tab.Locate(p)), ref.locateLinear(p); got != want {
				t.Fatalf("locate(%#x) = %d, want %d", p, got, want)
			}
		}
	})
}

// benchRing builds the rings the benchmarks compare.
func benchRings(b *testing.B) []struct {
	name string
	r    *Ring
} {
	var out []struct {
		name string
		r    *Ring
	}
	for _, n := range []int{10, 100, 1000} {
		m, err := NewMurmurRing(n, 160)
		require.NoError(b, err)
		j, err := NewJedisRing(n)
		require.NoError(b, err)
		out = append(out, struct {
			name string
			r    *Ring
		}{fmt.Sprintf("ring=murmur/shards=%d", n), m}, struct {
			name string
			r    *Ring
		}{fmt.Sprintf("ring=jedis/shards=%d", n), j})
	}
	return out
}

var ringSink int

// BenchmarkRingLocate measures whole lookups, hashing included.
func BenchmarkRingLocate(b *testing.B) {
	keys := randomKeys(11, 1<<12, 16)
	for _, c := range benchRings(b) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				s += c.r.Locate(keys[i&(len(keys)-1)])
			}
			ringSink = s
		})
	}
}

// BenchmarkRingSearch compares the bucket index with sort.Search over the same points, on
// precomputed positions, so the ratio shows the search alone.
func BenchmarkRingSearch(b *testing.B) {
	r := rand.New(rand.NewPCG(12, 13))
	pos := make([]uint64, 1<<12)
	for i := range pos {
		pos[i] = r.Uint64()
	}
	for _, c := range benchRings(b) {
		t := c.r.table.Load()
		points := make([]uint64, t.Len())
		for i := range points {
			points[i] = t.Position(i)
		}
		b.Run(c.name+"/search=index", func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				s += int(t.Locate(pos[i&(len(pos)-1)]))
			}
			ringSink = s
		})
		b.Run(c.name+"/search=sort", func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				h := pos[i&(len(pos)-1)]
				j := sort.Search(len(points), func(j int) bool { return points[j] >= h })
				if j == len(points) {
					j = 0
				}
				s += int(t.Owner(j))
			}
			ringSink = s
		})
	}
}

// BenchmarkRingLocateParallel shows that lookups share nothing but the table pointer.
func BenchmarkRingLocateParallel(b *testing.B) {
	keys := randomKeys(11, 1<<12, 16)
	r, err := NewMurmurRing(10, 160)
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := 0
		for i := 0; pb.Next(); i++ {
			s += r.Locate(keys[i&(len(keys)-1)])
		}
		ringSink = s
	})
}

// BenchmarkRingBuild measures construction, which hashes every point name once, and reports
// the memory a ring keeps per point (table, index and the sorted points Resize reuses).
func BenchmarkRingBuild(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("ring=murmur/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var r *Ring
			for b.Loop() {
				r, _ = NewMurmurRing(n, 160)
			}
			t := r.table.Load()
			kept := t.Bytes() + cap(r.all)*int(unsafe.Sizeof(ring.Point{}))
			b.ReportMetric(float64(kept)/float64(r.Points()), "B/point")
		})
	}
}

// Arcs tile the positions in order, consecutive arcs differ, and every position of an arc
// belongs to its shard by the reference: at both ends, at every point and one either side of
// it, and at random positions. Position is the ring's hash of the key.
func TestRingArcs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range ringCases() {
		ring, err := c.newRng()
		require.NoError(t, err)
		ref := newRefRing(c.n, c.v, c.hash, c.vname)
		var arcs []Arc
		next := uint64(0)
		for a := range ring.Arcs() {
			require.Equalf(t, next, a.First, "%s(%d): arc %+v does not start where the last ended", c.name, c.n, a)
			require.LessOrEqual(t, a.First, a.Last)
			if len(arcs) > 0 {
				require.NotEqualf(t, arcs[len(arcs)-1].Shard, a.Shard, "%s(%d): arcs %+v and %+v not merged", c.name, c.n, arcs[len(arcs)-1], a)
			}
			arcs = append(arcs, a)
			next = a.Last + 1
			if a.Last == math.MaxUint64 {
				break
			}
		}
		require.Equalf(t, uint64(math.MaxUint64), arcs[len(arcs)-1].Last, "%s(%d): arcs end early", c.name, c.n)
		require.LessOrEqual(t, len(arcs), c.n*c.v+1)
		if c.n == 1 {
			require.Len(t, arcs, 1)
		}
		probes := []uint64{0, math.MaxUint64}
		for _, p := range ref.pos {
			probes = append(probes, p-1, p, p+1)
		}
		for range 2000 {
			probes = append(probes, r.Uint64())
		}
		for _, h := range probes {
			i, _ := slices.BinarySearchFunc(arcs, h, func(a Arc, h uint64) int { return cmp.Compare(a.Last, h) })
			require.Truef(t, arcs[i].First <= h && h <= arcs[i].Last, "%s(%d): no arc holds %#x", c.name, c.n, h)
			require.Equalf(t, ref.locate(h), arcs[i].Shard, "%s(%d): arc %+v at %#x", c.name, c.n, arcs[i], h)
		}
		for _, k := range randomKeys(11, 200, 10) {
			require.Equal(t, c.hash(k), ring.Position(k))
		}
	}
}

// Arcs reads one table: a Resize after the call does not change what it yields.
func TestRingArcsSnapshot(t *testing.T) {
	ring, err := NewRing(3, RingOptions{Vnodes: 4})
	require.NoError(t, err)
	seq := ring.Arcs()
	before := slices.Collect(seq)
	require.NoError(t, ring.Resize(4))
	require.Equal(t, before, slices.Collect(seq))
	require.NotEqual(t, before, slices.Collect(ring.Arcs()))
	for a := range ring.Arcs() { // stopping early is allowed
		require.Equal(t, uint64(0), a.First)
		break
	}
	var zero Ring
	require.Empty(t, slices.Collect(zero.Arcs()))
	require.Zero(t, zero.Position("user:1"))
}

// LocateBatch answers what Locate answers, for every kind of ring, and allocates nothing.
func TestRingLocateBatch(t *testing.T) {
	keys := append(randomKeys(12, 3000, 12), adversarialKeys()...)
	for _, c := range ringCases() {
		r, err := c.newRng()
		require.NoError(t, err)
		want := placement(r, keys)
		for _, size := range []int{0, 1, 15, 16, 17, 33, len(keys)} {
			dst := make([]int, size+1)
			dst[size] = -7
			r.LocateBatch(keys[:size], dst)
			for i := range size {
				require.Equalf(t, int(want[i]), dst[i], "%s(%d).LocateBatch: key %q", c.name, c.n, keys[i])
			}
			require.Equal(t, -7, dst[size], "LocateBatch wrote past len(keys)")
		}
		dst := make([]int, 100)
		require.Zero(t, testing.AllocsPerRun(10, func() { r.LocateBatch(keys[:100], dst) }))
		require.PanicsWithValue(t, "shard: LocateBatch: 3 keys but room for 2 shards in dst", func() { r.LocateBatch(keys[:3], dst[:2]) })
	}
}

// BenchmarkRingLocateBatch compares LocateBatch with a loop of Locate on the same 4096 keys
// (ns/op is per key in both).
func BenchmarkRingLocateBatch(b *testing.B) {
	keys := randomKeys(11, 1<<12, 16)
	dst := make([]int, len(keys))
	for _, n := range []int{10, 1000, 10000} {
		r, err := NewMurmurRing(n, 160)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("ring=murmur/shards=%d/call=loop", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				dst[i&(len(keys)-1)] = r.Locate(keys[i&(len(keys)-1)])
			}
		})
		b.Run(fmt.Sprintf("ring=murmur/shards=%d/call=batch", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i&(len(keys)-1) == 0 {
					r.LocateBatch(keys, dst)
				}
			}
		})
	}
}
