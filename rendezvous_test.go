package shard

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/shardkit/shard/internal/keyhash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRendezvousContract(t *testing.T) {
	checkContract(t, contract{
		name:          "rendezvous",
		newSharder:    func(n int) (Sharder, error) { return NewRendezvous(n) },
		sizes:         []int{1, 2, 7, 10, 100, 1000},
		tooMany:       maxRendezvous + 1,
		resizeIsFresh: true,
		minimalGrow:   true,
		minimalShrink: true,
		batch:         true,
	})
}

// slowRendezvous is the documented score function written the obvious way: build each
// multiplier from scratch, score every shard, and keep the best (high 47 bits, shard) pair
// with the tie rule spelled out.
func slowRendezvous(key string, n int) int {
	k := keyhash.XXH64(key)>>17<<17 + 1
	best, bestScore := -1, uint64(0)
	for i := 0; i < n; i++ {
		z := uint64(i+1) * 0x9e3779b97f4a7c15 // SplitMix64's (i+1)th state
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		m := z>>17<<17 + uint64(2*i+1)
		score := (k * m) >> 17
		if best < 0 || score > bestScore || score == bestScore { // ties: the higher shard wins
			best, bestScore = i, score
		}
	}
	return best
}

func TestRendezvousSlow(t *testing.T) {
	keys := append(randomKeys(11, 2000, 10), adversarialKeys()...)
	for _, n := range []int{1, 2, 3, 4, 5, 7, 10, 16, 33, 100, 1000} {
		r, err := NewRendezvous(n)
		require.NoError(t, err)
		for _, k := range keys {
			if got, want := r.Locate(k), slowRendezvous(k, n); got != want {
				t.Fatalf("Rendezvous(%d).Locate(%q) = %d, want %d", n, k, got, want)
			}
		}
	}
	r, err := NewRendezvous(maxRendezvous)
	require.NoError(t, err)
	for _, k := range keys[:20] {
		require.Equalf(t, slowRendezvous(k, maxRendezvous), r.Locate(k), "Rendezvous(%d).Locate(%q)", maxRendezvous, k)
	}
}

// Scores equal in their high 47 bits go to the higher shard, whichever half it is in.
func TestRendezvousTies(t *testing.T) {
	const x = 0xabcdef0123456789 &^ rendezvousLowMask
	for n := 1; n <= 9; n++ {
		mults := make([]uint64, n)
		for i := range mults {
			mults[i] = x | uint64(2*i+1)
		}
		require.Equal(t, n-1, rendezvous(mults, 1), "%d tied shards", n) // k = 1: score = m_i
		mults[0] = (x + 1<<rendezvousLowBits) | 1
		require.Equal(t, 0, rendezvous(mults, 1), "%d shards, shard 0 higher", n)
	}
}

// bruteRendezvous is rendezvous hashing as the sharding lecture [003] writes it: hash the key
// with each shard's number appended (8 bytes little-endian, so no two (key, shard) pairs share
// bytes) and take the highest. It hashes the whole key once per shard, which is why Locate
// uses a single hash and one multiplication per shard instead; the two must behave alike.
func bruteRendezvous(key string, n int) int {
	buf := make([]byte, len(key)+8)
	copy(buf, key)
	best, bestScore := 0, uint64(0)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(buf[len(key):], uint64(i))
		if h := xxhash.Sum64(buf); i == 0 || h >= bestScore {
			best, bestScore = i, h
		}
	}
	return best
}

// Both the fast score and the brute force must spread keys evenly, move 1/(n+1) of them to
// a new shard and nowhere else, and spread a removed shard's keys evenly over the rest.
func TestRendezvousAgainstBruteForce(t *testing.T) {
	nkeys := 100000
	sizes := []int{3, 10, 100}
	if quick() {
		nkeys, sizes = 30000, []int{3, 10}
	}
	keys := randomKeys(12, nkeys, 12)
	impls := []struct {
		name   string
		locate func(n int) func(key string) int
	}{
		{"fast", func(n int) func(string) int {
			r, err := NewRendezvous(n)
			require.NoError(t, err)
			return r.Locate
		}},
		{"brute", func(n int) func(string) int {
			return func(k string) int { return bruteRendezvous(k, n) }
		}},
	}
	for _, impl := range impls {
		name := impl.name
		for _, n := range sizes {
			locate, grown := impl.locate(n), impl.locate(n+1)
			counts := make([]int, n)
			spread := make([]int, n) // where shard n's keys go when it is removed
			moved := 0
			for _, k := range keys {
				before, after := locate(k), grown(k)
				counts[before]++
				if after != before {
					require.Equalf(t, n, after, "%s: %d -> %d moved %q to %d", name, n, n+1, k, after)
					moved++
					spread[before]++
				}
			}
			chi2 := assertUniform(t, counts, fmt.Sprintf("%s, %d shards", name, n))
			assertUniform(t, spread, fmt.Sprintf("%s, keys of removed shard %d", name, n))
			p := 1 / float64(n+1)
			sd := math.Sqrt(float64(nkeys) * p * (1 - p))
			assert.InDeltaf(t, float64(nkeys)*p, float64(moved), 5*sd, "%s: %d -> %d moved %d keys", name, n, n+1, moved)
			t.Logf("%s n=%d: chi-square %.1f (df %d), moved %.4f (ideal %.4f)", name, n, chi2, n-1, float64(moved)/float64(nkeys), p)
		}
	}
}

// The fast score must stay even at every count, not only the ones above: a chi-square test
// over 1e5 keys for counts up to 64 and a few large ones.
func TestRendezvousBalance(t *testing.T) {
	nkeys := 100000
	if quick() {
		nkeys = 20000
	}
	keys := randomKeys(13, nkeys, 16)
	hashes := make([]uint64, len(keys))
	for i, k := range keys {
		hashes[i] = keyhash.XXH64(k)
	}
	sizes := []int{1000, 4096}
	for n := 2; n <= 64; n++ {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		mults := rendezvousMultipliers(n)
		counts := make([]int, n)
		for _, h := range hashes {
			counts[rendezvous(mults, h)]++
		}
		assertUniform(t, counts, fmt.Sprintf("rendezvous, %d shards", n))
	}
}

func TestRendezvousRegress(t *testing.T) {
	var b strings.Builder
	for _, n := range []int{1, 2, 3, 10, 1000, maxRendezvous} {
		r, err := NewRendezvous(n)
		require.NoError(t, err)
		for _, k := range append(randomKeys(3, 20, 12), adversarialKeys()[:12]...) {
			fmt.Fprintf(&b, "%d %q %d\n", n, k, r.Locate(k))
		}
	}
	checkRegress(t, "regress/rendezvous.txt", b.String())
}

func FuzzRendezvousLocate(f *testing.F) {
	for _, k := range adversarialKeys() {
		f.Add(k, uint16(7))
	}
	f.Add("k", uint16(0))
	f.Fuzz(func(t *testing.T, key string, n uint16) {
		n1 := int(n)%64 + 1 // the slow reference is O(n): keep it small
		r, err := NewRendezvous(n1)
		require.NoError(t, err)
		require.Equal(t, slowRendezvous(key, n1), r.Locate(key), "Rendezvous(%d).Locate(%q)", n1, key)
	})
}

// xorshiftMult64 and baselineRendezvous are the scoring loop of
// github.com/dgryski/go-rendezvous as its documentation describes it (hash the key once; for
// each node, xorshift-multiply the key hash xor the node's hash; keep the highest), written
// here as the speed baseline.
func xorshiftMult64(x uint64) uint64 {
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	return x * 2685821657736338717
}

func baselineRendezvous(nodeHashes []uint64, key string) int {
	khash := xxhash.Sum64String(key)
	midx, mhash := 0, xorshiftMult64(khash^nodeHashes[0])
	for i, nh := range nodeHashes[1:] {
		if h := xorshiftMult64(khash ^ nh); h > mhash {
			midx, mhash = i+1, h
		}
	}
	return midx
}

var rendezvousSink int

// BenchmarkRendezvousLocate compares Locate with the go-rendezvous loop; run with go test -run
// XXX -bench RendezvousLocate -count 5 . and compare impl=shard with impl=baseline.
func BenchmarkRendezvousLocate(b *testing.B) {
	keys := randomKeys(14, 1024, 16)
	for _, n := range []int{10, 100, 1000} {
		nodeHashes := make([]uint64, n)
		for i := range nodeHashes {
			nodeHashes[i] = xxhash.Sum64String(fmt.Sprintf("node-%d", i))
		}
		r, err := NewRendezvous(n)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("impl=shard/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rendezvousSink += r.Locate(keys[i%len(keys)])
				i++
			}
		})
		b.Run(fmt.Sprintf("impl=baseline/shards=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rendezvousSink += baselineRendezvous(nodeHashes, keys[i%len(keys)])
				i++
			}
		})
	}
}
