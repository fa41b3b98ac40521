// Package keyhash holds the hash functions that shard strategies place keys with. Each one
// hashes the bytes of a string without allocating and without any per-process seed, so the
// same key hashes the same everywhere.
package keyhash

import (
	"crypto/md5"
	"crypto/sha1"

	"github.com/cespare/xxhash/v2"
)

// XXH64 returns the 64-bit xxHash (XXH64, seed 0) of s. It is the default key hash of the
// strategies that do not have to match another system.
func XXH64(s string) uint64 {
	return xxhash.Sum64String(s)
}

// JedisMD5 returns the first four bytes of the MD5 digest of s read little-endian, the
// position Jedis's Hashing.MD5 gives a key on its ring (held there in a Java long, always in
// [0, 2^32)). Jedis encodes the key as UTF-8 first; a Go string's bytes are hashed as they
// are, which is the same for every valid UTF-8 key.
func JedisMD5(s string) uint32 {
	d := md5.Sum(bytesOf(s))
	return uint32(d[0]) | uint32(d[1])<<8 | uint32(d[2])<<16 | uint32(d[3])<<24
}

// SHA1FirstByte returns the first byte of the SHA-1 digest of s.
func SHA1FirstByte(s string) byte {
	d := sha1.Sum(bytesOf(s))
	return d[0]
}
