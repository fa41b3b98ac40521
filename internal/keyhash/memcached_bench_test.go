package keyhash

import "testing"

var memcachedSink uint32

// BenchmarkMemcached times each memcached-family hash, spymemcached's String.hashCode and
// XXH64 (the engines' default) on a 16-byte key, side by side: what a preset's lookup spends
// on its key hash.
func BenchmarkMemcached(b *testing.B) {
	const key = "user:1000:cart:7"
	names := []string{"?", "one_at_a_time", "md5", "crc16", "crc32", "crc32a", "fnv1_64", "fnv1a_64", "fnv1_32", "fnv1a_32", "hsieh", "murmur", "murmur3", "jenkins"}
	for h := OneAtATime; h <= Jenkins; h++ {
		b.Run("hash="+names[h], func(b *testing.B) {
			for b.Loop() {
				memcachedSink += h.Sum32(key)
			}
		})
	}
	b.Run("hash=java_hashcode", func(b *testing.B) {
		for b.Loop() {
			memcachedSink += JavaHashCode(key)
		}
	})
	b.Run("hash=xxh64", func(b *testing.B) {
		for b.Loop() {
			memcachedSink += uint32(XXH64(key))
		}
	})
}
