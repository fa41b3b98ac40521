package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJumpBackContract(t *testing.T) {
	checkContract(t, contract{
		name:          "jump-back",
		newSharder:    func(n int) (Sharder, error) { return NewJumpBack(n) },
		sizes:         []int{1, 2, 7, 10, 64, 1000, 1 << 30},
		tooMany:       above(maxJump),
		resizeIsFresh: true,
		minimalGrow:   true,
		minimalShrink: true,
		batch:         true,
	})
}

// The vectors come from testdata/gen/JumpBackHashGen.java, which calls hash4j's
// ConsistentHashing.jumpBackHashSplitMix64() and, for keys, its Hashing.xxh64().
func TestJumpBackHash4j(t *testing.T) {
	most := 10_000_000 // pairs behind the checksums; 10^8 with -long
	switch {
	case *long:
		most = 100_000_000
	case quick():
		most = 100_000
	}
	pairs := splitMixStream{18}
	sum, done := uint64(0xcbf29ce484222325), 0
	counts := map[string]int{}
	for _, f := range readVectors(t, "testdata/jumpback_hash4j.txt") {
		fields := 4 // kind, input, n, bucket; a checksum has kind, pairs, sum
		if f[0] == "sum" {
			fields = 3
		}
		require.Len(t, f, fields, "line %q", f)
		counts[f[0]]++
		switch f[0] {
		case "h":
			hash, err := strconv.ParseUint(f[1], 16, 64)
			require.NoError(t, err, "line %q", f)
			n, want := atoi(t, f[2]), atoi(t, f[3])
			require.Equalf(t, want, JumpBackHash(hash, n), "JumpBackHash(%#x, %d)", hash, n)
		case "k":
			key, n, want := hexKey(t, f[1]), atoi(t, f[2]), atoi(t, f[3])
			s, err := NewJumpBack(n)
			require.NoError(t, err)
			require.Equalf(t, want, s.Locate(key), "NewJumpBack(%d).Locate(%q)", n, key)
		case "sum":
			count := atoi(t, f[1])
			if count > most {
				continue
			}
			for ; done < count; done++ {
				hash := pairs.next()
				sum = (sum ^ uint64(JumpBackHash(hash, hash4jSumsBuckets(pairs.next())))) * 0x100000001b3
			}
			require.Equal(t, f[2], strconv.FormatUint(sum, 16), "checksum of the first %d pairs", count)
		default:
			t.Fatalf("line %q: unknown kind", f)
		}
	}
	require.Greater(t, counts["h"], 5000)
	require.Greater(t, counts["k"], 300)
	require.GreaterOrEqual(t, done, 100_000)
}

// hash4jSumsBuckets is JumpBackHashGen.buckets: a bucket count from a random word.
func hash4jSumsBuckets(r uint64) int {
	v := r >> 2
	switch r & 3 {
	case 0:
		return 1 + int(v%1000)
	case 1:
		return 1 + int(v%1000000)
	case 2:
		return 1 + int(v%maxJump)
	}
	return 1<<(1+v%30) - 1 + int(v>>5%3)
}

// Consistency key by key, for every count up to 2^12 and around every power of two: from n
// to n+1 buckets a key stays or moves to bucket n.
func TestJumpBackConsistent(t *testing.T) {
	keys := 2000
	if quick() {
		keys = 200
	}
	var ns []int
	for n := 1; n <= 1<<12; n++ {
		ns = append(ns, n)
	}
	for k := 13; k <= 30; k++ {
		for d := -3; d <= 2; d++ {
			ns = append(ns, 1<<k+d)
		}
	}
	ns = append(ns, maxJump-2, maxJump-1)
	r := rand.New(rand.NewPCG(21, 21))
	for range keys {
		key := r.Uint64()
		for _, n := range ns {
			a, b := JumpBackHash(key, n), JumpBackHash(key, n+1)
			if a < 0 || a >= n || (b != a && b != n) {
				t.Fatalf("JumpBackHash(%#x, %d) = %d, then %d with %d buckets", key, n, a, b, n+1)
			}
		}
	}
}

// joinedBuckets is the slow reference behind both jump hashes (Lamping and Veach's first
// algorithm): as buckets are added one at a time, the key joins bucket j with probability
// 1/(j+1), independently, and lives in the last bucket it joined. It cannot agree with
// JumpBackHash key by key, since they use their random numbers differently, but it must in
// distribution.
func joinedBuckets(key uint64, n int) int {
	s := splitMixStream{key}
	b := 0
	for j := 1; j < n; j++ {
		if s.next()%uint64(j+1) == 0 {
			b = j
		}
	}
	return b
}

// Balance and movement of JumpBackHash against the slow reference: even loads, and 1/(n+1)
// of the keys moving from n to n+1 buckets, also just above powers of two (17, 1025), where
// the top range is almost empty.
func TestJumpBackDistribution(t *testing.T) {
	keys := 100000
	if quick() {
		keys = 20000
	}
	// The reference costs n steps per key, so it runs up to 100 buckets only.
	for _, n := range []int{2, 10, 17, 100, 1000, 1025} {
		fast, slow := make([]int, n), make([]int, n)
		fastMoved, slowMoved := 0, 0
		withSlow := n <= 100
		r := rand.New(rand.NewPCG(uint64(n), 23))
		for range keys {
			k := r.Uint64()
			a := JumpBackHash(k, n)
			fast[a]++
			if JumpBackHash(k, n+1) != a {
				fastMoved++
			}
			if withSlow {
				b := joinedBuckets(k, n)
				slow[b]++
				if joinedBuckets(k, n+1) != b {
					slowMoved++
				}
			}
		}
		p := 1 / float64(n+1)
		mean := float64(keys) * p
		sd := math.Sqrt(mean * (1 - p))
		assertUniform(t, fast, fmt.Sprintf("JumpBackHash, %d buckets", n))
		assert.InDelta(t, mean, fastMoved, 5*sd, "JumpBackHash %d -> %d", n, n+1)
		if withSlow {
			assertUniform(t, slow, fmt.Sprintf("joined buckets, %d buckets", n))
			assert.InDelta(t, mean, slowMoved, 5*sd, "joined buckets %d -> %d", n, n+1)
		}
	}
}

// Near the top of the range the buckets must stay even too: the share of keys in the last
// 1/8 of 2^31-1 buckets is 1/8.
func TestJumpBackHashTopBuckets(t *testing.T) {
	keys := 200000
	if quick() {
		keys = 20000
	}
	r := rand.New(rand.NewPCG(25, 25))
	top := 0
	for range keys {
		if JumpBackHash(r.Uint64(), maxJump) >= maxJump-maxJump/8 {
			top++
		}
	}
	mean := float64(keys) / 8
	assert.InDelta(t, mean, top, 5*math.Sqrt(mean*7/8))
}

func TestJumpBackHashPanics(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt, above(maxJump), math.MaxInt} {
		if n >= 1 && int64(n) <= maxJump { // MaxInt on 32-bit platforms, where it is maxJump
			continue
		}
		require.PanicsWithValuef(t, fmt.Sprintf("shard: JumpBackHash: %d buckets: allowed range is [1, %d]", n, maxJump),
			func() { JumpBackHash(1, n) }, "JumpBackHash(1, %d)", n)
	}
	require.NotPanics(t, func() { JumpBackHash(math.MaxUint64, maxJump) })
}

func FuzzJumpBackHash(f *testing.F) {
	f.Add(uint64(0), uint32(1))
	f.Add(uint64(math.MaxUint64), uint32(1000))
	f.Add(uint64(0x9e3779b97f4a7c15), uint32(1<<30))
	f.Add(uint64(1), uint32(maxJump-1))
	f.Fuzz(func(t *testing.T, key uint64, n uint32) {
		if n == 0 || n >= maxJump {
			return
		}
		a, b := JumpBackHash(key, int(n)), JumpBackHash(key, int(n)+1)
		require.True(t, a >= 0 && a < int(n), "JumpBackHash(%#x, %d) = %d", key, n, a)
		require.True(t, b == a || b == int(n), "JumpBackHash(%#x, %d) = %d, then %d with one more bucket", key, n, a, b)
	})
}
