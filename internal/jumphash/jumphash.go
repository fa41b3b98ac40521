// Package jumphash holds the jump consistent hash that shard.Jump and pool.Memento share, so
// that the two place keys with one piece of code.
package jumphash

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
func Guava(state uint64, n int) int {
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
