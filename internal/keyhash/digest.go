package keyhash

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"encoding/binary"
)

// Digest names a cryptographic digest of the standard library, for the rings that take
// their points and key positions from digest bytes (npm hashring takes any digest Node's
// crypto.createHash offers).
type Digest uint8

const (
	DigestMD5 Digest = iota + 1
	DigestSHA1
	DigestSHA224
	DigestSHA256
	DigestSHA384
	DigestSHA512
	DigestSHA512_224
	DigestSHA512_256
	DigestSHA3_224
	DigestSHA3_256
	DigestSHA3_384
	DigestSHA3_512
	// DigestMD5SHA1 is OpenSSL's md5-sha1: the MD5 digest followed by the SHA-1 digest.
	DigestMD5SHA1
)

// Append appends the digest of s to dst and returns the extended slice.
func (d Digest) Append(dst []byte, s string) []byte {
	b := bytesOf(s)
	switch d {
	case DigestMD5:
		x := md5.Sum(b)
		return append(dst, x[:]...)
	case DigestSHA1:
		x := sha1.Sum(b)
		return append(dst, x[:]...)
	case DigestSHA224:
		x := sha256.Sum224(b)
		return append(dst, x[:]...)
	case DigestSHA256:
		x := sha256.Sum256(b)
		return append(dst, x[:]...)
	case DigestSHA384:
		x := sha512.Sum384(b)
		return append(dst, x[:]...)
	case DigestSHA512:
		x := sha512.Sum512(b)
		return append(dst, x[:]...)
	case DigestSHA512_224:
		x := sha512.Sum512_224(b)
		return append(dst, x[:]...)
	case DigestSHA512_256:
		x := sha512.Sum512_256(b)
		return append(dst, x[:]...)
	case DigestSHA3_224:
		x := sha3.Sum224(b)
		return append(dst, x[:]...)
	case DigestSHA3_256:
		x := sha3.Sum256(b)
		return append(dst, x[:]...)
	case DigestSHA3_384:
		x := sha3.Sum384(b)
		return append(dst, x[:]...)
	case DigestSHA3_512:
		x := sha3.Sum512(b)
		return append(dst, x[:]...)
	case DigestMD5SHA1:
		x, y := md5.Sum(b), sha1.Sum(b)
		return append(append(dst, x[:]...), y[:]...)
	}
	panic("keyhash: unknown Digest") // unreachable through the named constants
}

// First32 returns the first four bytes of the digest of s, read little-endian.
func (d Digest) First32(s string) uint32 {
	var buf [64]byte
	return binary.LittleEndian.Uint32(d.Append(buf[:0], s))
}
