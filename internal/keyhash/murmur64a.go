package keyhash

import "encoding/binary"

// JedisMurmurSeed is the seed of Jedis's Hashing.MURMUR_HASH (MurmurHash.hash64A).
const JedisMurmurSeed = 0x1234ABCD

// MurmurHash64A returns Austin Appleby's MurmurHash64A (MurmurHash2, 64-bit version for
// 64-bit platforms) of s with the given seed: 8-byte blocks read little-endian, the 1 to 7
// bytes left zero-padded into one more block. With JedisMurmurSeed and the result read as a
// signed Java long it is the position Jedis's Hashing.MURMUR_HASH gives a key or a point
// (redis.clients.jedis.util.MurmurHash.hash64A), Jedis's default hash.
func MurmurHash64A(s string, seed uint64) uint64 {
	const (
		m = 0xc6a4a7935bd1e995
		r = 47
	)
	b := bytesOf(s)
	h := seed ^ uint64(len(b))*m
	for ; len(b) >= 8; b = b[8:] {
		k := binary.LittleEndian.Uint64(b)
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
	}
	if len(b) > 0 {
		var tail [8]byte
		copy(tail[:], b)
		h ^= binary.LittleEndian.Uint64(tail[:])
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}
