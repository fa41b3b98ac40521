package proxyhash

import (
	"hash/crc32"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Worked values from testdata/compat/haproxy/README.md and testdata/compat/nginx/README.md,
// computed there by HAProxy's and nginx's own functions (and checked against their vectors by
// package compat's tests), and the published CRC-32 check value.
func TestGolden(t *testing.T) {
	assert.Equal(t, uint32(0xCBF43926), CRC32("123456789"), "CRC-32 check value")
	assert.Equal(t, uint32(0x7ba5c282), CRC32("user:1"))
	assert.Equal(t, uint32(0x39047082), SDBM("user:1"))
	assert.Equal(t, uint32(0x2124e72f), DJB2("user:1"))
	assert.Equal(t, uint32(0xecb0b882), WT6("user:1"))
	assert.Equal(t, uint32(0xcc761b27), Avalanche(0x39047082))
	assert.Equal(t, uint32(0xab4ed927), Avalanche(0))
	assert.Equal(t, uint32(0), SDBM(""))
	assert.Equal(t, uint32(0), CRC32(""))
	assert.Equal(t, uint32(5381), DJB2(""))
	assert.Equal(t, uint32(0xf99a0360), WT6(""))

	assert.Equal(t, uint32(0x7ba5), NginxPart("user:1", 0))
	base := NginxBase("127.0.0.1", "31001")
	p0 := NginxPoint(base, 0)
	assert.Equal(t, uint32(0xdb86b039), p0)
	assert.Equal(t, uint32(0xef23cd93), NginxPoint(base, p0))
}

// The incremental forms agree with CRC-32 of the whole strings.
func TestNginxAgainstWholeCRC(t *testing.T) {
	for _, key := range []string{"", "a", "user:1", "日本語", "{x}"} {
		for r := range 25 {
			prefix := ""
			if r > 0 {
				prefix = strconv.Itoa(r)
			}
			assert.Equal(t, crc32.ChecksumIEEE([]byte(prefix+key))>>16&0x7fff, NginxPart(key, r), "NginxPart(%q, %d)", key, r)
		}
		base := NginxBase(key, "80")
		prev := uint32(0x01020304)
		want := crc32.ChecksumIEEE([]byte(key + "\x0080\x04\x03\x02\x01"))
		assert.Equal(t, want, NginxPoint(base, prev), "NginxPoint(%q)", key)
	}
}

func TestAllocs(t *testing.T) {
	key := "some:key:of:a:usual:length"
	for name, f := range map[string]func(){
		"CRC32":     func() { _ = CRC32(key) },
		"NginxPart": func() { _ = NginxPart(key, 17) },
		"SDBM":      func() { _ = SDBM(key) },
		"DJB2":      func() { _ = DJB2(key) },
		"WT6":       func() { _ = WT6(key) },
	} {
		assert.Zerof(t, testing.AllocsPerRun(100, f), "%s allocates", name)
	}
}

var sink uint32

func BenchmarkHash(b *testing.B) {
	key := "0123456789abcdef"
	for name, f := range map[string]func(string) uint32{
		"crc32": CRC32,
		"sdbm":  SDBM,
		"djb2":  DJB2,
		"wt6":   WT6,
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
