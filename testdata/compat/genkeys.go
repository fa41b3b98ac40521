//go:build ignore

// genkeys writes keys.txt, the one key set that every compatibility vector file under
// testdata/compat is made from, so that every system is checked on the same keys:
//
//	go run testdata/compat/genkeys.go > testdata/compat/keys.txt
//
// One key per line in hex, "-" for the empty key; the line number (from 0, comments and
// blank lines not counted) is the key's index, which the vector files refer to. The keys
// are valid UTF-8 without control characters, so every system can carry them; a system that
// cannot carry some of them (memcached's text protocol refuses spaces, for instance) says so
// in its own vector file and leaves them out there.
package main

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
)

func main() {
	var keys []string
	seen := map[string]bool{}
	add := func(k string) { // each key once
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}

	// The edges: empty, one byte, every printable ASCII byte on its own.
	add("")
	for c := byte(' '); c <= '~'; c++ {
		add(string(c))
	}
	// What applications really use.
	for i := range 300 {
		add(fmt.Sprintf("user:%d", i))
	}
	for i := range 100 {
		add(fmt.Sprintf("session-%08x", uint32(i)*2654435761))
	}
	for i := range 50 {
		add(fmt.Sprintf("/img/%d/thumb.jpg?size=%d", i, 64<<(i%4)))
	}
	// Hash tags in every shape the routers disagree on.
	for _, k := range []string{
		"{user1000}.following", "{user1000}.followers", "foo{}{bar}", "foo{{bar}}zap",
		"foo{bar}{zap}", "{}", "{", "}", "}{", "a{b", "a}b", "{a}", "{{a}}", "x{y}z{w}",
		"{user:1}:profile", "{user:1}:cart", "user:{1}", "{ä}", "prefix{中文}suffix",
	} {
		add(k)
	}
	// Separators that config parsers and protocols care about.
	for _, k := range []string{
		"a b", " leading", "trailing ", "two  spaces", "a,b", "a;b", "a=b", "a:b:c",
		"a/b", "a\\b", "a\"b", "a'b", "100%", "a#b", "a?b&c=d", "a+b", "*", "-", "--",
	} {
		add(k)
	}
	// UTF-8: Cyrillic, Chinese, emoji (4-byte), combining marks.
	for _, k := range []string{
		"ключ", "шард:1", "Привет, мир", "键", "分片键", "用户:42", "🙂", "key🙂", "🚀🚀",
		"e\u0301", "naïve", "Größe", "日本語テキスト",
	} {
		add(k)
	}
	// Long keys: around the 250-byte memcached limit, and beyond it.
	for _, n := range []int{63, 64, 65, 127, 128, 200, 249, 250, 251, 255, 256, 1000, 4096} {
		add(strings.Repeat(string(rune('a'+n%26)), n))
	}
	// Random keys of random lengths and alphabets, fixed seed.
	r := rand.New(rand.NewPCG(2026, 11))
	const ascii = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:./{} ,"
	runes := []rune("абвгдежзийклмнопрстуфхцчшщъыьэюя中文键值分片一二三四五六七八九十éüß🙂")
	for len(keys) < 2000 {
		n := 1 + r.IntN(40)
		var b strings.Builder
		for range n {
			if r.IntN(8) == 0 {
				b.WriteRune(runes[r.IntN(len(runes))])
			} else {
				b.WriteByte(ascii[r.IntN(len(ascii))])
			}
		}
		add(b.String())
	}

	fmt.Println("# The key set of every compatibility vector file: one key per line in hex, \"-\" for the empty key.")
	fmt.Println("# Index = line number from 0, comments not counted. Made by: go run testdata/compat/genkeys.go")
	for _, k := range keys {
		if k == "" {
			fmt.Println("-")
			continue
		}
		fmt.Println(hex.EncodeToString([]byte(k)))
	}
}
