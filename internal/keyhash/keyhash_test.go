package keyhash

import (
	"crypto/md5"
	"crypto/sha1"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/spaolacci/murmur3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomKey returns a key of length n whose bytes are below 0x80 when ascii is set and
// arbitrary otherwise.
func randomKey(r *rand.Rand, n int, ascii bool) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
		if ascii {
			b[i] &= 0x7f
		}
	}
	return string(b)
}

// Cassandra's hash3_x64_128 reads the body as unsigned bytes, so with a tail of bytes below
// 0x80 it must equal reference MurmurHash3; a high tail byte must make it differ.
func TestCassandra128AgainstReferenceMurmur3(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 64; n++ {
		for range 50 {
			body := randomKey(r, n-n%16, false)
			tail := randomKey(r, n%16, true)
			key := body + tail
			h1, h2 := Cassandra128(key)
			w1, w2 := murmur3.Sum128([]byte(key))
			require.Equalf(t, [2]uint64{w1, w2}, [2]uint64{h1, h2}, "Cassandra128(%q)", key)

			if n%16 == 0 {
				continue
			}
			// Sign extension changes the hash unless the only high byte is tail byte 7,
			// whose extension is shifted out of the 64-bit word.
			signedTail := []byte(tail)
			i := r.IntN(len(signedTail))
			if i == 7 {
				i = 0
			}
			signedTail[i] |= 0x80
			key = body + string(signedTail)
			h1, _ = Cassandra128(key)
			w1, _ = murmur3.Sum128([]byte(key))
			assert.NotEqualf(t, w1, h1, "Cassandra128(%q) should differ from reference MurmurHash3", key)
		}
	}
}

func TestDigestPrefixes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 100 {
		key := randomKey(r, n, false)
		m := md5.Sum([]byte(key))
		assert.Equalf(t, binary.LittleEndian.Uint32(m[:4]), JedisMD5(key), "JedisMD5(%q)", key)
		s := sha1.Sum([]byte(key))
		assert.Equalf(t, s[0], SHA1FirstByte(key), "SHA1FirstByte(%q)", key)
	}
	// MD5("") = d41d8cd98f00b204e9800998ecf8427e (RFC 1321, appendix A.5).
	assert.Equal(t, uint32(0xd98c1dd4), JedisMD5(""))
	// SHA-1("abc") = a9993e36... (FIPS 180-1, appendix A).
	assert.Equal(t, byte(0xa9), SHA1FirstByte("abc"))
	// XXH64("", seed 0) = ef46db3751d8e999 (xxHash's reference sanity value).
	assert.Equal(t, uint64(0xef46db3751d8e999), XXH64(""))
}

func TestAllocs(t *testing.T) {
	key := randomKey(rand.New(rand.NewPCG(5, 6)), 1000, false)
	for name, f := range map[string]func(){
		"XXH64":         func() { _ = XXH64(key) },
		"JedisMD5":      func() { _ = JedisMD5(key) },
		"SHA1FirstByte": func() { _ = SHA1FirstByte(key) },
		"Cassandra128":  func() { _, _ = Cassandra128(key) },
	} {
		assert.Zerof(t, testing.AllocsPerRun(100, f), "%s allocates", name)
	}
}

var sink uint64

func BenchmarkHash(b *testing.B) {
	key := randomKey(rand.New(rand.NewPCG(7, 8)), 16, false)
	for name, f := range map[string]func(string) uint64{
		"xxh64":     XXH64,
		"md5":       func(s string) uint64 { return uint64(JedisMD5(s)) },
		"sha1":      func(s string) uint64 { return uint64(SHA1FirstByte(s)) },
		"cassandra": func(s string) uint64 { h, _ := Cassandra128(s); return h },
	} {
		b.Run("hash="+name, func(b *testing.B) {
			b.SetBytes(int64(len(key)))
			b.ReportAllocs()
			for b.Loop() {
				sink += f(key)
			}
		})
	}
}
