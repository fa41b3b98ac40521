package jumphash

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The vectors come from Guava 31.1's Hashing.consistentHash(long, int) (see
// testdata/gen/JumpGuavaGen.java at the root, whose tests check shard.JumpHash on all of them).
func TestGuavaVectors(t *testing.T) {
	data, err := os.ReadFile("../../testdata/jump_guava.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 3 || strings.HasPrefix(line, "#") {
			continue
		}
		key, err1 := strconv.ParseUint(f[0], 16, 64)
		n, err2 := strconv.Atoi(f[1])
		want, err3 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("bad line %q", line)
		}
		if got := Guava(key, n); got != want {
			t.Fatalf("Guava(%#x, %d) = %d, want %d", key, n, got, want)
		}
		rows++
	}
	if rows < 5000 {
		t.Fatalf("read %d vectors, want over 5000", rows)
	}
}
