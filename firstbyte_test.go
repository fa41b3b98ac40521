package shard

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/stretchr/testify/require"
)

func TestFirstByteSHA1Contract(t *testing.T) {
	checkContract(t, contract{
		name:          "first-byte SHA-1",
		newSharder:    func(n int) (Sharder, error) { return NewFirstByteSHA1(n) },
		sizes:         []int{1, 3, 7, 9, 10},
		tooMany:       maxFirstByte + 1,
		resizeIsFresh: true,
		batch:         true,
	})
}

// The vectors come from testdata/gen/FirstByteSHA1Gen.java, the two-algorithms post's [000]
// Java rule run on the raw key bytes with MessageDigest SHA-1; they cover every value of the
// first byte.
func TestFirstByteSHA1Golden(t *testing.T) {
	sharders := make([]*FirstByteSHA1, maxFirstByte+1)
	for n := 1; n <= maxFirstByte; n++ {
		var err error
		sharders[n], err = NewFirstByteSHA1(n)
		require.NoError(t, err)
	}
	var firstBytes [256]bool
	rows := readVectors(t, "testdata/firstbyte_sha1.txt")
	for _, fields := range rows {
		require.Len(t, fields, 1+maxFirstByte, "line %q", fields)
		key := hexKey(t, strings.TrimPrefix(fields[0], "x")) // "x" alone is the empty key
		firstBytes[keyhash.SHA1FirstByte(key)] = true
		for n := 1; n <= maxFirstByte; n++ {
			require.Equalf(t, atoi(t, fields[n]), sharders[n].Locate(key), "FirstByteSHA1(%d).Locate(%q)", n, key)
		}
	}
	require.Greater(t, len(rows), 300)
	for b, seen := range firstBytes {
		require.Truef(t, seen, "no vector has first digest byte %#x", b)
	}
}

// The tables must agree with the literal formula for every byte and count, and the
// formula's known values pin the float arithmetic (10/6 does not divide 5 into exactly 3).
func TestFirstByteSHA1Table(t *testing.T) {
	for n := 1; n <= maxFirstByte; n++ {
		for b := range 256 {
			require.Equalf(t, firstByteFormula(byte(b), n), int(firstByteTables[n].shard[b]), "byte %#x, %d shards", b, n)
		}
	}
	// Residues by Math.abs of the signed byte: 0x80 is -128, whose abs is 128 -> 8.
	for _, c := range []struct {
		b    byte
		n    int
		want int
	}{{0x00, 10, 0}, {0x09, 10, 9}, {0xf7, 10, 9}, {0x80, 10, 8}, {0x7f, 10, 7}, {0x81, 10, 7},
		{0x05, 6, 3}, {0x03, 3, 0}, {0x07, 3, 2}, {0x09, 7, 6}, {0x08, 9, 7}} {
		require.Equalf(t, c.want, firstByteFormula(c.b, c.n), "byte %#x, %d shards", c.b, c.n)
	}
}

// The bucket counts stated in the doc comment of FirstByteSHA1.
func TestFirstByteSHA1Balance(t *testing.T) {
	counts := func(n int) []int {
		c := make([]int, n)
		for b := range 256 {
			c[firstByteTables[n].shard[b]]++
		}
		return c
	}
	require.Equal(t, []int{25, 26, 26, 26, 26, 26, 26, 26, 25, 24}, counts(10))
	require.Equal(t, []int{103, 78, 75}, counts(3))
	require.Equal(t, []int{51, 26, 52, 26, 52, 25, 24}, counts(7))
}

func TestFirstByteSHA1Regress(t *testing.T) {
	var b strings.Builder
	for _, n := range []int{1, 3, 7, 10} {
		f, err := NewFirstByteSHA1(n)
		require.NoError(t, err)
		for _, k := range append(randomKeys(3, 20, 12), adversarialKeys()[:12]...) {
			fmt.Fprintf(&b, "%d %q %d\n", n, k, f.Locate(k))
		}
	}
	checkRegress(t, "regress/firstbyte.txt", b.String())
}

func FuzzFirstByteSHA1Locate(f *testing.F) {
	for _, k := range adversarialKeys() {
		f.Add(k, 7)
	}
	f.Fuzz(func(t *testing.T, key string, n int) {
		s, err := NewFirstByteSHA1(n)
		if n < 1 || n > maxFirstByte {
			require.ErrorIs(t, err, ErrShardCount)
			return
		}
		require.NoError(t, err)
		require.Equal(t, firstByteFormula(keyhash.SHA1FirstByte(key), n), s.Locate(key))
	})
}
