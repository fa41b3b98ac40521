package keyhash

import "math"

// Kafka names one of the 32-bit key hashes of the Kafka producers, computed exactly as the
// clients compute it (testdata/compat/kafka/README.md gives each client's code).
type Kafka uint8

const (
	// KafkaMurmur2 is MurmurHash2 (32-bit) seeded with 0x9747b28c: the Java client's
	// Utils.murmur2, librdkafka's rd_murmur2, franz-go's and sarama's murmur2, kafkajs's
	// default murmur2.
	KafkaMurmur2 Kafka = iota + 1
	// KafkaFNV1a is FNV-1a in 32 bits over unsigned bytes: Go's hash/fnv New32a, which
	// sarama and franz-go use, and librdkafka's rd_fnv1a before its sign step.
	KafkaFNV1a
	// KafkaCRC32 is the standard CRC-32 (IEEE): librdkafka's rd_crc32, Go's
	// crc32.ChecksumIEEE.
	KafkaCRC32
	// KafkaJSLegacy is the murmur2 of kafkajs's LegacyPartitioner (src/producer/partitioners/
	// legacy/murmur2.js), which computes in JavaScript's float64 numbers: its products round
	// to 53 bits before the bit operations take their low 32 bits, and its loop runs
	// ceil(len/4) times, reading the bytes of a last partial word (and zeros past the end)
	// as a whole word before the tail step mixes them in again.
	KafkaJSLegacy
)

// Sum32 returns the hash of the bytes of s.
func (h Kafka) Sum32(s string) uint32 { return h.Sum32Bytes(bytesOf(s)) }

// Sum32Bytes returns the hash of b.
func (h Kafka) Sum32Bytes(b []byte) uint32 {
	switch h {
	case KafkaMurmur2:
		return murmur2(b, 0x9747b28c)
	case KafkaFNV1a:
		x := uint32(0x811c9dc5)
		for _, c := range b {
			x = (x ^ uint32(c)) * 0x01000193
		}
		return x
	case KafkaCRC32:
		return crc32IEEE(b)
	case KafkaJSLegacy:
		return jsLegacyMurmur2(b)
	}
	panic("keyhash: unknown Kafka hash") // unreachable through the named constants
}

// jsLegacyMurmur2 follows kafkajs's legacy murmur2.js step by step. A JavaScript number is a
// float64; "*" rounds its product to float64, and "^" and ">>>" first take the number's
// integer value modulo 2^32 (ToInt32, ToUint32). Every number here is an integer below 2^63 in
// magnitude (a product of a 32-bit value and M), so int64 conversion is exact, and the explicit
// float64 conversions keep the compiler from fusing a product into another operation.
func jsLegacyMurmur2(b []byte) uint32 {
	const m = float64(0x5bd1e995)
	n := len(b)
	at := func(i int) uint32 { // data[i] & 0xff, and undefined & 0xff = 0 past the end
		if i < n {
			return uint32(b[i])
		}
		return 0
	}
	h := float64(int32(0x9747b28c ^ uint32(n)))
	for i := 0; i < (n+3)/4; i++ { // i < n / 4 on float64: ceil(n/4) rounds
		i4 := i * 4
		k := float64(at(i4)) + float64(at(i4+1)<<8) + float64(at(i4+2)<<16) + float64(int32(at(i4+3)<<24))
		k = float64(k * m)
		ku := jsUint32(k)
		k = float64(int32(ku ^ ku>>24))
		k = float64(k * m)
		h = float64(h * m)
		h = float64(int32(jsUint32(h) ^ jsUint32(k)))
	}
	tail := n &^ 3
	switch n % 4 {
	case 3:
		h = float64(int32(jsUint32(h) ^ at(tail+2)<<16))
		fallthrough
	case 2:
		h = float64(int32(jsUint32(h) ^ at(tail+1)<<8))
		fallthrough
	case 1:
		h = float64(int32(jsUint32(h) ^ at(tail)))
		h = float64(h * m)
	}
	u := jsUint32(h)
	h = float64(int32(u ^ u>>13))
	h = float64(h * m)
	u = jsUint32(h)
	return u ^ u>>15
}

// jsUint32 is JavaScript's ToUint32 of an integral float64 below 2^63 in magnitude.
func jsUint32(x float64) uint32 {
	if math.Abs(x) >= 1<<63 { // not reached by jsLegacyMurmur2; kept exact for any input
		x = math.Mod(x, 1<<32)
	}
	return uint32(int64(x))
}
