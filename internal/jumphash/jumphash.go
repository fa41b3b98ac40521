// Package jumphash holds the jump consistent hash that shard.Jump and pool.Memento share, so
// that the two place keys with one piece of code.
package jumphash

import "math"

// Guava returns the bucket in [0, n) of the 64-bit key state among n buckets, n in
// [1, 2^31-1], by jump consistent hashing (John Lamping and Eric Veach, "A Fast, Minimal
// Memory, Consistent Hash Algorithm", 2014, https://arxiv.org/abs/1406.2294). The caller
// checks n.
//
// The result equals Guava's Hashing.consistentHash(long, int) for the same 64 bits, including
// its arithmetic: the random number is (int)(state >>> 33) + 1 in 32-bit arithmetic divided by
// 2^31, and the next bucket is (candidate + 1) divided by it. The paper's C++ multiplies by
// 2^31 / ((state >> 33) + 1) instead, which rounds differently, and does not wrap when
// state >> 33 is 2^31-1 (Guava's walk stops there).
//
// Guava steps from candidate c to next = (int) ((c+1) / r), r = x / 2^31 for the random x in
// [1, 2^31], and stops when next >= n. Dividing by r on every step puts the division's
// latency on the chain that carries c from step to step. The division here, 2^31/x, depends
// only on the generator, so it runs ahead of that chain, which is one multiplication and
// two additions (see step); above SmallMax buckets stepChecked adds a check that falls back
// to Guava's division in the rare steps where the fast value could differ. The candidate
// travels as b = c+1 in a float64, which holds every count exactly.
func Guava(state uint64, n int) int {
	if n <= SmallMax {
		return GuavaSmall(state, n)
	}
	return guavaChecked(state, n)
}

// multiplier is the multiplier of Guava's LinearCongruentialGenerator (and the paper's).
const multiplier = 2862933555777941757

// guavaChecked is Guava with stepChecked, for any n.
func guavaChecked(state uint64, n int) int {
	limit := float64(n)
	b := 1.0
	for {
		state = state*multiplier + 1
		x := int32(state>>33) + 1
		if x < 0 {
			break
		}
		next := stepChecked(b, x)
		if next > limit {
			break
		}
		b = next
	}
	return int(b) - 1
}

// GuavaSmall is Guava for n in [1, SmallMax], small enough to inline in a caller's loop.
func GuavaSmall(state uint64, n int) int {
	limit := float64(n)
	b := 1.0
	for {
		state = state*multiplier + 1
		x := int32(state>>33) + 1
		if x < 0 { // Guava's int addition wrapped: r = -1, next < 0, the walk stops
			break
		}
		next := step(b, x)
		if next > limit {
			break
		}
		b = next
	}
	return int(b) - 1
}

// Guava4 is Guava of four states, for n in [1, SmallMax]. One walk is a chain of
// dependent steps that leaves most of the processor idle; four walks stepping side by side
// fill it, and share one unpredictable loop exit instead of paying one each. A walk that has
// stopped keeps stepping until the last one stops: its b only grows (to +Inf at worst, never
// NaN), and its answer is the last b it reached that was at most n.
func Guava4(s0, s1, s2, s3 uint64, n int) (int, int, int, int) {
	limit := float64(n)
	stop := limit + 1
	// For floats >= 0 the order of their bits is the order of their values, and comparing
	// bits is an integer compare that can feed a conditional move.
	top := math.Float64bits(limit)
	b0, b1, b2, b3 := 1.0, 1.0, 1.0, 1.0
	one := math.Float64bits(1)
	c0, c1, c2, c3 := one, one, one, one // the bits of the last b <= n of each walk
	for {
		s0 = s0*multiplier + 1
		s1 = s1*multiplier + 1
		s2 = s2*multiplier + 1
		s3 = s3*multiplier + 1
		x0, x1, x2, x3 := int32(s0>>33)+1, int32(s1>>33)+1, int32(s2>>33)+1, int32(s3>>33)+1
		b0, b1, b2, b3 = step(b0, x0), step(b1, x1), step(b2, x2), step(b3, x3)
		if x0|x1|x2|x3 < 0 { // a wrapped x stops its walk (see GuavaSmall)
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

// SmallMax is the largest bucket count of GuavaSmall and Guava4: step is exact on every step
// of a walk below it.
const SmallMax = 1 << 18

// roundDown, added to a y in [0.5, 2^51), gives 2^52 + (y - 1/2 rounded to the nearest
// integer): in [2^52, 2^53) float64 values are exactly the integers.
const roundDown = 0x1p52 - 0.5

// step returns Guava's next candidate + 1 from candidate + 1 = b and the random x in
// [1, 2^31), for b <= 2^18, without a division on b's path. It is always exact:
//
// Let q = b*2^31/x, the exact quotient, k = floor(q), and u = 2^-53 the unit roundoff.
// Guava computes g = fl(q) (its r is exact, so b/r rounds once) and continues with trunc(g).
// Here lo = fl((2^31 + 2^-19)/x) = (2^31/x)(1 + 2^-50)(1 + e1) and p = fl(b*lo) =
// q(1 + 2^-50)(1 + e1)(1 + e2), |e1|, |e2| <= u, so q < p < q(1 + 2^-49): the numerator's
// bias keeps p above q whichever way the two roundings go. Since q*x = b*2^31 is an integer,
// q is either an integer or at least 1/x below the next one, and q*2^-49 <= 1/x because
// b <= 2^18; so k < p < k+1. Adding roundDown then rounds to 2^52 + k with no tie, and
// subtracting 2^52 - 1 gives k+1 exactly. Guava's g is within q*u < 1/x of q, on the same
// side of every integer (or equal to q when q is an integer), so trunc(g) = k too. The
// conversion float64(...) stops the compiler from fusing the multiply and the add; fused,
// p is the exact product and the argument holds all the more.
func step(b float64, x int32) float64 {
	return float64(b*((0x1p31+0x1p-19)/float64(x))) + roundDown - (0x1p52 - 1)
}

// stepChecked is step for any b up to 2^31: it brackets q between two products and
// uses them only when both round to the same integer; otherwise (q within about q*2^-47 of an
// integer: for q below 2^22, under one step in 10^7) it divides as Guava does.
//
// With r = fl(2^31/x), lower = fl(r(1 - 2^-47)) and upper = fl(r(1 + 2^-47)), the products
// p1 = fl(b*lower) < q(1 - 2^-48)(1 + u) and p2 = fl(b*upper) > q(1 + 2^-48)(1 - u) lie
// strictly below and above both q and g = fl(q). If p1 + roundDown and p2 + roundDown round
// to the same 2^52 + k, then k <= p1 and p2 <= k+1, so q and g lie in (k, k+1) and
// trunc(g) = k. A result at or above 2^53 means p1 >= 2^52 - 1/2, far beyond any count, and
// both this step and Guava's stop.
func stepChecked(b float64, x int32) float64 {
	r := 0x1p31 / float64(x)
	s := float64(b*(r*(1-0x1p-47))) + roundDown
	if s != float64(b*(r*(1+0x1p-47)))+roundDown {
		return float64(int64(b/(float64(x)/0x1p31))) + 1 // Guava's division; below 2^63
	}
	return s - (0x1p52 - 1)
}
