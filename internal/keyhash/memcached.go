package keyhash

import (
	"crypto/md5"
	"encoding/binary"
	"math/bits"
)

// Memcached names one of the 32-bit key hashes of the memcached family, computed exactly as
// the C code of libmemcached's libhashkit (1.1) and twemproxy's hashkit (0.5) computes it on
// x86-64, quirks included: C's char is signed there, and the functions that widen a key byte
// from char (one-at-a-time, the four FNV, and Hsieh's 3-byte tail) add a byte b >= 0x80 as
// b - 256, which changes the hash of every UTF-8 key. The two projects share these
// functions (twemproxy took libmemcached's); CRC16, CRC32a and Hsieh are twemproxy's only,
// Murmur3 libmemcached's only.
type Memcached uint8

const (
	// OneAtATime is Bob Jenkins' one-at-a-time hash over signed bytes: libmemcached's
	// DEFAULT, twemproxy's one_at_a_time.
	OneAtATime Memcached = iota + 1
	// MD5 is the first four bytes of the MD5 digest, little-endian: ketama's key hash.
	MD5
	// CRC16 is twemproxy's crc16: the CRC-16/XMODEM table (polynomial 0x1021, MSB first)
	// run on a 32-bit register that is never cut to 16 bits; its low 16 bits are the usual
	// CRC-16/XMODEM.
	CRC16
	// CRC32 is the standard CRC-32 (IEEE) shifted to its 15 bits 16..30: (crc >> 16) &
	// 0x7fff, libmemcached's CRC and twemproxy's crc32 (the perl Cache::Memcached rule).
	CRC32
	// CRC32a is the standard CRC-32 (IEEE), all 32 bits: twemproxy's crc32a.
	CRC32a
	// FNV64 is FNV-1 in 64 bits over signed bytes (multiply, then xor), its low 32 bits.
	FNV64
	// FNV64a is FNV-1a in 64 bits over signed bytes (xor, then multiply), its low 32 bits.
	// The C code computes it in 32 bits with the 64-bit constants cut to 32 bits, which
	// gives the same value: the low 32 bits of a product depend only on the low 32 bits
	// of its factors.
	FNV64a
	// FNV32 is FNV-1 in 32 bits over signed bytes.
	FNV32
	// FNV32a is FNV-1a in 32 bits over signed bytes.
	FNV32a
	// Hsieh is twemproxy's hsieh: Paul Hsieh's SuperFastHash started from 0 instead of the
	// length, with the third byte of a 3-byte tail signed.
	Hsieh
	// Murmur is MurmurHash2 (32-bit) seeded with 0xdeadbeef * len(key) mod 2^32.
	Murmur
	// Murmur3 is MurmurHash3 x86_32 seeded with 0xdeadbeef * len(key) mod 2^32:
	// libmemcached's MURMUR3.
	Murmur3
	// Jenkins is Bob Jenkins' lookup3 hashlittle with initval 13.
	Jenkins
)

// Sum32 returns the hash of the bytes of s.
func (h Memcached) Sum32(s string) uint32 { return h.Sum32Bytes(bytesOf(s)) }

// Sum32Bytes returns the hash of b. It is Sum32 for callers that assemble the hashed bytes
// themselves, such as libmemcached's namespace + key.
func (h Memcached) Sum32Bytes(b []byte) uint32 {
	switch h {
	case OneAtATime:
		return oneAtATime(b)
	case MD5:
		d := md5.Sum(b)
		return binary.LittleEndian.Uint32(d[:])
	case CRC16:
		return crc16(b)
	case CRC32:
		return crc32IEEE(b) >> 16 & 0x7fff
	case CRC32a:
		return crc32IEEE(b)
	case FNV64:
		return fnv64(b, false)
	case FNV64a:
		return fnv64(b, true)
	case FNV32:
		return fnv32(b, false)
	case FNV32a:
		return fnv32(b, true)
	case Hsieh:
		return hsieh(b)
	case Murmur:
		return murmur2(b, 0xdeadbeef*uint32(len(b)))
	case Murmur3:
		return murmur3x86(b, 0xdeadbeef*uint32(len(b)))
	case Jenkins:
		return lookup3(b, 13)
	}
	panic("keyhash: unknown Memcached hash") // unreachable through the named constants
}

// signed returns byte c widened from a signed C char to 32 bits.
func signed(c byte) uint32 { return uint32(int32(int8(c))) }

func oneAtATime(b []byte) uint32 {
	var h uint32
	for _, c := range b {
		h += signed(c)
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return h
}

// crc32Table is the table of the standard CRC-32 (IEEE 802.3, reflected, 0xEDB88320).
// hash/crc32 computes the same faster, but through a function variable that makes every
// buffer given to it escape to the heap, which Sum32Bytes's callers must avoid.
var crc32Table = func() (t [256]uint32) {
	for i := range t {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xedb88320
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc32IEEE(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc = crc>>8 ^ crc32Table[byte(crc)^c]
	}
	return ^crc
}

// crc16Table is the CRC-16/XMODEM table: the CRC of each byte, polynomial 0x1021, MSB first.
var crc16Table = func() (t [256]uint32) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = uint32(c)
	}
	return t
}()

func crc16(b []byte) uint32 {
	var crc uint32
	for _, c := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^c]
	}
	return crc
}

func fnv64(b []byte, a bool) uint32 {
	h := uint64(0xcbf29ce484222325)
	if a {
		for _, c := range b {
			h = (h ^ uint64(int64(int8(c)))) * 0x100000001b3
		}
	} else {
		for _, c := range b {
			h = h*0x100000001b3 ^ uint64(int64(int8(c)))
		}
	}
	return uint32(h)
}

func fnv32(b []byte, a bool) uint32 {
	h := uint32(0x811c9dc5)
	if a {
		for _, c := range b {
			h = (h ^ signed(c)) * 0x01000193
		}
	} else {
		for _, c := range b {
			h = h*0x01000193 ^ signed(c)
		}
	}
	return h
}

func hsieh(b []byte) uint32 {
	var h uint32
	for ; len(b) >= 4; b = b[4:] {
		h += uint32(binary.LittleEndian.Uint16(b))
		tmp := uint32(binary.LittleEndian.Uint16(b[2:]))<<11 ^ h
		h = h<<16 ^ tmp
		h += h >> 11
	}
	switch len(b) {
	case 3:
		h += uint32(binary.LittleEndian.Uint16(b))
		h ^= h << 16
		h ^= signed(b[2]) << 18
		h += h >> 11
	case 2:
		h += uint32(binary.LittleEndian.Uint16(b))
		h ^= h << 11
		h += h >> 17
	case 1:
		h += uint32(b[0])
		h ^= h << 10
		h += h >> 1
	}
	h ^= h << 3
	h += h >> 5
	h ^= h << 4
	h += h >> 17
	h ^= h << 25
	h += h >> 6
	return h
}

// murmur2 is Austin Appleby's MurmurHash2 (32-bit) with the given seed, read little-endian
// (the reference reads native words: little-endian on x86). libmemcached seeds it with
// 0xdeadbeef * len(key), Kafka's clients with 0x9747b28c.
func murmur2(b []byte, seed uint32) uint32 {
	const m, r = 0x5bd1e995, 24
	h := seed ^ uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		k := binary.LittleEndian.Uint32(b)
		k *= m
		k ^= k >> r
		k *= m
		h = h*m ^ k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// murmur3x86 is MurmurHash3_x86_32 (Austin Appleby's reference) with the given seed.
func murmur3x86(b []byte, seed uint32) uint32 {
	n := uint32(len(b))
	h := seed
	for ; len(b) >= 4; b = b[4:] {
		h = murmur3Round(h, binary.LittleEndian.Uint32(b))
	}
	var k uint32
	switch len(b) {
	case 3:
		k ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(b[0])
		h ^= murmur3K(k)
	}
	return murmur3Final(h, n)
}

// murmur3K mixes a block of MurmurHash3_x86_32 before it meets the hash.
func murmur3K(k uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	return bits.RotateLeft32(k*c1, 15) * c2
}

// murmur3Round takes a whole block k into h.
func murmur3Round(h, k uint32) uint32 {
	return bits.RotateLeft32(h^murmur3K(k), 13)*5 + 0xe6546b64
}

// murmur3Final is MurmurHash3_x86_32's finalization of h after n bytes.
func murmur3Final(h, n uint32) uint32 {
	h ^= n
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// Murmur3Stream is MurmurHash3_x86_32 with seed 0 of bytes given one at a time: for hashes
// of text that is not a byte string in memory (pymemcache hashes a node name, a '-' and a key,
// one byte per character). The zero value is the hash of no bytes; it never allocates.
type Murmur3Stream struct {
	h, k, n uint32 // the hash of the whole blocks, the bytes of the current block, bytes given
}

// Add appends one byte.
func (m *Murmur3Stream) Add(b byte) {
	m.k |= uint32(b) << (8 * (m.n & 3))
	m.n++
	if m.n&3 == 0 {
		m.h, m.k = murmur3Round(m.h, m.k), 0
	}
}

// Sum32 returns the hash of the bytes given so far.
func (m *Murmur3Stream) Sum32() uint32 {
	h := m.h
	if m.n&3 != 0 {
		h ^= murmur3K(m.k)
	}
	return murmur3Final(h, m.n)
}

// lookup3 is Bob Jenkins' hashlittle (lookup3.c, 2006) of b with initval, reading the bytes
// little-endian as the C code does on x86-64 whatever the alignment.
func lookup3(b []byte, initval uint32) uint32 {
	a := 0xdeadbeef + uint32(len(b)) + initval
	bb, c := a, a
	for len(b) > 12 {
		a += binary.LittleEndian.Uint32(b)
		bb += binary.LittleEndian.Uint32(b[4:])
		c += binary.LittleEndian.Uint32(b[8:])
		a, bb, c = lookup3Mix(a, bb, c)
		b = b[12:]
	}
	if len(b) == 0 {
		return c // zero length strings require no mixing
	}
	var last [12]byte
	copy(last[:], b)
	a += binary.LittleEndian.Uint32(last[:])
	bb += binary.LittleEndian.Uint32(last[4:])
	c += binary.LittleEndian.Uint32(last[8:])
	return lookup3Final(a, bb, c)
}

func lookup3Mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

func lookup3Final(a, b, c uint32) uint32 {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}
