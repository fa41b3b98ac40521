package coord_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/coord/embedded"
	"github.com/shardkit/shard/coord/internal/blackhole"
)

// The tests share one in-process etcd server and, when Debian's etcd-server is installed,
// one etcd process of its binary: every test runs against each (forEachServer), with a key
// prefix of its own.

// debianEtcd is the binary of Debian's etcd-server package.
const debianEtcd = "/usr/bin/etcd"

type server struct {
	name      string
	endpoints []string
	skip      string // why the server is not there, when it is not
}

var servers []server

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "coord-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	eps, stop, err := embedded.Start(dir + "/embedded")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	servers = append(servers, server{name: "embedded", endpoints: eps})

	real := server{name: "etcd-server"}
	if _, err := os.Stat(debianEtcd); err != nil {
		real.skip = fmt.Sprintf("%s not installed (apt-get install -y etcd-server): %v", debianEtcd, err)
	} else if eps, stop, err := embedded.StartProcess(debianEtcd, dir+"/debian"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	} else {
		defer stop()
		real.endpoints = eps
	}
	servers = append(servers, real)
	return m.Run()
}

// forEachServer runs f as a subtest against every server, skipping the ones not installed.
func forEachServer(t *testing.T, f func(t *testing.T, endpoints []string)) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			if s.skip != "" {
				t.Skip(s.skip)
			}
			f(t, s.endpoints)
		})
	}
}

var prefixes atomic.Int64

// prefix returns a key prefix of the test's own, new on every run (-count).
func prefix(t *testing.T) string {
	return fmt.Sprintf("/coord-test/%s/%d/", strings.ReplaceAll(t.Name(), "/", "_"), prefixes.Add(1))
}

// open opens a client that the test closes at its end.
func open(t *testing.T, endpoints []string, pfx string, opts coord.Options) *coord.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := coord.Open(ctx, endpoints, pfx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls cond every 50 ms until it returns nil or the deadline passes; the
// deadline only bounds a failing test, nothing is asserted about time.
func eventually(t *testing.T, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after %v: %v", what, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The roles a re-executed test binary can play (see TestMoverKilledTakenOver).
const (
	roleEnv      = "COORD_TEST_ROLE"
	endpointsEnv = "COORD_TEST_ENDPOINTS"
	prefixEnv    = "COORD_TEST_PREFIX"
)

// runRole plays a role in a child process: "mover" opens a client, takes the mover
// election, prints "epoch N identity" and waits to be killed.
func runRole(role string) int {
	switch role {
	case "mover":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := coord.Open(ctx, strings.Split(os.Getenv(endpointsEnv), ","), os.Getenv(prefixEnv), coord.Options{TTL: 3 * time.Second})
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		m, err := c.TryMover(ctx)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Printf("epoch %d %s\n", m.Epoch(), c.Identity())
		<-m.Done()
		fmt.Println("lost", m.Err())
		return 1
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// moverChild starts the test binary as a mover child and returns its command, epoch and
// identity once it holds the election.
func moverChild(t *testing.T, endpoints []string, pfx string) (*exec.Cmd, uint64, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=mover", endpointsEnv+"="+strings.Join(endpoints, ","), prefixEnv+"="+pfx)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var epoch uint64
	var identity, word string
	if _, err := fmt.Fscan(out, &word, &epoch, &identity); err != nil || word != "epoch" {
		t.Fatalf("mover child: read %q %d %q: %v", word, epoch, identity, err)
	}
	return cmd, epoch, identity
}

var errNotYet = errors.New("not yet")

// testProxy is a blackhole proxy in front of a test server, closed at the test's end.
type testProxy struct{ *blackhole.Proxy }

func proxy(t *testing.T, endpoints []string) testProxy {
	t.Helper()
	u, err := url.Parse(endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	p, err := blackhole.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return testProxy{p}
}

func (p testProxy) endpoints() []string { return []string{"http://" + p.Addr()} }
