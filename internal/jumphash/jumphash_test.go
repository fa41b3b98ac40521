package jumphash

import (
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxBuckets is the largest count Guava takes: its buckets parameter is a Java int.
const maxBuckets = math.MaxInt32

// quick reports whether a test should run its smaller case: with -short, and under the race
// detector, whose slowdown buys nothing in single-goroutine arithmetic.
func quick() bool { return testing.Short() || raceEnabled }

// divide is Guava's consistentHash as Guava writes it, dividing on every step: the slow
// obvious version that Guava, GuavaSmall and Guava4 must equal.
func divide(state uint64, n int) int {
	limit := float64(n)
	candidate := 0
	for {
		state = state*2862933555777941757 + 1
		// Java: ((double) ((int) (state >>> 33) + 1)) / 0x1.0p31, the int addition wrapping.
		r := float64(int32(state>>33)+1) / (1 << 31)
		next := float64(candidate+1) / r
		// Java truncates next to an int (saturating) and stops unless 0 <= next < n. A
		// negative r (the wrapped case) gives next <= -1; otherwise next >= 1.
		if next < 0 || next >= limit {
			return candidate
		}
		candidate = int(next)
	}
}

// The vectors come from Guava 31.1's Hashing.consistentHash(long, int) (see
// testdata/gen/JumpGuavaGen.java at the root, whose tests check shard.JumpHash on all of them).
func TestGuavaVectors(t *testing.T) {
	data, err := os.ReadFile("../../testdata/jump_guava.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 3 || strings.HasPrefix(line, "#") {
			continue
		}
		key, err1 := strconv.ParseUint(f[0], 16, 64)
		n, err2 := strconv.Atoi(f[1])
		want, err3 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("bad line %q", line)
		}
		if got := Guava(key, n); got != want {
			t.Fatalf("Guava(%#x, %d) = %d, want %d", key, n, got, want)
		}
		rows++
	}
	if rows < 5000 {
		t.Fatalf("read %d vectors, want over 5000", rows)
	}
}

// TestDivide cross-checks Guava with the division on every step on random pairs,
// a quarter of them near SmallMax, where Guava switches its step.
func TestDivide(t *testing.T) {
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
			n = SmallMax - 8 + r.IntN(16)
		default:
			n = 1 + r.IntN(maxBuckets)
		}
		if got, want := Guava(key, n), divide(key, n); got != want {
			t.Fatalf("Guava(%#x, %d) = %d, want %d", key, n, got, want)
		}
	}
}

// guavaStep is Guava's step as step reports it: trunc(b / (x/2^31)) + 1.
func guavaStep(b float64, x int32) float64 {
	return math.Trunc(b/(float64(x)/0x1p31)) + 1
}

// checkStep fails unless step(b, x) equals Guava's step wherever the result can continue a
// walk (up to 2^31-1) and exceeds 2^31-1 wherever Guava's does.
func checkStep(t *testing.T, name string, step func(float64, int32) float64, b float64, x int32) {
	got, want := step(b, x), guavaStep(b, x)
	if got != want && (got <= maxBuckets || want <= maxBuckets) {
		t.Fatalf("%s(%v, %d) = %v, want %v", name, b, x, got, want)
	}
}

// The steps can only go wrong where b*2^31/x is an integer or within about 1/x of one; these
// are those cases, built directly, plus every x up to 2^16 for a spread of b.
func TestStepHard(t *testing.T) {
	xs := []int32{1, 2, 3, 7, 1 << 16, 1<<31 - 1, 1<<31 - 2, 1<<30 + 1, 1 << 30}
	for k := range 31 {
		xs = append(xs, 1<<k, 1<<k+1, 1<<k-1, 3<<k>>1)
	}
	bs := []float64{1, 2, 3, 1000, 65535, 65536, 1<<18 - 1, 1 << 18}
	r := rand.New(rand.NewPCG(17, 17))
	for range 200 {
		bs = append(bs, float64(1+r.IntN(SmallMax)))
		xs = append(xs, int32(1+r.IntN(1<<31-1)))
	}
	for _, x := range xs {
		if x <= 0 {
			continue
		}
		for _, b := range bs {
			checkStep(t, "step", step, b, x)
			checkStep(t, "stepChecked", stepChecked, b, x)
		}
	}
	maxX := int32(1 << 16)
	if quick() {
		maxX = 1 << 12
	}
	for x := int32(1); x <= maxX; x++ {
		for _, b := range bs[:8] {
			checkStep(t, "step", step, b, x)
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
			for _, m := range []int64{1, 2, 3, 5, 1 + r.Int64N(SmallMax/o)} {
				if b := o * m; b <= SmallMax {
					checkStep(t, "step", step, float64(b), int32(x))
					checkStep(t, "stepChecked", stepChecked, float64(b), int32(x))
				}
			}
		}
	}
	// For odd x, b = ±2^-31 mod x (so b < x) puts b*2^31/x exactly 1/x above or below an
	// integer: the nearest a quotient comes to an integer without being one. Every odd x up
	// to 2^15 and random odd x below 2^24, so that b covers step's whole range and more.
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
			if b <= SmallMax {
				checkStep(t, "step", step, float64(b), int32(x))
			}
			checkStep(t, "stepChecked", stepChecked, float64(b), int32(x))
		}
	}
	// With b above 2^22 and x near 2^31, a quotient 1/x below an integer rounds up to it in
	// Guava's division: floor and Guava differ, and stepChecked must follow Guava.
	roundedUp := 0
	for range 2000 {
		x := int64(1<<31 - 1 - 2*r.IntN(1<<20)) // odd
		inv := modInverse(1<<31%x, x)
		b := x - inv // b*2^31 = -1 mod x
		for b < 1<<22 {
			b += x
		}
		if b > maxBuckets {
			continue
		}
		checkStep(t, "stepChecked", stepChecked, float64(b), int32(x))
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

// The four walks side by side must each equal Guava's walk, also when some walk's generator
// wraps (Guava's stop) while the others go on.
func TestGuava4(t *testing.T) {
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
			n = 1 + r.IntN(SmallMax)
		}
		var got [4]int
		got[0], got[1], got[2], got[3] = Guava4(s[0], s[1], s[2], s[3], n)
		for j := range s {
			if want := divide(s[j], n); got[j] != want {
				t.Fatalf("Guava4(%#x, %d) walk %d = %d, want %d", s, n, j, got[j], want)
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

func TestWrap(t *testing.T) {
	for n := 1; n <= 100; n++ {
		require.Equal(t, 0, Guava(wrapKey(0), n), "the first random number wraps: Guava stays on 0")
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

func FuzzDivide(f *testing.F) {
	f.Add(uint64(0), uint32(1))
	f.Add(uint64(math.MaxUint64), uint32(SmallMax))
	f.Add(uint64(12345), uint32(SmallMax+1))
	f.Add(wrapKey(2), uint32(maxBuckets))
	f.Fuzz(func(t *testing.T, key uint64, n uint32) {
		if n == 0 || n > maxBuckets {
			return
		}
		require.Equal(t, divide(key, int(n)), Guava(key, int(n)), "Guava(%#x, %d)", key, n)
	})
}

func FuzzStep(f *testing.F) {
	f.Add(uint32(1), uint32(1))
	f.Add(uint32(1<<18), uint32(3))
	f.Add(uint32(maxBuckets), uint32(maxBuckets))
	f.Fuzz(func(t *testing.T, b, x uint32) {
		if b == 0 || b > maxBuckets || x == 0 || x > 1<<31-1 {
			return
		}
		if b <= SmallMax {
			checkStep(t, "step", step, float64(b), int32(x))
		}
		checkStep(t, "stepChecked", stepChecked, float64(b), int32(x))
	})
}
