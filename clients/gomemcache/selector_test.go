package gomemcache

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

// fakeResolve resolves "n<i>" to 10.0.0.<i>:11211 without the network, counting calls.
type fakeResolve struct{ calls atomic.Int64 }

func (f *fakeResolve) resolve(name string) (net.Addr, error) {
	f.calls.Add(1)
	i, err := strconv.Atoi(name[1:])
	if name[0] != 'n' || err != nil {
		return nil, errors.New("no such node")
	}
	return &net.TCPAddr{IP: net.IPv4(10, 0, 0, byte(i)), Port: 11211}, nil
}

func nodes(names ...string) []pool.Node {
	out := make([]pool.Node, len(names))
	for i, n := range names {
		out[i] = pool.Node{Name: n}
	}
	return out
}

func newRingSelector(t *testing.T, f *fakeResolve, names ...string) *Selector {
	t.Helper()
	p, err := pool.NewRing(nodes(names...), pool.RingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(p, Options{Resolve: f.resolve})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// PickServer, and the String gomemcache calls on its result, allocate nothing and resolve
// nothing once the selector is built.
func TestPickServerAllocatesNothing(t *testing.T) {
	f := &fakeResolve{}
	s := newRingSelector(t, f, "n1", "n2", "n3")
	calls := f.calls.Load()
	keys := []string{"user:1", "user:2", "a", ""}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		a, err := s.PickServer(keys[i%len(keys)])
		if err != nil || a.String() == "" || a.Network() != "tcp" {
			t.Fatal(a, err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("PickServer allocates %.1f times per call, want 0", allocs)
	}
	if f.calls.Load() != calls {
		t.Errorf("lookups resolved names %d times, want 0", f.calls.Load()-calls)
	}
}

// Every answer is the address of the node the pool names for the key.
func TestPickServerFollowsThePool(t *testing.T) {
	f := &fakeResolve{}
	s := newRingSelector(t, f, "n1", "n2", "n3", "n4")
	for i := range 1000 {
		key := "key:" + strconv.Itoa(i)
		a, err := s.PickServer(key)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := f.resolve(s.Pool().Locate(key))
		if a.String() != want.String() {
			t.Fatalf("%s: %s, the pool names %s", key, a, want)
		}
	}
}

// Lookups run while nodes join and leave, through the selector and through the pool
// directly: every answer is the address of a node that was a member at some point, and
// never an error. Run it with -race.
func TestChangesUnderConcurrency(t *testing.T) {
	f := &fakeResolve{}
	s := newRingSelector(t, f, "n1", "n2", "n3")
	valid := map[string]bool{}
	for i := 1; i <= 9; i++ {
		a, _ := f.resolve("n" + strconv.Itoa(i))
		valid[a.String()] = true
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				a, err := s.PickServer(fmt.Sprintf("k%d:%d", g, i))
				if err != nil || !valid[a.String()] {
					t.Errorf("PickServer = %v, %v", a, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if err := s.Each(func(a net.Addr) error {
				if !valid[a.String()] {
					return fmt.Errorf("Each gave %s", a)
				}
				return nil
			}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for round := range 200 {
		n := "n" + strconv.Itoa(4+round%6)
		var err error
		switch round % 3 {
		case 0:
			err = s.Add(pool.Node{Name: n, Weight: 2})
		case 1:
			err = s.Pool().Add(pool.Node{Name: n}) // behind the selector's back
		case 2:
			err = s.SetWeight("n1", 1+round%4)
		}
		if err != nil && !errors.Is(err, pool.ErrNode) {
			t.Fatal(err)
		}
		if round%2 == 1 {
			if err := s.Remove(n); err != nil && !errors.Is(err, pool.ErrNode) {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
}

// A node added to the pool directly is resolved at the first lookup that lands on it, and
// Each lists it.
func TestNodeAddedToThePool(t *testing.T) {
	f := &fakeResolve{}
	s := newRingSelector(t, f, "n1")
	if err := s.Pool().Add(pool.Node{Name: "n2"}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i := range 200 {
		a, err := s.PickServer(strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		seen[a.String()]++
	}
	if len(seen) != 2 || seen["10.0.0.2:11211"] == 0 {
		t.Fatalf("keys went to %v, want both nodes", seen)
	}
	var each []string
	if err := s.Each(func(a net.Addr) error { each = append(each, a.String()); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(each) != "[10.0.0.1:11211 10.0.0.2:11211]" {
		t.Fatalf("Each: %v", each)
	}
	// A node whose name does not resolve: the lookups that land on it fail.
	if err := s.Pool().Add(pool.Node{Name: "bad"}); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := range 200 {
		if _, err := s.PickServer(strconv.Itoa(i)); err != nil {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no lookup failed on a node that does not resolve")
	}
}

func TestErrors(t *testing.T) {
	f := &fakeResolve{}
	p, _ := pool.NewRing(nodes("n1", "bad"), pool.RingOptions{})
	if _, err := New(p, Options{Resolve: f.resolve}); err == nil {
		t.Error("New with a name that does not resolve: no error")
	}
	if _, err := New(nil, Options{}); !errors.Is(err, ErrConfig) {
		t.Errorf("New(nil): %v, want ErrConfig", err)
	}
	s := newRingSelector(t, f, "n1", "n2")
	if err := s.Add(pool.Node{Name: "n3"}, pool.Node{Name: "bad"}); err == nil {
		t.Error("Add of a name that does not resolve: no error")
	}
	if err := s.Add(pool.Node{Name: "n3"}, pool.Node{Name: "n1"}); !errors.Is(err, pool.ErrNode) {
		t.Errorf("Add of a member: %v, want pool.ErrNode", err)
	}
	if err := s.Remove("n9"); !errors.Is(err, pool.ErrNode) {
		t.Errorf("Remove of a stranger: %v, want pool.ErrNode", err)
	}
	if err := s.SetWeight("n1", -1); !errors.Is(err, pool.ErrWeight) {
		t.Errorf("SetWeight -1: %v, want pool.ErrWeight", err)
	}
	if got := fmt.Sprint(s.Pool().Nodes()); got != "[{n1 1} {n2 1}]" {
		t.Errorf("after failed changes the pool is %s", got)
	}
	if len(*s.addrs.Load()) != 2 {
		t.Errorf("after failed changes the table has %d names", len(*s.addrs.Load()))
	}
	for _, servers := range [][]string{nil, {""}, {"a,b"}, {"a b"}, {"a\nbehavior HASH CRC"}} {
		if _, err := NewKetama(servers...); !errors.Is(err, ErrConfig) && !errors.Is(err, compat.ErrConfig) {
			t.Errorf("NewKetama(%q): %v, want ErrConfig or compat.ErrConfig", servers, err)
		}
	}
	// libmemcached keeps the port modulo 2^16; the host then does not resolve.
	if _, err := NewKetama("host.invalid:99999999999"); err == nil {
		t.Error("NewKetama of a host that does not resolve: no error")
	}
	var z pool.Ring // the zero pool has no node
	if _, err := New(&z, Options{}); !errors.Is(err, ErrConfig) {
		t.Errorf("New of an empty pool: %v, want ErrConfig", err)
	}
	if _, err := (&Selector{p: &z, addrs: atomic.Pointer[map[string]net.Addr]{}}).miss(""); !errors.Is(err, memcache.ErrNoServers) {
		t.Errorf("no node: %v, want memcache.ErrNoServers", err)
	}
}

func TestResolveAddr(t *testing.T) {
	for name, want := range map[string]string{
		"127.0.0.1:24101": "tcp 127.0.0.1:24101",
		"127.0.0.1":       "tcp 127.0.0.1:11211",
		"[::1]":           "tcp [::1]:11211",
		"[::1]:24101":     "tcp [::1]:24101",
		"/run/mc.sock":    "unix /run/mc.sock",
	} {
		a, err := ResolveAddr(name)
		if err != nil || a.Network()+" "+a.String() != want {
			t.Errorf("ResolveAddr(%q) = %v, %v, want %s", name, a, err, want)
		}
	}
	if _, err := ResolveAddr("127.0.0.1:port"); err == nil {
		t.Error("a bad port: no error")
	}
}

// libmemcached's KETAMA_WEIGHTED and twemproxy's ketama with md5 are the same continuum:
// NewKetama serves both, key for key, on ports other than 11211 and on 11211, with weights.
func TestKetamaIsTwemproxyKetamaMD5(t *testing.T) {
	for _, c := range []struct {
		libmemcached []string
		twemproxy    []compat.TwemproxyServer
	}{
		{[]string{"10.0.0.1:24101", "10.0.0.2:24101", "10.0.0.3:24102:2"},
			[]compat.TwemproxyServer{{Addr: "10.0.0.1:24101", Weight: 1}, {Addr: "10.0.0.2:24101", Weight: 1}, {Addr: "10.0.0.3:24102", Weight: 2}}},
		{[]string{"10.0.0.1:11211", "10.0.0.2", "10.0.0.3:11211:3"},
			[]compat.TwemproxyServer{{Addr: "10.0.0.1:11211", Weight: 1}, {Addr: "10.0.0.2:11211", Weight: 1}, {Addr: "10.0.0.3:11211", Weight: 3}}},
	} {
		s, err := NewKetama(c.libmemcached...)
		if err != nil {
			t.Fatal(err)
		}
		twp, err := compat.NewTwemproxy(compat.Twemproxy{Hash: "md5", Distribution: "ketama", Servers: c.twemproxy})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20000 {
			key := "key:" + strconv.Itoa(i)
			a, _ := s.PickServer(key)
			b, _ := ResolveAddr(twp.Locate(key))
			if a.String() != b.String() {
				t.Fatalf("%v: %s: libmemcached ketama %s, twemproxy %s", c.libmemcached, key, a, b)
			}
		}
	}
}

// BenchmarkPickServer: a lookup of a Selector over NewKetama's pool of 10 servers.
func BenchmarkPickServer(b *testing.B) {
	var servers []string
	for i := range 10 {
		servers = append(servers, fmt.Sprintf("10.0.0.%d:11211", i+1))
	}
	s, err := NewKetama(servers...)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.PickServer(keys[i&1023]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
