//go:build ignore

// Firstbytekeys prints, one per line as hex, the keys of testdata/firstbyte_sha1.txt:
// adversarial keys, random byte strings, and one key for every value of the first SHA-1
// byte, so that the vectors cover all 256 table entries.
//
//	go run firstbytekeys.go | java FirstByteSHA1Gen.java > ../firstbyte_sha1.txt
package main

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
)

func main() {
	keys := []string{
		"", "\x00", "\x00\x00\x00\x00", "\xff", "\xff\xfe\xfd", "\x80\x81\x82\x83",
		"\xc3\x28", "\xed\xa0\x80", "\xf4\x90\x80\x80", "日本語", "a\x00b", "{user}", "-1",
		"key", "user:1000", strings.Repeat("k", 4096), strings.Repeat("\xff", 1000),
	}
	r := rand.New(rand.NewPCG(0, 1))
	for range 60 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		keys = append(keys, string(b))
	}
	var seen [256]bool
	for i, left := 0, 256; left > 0; i++ {
		k := fmt.Sprintf("k%d", i)
		if d := sha1.Sum([]byte(k)); !seen[d[0]] {
			seen[d[0]] = true
			left--
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		fmt.Println("x" + hex.EncodeToString([]byte(k)))
	}
}
