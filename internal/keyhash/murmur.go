package keyhash

import (
	"encoding/binary"
	"math/bits"
)

// Cassandra128 returns MurmurHash3 x64 128 (seed 0) of s as Cassandra computes it in
// org.apache.cassandra.utils.MurmurHash.hash3_x64_128, the hash of its Murmur3Partitioner.
//
// It differs from reference MurmurHash3 in one place: the tail (the last len(s)%16 bytes)
// is read as signed Java bytes, so a tail byte >= 0x80 is sign-extended before it is shifted
// into place. For keys whose tail bytes are all below 0x80 both agree.
func Cassandra128(s string) (h1, h2 uint64) {
	const (
		c1 = 0x87c37b91114253d5
		c2 = 0x4cf5ad432745937f
	)
	b := bytesOf(s)
	n := len(b)
	for len(b) >= 16 {
		k1 := binary.LittleEndian.Uint64(b)
		k2 := binary.LittleEndian.Uint64(b[8:])
		b = b[16:]

		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
		h1 = bits.RotateLeft64(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729

		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
		h2 = bits.RotateLeft64(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}

	// signed widens a byte as Java's (long) cast of a byte does.
	signed := func(c byte) uint64 { return uint64(int64(int8(c))) }
	var k1, k2 uint64
	switch len(b) {
	case 15:
		k2 ^= signed(b[14]) << 48
		fallthrough
	case 14:
		k2 ^= signed(b[13]) << 40
		fallthrough
	case 13:
		k2 ^= signed(b[12]) << 32
		fallthrough
	case 12:
		k2 ^= signed(b[11]) << 24
		fallthrough
	case 11:
		k2 ^= signed(b[10]) << 16
		fallthrough
	case 10:
		k2 ^= signed(b[9]) << 8
		fallthrough
	case 9:
		k2 ^= signed(b[8])
		k2 *= c2
		k2 = bits.RotateLeft64(k2, 33)
		k2 *= c1
		h2 ^= k2
		fallthrough
	case 8:
		k1 ^= signed(b[7]) << 56
		fallthrough
	case 7:
		k1 ^= signed(b[6]) << 48
		fallthrough
	case 6:
		k1 ^= signed(b[5]) << 40
		fallthrough
	case 5:
		k1 ^= signed(b[4]) << 32
		fallthrough
	case 4:
		k1 ^= signed(b[3]) << 24
		fallthrough
	case 3:
		k1 ^= signed(b[2]) << 16
		fallthrough
	case 2:
		k1 ^= signed(b[1]) << 8
		fallthrough
	case 1:
		k1 ^= signed(b[0])
		k1 *= c1
		k1 = bits.RotateLeft64(k1, 31)
		k1 *= c2
		h1 ^= k1
	}

	h1 ^= uint64(n)
	h2 ^= uint64(n)
	h1 += h2
	h2 += h1
	h1 = fmix64(h1)
	h2 = fmix64(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
