package main

// The Go packages that claim to place keys as one of the systems of package compat, checked
// against the same golden vectors and timed next to the preset.
//
// Searched for: Go packages claiming nginx, HAProxy, Jedis or go-redis compatibility. Found on
// the Go module proxy: dgryski/go-rendezvous, which go-redis v9.0-v9.18 calls for its Ring
// (and v9.19+ inlines). github.com/bydsky/nchash ("the same result as nginx consistent hash")
// is not served by the proxy (403); no package claiming HAProxy's or Jedis's placement was
// found.

import (
	"bufio"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	rendezvous "github.com/dgryski/go-rendezvous"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

const compatDir = "../../testdata/compat"

// compatKeys reads the key set of the vectors.
func compatKeys(t testing.TB) []string {
	f, err := os.Open(filepath.Join(compatDir, "keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "-":
			keys = append(keys, "")
		default:
			b, err := hex.DecodeString(line)
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, string(b))
		}
	}
	return keys
}

// compatVectors reads a vector file: the server names and, per key index, the owner's name.
func compatVectors(t testing.TB, path string) (servers []string, owner map[int]string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	owner = map[int]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "# servers: "); ok {
			for _, f := range strings.Fields(rest) {
				_, name, _ := strings.Cut(f, "=")
				servers = append(servers, name)
			}
			continue
		}
		k, s, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		ki, err1 := strconv.Atoi(k)
		si, err2 := strconv.Atoi(s)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %q", path, line)
		}
		owner[ki] = servers[si]
	}
	return servers, owner
}

// dgryski/go-rendezvous with xxhash over the shard names, given the key's hash tag as
// go-redis gives it, places every go-redis vector: it is exact for the go-redis Ring.
func TestGoRendezvousIsGoRedisExact(t *testing.T) {
	keys := compatKeys(t)
	files, _ := filepath.Glob(filepath.Join(compatDir, "goredis", "ring-*.txt"))
	if len(files) == 0 {
		t.Fatal("no go-redis vectors")
	}
	total := 0
	for _, f := range files {
		servers, owner := compatVectors(t, f)
		names := slices.Clone(servers)
		slices.Reverse(names) // the order of the names does not matter
		r := rendezvous.New(names, xxhash.Sum64String)
		for k, want := range owner {
			if got := r.Lookup(compat.GoRedisHashTag(keys[k])); got != want {
				t.Fatalf("%s: key %d %q: go-rendezvous gives %q, go-redis %q", filepath.Base(f), k, keys[k], got, want)
			}
			total++
		}
	}
	t.Logf("dgryski/go-rendezvous+xxhash: %d of %d go-redis vectors", total, total)
}

// BenchmarkCompatLocate times each preset against the peer that claims the same placement,
// where one exists, on ten servers and the same keys.
func BenchmarkCompatLocate(b *testing.B) {
	keys := compatKeys(b)[:1024]
	names := make([]string, 10)
	addrs := map[string]string{}
	for i := range names {
		names[i] = "shard" + strconv.Itoa(i)
		addrs[names[i]] = ""
	}
	preset, err := compat.NewGoRedis(addrs)
	if err != nil {
		b.Fatal(err)
	}
	peer := rendezvous.New(names, xxhash.Sum64String)
	nodes := make([]pool.Node, len(names))
	for i, n := range names {
		nodes[i] = pool.Node{Name: n}
	}
	ring, err := pool.NewRing(nodes, pool.RingOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		locate func(string) string
	}{
		{"ours/pool-ring", ring.Locate},
		{"ours/compat-goredis", preset.Locate},
		{"dgryski/go-rendezvous+xxhash+hashtag", func(k string) string { return peer.Lookup(compat.GoRedisHashTag(k)) }},
	} {
		b.Run("impl="+c.name+"/shards=10", func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				s += len(c.locate(keys[i&1023]))
			}
			sink += s
		})
	}
}
