package shard

import (
	"sync/atomic"

	"github.com/shardkit/shard/internal/keyhash"
)

// FirstByteSHA1 places a key by the first byte of its SHA-1 digest: the "simple" algorithm
// of the two-algorithms post [000], reproduced bit for bit. In Java:
//
//	int n = Math.abs((int) sha1(key.getBytes("UTF-8"))[0]); // signed byte: 0..128
//	if (n >= 10) n = n % 10;                                 // 0..9
//	double delimiter = (double) 10 / shardsCount;
//	return (int) (n / delimiter);
//
// Go hashes the raw bytes of the key, which equal Java's UTF-8 encoding for every valid
// UTF-8 key.
//
// It is kept as a baseline, and is a poor choice for real data:
//   - There are only 10 buckets, so it addresses at most 10 shards.
//   - The buckets are uneven. Of the 256 byte values, residues 1 to 7 take 26 each, 0 and 8
//     take 25 (0 and -128 have no negative twin) and 9 takes 24, so residue 1 is 26/24 ≈ 1.08
//     times as likely as residue 9. Worse, 10 buckets do not divide evenly among most shard
//     counts: on 3 shards the shards get 103, 78 and 75 of 256 (max/mean 1.21); on 7 shards
//     51, 26, 52, 26, 52, 25 and 24 (max/mean 1.42, the fullest holds 2.17 times the
//     emptiest); on 9 shards max/mean is 1.79. Only 1, 2, 5 and 10 shards are near even.
//   - A resize moves many keys, and not only to the new shard: growing by one moves 50% of
//     the keys from 1, 3 or 7 shards, 60% from 4 and 90% from 9.
//
// Make one with NewFirstByteSHA1. The zero FirstByteSHA1 has no shards: Shards and Locate
// return 0 until Resize gives it some. All methods are safe for concurrent use: Resize only
// swaps a pointer to one of ten tables made at init, so it needs no lock, and a lookup sees
// the table before or after it.
type FirstByteSHA1 struct {
	table atomic.Pointer[firstByteTable]
}

// maxFirstByte is the number of buckets the rule has: more shards would never be used.
const maxFirstByte = 10

// firstByteTable maps every first digest byte to its shard for one shard count.
type firstByteTable struct {
	n     int
	shard [256]uint8
}

// firstByteTables[n] is the table for n shards, 1 <= n <= 10, computed once at init from the
// literal formula, so Locate is one digest and one table lookup.
var firstByteTables = func() (t [maxFirstByte + 1]firstByteTable) {
	for n := 1; n <= maxFirstByte; n++ {
		t[n].n = n
		for b := range 256 {
			t[n].shard[b] = uint8(firstByteFormula(byte(b), n))
		}
	}
	return t
}()

// firstByteFormula is the two-algorithms post's [000] rule for digest byte b and n shards,
// written as the Java is, in float64 as Java's double.
func firstByteFormula(b byte, n int) int {
	v := int(int8(b)) // Java bytes are signed
	if v < 0 {
		v = -v // Math.abs: -128 becomes 128 in an int
	}
	if v >= 10 {
		v %= 10
	}
	delimiter := float64(10) / float64(n)
	return int(float64(v) / delimiter) // Java's (int) truncates toward zero
}

// NewFirstByteSHA1 returns a FirstByteSHA1 sharder over n shards, n in [1, 10].
func NewFirstByteSHA1(n int) (*FirstByteSHA1, error) {
	if err := checkCount("first-byte SHA-1", n, maxFirstByte); err != nil {
		return nil, err
	}
	f := &FirstByteSHA1{}
	f.table.Store(&firstByteTables[n])
	return f, nil
}

// Locate returns the shard of key by the two-algorithms post's [000] rule, in [0, Shards()).
func (f *FirstByteSHA1) Locate(key string) int {
	t := f.table.Load()
	if t == nil { // the zero FirstByteSHA1
		return 0
	}
	return int(t.shard[keyhash.SHA1FirstByte(key)])
}

// LocateBatch sets dst[i] = Locate(keys[i]) for every key (see [BatchLocator]); it panics if
// len(dst) < len(keys).
func (f *FirstByteSHA1) LocateBatch(keys []string, dst []int) {
	dst = batchDst(keys, dst)
	t := f.table.Load()
	if t == nil { // the zero FirstByteSHA1
		clear(dst)
		return
	}
	for i, k := range keys {
		dst[i] = int(t.shard[keyhash.SHA1FirstByte(k)])
	}
}

// Resize sets the number of shards to n, n in [1, 10]. On error nothing changes.
func (f *FirstByteSHA1) Resize(n int) error {
	if err := checkCount("first-byte SHA-1", n, maxFirstByte); err != nil {
		return err
	}
	f.table.Store(&firstByteTables[n])
	return nil
}

// Shards returns the current number of shards.
func (f *FirstByteSHA1) Shards() int {
	if t := f.table.Load(); t != nil {
		return t.n
	}
	return 0
}
