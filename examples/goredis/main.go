// Command goredis plugs a pool of package shard into go-redis's Ring: the Ring's
// NewConsistentHash option builds one of our pools over the live shard names, so every key the
// Ring writes lands where our pool says. It starts real redis-server processes on 127.0.0.1
// (random free ports in 20000-60000, stopped on exit, also on failure or interrupt), SETs keys
// through the Ring, then asks every server directly and checks that each key is on exactly
// the server our pool names, and nowhere else.
//
//	go run . -servers 5 -keys 2000 -pool ring
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
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

// errNoRedis reports that redis-server is not installed: the example has nothing to run.
var errNoRedis = errors.New("redis-server is not installed (apt-get install redis-server): skipping the go-redis example")

func main() {
	servers := flag.Int("servers", 5, "redis-server processes to start, in [1, 50]")
	keys := flag.Int("keys", 2000, "keys to SET through the Ring")
	kind := flag.String("pool", "ring", "the pool go-redis uses: ring, rendezvous or goredis")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Stdout, *servers, *keys, *kind)
	switch {
	case errors.Is(err, errNoRedis):
		fmt.Println(err)
	case err != nil:
		fmt.Fprintln(os.Stderr, "goredis:", err)
		stop()
		os.Exit(1)
	}
}

// newPool returns the pool of the given kind over the shard names.
func newPool(kind string, names []string) (pool.Pool, error) {
	nodes := make([]pool.Node, len(names))
	for i, n := range names {
		nodes[i] = pool.Node{Name: n}
	}
	switch kind {
	case "ring":
		return pool.NewRing(nodes, pool.RingOptions{})
	case "rendezvous":
		return pool.NewRendezvous(nodes, pool.RendezvousOptions{})
	case "goredis":
		addrs := make(map[string]string, len(names))
		for _, n := range names {
			addrs[n] = "" // only the names place keys
		}
		return compat.NewGoRedis(addrs)
	}
	return nil, fmt.Errorf("unknown pool %q: want ring, rendezvous or goredis", kind)
}

// consistentHash adapts a pool to go-redis's ConsistentHash. The Ring hands Get the key's hash
// tag already (hashtag.Key), so keys with one tag stay together whatever the pool.
type consistentHash struct{ p pool.Pool }

func (c consistentHash) Get(key string) string {
	if c.p == nil {
		return "" // no live shard: the Ring reports "all ring shards are down"
	}
	return c.p.Locate(key)
}

// run starts the servers, writes the keys through a Ring that uses our pool, and verifies
// where every key is. It stops every server it started before it returns.
func run(ctx context.Context, out io.Writer, servers, keys int, kind string) (err error) {
	if servers < 1 || servers > 50 || keys < 1 {
		return fmt.Errorf("want 1 to 50 servers and at least one key, not %d and %d", servers, keys)
	}
	if _, err := newPool(kind, []string{"x"}); err != nil {
		return err
	}
	bin, lookErr := exec.LookPath("redis-server")
	if lookErr != nil {
		return errNoRedis
	}
	dir, err := os.MkdirTemp("", "shard-goredis-")
	if err != nil {
		return err
	}
	var procs []*server
	defer func() { // stop everything we started, whatever happened
		for _, p := range procs {
			p.stop()
		}
		if rmErr := os.RemoveAll(dir); err == nil {
			err = rmErr
		}
	}()

	addrs := make(map[string]string, servers)
	var names []string
	for i := range servers {
		srv, addr, err := startRedis(ctx, bin, filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			return err
		}
		procs = append(procs, srv)
		name := fmt.Sprintf("shard-%d", i)
		addrs[name] = addr
		names = append(names, name)
	}
	fmt.Fprintf(out, "started %d redis-server processes on 127.0.0.1\n", servers)

	ring := redis.NewRing(&redis.RingOptions{
		Addrs: addrs,
		NewConsistentHash: func(shards []string) redis.ConsistentHash {
			if len(shards) == 0 {
				return consistentHash{}
			}
			p, err := newPool(kind, shards)
			if err != nil {
				panic(err) // unreachable: the names are distinct and not empty, the kind checked
			}
			return consistentHash{p}
		},
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
	ours, err := newPool(kind, names)
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

// server is a redis-server process we started.
type server struct {
	cmd    *exec.Cmd
	exited chan error // receives Wait's result once the process has exited
}

// stop kills the process and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// startRedis starts one redis-server on 127.0.0.1 at a random free port in 20000-60000,
// without persistence, and waits until it answers. It tries other ports when one is taken.
// On error nothing it started is left running.
func startRedis(ctx context.Context, bin, dir string) (*server, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	for range 20 {
		port := strconv.Itoa(20000 + rand.IntN(40000))
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			continue // taken
		}
		l.Close()
		cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--dir", dir,
			"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "log"))
		if err := cmd.Start(); err != nil {
			return nil, "", err
		}
		s := &server{cmd: cmd, exited: make(chan error, 1)}
		go func() { s.exited <- cmd.Wait(); close(s.exited) }()
		addr := "127.0.0.1:" + port
		switch err := waitForPing(ctx, addr, s.exited); {
		case err == nil:
			return s, addr, nil
		case ctx.Err() != nil:
			s.stop()
			return nil, "", ctx.Err()
		}
		s.stop() // it could not listen there (taken since we looked): another port
	}
	return nil, "", errors.New("could not start redis-server on a free port in 20000-60000")
}

// waitForPing waits up to five seconds for the server at addr to answer PING, and gives up
// early if the process exits or ctx ends.
func waitForPing(ctx context.Context, addr string, exited <-chan error) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	for range 50 {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("redis-server did not answer")
}
