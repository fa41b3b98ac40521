// Package proxyhash holds the key hashes of the HTTP proxies that package compat reproduces:
// nginx's upstream hash module and HAProxy's hash-based balancing. Each hashes the bytes of a
// string without allocating and without any per-process seed.
//
// All arithmetic is unsigned 32-bit, as in the C sources; bytes are unsigned.
package proxyhash

import (
	"hash/crc32"
	"math/bits"
)

// CRC32 returns the usual CRC-32 of s (IEEE polynomial, reflected, initial and final xor
// 0xFFFFFFFF): nginx's ngx_crc32_long and HAProxy's hash_crc32.
func CRC32(s string) uint32 { return crc32.ChecksumIEEE(bytesOf(s)) }

// NginxPart returns the 15 bits nginx's `hash` method adds up for a key: bits 16..30 of
// CRC32 of the decimal digits of rehash followed by key, the digits left out when rehash is
// 0 (ngx_http_upstream_get_hash_peer, nginx 1.22, after Cache::Memcached).
func NginxPart(key string, rehash int) uint32 {
	c := uint32(0)
	if rehash > 0 {
		// The digits go through the table byte by byte: a buffer handed to crc32.Update
		// would escape to the heap.
		var buf [20]byte
		i := len(buf)
		for r := uint(rehash); r > 0; r /= 10 {
			i--
			buf[i] = byte('0' + r%10)
		}
		c = ^c
		for _, d := range buf[i:] {
			c = crc32.IEEETable[byte(c)^d] ^ c>>8
		}
		c = ^c
	}
	c = crc32.Update(c, crc32.IEEETable, bytesOf(key))
	return c >> 16 & 0x7fff
}

// NginxPoint returns the CRC32 of base followed by prev's four bytes, least significant
// first: point j+1 of an nginx `hash ... consistent` server from point j (prev), where
// base is the CRC32 state of "host\x00port" (NginxBase).
func NginxPoint(base, prev uint32) uint32 {
	b := [4]byte{byte(prev), byte(prev >> 8), byte(prev >> 16), byte(prev >> 24)}
	return crc32.Update(base, crc32.IEEETable, b[:])
}

// NginxBase returns CRC32 of host, a zero byte and port: the value every point of an
// nginx consistent-hash server continues from (ngx_http_upstream_init_chash).
func NginxBase(host, port string) uint32 {
	c := crc32.Update(0, crc32.IEEETable, bytesOf(host))
	c = crc32.Update(c, crc32.IEEETable, []byte{0})
	return crc32.Update(c, crc32.IEEETable, bytesOf(port))
}

// SDBM returns HAProxy's hash_sdbm of s: h = c + (h << 6) + (h << 16) - h per byte.
func SDBM(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h = uint32(s[i]) + h<<6 + h<<16 - h
	}
	return h
}

// DJB2 returns HAProxy's hash_djb2 of s: h = h*33 + c per byte from 5381.
func DJB2(s string) uint32 {
	h := uint32(5381)
	for i := 0; i < len(s); i++ {
		h = h*33 + uint32(s[i])
	}
	return h
}

// WT6 returns HAProxy's hash_wt6 of s (Willy Tarreau's 2013 hash: two 32-bit lanes rotated by
// amounts taken from the data).
func WT6(s string) uint32 {
	h0, h1 := uint32(0xa53c965a), uint32(0x5ca6953a)
	s0, s1 := 6, 18
	for i := 0; i < len(s); i++ {
		t := uint32(s[i])
		h0 = ^(h0 ^ t)
		h1 = ^(h1 + t)
		h0, h1 = bits.RotateLeft32(h1, s0), bits.RotateLeft32(h0, s1)
		u := (h0>>16 ^ h1) & 0xffff
		s0, s1 = int(u&31), int(u>>11)
	}
	return h0 ^ h1
}

// Avalanche returns HAProxy's full_hash of a: Bob Jenkins's 32-bit integer mix, multiplied
// by 3221225473. HAProxy applies it to the key's hash under `avalanche` and always to the
// numbers of its consistent-hash points.
func Avalanche(a uint32) uint32 {
	a = a + 0x7ed55d16 + a<<12
	a = a ^ 0xc761c23c ^ a>>19
	a = a + 0x165667b1 + a<<5
	a = (a + 0xd3a2646c) ^ a<<9
	a = a + 0xfd7046c5 + a<<3
	a = a ^ 0xb55a4f09 ^ a>>16
	return a * 3221225473
}
