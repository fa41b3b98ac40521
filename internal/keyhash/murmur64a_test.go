package keyhash

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// MurmurHash64A against a direct transcription of Appleby's MurmurHash2_64.cpp that works on
// a byte slice with the tail switch of the reference (rather than a zero-padded block); the
// Jedis positions themselves are checked by package compat against the Jedis vectors.
func TestMurmurHash64AAgainstReferenceShape(t *testing.T) {
	ref := func(data []byte, seed uint64) uint64 {
		const m, r = 0xc6a4a7935bd1e995, 47
		h := seed ^ uint64(len(data))*m
		n := len(data) / 8
		for i := range n {
			var k uint64
			for j := 7; j >= 0; j-- {
				k = k<<8 | uint64(data[8*i+j])
			}
			k *= m
			k ^= k >> r
			k *= m
			h ^= k
			h *= m
		}
		tail := data[8*n:]
		switch len(tail) {
		case 7:
			h ^= uint64(tail[6]) << 48
			fallthrough
		case 6:
			h ^= uint64(tail[5]) << 40
			fallthrough
		case 5:
			h ^= uint64(tail[4]) << 32
			fallthrough
		case 4:
			h ^= uint64(tail[3]) << 24
			fallthrough
		case 3:
			h ^= uint64(tail[2]) << 16
			fallthrough
		case 2:
			h ^= uint64(tail[1]) << 8
			fallthrough
		case 1:
			h ^= uint64(tail[0])
			h *= m
		}
		h ^= h >> r
		h *= m
		h ^= h >> r
		return h
	}
	b := make([]byte, 40)
	for i := range b {
		b[i] = byte(i*37 + 200)
	}
	for n := range len(b) {
		for _, seed := range []uint64{0, JedisMurmurSeed} {
			assert.Equalf(t, ref(b[:n], seed), MurmurHash64A(string(b[:n]), seed), "MurmurHash64A(%d bytes, %#x)", n, seed)
		}
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = MurmurHash64A("a key of 21 bytes....", JedisMurmurSeed) }))
}
