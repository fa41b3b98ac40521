package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard/internal/jumphash"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJumpContract(t *testing.T) {
	checkContract(t, contract{
		name:          "jump",
		newSharder:    func(n int) (Sharder, error) { return NewJump(n) },
		sizes:         []int{1, 2, 7, 10, 64, 1000, jumphash.SmallMax, 1 << 30},
		tooMany:       above(maxJump),
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
	for _, n := range []int{0, -1, math.MinInt, above(maxJump), math.MaxInt} {
		if n >= 1 && int64(n) <= maxJump { // MaxInt on 32-bit platforms, where it is maxJump
			continue
		}
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

func FuzzJumpHash(f *testing.F) {
	f.Add(uint64(0), uint16(1))
	f.Add(uint64(math.MaxUint64), uint16(1000))
	// Keys whose generator wraps on the first and second step (wrapKey in internal/jumphash).
	f.Add(uint64(0xecdfbf4e666313ab), uint16(10))
	f.Add(uint64(0x270d0031ea9e3f72), uint16(100))
	f.Fuzz(func(t *testing.T, key uint64, n uint16) {
		if n == 0 {
			return
		}
		want := naiveJumps(key, int(n))
		require.Equal(t, want[n-1], JumpHash(key, int(n)), "JumpHash(%#x, %d)", key, n)
	})
}
