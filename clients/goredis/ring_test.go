package goredis

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardkit/shard/clients/goredis/internal/redisproc"
	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

// TestRingOnRealServers writes every key of testdata/compat/keys.txt through go-redis's Ring
// over four real redis-server processes with NewConsistentHash, and asks every server
// directly which keys it holds: each key must be on the server the pool names for the live
// shards, and on no other. It does so with all four up, after one is stopped (once the Ring's
// heartbeat has marked it down and rebuilt its hash over the other three), and after it is
// started again (marked up: the hash over four again). It skips without redis-server, and
// fails instead when SHARD_REQUIRE_REDIS=1.
func TestRingOnRealServers(t *testing.T) {
	redis.SetLogger(quiet{}) // go-redis logs every refused dial to the stopped server
	keys := compatKeys(t)
	for _, c := range []struct {
		name    string
		newPool func([]pool.Node) (pool.Pool, error)
		minimal bool // a shard that goes down gives up only its own keys
	}{
		{"ring", func(n []pool.Node) (pool.Pool, error) { return pool.NewRing(n, pool.RingOptions{}) }, true},
		{"maglev", maglev, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			addrs := map[string]string{}
			srvs := map[string]*redisproc.Server{}
			var names []string
			for i := range 4 {
				s, err := redisproc.Start(ctx, filepath.Join(dir, strconv.Itoa(i)))
				if errors.Is(err, redisproc.ErrNoRedis) && os.Getenv("SHARD_REQUIRE_REDIS") != "1" {
					t.Skip(err.Error() + "; SHARD_REQUIRE_REDIS=1 makes this a failure")
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Stop)
				name := "shard-" + strconv.Itoa(i)
				addrs[name], srvs[name] = s.Addr, s
				names = append(names, name)
			}
			ring := redis.NewRing(&redis.RingOptions{
				Addrs:              addrs,
				NewConsistentHash:  NewConsistentHash(c.newPool),
				HeartbeatFrequency: 50 * time.Millisecond,
				MaxRetries:         -1,
			})
			defer ring.Close()

			up := check(t, ctx, ring, addrs, names, keys, c.newPool, "v1")

			// shard-2 goes down: the Ring's hash over the three others.
			srvs["shard-2"].Stop()
			waitLen(t, ring, 3)
			live := []string{"shard-0", "shard-1", "shard-3"}
			down := check(t, ctx, ring, addrs, live, keys, c.newPool, "v2")
			moved, others := 0, 0
			for i := range keys {
				if down[i] != up[i] {
					moved++
					if up[i] != "shard-2" {
						others++
					}
					if c.minimal && up[i] != "shard-2" {
						t.Fatalf("key %q moved from %s to %s when shard-2 went down", keys[i], up[i], down[i])
					}
				}
			}

			// shard-2 comes back (empty): the hash over four again, every key where it was.
			if err := srvs["shard-2"].Restart(ctx); err != nil {
				t.Fatal(err)
			}
			waitLen(t, ring, 4)
			back := check(t, ctx, ring, addrs, names, keys, c.newPool, "v3")
			for i := range keys {
				if back[i] != up[i] {
					t.Fatalf("key %q: on %s before shard-2 went down, on %s after it came back", keys[i], up[i], back[i])
				}
			}
			t.Logf("%s: %d keys where the pool says with 4 shards, then 3 (%d moved: shard-2's %d and %d others), then 4 again (all back)",
				c.name, len(keys), moved, moved-others, others)
		})
	}
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// waitLen waits up to ten seconds for the Ring to count n live shards.
func waitLen(t *testing.T, ring *redis.Ring, n int) {
	t.Helper()
	for range 200 {
		if ring.Len() == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the Ring counts %d live shards, want %d", ring.Len(), n)
}

// check empties the live servers, SETs every key through the Ring with the value
// version#index, then asks each live server for every key: each key must be on exactly one,
// the one newPool over the live names gives its hash tag. It returns each key's server.
func check(t *testing.T, ctx context.Context, ring *redis.Ring, addrs map[string]string, live, keys []string,
	newPool func([]pool.Node) (pool.Pool, error), version string) []string {
	t.Helper()
	clients := map[string]*redis.Client{}
	for _, name := range live {
		c := redis.NewClient(&redis.Options{Addr: addrs[name]})
		defer c.Close()
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		clients[name] = c
	}
	for i, k := range keys {
		if err := ring.Set(ctx, k, version+"#"+strconv.Itoa(i), 0).Err(); err != nil {
			t.Fatalf("%s: SET %q through the Ring: %v", version, k, err)
		}
	}
	nodes := make([]pool.Node, len(live))
	for i, name := range live {
		nodes[i] = pool.Node{Name: name}
	}
	p, err := newPool(nodes)
	if err != nil {
		t.Fatal(err)
	}
	where := make([]string, len(keys))
	perShard := map[string]int64{}
	for _, name := range live {
		for start := 0; start < len(keys); start += 200 {
			batch := keys[start:min(start+200, len(keys))]
			vals, err := clients[name].MGet(ctx, batch...).Result()
			if err != nil {
				t.Fatal(err)
			}
			for j, v := range vals {
				if v == nil {
					continue
				}
				i := start + j
				if v != version+"#"+strconv.Itoa(i) {
					t.Fatalf("%s: %s holds %q = %v", version, name, keys[i], v)
				}
				if where[i] != "" {
					t.Fatalf("%s: key %q on %s and on %s", version, keys[i], where[i], name)
				}
				where[i] = name
				perShard[name]++
			}
		}
		if n, err := clients[name].DBSize(ctx).Result(); err != nil || n != perShard[name] {
			t.Fatalf("%s: %s holds %d keys (%v), %d of ours", version, name, n, err, perShard[name])
		}
	}
	var counts []string
	for i, k := range keys {
		if want := p.Locate(compat.GoRedisHashTag(k)); where[i] != want {
			t.Fatalf("%s: key %q is on %q, the pool over %v names %s", version, k, where[i], live, want)
		}
	}
	for _, name := range live {
		counts = append(counts, fmt.Sprintf("%s %d", name, perShard[name]))
	}
	t.Logf("%s: %d keys, each on exactly one server, the pool's: %s", version, len(keys), strings.Join(counts, ", "))
	return where
}

// compatKeys returns the 2000 keys of testdata/compat/keys.txt (Redis takes any bytes, the
// empty key too).
func compatKeys(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../testdata/compat/keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		switch {
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
	if len(keys) != 2000 {
		t.Fatalf("keys.txt holds %d keys, want 2000", len(keys))
	}
	return keys
}
