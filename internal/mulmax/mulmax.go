// Package mulmax computes, for one or a few 64-bit keys at once, the largest product k × m mod 2^64
// over a slice of multipliers m: the inner loop of rendezvous hashing with multiplicative
// scores (package shard's Rendezvous), which costs one 64-bit multiplication per shard and
// key. A scalar loop is bound by the processor's one 64-bit multiplier; where AVX-512
// (F and DQ) is available, an assembly kernel multiplies and compares eight lanes at once
// (VPMULLQ, VPMAXUQ). Both give exactly the same results; Max4Generic is the reference.
package mulmax

// Max4 returns, for each of k0..k3, the largest k × m mod 2^64 over m in mults, and 0 for an
// empty mults.
func Max4(mults []uint64, k0, k1, k2, k3 uint64) (b0, b1, b2, b3 uint64) {
	if useAVX512 && len(mults) >= minSIMD {
		var k, best [4]uint64
		k = [4]uint64{k0, k1, k2, k3}
		max4AVX512(mults, &k, &best)
		return best[0], best[1], best[2], best[3]
	}
	return Max4Generic(mults, k0, k1, k2, k3)
}

// Max1 returns the largest k × m mod 2^64 over m in mults, and 0 for an empty mults.
func Max1(mults []uint64, k uint64) uint64 {
	if useAVX512 && len(mults) >= minSIMD {
		return max1AVX512(mults, k)
	}
	return Max1Generic(mults, k)
}

// Max1Generic is Max1 in plain Go: two running maxima, so that their compare-and-select
// chains run side by side.
func Max1Generic(mults []uint64, k uint64) uint64 {
	var b0, b1 uint64
	lo, hi := mults[:len(mults)/2], mults[len(mults)/2:]
	hi = hi[:len(lo)] // no bounds checks in the loop
	for i, m := range lo {
		b0 = max(b0, k*m)
		b1 = max(b1, k*hi[i])
	}
	if len(mults)%2 == 1 {
		b0 = max(b0, k*mults[len(mults)-1])
	}
	return max(b0, b1)
}

// Max4Generic is Max4 in plain Go, one multiplication at a time.
func Max4Generic(mults []uint64, k0, k1, k2, k3 uint64) (b0, b1, b2, b3 uint64) {
	for _, m := range mults {
		b0 = max(b0, k0*m)
		b1 = max(b1, k1*m)
		b2 = max(b2, k2*m)
		b3 = max(b3, k3*m)
	}
	return b0, b1, b2, b3
}

// SIMD reports whether Max4 uses the AVX-512 kernel on this machine.
func SIMD() bool { return useAVX512 }

// minSIMD is the fewest multipliers for which the kernel pays for its setup and reduction.
const minSIMD = 16
