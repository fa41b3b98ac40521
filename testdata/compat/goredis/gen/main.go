// Command gen writes the go-redis Ring compatibility vectors: for every configuration it
// builds a real redis.Ring over live redis-server processes, SETs every key of keys.txt
// through the Ring, then SCANs every backend and records which shard holds each key.
//
// gen.sh starts the servers and runs it:
//
//	go run . -keys ../../keys.txt -out .. -addrs 127.0.0.1:p1,...,127.0.0.1:p10
//
// The committed JSON configs carry illustrative addresses (10.0.0.x:6379); the live run
// puts the loopback servers behind the same names, twice, with the addresses assigned in
// two different orders, and fails unless both runs place every key on the same name: the
// placement depends on the Addrs names only.
package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// shard is one entry of an Addrs map, in the order the config file lists it.
type shard struct{ name, addr string }

// config is one Addrs map; file names the JSON written and the .txt vectors beside it.
type config struct {
	file   string
	shards []shard
}

// illustrative returns shards named names with addresses 10.0.0.1:6379, 10.0.0.2:6379, ...
func illustrative(names ...string) []shard {
	s := make([]shard, len(names))
	for i, n := range names {
		s[i] = shard{n, fmt.Sprintf("10.0.0.%d:6379", i+1)}
	}
	return s
}

var configs = []config{
	{"ring-1-shard", illustrative("shard1")},
	// The two names of go-redis's own README example.
	{"ring-2-shards", illustrative("shard1", "shard2")},
	{"ring-3-shards", illustrative("server1", "server2", "server3")},
	// The same three names listed in another order: same placement by name.
	{"ring-3-shards-reordered", illustrative("server3", "server1", "server2")},
	{"ring-5-numeric-names", illustrative("1", "2", "3", "4", "5")},
	// Names that look like addresses (what people write when they key Addrs by host).
	{"ring-5-hostport-names", illustrative("10.0.0.5:6379", "10.0.0.1:6379", "10.0.0.3:6379",
		"redis-b.internal:6380", "redis-a.internal:6379")},
	{"ring-10-shards-unordered", illustrative("shard7", "shard2", "shard9", "shard0", "shard4",
		"shard1", "shard8", "shard3", "shard6", "shard5")},
	// Names of every shape: leading zero, case, punctuation, URL, UTF-8, emoji, a long one.
	{"ring-10-mixed-names", illustrative("01", "1", "Shard_B", "shard_b", "a.b.c",
		"redis://cache-3:6379/0", "ключ", "分片", "🙂", strings.Repeat("long", 25))},
}

// refusals are Addrs maps the Ring accepts at construction but cannot route every key with.
var refusals = []config{
	{"refused-no-shards", nil},
	{"refused-empty-name", illustrative("", "b", "c")},
}

func main() {
	keysPath := flag.String("keys", "../../keys.txt", "the shared key set")
	outDir := flag.String("out", "..", "where the configs and vectors go")
	addrList := flag.String("addrs", "", "comma-separated live redis-server host:port, at least 10")
	redisVersion := flag.String("redis", "", "redis-server version line for the headers")
	flag.Parse()

	live := strings.Split(*addrList, ",")
	if len(live) < 10 {
		log.Fatalf("gen: need at least 10 live servers in -addrs, have %d", len(live))
	}
	keys, err := readKeys(*keysPath)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	backends := make(map[string]*redis.Client, len(live))
	for _, a := range live {
		backends[a] = redis.NewClient(&redis.Options{Addr: a})
	}
	system := fmt.Sprintf("go-redis %s Ring (default NewConsistentHash), %s", goRedisVersion(), *redisVersion)

	for _, c := range configs {
		if err := writeJSON(filepath.Join(*outDir, c.file+".json"), c.shards); err != nil {
			log.Fatal(err)
		}
		// Two live runs with the addresses assigned to the names in opposite orders.
		first, err := place(ctx, c.shards, live, false, keys, backends)
		if err != nil {
			log.Fatalf("gen: %s: %v", c.file, err)
		}
		second, err := place(ctx, c.shards, live, true, keys, backends)
		if err != nil {
			log.Fatalf("gen: %s (addresses reversed): %v", c.file, err)
		}
		for i := range first {
			if first[i] != second[i] {
				log.Fatalf("gen: %s: key %d moved from shard %d to %d when only the addresses changed",
					c.file, i, first[i], second[i])
			}
		}
		if err := writeVectors(filepath.Join(*outDir, c.file+".txt"), system, c, first); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d keys, per shard %v\n", c.file, len(keys), counts(first, len(c.shards)))
	}

	for _, c := range refusals {
		if err := writeJSON(filepath.Join(*outDir, c.file+".json"), c.shards); err != nil {
			log.Fatal(err)
		}
		msgs, failed := refusal(ctx, c.shards, live, keys, backends)
		fmt.Printf("%s: %d of %d keys refused: %s\n", c.file, failed, len(keys), strings.Join(msgs, "; "))
	}
}

// place builds a Ring over c's names with live addresses (in reverse order if reversed),
// SETs every key through it and returns, per key, the config index of the shard whose
// backend holds it. It checks that each key is on exactly one backend, holds the value
// written, and that Ring.GetShardClientForKey names the same backend.
func place(ctx context.Context, shards []shard, live []string, reversed bool, keys []string,
	backends map[string]*redis.Client) ([]int, error) {
	addrs := make(map[string]string, len(shards))
	shardOfAddr := make(map[string]int, len(shards))
	for i, s := range shards {
		a := live[i]
		if reversed {
			a = live[len(shards)-1-i]
		}
		addrs[s.name] = a
		shardOfAddr[a] = i
	}
	for _, b := range backends {
		if err := b.FlushAll(ctx).Err(); err != nil {
			return nil, err
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	defer ring.Close()
	for i, k := range keys {
		if err := ring.Set(ctx, k, strconv.Itoa(i), 0).Err(); err != nil {
			return nil, fmt.Errorf("SET key %d through the ring: %w", i, err)
		}
	}
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	where := make([]int, len(keys))
	for i := range where {
		where[i] = -1
	}
	for a, s := range shardOfAddr {
		found, err := scanAll(ctx, backends[a])
		if err != nil {
			return nil, err
		}
		for _, k := range found {
			i, ok := index[k]
			if !ok {
				return nil, fmt.Errorf("backend %s holds a key that is not in the key set: %q", a, k)
			}
			if where[i] != -1 {
				return nil, fmt.Errorf("key %d found on two backends", i)
			}
			where[i] = s
			v, err := backends[a].Get(ctx, k).Result()
			if err != nil || v != strconv.Itoa(i) {
				return nil, fmt.Errorf("key %d on %s holds %q (%v), want %d", i, a, v, err, i)
			}
		}
	}
	for i, s := range where {
		if s == -1 {
			return nil, fmt.Errorf("key %d found on no backend", i)
		}
		cl, err := ring.GetShardClientForKey(keys[i])
		if err != nil {
			return nil, err
		}
		if got := shardOfAddr[cl.Options().Addr]; got != s {
			return nil, fmt.Errorf("key %d: GetShardClientForKey says shard %d, SCAN found it on %d", i, got, s)
		}
	}
	return where, nil
}

// refusal SETs every key through a Ring over shards and returns the distinct errors and how
// many keys failed.
func refusal(ctx context.Context, shards []shard, live []string, keys []string,
	backends map[string]*redis.Client) ([]string, int) {
	addrs := make(map[string]string, len(shards))
	for i, s := range shards {
		addrs[s.name] = live[i]
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	defer ring.Close()
	seen := map[string]bool{}
	var msgs []string
	failed := 0
	for i, k := range keys {
		if err := ring.Set(ctx, k, strconv.Itoa(i), 0).Err(); err != nil {
			failed++
			if !seen[err.Error()] {
				seen[err.Error()] = true
				msgs = append(msgs, fmt.Sprintf("%q", err.Error()))
			}
		}
	}
	for _, b := range backends {
		b.FlushAll(ctx)
	}
	return msgs, failed
}

func scanAll(ctx context.Context, c *redis.Client) ([]string, error) {
	var all []string
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, "", 1000).Result()
		if err != nil {
			return nil, err
		}
		all = append(all, keys...)
		if next == 0 {
			return all, nil
		}
		cursor = next
	}
}

// readKeys reads keys.txt: one key per line in hex, "-" for the empty key, # comments.
func readKeys(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []string
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "-":
			keys = append(keys, "")
		default:
			b, err := hex.DecodeString(line)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n+1, err)
			}
			keys = append(keys, string(b))
		}
	}
	return keys, nil
}

// writeJSON writes the Addrs map with its names in config order, one per line.
func writeJSON(path string, shards []shard) error {
	var b bytes.Buffer
	b.WriteString("{")
	for i, s := range shards {
		if i > 0 {
			b.WriteString(",")
		}
		name, _ := json.Marshal(s.name)
		addr, _ := json.Marshal(s.addr)
		fmt.Fprintf(&b, "\n  %s: %s", name, addr)
	}
	if len(shards) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func writeVectors(path, system string, c config, where []int) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# system: %s, Addrs of %s.json\n", system, c.file)
	b.WriteString("# front door: SET through the Ring, then SCAN on every backend; each key found on exactly one\n")
	b.WriteString("# servers:")
	for i, s := range c.shards {
		fmt.Fprintf(&b, " %d=%s", i, s.name)
	}
	fmt.Fprintf(&b, "\n# keys: %d of %d carried\n", len(where), len(where))
	for i, s := range where {
		fmt.Fprintf(&b, "%d %d\n", i, s)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func counts(where []int, n int) []int {
	c := make([]int, n)
	for _, s := range where {
		c[s]++
	}
	return c
}

// goRedisVersion reads the go-redis version this binary was built with from its build info.
func goRedisVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/redis/go-redis/v9" {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}
