package keyhash

// The key hashes of spymemcached (net.spy.memcached.DefaultHashAlgorithm, 2.12) that work on
// a Java String's UTF-16 code units rather than on bytes. A Go string is read as UTF-8 and
// each character becomes one unit, or two (a surrogate pair) above U+FFFF, as in the Java
// String that decoding the same bytes gives; a byte that is not part of valid UTF-8 counts as
// U+FFFD, as Go decodes it (Java's decoder may replace a broken sequence by fewer U+FFFD).
// Each returns the low 32 bits of the Java long, as spymemcached does. Its two byte-based
// hashes are Memcached CRC32 and MD5 of the UTF-8 bytes.

// JavaHashCode returns Java's String.hashCode of s (h = 31*h + unit), as an unsigned 32-bit
// value: spymemcached's NATIVE_HASH.
func JavaHashCode(s string) uint32 {
	var h uint32
	for _, r := range s {
		if r < 0x10000 {
			h = 31*h + uint32(r)
		} else {
			hi, lo := surrogates(r)
			h = 31*(31*h+hi) + lo
		}
	}
	return h
}

// JavaFNV64 returns FNV-1 in 64 bits (multiply, then xor) over the UTF-16 units of s, its
// low 32 bits: spymemcached's FNV1_64_HASH.
func JavaFNV64(s string) uint32 { return javaFNV(s, 0xcbf29ce484222325, 0x100000001b3, false) }

// JavaFNV64a returns FNV-1a in 64 bits (xor, then multiply) over the UTF-16 units of s, its
// low 32 bits: spymemcached's FNV1A_64_HASH.
func JavaFNV64a(s string) uint32 { return javaFNV(s, 0xcbf29ce484222325, 0x100000001b3, true) }

// JavaFNV32 returns FNV-1 in 32 bits over the UTF-16 units of s: spymemcached's
// FNV1_32_HASH (computed there in a long, whose low 32 bits are the 32-bit hash).
func JavaFNV32(s string) uint32 { return javaFNV(s, 0x811c9dc5, 0x01000193, false) }

// JavaFNV32a returns FNV-1a in 32 bits over the UTF-16 units of s: spymemcached's
// FNV1A_32_HASH.
func JavaFNV32a(s string) uint32 { return javaFNV(s, 0x811c9dc5, 0x01000193, true) }

// javaFNV runs FNV in 64-bit arithmetic, as Java's long does; for the 32-bit variants the
// low 32 bits are the same as in 32-bit arithmetic.
func javaFNV(s string, h, prime uint64, a bool) uint32 {
	unit := func(u uint32) {
		if a {
			h = (h ^ uint64(u)) * prime
		} else {
			h = h*prime ^ uint64(u)
		}
	}
	for _, r := range s {
		if r < 0x10000 {
			unit(uint32(r))
		} else {
			hi, lo := surrogates(r)
			unit(hi)
			unit(lo)
		}
	}
	return uint32(h)
}

// surrogates returns the UTF-16 surrogate pair of r, r in [0x10000, 0x10FFFF].
func surrogates(r rune) (hi, lo uint32) {
	r -= 0x10000
	return 0xd800 + uint32(r>>10), 0xdc00 + uint32(r&0x3ff)
}
