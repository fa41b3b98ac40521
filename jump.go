package shard

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
)

// maxJump is the largest bucket count of JumpHash: Guava's buckets parameter is a Java int.
const maxJump = math.MaxInt32

// JumpHash returns the bucket of key among n buckets, in [0, n), by jump consistent hashing
// (John Lamping and Eric Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014,
// https://arxiv.org/abs/1406.2294). From n to n+1 buckets a key moves with probability
// 1/(n+1), and only to bucket n. It takes O(log n) expected time and no memory.
//
// The result equals Guava's Hashing.consistentHash(long, int) for the same 64 bits, including
// its arithmetic: the random number is (int)(state >>> 33) + 1 in 32-bit arithmetic divided by
// 2^31, and the next bucket is (candidate + 1) divided by it. The paper's C++ multiplies by
// 2^31 / ((state >> 33) + 1) instead, which rounds differently, and does not wrap when
// state >> 33 is 2^31-1 (Guava's walk stops there). The two disagree on about 1 in 10^7
// random (key, n) pairs with n up to 2^31-1, so matching Guava matters for sharing placement
// with Java services.
//
// JumpHash panics if n < 1 or n > 2^31-1, like rand.IntN: a count is a programmer's choice,
// not data. Sharders that take counts from configuration check them and return errors.
func JumpHash(key uint64, n int) int {
	if n < 1 || n > maxJump {
		panic(fmt.Sprintf("shard: JumpHash: %d buckets: allowed range is [1, %d]", n, maxJump))
	}
	return jumpHash(key, n)
}

// jumpMultiplier is the multiplier of Guava's LinearCongruentialGenerator (and the paper's).
const jumpMultiplier = 2862933555777941757

// jumpHash is JumpHash for n in [1, maxJump].
//
// Guava steps from candidate c to next = (int) ((c+1) / r), r = x / 2^31 for the random x in
// [1, 2^31], and stops when next >= n. Dividing by r on every step puts the division's
// latency on the chain that carries c from step to step. The division here, 2^31/x, depends
// only on the generator, so it runs ahead of that chain, which is one multiplication and
// two additions (see jumpStep); above jumpUncheckedMax buckets jumpStepChecked adds a check
// that falls back to Guava's division in the rare steps where the fast value could differ.
//
// The candidate travels as b = c+1 in a float64, which holds every count exactly.
func jumpHash(state uint64, n int) int {
	if n <= jumpUncheckedMax {
		return jumpHashUnchecked(state, n)
	}
	return jumpHashChecked(state, n)
}

// jumpHashChecked is jumpHash with jumpStepChecked, for any n.
func jumpHashChecked(state uint64, n int) int {
	limit := float64(n)
	b := 1.0
	for {
		state = state*jumpMultiplier + 1
		x := int32(state>>33) + 1
		if x < 0 {
			break
		}
		next := jumpStepChecked(b, x)
		if next > limit {
			break
		}
		b = next
	}
	return int(b) - 1
}

// jumpHashUnchecked is jumpHash for n <= jumpUncheckedMax, small enough to inline.
func jumpHashUnchecked(state uint64, n int) int {
	limit := float64(n)
	b := 1.0
	for {
		state = state*jumpMultiplier + 1
		x := int32(state>>33) + 1
		if x < 0 { // Guava's int addition wrapped: r = -1, next < 0, the walk stops
			break
		}
		next := jumpStep(b, x)
		if next > limit {
			break
		}
		b = next
	}
	return int(b) - 1
}

// jumpHash4 is jumpHash of four states, for n <= jumpUncheckedMax. One walk is a chain of
// dependent steps that leaves most of the processor idle; four walks stepping side by side
// fill it, and share one unpredictable loop exit instead of paying one each. A walk that has
// stopped keeps stepping until the last one stops: its b only grows (to +Inf at worst, never
// NaN), and its answer is the last b it reached that was at most n.
func jumpHash4(s0, s1, s2, s3 uint64, n int) (int, int, int, int) {
	limit := float64(n)
	stop := limit + 1
	// For floats >= 0 the order of their bits is the order of their values, and comparing
	// bits is an integer compare that can feed a conditional move.
	top := math.Float64bits(limit)
	b0, b1, b2, b3 := 1.0, 1.0, 1.0, 1.0
	one := math.Float64bits(1)
	c0, c1, c2, c3 := one, one, one, one // the bits of the last b <= n of each walk
	for {
		s0 = s0*jumpMultiplier + 1
		s1 = s1*jumpMultiplier + 1
		s2 = s2*jumpMultiplier + 1
		s3 = s3*jumpMultiplier + 1
		x0, x1, x2, x3 := int32(s0>>33)+1, int32(s1>>33)+1, int32(s2>>33)+1, int32(s3>>33)+1
		b0, b1, b2, b3 = jumpStep(b0, x0), jumpStep(b1, x1), jumpStep(b2, x2), jumpStep(b3, x3)
		if x0|x1|x2|x3 < 0 { // a wrapped x stops its walk (see jumpHashUnchecked)
			b0, b1, b2, b3 = stopIfWrapped(b0, x0, stop), stopIfWrapped(b1, x1, stop), stopIfWrapped(b2, x2, stop), stopIfWrapped(b3, x3, stop)
		}
		// Conditional moves, not branches: when a walk stops is unpredictable.
		v0, v1, v2, v3 := math.Float64bits(b0), math.Float64bits(b1), math.Float64bits(b2), math.Float64bits(b3)
		if v0 <= top {
			c0 = v0
		}
		if v1 <= top {
			c1 = v1
		}
		if v2 <= top {
			c2 = v2
		}
		if v3 <= top {
			c3 = v3
		}
		if min(v0, v1, v2, v3) > top {
			return int(math.Float64frombits(c0)) - 1, int(math.Float64frombits(c1)) - 1,
				int(math.Float64frombits(c2)) - 1, int(math.Float64frombits(c3)) - 1
		}
	}
}

// stopIfWrapped returns stop if x wrapped, else next.
func stopIfWrapped(next float64, x int32, stop float64) float64 {
	if x < 0 {
		return stop
	}
	return next
}

// jumpUncheckedMax is the largest bucket count for which jumpStep is exact on every step.
const jumpUncheckedMax = 1 << 18

// jumpRound, added to a y in [0.5, 2^51), gives 2^52 + (y - 1/2 rounded to the nearest
// integer): in [2^52, 2^53) float64 values are exactly the integers.
const jumpRound = 0x1p52 - 0.5

// jumpStep returns Guava's next candidate + 1 from candidate + 1 = b and the random x in
// [1, 2^31), for b <= 2^18, without a division on b's path. It is always exact:
//
// Let q = b*2^31/x, the exact quotient, k = floor(q), and u = 2^-53 the unit roundoff.
// Guava computes g = fl(q) (its r is exact, so b/r rounds once) and continues with trunc(g).
// Here lo = fl((2^31 + 2^-19)/x) = (2^31/x)(1 + 2^-50)(1 + e1) and p = fl(b*lo) =
// q(1 + 2^-50)(1 + e1)(1 + e2), |e1|, |e2| <= u, so q < p < q(1 + 2^-49): the numerator's
// bias keeps p above q whichever way the two roundings go. Since q*x = b*2^31 is an integer,
// q is either an integer or at least 1/x below the next one, and q*2^-49 <= 1/x because
// b <= 2^18; so k < p < k+1. Adding jumpRound then rounds to 2^52 + k with no tie, and
// subtracting 2^52 - 1 gives k+1 exactly. Guava's g is within q*u < 1/x of q, on the same
// side of every integer (or equal to q when q is an integer), so trunc(g) = k too. The
// conversion float64(...) stops the compiler from fusing the multiply and the add; fused,
// p is the exact product and the argument holds all the more.
func jumpStep(b float64, x int32) float64 {
	return float64(b*((0x1p31+0x1p-19)/float64(x))) + jumpRound - (0x1p52 - 1)
}

// jumpStepChecked is jumpStep for any b up to 2^31: it brackets q between two products and
// uses them only when both round to the same integer; otherwise (q within about q*2^-47 of an
// integer: for q below 2^22, under one step in 10^7) it divides as Guava does.
//
// With r = fl(2^31/x), lower = fl(r(1 - 2^-47)) and upper = fl(r(1 + 2^-47)), the products
// p1 = fl(b*lower) < q(1 - 2^-48)(1 + u) and p2 = fl(b*upper) > q(1 + 2^-48)(1 - u) lie
// strictly below and above both q and g = fl(q). If p1 + jumpRound and p2 + jumpRound round
// to the same 2^52 + k, then k <= p1 and p2 <= k+1, so q and g lie in (k, k+1) and
// trunc(g) = k. A result at or above 2^53 means p1 >= 2^52 - 1/2, far beyond any count, and
// both this step and Guava's stop.
func jumpStepChecked(b float64, x int32) float64 {
	r := 0x1p31 / float64(x)
	s := float64(b*(r*(1-0x1p-47))) + jumpRound
	if s != float64(b*(r*(1+0x1p-47)))+jumpRound {
		return float64(int64(b/(float64(x)/0x1p31))) + 1 // Guava's division; below 2^63
	}
	return s - (0x1p52 - 1)
}

// Jump places a key on shard JumpHash(xxhash64(key), n).
//
// It is perfectly balanced and needs no memory, and a resize moves the fewest keys possible:
// growing from n to n+1 shards moves about 1/(n+1) of the keys, all to the new shard, and
// shrinking moves only the removed shard's keys. Shards can only be added or removed at the
// end; a failed server is replaced under the same number.
//
// Make one with NewJump; the zero Jump is not usable. All methods are safe for concurrent
// use: the count is one atomic word, so Resize needs no lock and a lookup sees the count
// before or after it.
type Jump struct {
	n atomic.Int64
}

// NewJump returns a Jump sharder over n shards, n in [1, 2^31-1].
func NewJump(n int) (*Jump, error) {
	if err := checkCount("jump", n, maxJump); err != nil {
		return nil, err
	}
	j := &Jump{}
	j.n.Store(int64(n))
	return j, nil
}

// Locate returns JumpHash(xxhash64(key), n), in [0, Shards()).
func (j *Jump) Locate(key string) int {
	h, n := keyhash.XXH64(key), int(j.n.Load())
	if n <= jumpUncheckedMax {
		return jumpHashUnchecked(h, n) // inlined: one call less for the usual counts
	}
	return jumpHashChecked(h, n)
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys). Up to 2^18 shards it walks four keys side by side, which on an
// amd64 server places keys about 1.4 times as fast as a loop of Locate at 1000 shards;
// above that it loops.
func (j *Jump) LocateBatch(keys []string, dst []int) {
	dst = batchDst(keys, dst)
	n := int(j.n.Load())
	i := 0
	if n <= jumpUncheckedMax {
		for ; i+4 <= len(keys); i += 4 {
			k, d := keys[i:i+4:i+4], dst[i:i+4:i+4]
			d[0], d[1], d[2], d[3] = jumpHash4(keyhash.XXH64(k[0]), keyhash.XXH64(k[1]), keyhash.XXH64(k[2]), keyhash.XXH64(k[3]), n)
		}
	}
	for ; i < len(keys); i++ {
		dst[i] = jumpHash(keyhash.XXH64(keys[i]), n)
	}
}

// Resize sets the number of shards to n, n in [1, 2^31-1]. On error nothing changes.
func (j *Jump) Resize(n int) error {
	if err := checkCount("jump", n, maxJump); err != nil {
		return err
	}
	j.n.Store(int64(n))
	return nil
}

// Shards returns the current number of shards.
func (j *Jump) Shards() int {
	return int(j.n.Load())
}
