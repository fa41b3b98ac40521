package goredis

import (
	"errors"
	"strconv"
	"testing"

	"github.com/shardkit/shard/pool"
)

func maglev(nodes []pool.Node) (pool.Pool, error) {
	return pool.NewMaglev(nodes, pool.MaglevOptions{})
}

func modula(nodes []pool.Node) (pool.Pool, error) {
	return pool.NewModula(nodes, pool.ModulaOptions{})
}

// Get is the pool's Locate over the shard names, sorted: the Ring's order (a map's, so
// random) changes nothing, even for a pool that depends on the order of its nodes.
func TestGetIsLocateOverSortedNames(t *testing.T) {
	newHash := NewConsistentHash(modula)
	a := newHash([]string{"c", "a", "d", "b"})
	b := newHash([]string{"b", "d", "a", "c"})
	p, err := modula([]pool.Node{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range 1000 {
		key := "user:" + strconv.Itoa(i)
		if got, want := a.Get(key), p.Locate(key); got != want || b.Get(key) != want {
			t.Fatalf("%s: Get %s and %s, the pool over the sorted names %s", key, got, b.Get(key), want)
		}
		seen[a.Get(key)] = true
	}
	if len(seen) != 4 {
		t.Fatalf("keys on %d shards of 4", len(seen))
	}
}

// No live shard, or a pool that cannot be built: "" for every key, which the Ring reports as
// "all ring shards are down".
func TestNoShard(t *testing.T) {
	if got := NewConsistentHash(maglev)(nil).Get("k"); got != "" {
		t.Errorf("no shard: Get = %q", got)
	}
	failing := NewConsistentHash(func([]pool.Node) (pool.Pool, error) { return nil, errors.New("no") })
	if got := failing([]string{"a"}).Get("k"); got != "" {
		t.Errorf("a pool error: Get = %q", got)
	}
	if got := NewConsistentHash(maglev)([]string{"a", "a"}).Get("k"); got != "" {
		t.Errorf("a name twice (the pool refuses it): Get = %q", got)
	}
}

func TestGetAllocatesNothing(t *testing.T) {
	h := NewConsistentHash(maglev)([]string{"shard1", "shard2", "shard3"})
	allocs := testing.AllocsPerRun(1000, func() {
		if h.Get("user:1000") == "" {
			t.Fatal("no shard")
		}
	})
	if allocs != 0 {
		t.Errorf("Get allocates %.1f times per call, want 0", allocs)
	}
}
