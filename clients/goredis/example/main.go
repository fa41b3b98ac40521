// Command example plugs a pool of package shard into go-redis's Ring with
// goredis.NewConsistentHash: the Ring's NewConsistentHash option builds one of our pools over
// the live shard names, so every key the Ring writes lands where our pool says. It starts
// real redis-server processes on 127.0.0.1 (random free ports in 20000-60000, stopped on
// exit, also on failure or interrupt), SETs keys through the Ring, then asks every server
// directly and checks that each key is on exactly the server our pool names, and nowhere
// else.
//
//	go -C clients/goredis run ./example -servers 5 -keys 2000 -pool ring
//
// -pool chooses the pool: ring (pool.Ring, our default ring of 160 points per shard),
// rendezvous (pool.Rendezvous) or goredis (compat.NewGoRedis, which places keys exactly as the
// Ring's own default does, so the Ring places them as without the option). Without redis-server
// on the PATH it says so and exits 0 (apt-get install redis-server).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/shardkit/shard/clients/goredis"
	"github.com/shardkit/shard/clients/goredis/internal/redisproc"
	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

func main() {
	servers := flag.Int("servers", 5, "redis-server processes to start, in [1, 50]")
	keys := flag.Int("keys", 2000, "keys to SET through the Ring")
	kind := flag.String("pool", "ring", "the pool go-redis uses: ring, rendezvous or goredis")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Stdout, *servers, *keys, *kind)
	switch {
	case errors.Is(err, redisproc.ErrNoRedis):
		fmt.Println(err, ": skipping the go-redis example")
	case err != nil:
		fmt.Fprintln(os.Stderr, "example:", err)
		stop()
		os.Exit(1)
	}
}

// poolOf returns the constructor of the pool of the given kind, for
// goredis.NewConsistentHash.
func poolOf(kind string) (func(nodes []pool.Node) (pool.Pool, error), error) {
	switch kind {
	case "ring":
		return func(nodes []pool.Node) (pool.Pool, error) { return pool.NewRing(nodes, pool.RingOptions{}) }, nil
	case "rendezvous":
		return func(nodes []pool.Node) (pool.Pool, error) { return pool.NewRendezvous(nodes, pool.RendezvousOptions{}) }, nil
	case "goredis":
		return func(nodes []pool.Node) (pool.Pool, error) {
			addrs := make(map[string]string, len(nodes))
			for _, n := range nodes {
				addrs[n.Name] = "" // only the names place keys
			}
			return compat.NewGoRedis(addrs)
		}, nil
	}
	return nil, fmt.Errorf("unknown pool %q: want ring, rendezvous or goredis", kind)
}

// run starts the servers, writes the keys through a Ring that uses our pool, and verifies
// where every key is. It stops every server it started before it returns.
func run(ctx context.Context, out io.Writer, servers, keys int, kind string) (err error) {
	if servers < 1 || servers > 50 || keys < 1 {
		return fmt.Errorf("want 1 to 50 servers and at least one key, not %d and %d", servers, keys)
	}
	newPool, err := poolOf(kind)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "shard-goredis-")
	if err != nil {
		return err
	}
	var procs []*redisproc.Server
	defer func() { // stop everything we started, whatever happened
		for _, p := range procs {
			p.Stop()
		}
		if rmErr := os.RemoveAll(dir); err == nil {
			err = rmErr
		}
	}()

	addrs := make(map[string]string, servers)
	var names []string
	for i := range servers {
		srv, err := redisproc.Start(ctx, filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			return err
		}
		procs = append(procs, srv)
		name := fmt.Sprintf("shard-%d", i)
		addrs[name] = srv.Addr
		names = append(names, name)
	}
	fmt.Fprintf(out, "started %d redis-server processes on 127.0.0.1\n", servers)

	ring := redis.NewRing(&redis.RingOptions{
		Addrs:             addrs,
		NewConsistentHash: goredis.NewConsistentHash(newPool),
	})
	defer ring.Close()

	keyAt := func(i int) string {
		if i%10 == 0 { // every tenth key shares a hash tag with the next few
			return fmt.Sprintf("{user:%d}.profile", i/3)
		}
		return fmt.Sprintf("key:%d", i)
	}
	for i := range keys {
		if err := ring.Set(ctx, keyAt(i), i, 0).Err(); err != nil {
			return fmt.Errorf("SET %s through the Ring: %w", keyAt(i), err)
		}
	}
	fmt.Fprintf(out, "SET %d keys through go-redis's Ring with our %s pool as its ConsistentHash\n", keys, kind)

	// Our own pool, built here from all the names, says where each key must be.
	nodes := make([]pool.Node, len(names))
	for i, name := range names {
		nodes[i] = pool.Node{Name: name}
	}
	ours, err := newPool(nodes)
	if err != nil {
		return err
	}
	clients := make(map[string]*redis.Client, servers)
	for name, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients[name] = c
	}
	count := make(map[string]int64, servers)
	for i := range keys {
		key := keyAt(i)
		want := ours.Locate(compat.GoRedisHashTag(key))
		count[want]++
		v, err := clients[want].Get(ctx, key).Result()
		if err != nil || v != strconv.Itoa(i) {
			return fmt.Errorf("key %q is not on %s (%s), the server our pool names: GET gave %q, %v", key, want, addrs[want], v, err)
		}
	}
	for _, name := range names {
		n, err := clients[name].DBSize(ctx).Result()
		if err != nil {
			return err
		}
		if n != count[name] {
			return fmt.Errorf("%s holds %d keys, our pool put %d there: a key is on two servers", name, n, count[name])
		}
		fmt.Fprintf(out, "  %s (%s): %d keys, all where our pool says\n", name, addrs[name], n)
	}
	fmt.Fprintf(out, "verified: each of the %d keys is on the server our pool names, and on no other\n", keys)
	return nil
}
