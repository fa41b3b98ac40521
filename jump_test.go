package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJumpContract(t *testing.T) {
	checkContract(t, contract{
		name:          "jump",
		newSharder:    func(n int) (Sharder, error) { return NewJump(n) },
		sizes:         []int{1, 2, 7, 10, 64, 1000, jumpUncheckedMax, 1 << 30},
		tooMany:       maxJump + 1,
		resizeIsFresh: true,
		minimalGrow:   true,
		minimalShrink: true,
		batch:         true,
	})
}

// The vectors come from testdata/gen/JumpGuavaGen.java, which calls Guava 31.1's
// Hashing.consistentHash(long, int).
func TestJumpHashGuava(t *testing.T) {
	rows := readVectors(t, "testdata/jump_guava.txt")
	for _, f := range rows {
		require.Len(t, f, 3, "line %q", f)
		key, err := strconv.ParseUint(f[0], 16, 64)
		require.NoError(t, err, "line %q", f)
		n, want := atoi(t, f[1]), atoi(t, f[2])
		require.Equalf(t, want, JumpHash(key, n), "JumpHash(%#x, %d)", key, n)
	}
	require.Greater(t, len(rows), 5000)
}

// javaLCG is Guava's LinearCongruentialGenerator, written again in Java's signed arithmetic
// so that the reference below shares no code with jumpHash.
type javaLCG struct{ state int64 }

func (g *javaLCG) nextDouble() float64 {
	g.state = 2862933555777941757*g.state + 1
	x := int32(uint64(g.state) >> 33) // (int) (state >>> 33)
	x++                               // may wrap to MinInt32, as in Java
	return float64(x) / 0x1p31
}

// naiveJumps returns JumpHash(key, n) for every n in [1, max] by the paper's O(n) walk: start
// with one bucket, add one at a time, and at each new bucket j decide whether the key moves
// there. The paper derives the fast algorithm from this walk: having moved to b with the
// random number r, the key stays until bucket floor((b+1)/r), where it moves and draws anew.
func naiveJumps(key uint64, max int) []int {
	g := javaLCG{int64(key)}
	b := 0
	out := []int{0} // n = 1
	target := math.Trunc(float64(b+1) / g.nextDouble())
	for j := 1; j < max; j++ {
		if float64(j) == target { // the key moves to the new bucket j
			b = j
			target = math.Trunc(float64(b+1) / g.nextDouble())
		}
		out = append(out, b) // n = j+1
	}
	return out
}

// jumpHashDivide is Guava's consistentHash step for step, dividing on every step: the slow
// obvious version that jumpHash must equal.
func jumpHashDivide(key uint64, n int) int {
	g := javaLCG{int64(key)}
	candidate := 0
	for {
		next := float64(candidate+1) / g.nextDouble()
		if next < 0 || next >= float64(n) { // Java: (int) next saturates, then 0 <= next < n
			return candidate
		}
		candidate = int(next)
	}
}

// splitMixStream is java.util.SplittableRandom's nextLong: SplitMix64 from a seed.
type splitMixStream struct{ state uint64 }

func (s *splitMixStream) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	return mix64(s.state)
}

// guavaSumsBuckets is JumpGuavaSums.buckets: a bucket count from a random word.
func guavaSumsBuckets(r uint64) int {
	v := r >> 2
	switch r & 3 {
	case 0:
		return 1 + int(v%1000)
	case 1:
		return 1 + int(v%(1<<18))
	case 2:
		return 1<<18 - 16 + int(v%32)
	}
	return 1 + int(v%maxJump)
}

// TestJumpHashGuavaSums compares JumpHash with Guava on millions of pairs through the
// checksums that testdata/gen/JumpGuavaSums.java printed (10^7 pairs; 10^8 with -long).
func TestJumpHashGuavaSums(t *testing.T) {
	most := 10_000_000
	switch {
	case *long:
		most = 100_000_000
	case quick():
		most = 100_000
	}
	rows := readVectors(t, "testdata/jump_guava_sums.txt")
	r := splitMixStream{20240327}
	sum, done := uint64(0xcbf29ce484222325), 0
	for _, f := range rows {
		require.Len(t, f, 2, "line %q", f)
		count := atoi(t, f[0])
		if count > most {
			break
		}
		for ; done < count; done++ {
			key := r.next()
			sum = (sum ^ uint64(JumpHash(key, guavaSumsBuckets(r.next())))) * 0x100000001b3
		}
		require.Equal(t, f[1], strconv.FormatUint(sum, 16), "checksum of the first %d pairs", count)
	}
	require.GreaterOrEqual(t, done, min(most, 10_000_000)/100)
}

// TestJumpHashDivide cross-checks jumpHash with the division on every step on random pairs,
// a quarter of them near jumpUncheckedMax, where jumpHash switches its step.
func TestJumpHashDivide(t *testing.T) {
	pairs := 2_000_000
	if quick() {
		pairs = 100_000
	}
	r := rand.New(rand.NewPCG(13, 13))
	for i := range pairs {
		key := r.Uint64()
		var n int
		switch i % 4 {
		case 0:
			n = 1 + r.IntN(1000)
		case 1:
			n = 1 + r.IntN(1<<20)
		case 2:
			n = jumpUncheckedMax - 8 + r.IntN(16)
		default:
			n = 1 + r.IntN(maxJump)
		}
		if got, want := jumpHash(key, n), jumpHashDivide(key, n); got != want {
			t.Fatalf("jumpHash(%#x, %d) = %d, want %d", key, n, got, want)
		}
	}
}

// guavaStep is Guava's step as jumpStep reports it: trunc(b / (x/2^31)) + 1.
func guavaStep(b float64, x int32) float64 {
	return math.Trunc(b/(float64(x)/0x1p31)) + 1
}

// checkStep fails unless step(b, x) equals Guava's step wherever the result can continue a
// walk (up to 2^31-1) and exceeds 2^31-1 wherever Guava's does.
func checkStep(t *testing.T, name string, step func(float64, int32) float64, b float64, x int32) {
	got, want := step(b, x), guavaStep(b, x)
	if got != want && (got <= maxJump || want <= maxJump) {
		t.Fatalf("%s(%v, %d) = %v, want %v", name, b, x, got, want)
	}
}

// The steps can only go wrong where b*2^31/x is an integer or within about 1/x of one; these
// are those cases, built directly, plus every x up to 2^16 for a spread of b.
func TestJumpStepHard(t *testing.T) {
	xs := []int32{1, 2, 3, 7, 1 << 16, 1<<31 - 1, 1<<31 - 2, 1<<30 + 1, 1 << 30}
	for k := range 31 {
		xs = append(xs, 1<<k, 1<<k+1, 1<<k-1, 3<<k>>1)
	}
	bs := []float64{1, 2, 3, 1000, 65535, 65536, 1<<18 - 1, 1 << 18}
	r := rand.New(rand.NewPCG(17, 17))
	for range 200 {
		bs = append(bs, float64(1+r.IntN(jumpUncheckedMax)))
		xs = append(xs, int32(1+r.IntN(1<<31-1)))
	}
	for _, x := range xs {
		if x <= 0 {
			continue
		}
		for _, b := range bs {
			checkStep(t, "jumpStep", jumpStep, b, x)
			checkStep(t, "jumpStepChecked", jumpStepChecked, b, x)
		}
	}
	maxX := int32(1 << 16)
	if quick() {
		maxX = 1 << 12
	}
	for x := int32(1); x <= maxX; x++ {
		for _, b := range bs[:8] {
			checkStep(t, "jumpStep", jumpStep, b, x)
		}
	}
	// q is an integer when x = o*2^j and o divides b: q = (b/o)*2^(31-j). Every odd o up to
	// 2^10 (2^6 under -short), every j that keeps x below 2^31, a few multiples b of o.
	maxO := int64(1 << 10)
	if quick() {
		maxO = 1 << 6
	}
	for o := int64(1); o <= maxO; o += 2 {
		for x := o; x < 1<<31; x <<= 1 {
			for _, m := range []int64{1, 2, 3, 5, 1 + r.Int64N(jumpUncheckedMax/o)} {
				if b := o * m; b <= jumpUncheckedMax {
					checkStep(t, "jumpStep", jumpStep, float64(b), int32(x))
					checkStep(t, "jumpStepChecked", jumpStepChecked, float64(b), int32(x))
				}
			}
		}
	}
	// For odd x, b = ±2^-31 mod x (so b < x) puts b*2^31/x exactly 1/x above or below an
	// integer: the nearest a quotient comes to an integer without being one. Every odd x up
	// to 2^15 and random odd x below 2^24, so that b covers jumpStep's whole range and more.
	odd := []int64{}
	for x := int64(3); x <= 1<<15; x += 2 {
		odd = append(odd, x)
	}
	for range 50000 {
		odd = append(odd, 1+2*r.Int64N(1<<23))
	}
	if quick() {
		odd = odd[:5000]
	}
	for _, x := range odd {
		inv := modInverse(1<<31%x, x)
		for _, b := range []int64{inv, x - inv} {
			if b <= jumpUncheckedMax {
				checkStep(t, "jumpStep", jumpStep, float64(b), int32(x))
			}
			checkStep(t, "jumpStepChecked", jumpStepChecked, float64(b), int32(x))
		}
	}
	// With b above 2^22 and x near 2^31, a quotient 1/x below an integer rounds up to it in
	// Guava's division: floor and Guava differ, and jumpStepChecked must follow Guava.
	roundedUp := 0
	for range 2000 {
		x := int64(1<<31 - 1 - 2*r.IntN(1<<20)) // odd
		inv := modInverse(1<<31%x, x)
		b := x - inv // b*2^31 = -1 mod x
		for b < 1<<22 {
			b += x
		}
		if b > maxJump {
			continue
		}
		checkStep(t, "jumpStepChecked", jumpStepChecked, float64(b), int32(x))
		if floor := (b << 31) / x; float64(floor+1) != guavaStep(float64(b), int32(x)) {
			roundedUp++
		}
	}
	require.Positive(t, roundedUp, "no case where Guava's rounding differs from the floor")
}

// modInverse returns a^-1 mod m for a and m coprime, by the extended Euclidean algorithm.
func modInverse(a, m int64) int64 {
	old, cur := a, m
	oldS, s := int64(1), int64(0)
	for cur != 0 {
		q := old / cur
		old, cur = cur, old-q*cur
		oldS, s = s, oldS-q*s
	}
	return (oldS%m + m) % m
}

// The four walks side by side must each equal jumpHash, also when some walk's generator
// wraps (Guava's stop) while the others go on.
func TestJumpHash4(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 19))
	rounds := 200000
	if quick() {
		rounds = 20000
	}
	for i := range rounds {
		var s [4]uint64
		for j := range s {
			s[j] = r.Uint64()
			if r.IntN(8) == 0 {
				s[j] = wrapKey(r.IntN(6))
			}
		}
		n := 1 + r.IntN(1000)
		if i%2 == 1 {
			n = 1 + r.IntN(jumpUncheckedMax)
		}
		var got [4]int
		got[0], got[1], got[2], got[3] = jumpHash4(s[0], s[1], s[2], s[3], n)
		for j := range s {
			if want := jumpHash(s[j], n); got[j] != want {
				t.Fatalf("jumpHash4(%#x, %d) walk %d = %d, want %d", s, n, j, got[j], want)
			}
		}
	}
}

func TestJumpHashNaive(t *testing.T) {
	keys := 3000
	if quick() {
		keys = 300
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := range keys {
		key := r.Uint64()
		if i < 4 {
			key = []uint64{0, 1, math.MaxUint64, 1 << 63}[i]
		}
		for n1, want := range naiveJumps(key, 1000) {
			if got := JumpHash(key, n1+1); got != want { // not require: it is slow in a hot loop
				t.Fatalf("JumpHash(%#x, %d) = %d, want %d", key, n1+1, got, want)
			}
		}
	}
}

// wrapKey returns a key whose LCG state after step+1 steps has its top 31 bits set: there
// Guava's int addition wraps, the random number is -1 and the walk stops.
func wrapKey(step int) uint64 {
	const m = 2862933555777941757
	inv := uint64(m) // Newton's iteration: inv = m^-1 mod 2^64
	for range 6 {
		inv *= 2 - m*inv
	}
	state := uint64(0xFFFFFFFE_00000000)
	for range step + 1 {
		state = (state - 1) * inv
	}
	return state
}

func TestJumpHashWrap(t *testing.T) {
	for n := 1; n <= 100; n++ {
		require.Equal(t, 0, JumpHash(wrapKey(0), n), "the first random number wraps: Guava stays on 0")
	}
	// The paper's C++ reads (state>>33)+1 = 2^31 as a 64-bit value and moves on to bucket 1.
	paper := func(key uint64, n int) int {
		var b, j int64 = -1, 0
		for j < int64(n) {
			b = j
			key = key*2862933555777941757 + 1
			j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
		}
		return int(b)
	}
	require.Equal(t, 1, paper(wrapKey(0), 2))
}

// The paper's first algorithm draws one number per bucket and moves the key to bucket j with
// probability 1/(j+1). It cannot agree with the fast one key by key (they use the random
// numbers differently), but it must agree in distribution: even buckets, and 1/(n+1) of the
// keys moving from n to n+1.
func TestJumpHashPaperDistribution(t *testing.T) {
	perBucket := func(key uint64, n int) int {
		g := javaLCG{int64(key)}
		b := 0
		for j := 1; j < n; j++ {
			if g.nextDouble() < 1/float64(j+1) {
				b = j
			}
		}
		return b
	}
	keys := 100000
	if quick() {
		keys = 20000
	}
	for _, n := range []int{10, 100} {
		fast, slow := make([]int, n), make([]int, n)
		fastMoved, slowMoved := 0, 0
		r := rand.New(rand.NewPCG(uint64(n), 7))
		for range keys {
			k := r.Uint64()
			a, b := JumpHash(k, n), perBucket(k, n)
			fast[a]++
			slow[b]++
			if JumpHash(k, n+1) != a {
				fastMoved++
			}
			if perBucket(k, n+1) != b {
				slowMoved++
			}
		}
		assertUniform(t, fast, fmt.Sprintf("JumpHash, %d buckets", n))
		assertUniform(t, slow, fmt.Sprintf("per-bucket naive, %d buckets", n))
		p := 1 / float64(n+1)
		mean := float64(keys) * p
		sd := math.Sqrt(mean * (1 - p))
		assert.InDelta(t, mean, fastMoved, 5*sd, "JumpHash %d -> %d", n, n+1)
		assert.InDelta(t, mean, slowMoved, 5*sd, "per-bucket naive %d -> %d", n, n+1)
	}
}

func TestJumpHashPanics(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt, maxJump + 1, math.MaxInt} {
		require.PanicsWithValuef(t, fmt.Sprintf("shard: JumpHash: %d buckets: allowed range is [1, %d]", n, maxJump),
			func() { JumpHash(1, n) }, "JumpHash(1, %d)", n)
	}
	require.NotPanics(t, func() { JumpHash(math.MaxUint64, maxJump) })
}

func TestJumpRegress(t *testing.T) {
	var b strings.Builder
	for _, n := range []int{1, 3, 10, 1000, maxJump} {
		j, err := NewJump(n)
		require.NoError(t, err)
		for _, k := range append(randomKeys(3, 20, 12), adversarialKeys()[:12]...) {
			fmt.Fprintf(&b, "%d %q %d\n", n, k, j.Locate(k))
		}
	}
	checkRegress(t, "regress/jump.txt", b.String())
}

func FuzzJumpLocate(f *testing.F) {
	for _, k := range adversarialKeys() {
		f.Add(k, 7)
	}
	f.Add("k", maxJump)
	f.Fuzz(func(t *testing.T, key string, n int) {
		j, err := NewJump(n)
		if n < 1 || n > maxJump {
			require.ErrorIs(t, err, ErrShardCount)
			return
		}
		require.NoError(t, err)
		got := j.Locate(key)
		require.True(t, got >= 0 && got < n, "Locate(%q) = %d with %d shards", key, got, n)
	})
}

func FuzzJumpHashDivide(f *testing.F) {
	f.Add(uint64(0), uint32(1))
	f.Add(uint64(math.MaxUint64), uint32(jumpUncheckedMax))
	f.Add(uint64(12345), uint32(jumpUncheckedMax+1))
	f.Add(wrapKey(2), uint32(maxJump))
	f.Fuzz(func(t *testing.T, key uint64, n uint32) {
		if n == 0 || n > maxJump {
			return
		}
		require.Equal(t, jumpHashDivide(key, int(n)), JumpHash(key, int(n)), "JumpHash(%#x, %d)", key, n)
	})
}

func FuzzJumpStep(f *testing.F) {
	f.Add(uint32(1), uint32(1))
	f.Add(uint32(1<<18), uint32(3))
	f.Add(uint32(maxJump), uint32(maxJump))
	f.Fuzz(func(t *testing.T, b, x uint32) {
		if b == 0 || b > maxJump || x == 0 || x > 1<<31-1 {
			return
		}
		if b <= jumpUncheckedMax {
			checkStep(t, "jumpStep", jumpStep, float64(b), int32(x))
		}
		checkStep(t, "jumpStepChecked", jumpStepChecked, float64(b), int32(x))
	})
}

func FuzzJumpHash(f *testing.F) {
	f.Add(uint64(0), uint16(1))
	f.Add(uint64(math.MaxUint64), uint16(1000))
	f.Add(wrapKey(0), uint16(10))
	f.Add(wrapKey(1), uint16(100))
	f.Fuzz(func(t *testing.T, key uint64, n uint16) {
		if n == 0 {
			return
		}
		want := naiveJumps(key, int(n))
		require.Equal(t, want[n-1], JumpHash(key, int(n)), "JumpHash(%#x, %d)", key, n)
	})
}
