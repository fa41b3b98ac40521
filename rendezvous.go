package shard

import (
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/internal/mulmax"
)

// Rendezvous places a key on the shard that gives it the highest score: highest random
// weight hashing (David G. Thaler and Chinya V. Ravishankar, "Using Name-Based Mappings to
// Increase Hit Rates", IEEE/ACM Transactions on Networking 6(1), 1998).
//
// A resize moves the fewest keys possible: a key's scores do not depend on the shard count,
// so growing from n to n+1 shards moves only the keys that score highest on the new shard,
// about 1/(n+1) of them, and shrinking moves only the removed shard's keys, which spread
// evenly over the others. Any shard can be weighed against any other, which is what makes
// rendezvous hashing the usual choice for picking replicas or failover targets; here shards
// are numbered, so Resize adds and removes at the end like the other strategies.
//
// The score of shard i for a key is one multiplication, score_i = k * m_i mod 2^64, where k is
// xxhash64(key) with its low 17 bits replaced by 0...01, and m_i is the (i+1)th output of
// SplitMix64 seeded with 0 with its low 17 bits replaced by 2i+1. The key is hashed once, and
// m_i depends only on i, so placement does not depend on how the sharder was built or resized.
// The low 17 bits of score_i are 2i+1, so no two shards ever tie: in effect the high 47 bits
// decide and, were they equal, the higher shard number would win. A cheap score is in the
// spirit of the original: Thaler and Ravishankar's weight is two LCG steps around a xor (the
// form RFC 8584 §3.2 adopts), and this one spreads keys as evenly as rehashing the key for
// every shard does (see the tests).
//
// A lookup costs one multiplication per shard (about half a nanosecond), so Rendezvous allows
// at most 65536 shards, the most whose number fits in the low 17 bits; above a few thousand,
// Jump or a ring places keys faster.
//
// Make one with NewRendezvous. The zero Rendezvous has no shards: Shards and Locate return 0
// until Resize gives it some. All methods are safe for concurrent use: Resize builds the multipliers of the new count, which depend on nothing
// but the count, and swaps them in, so it needs no lock and a lookup sees the old or the
// new ones.
type Rendezvous struct {
	mults atomic.Pointer[[]uint64] // m_0 .. m_{n-1}; never modified once published
}

const (
	// maxRendezvous is the most shards whose 2i+1 fits in rendezvousLowBits bits.
	maxRendezvous     = 1 << (rendezvousLowBits - 1)
	rendezvousLowBits = 17
	rendezvousLowMask = 1<<rendezvousLowBits - 1
)

// NewRendezvous returns a Rendezvous sharder over n shards, n in [1, 65536].
func NewRendezvous(n int) (*Rendezvous, error) {
	if err := checkCount("rendezvous", n, maxRendezvous); err != nil {
		return nil, err
	}
	r := &Rendezvous{}
	m := rendezvousMultipliers(n)
	r.mults.Store(&m)
	return r, nil
}

// rendezvousMultipliers returns m_0 .. m_{n-1}.
func rendezvousMultipliers(n int) []uint64 {
	m := make([]uint64, n)
	for i := range m {
		m[i] = splitMix64(uint64(i)+1)&^rendezvousLowMask | uint64(2*i+1)
	}
	return m
}

// splitMix64 returns the ith output (from 1) of SplitMix64 seeded with 0 (Steele, Lea and
// Flood, "Fast Splittable Pseudorandom Number Generators", OOPSLA 2014; constants of
// Vigna's splitmix64.c).
func splitMix64(i uint64) uint64 {
	return mix64(i * 0x9e3779b97f4a7c15)
}

// mix64 is SplitMix64's output function (java.util.SplittableRandom's mix64): a bijection
// of 64-bit words that turns the generator's evenly spaced states into random-looking ones.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Locate returns the shard with the highest score for key, in [0, Shards()).
func (r *Rendezvous) Locate(key string) int {
	m := r.mults.Load()
	if m == nil { // the zero Rendezvous
		return 0
	}
	return rendezvous(*m, keyhash.XXH64(key))
}

// rendezvous returns the index of the highest score k * mults[i] for the key hash h; mults
// is not empty.
//
// Why a single multiplication: hashing the key again for every shard (argmax of
// xxhash64(key || i), the textbook form) costs a pass over the key per shard, while this
// costs one multiplication, and the tests show that both spread keys equally well and move
// the same keys' share on a resize.
//
// The loop is internal/mulmax's: in plain Go, two running maxima side by side, bound by the
// processor's one 64-bit multiplier; where the processor has AVX-512 (F and DQ), from 16
// shards up, an assembly kernel that multiplies and compares eight multipliers per
// instruction, 12 times faster at 1000 shards (BenchmarkMax4 in internal/mulmax).
func rendezvous(mults []uint64, h uint64) int {
	k := h&^rendezvousLowMask | 1 // so k * m_i ends in the low bits of m_i, 2i+1; every score is odd, so 0 never wins
	return int(mulmax.Max1(mults, k)&rendezvousLowMask) >> 1
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys). It scores four keys per pass over the multipliers, which saves
// loads and overlaps the keys' running maxima; both it and Locate are bound by the
// multiplications, one per shard and key, so it gains 1.1x to 1.4x over a loop of Locate in
// plain Go and little where both use the AVX-512 kernel (see rendezvous and
// BenchmarkLocateBatch).
func (r *Rendezvous) LocateBatch(keys []string, dst []int) {
	dst = batchDst(keys, dst)
	m := r.mults.Load()
	if m == nil { // the zero Rendezvous
		clear(dst)
		return
	}
	mults := *m
	i := 0
	for ; i+4 <= len(keys); i += 4 {
		k, d := keys[i:i+4:i+4], dst[i:i+4:i+4]
		d[0], d[1], d[2], d[3] = rendezvous4(mults, keyhash.XXH64(k[0]), keyhash.XXH64(k[1]), keyhash.XXH64(k[2]), keyhash.XXH64(k[3]))
	}
	for ; i < len(keys); i++ {
		dst[i] = rendezvous(mults, keyhash.XXH64(keys[i]))
	}
}

// rendezvous4 is rendezvous for four key hashes in one pass over mults, with
// internal/mulmax's kernel: eight multiplications at once where the processor has AVX-512.
func rendezvous4(mults []uint64, h0, h1, h2, h3 uint64) (int, int, int, int) {
	best0, best1, best2, best3 := mulmax.Max4(mults,
		h0&^rendezvousLowMask|1, h1&^rendezvousLowMask|1, h2&^rendezvousLowMask|1, h3&^rendezvousLowMask|1)
	return int(best0&rendezvousLowMask) >> 1, int(best1&rendezvousLowMask) >> 1,
		int(best2&rendezvousLowMask) >> 1, int(best3&rendezvousLowMask) >> 1
}

// Resize sets the number of shards to n, n in [1, 65536]. On error nothing changes.
func (r *Rendezvous) Resize(n int) error {
	if err := checkCount("rendezvous", n, maxRendezvous); err != nil {
		return err
	}
	m := rendezvousMultipliers(n)
	r.mults.Store(&m)
	return nil
}

// Shards returns the current number of shards.
func (r *Rendezvous) Shards() int {
	if m := r.mults.Load(); m != nil {
		return len(*m)
	}
	return 0
}
