// Package gomemcache places the keys of a gomemcache client (github.com/bradfitz/gomemcache)
// with any pool of package shard: a [Selector] is a memcache.ServerSelector, so
// memcache.NewFromSelector(s) gives a client that sends every key to the server the pool
// names. gomemcache's own selector, memcache.ServerList, takes crc32(key) % n, which moves
// almost every key when a server joins or leaves; a Selector over a consistent pool moves
// only that server's share.
//
// [NewKetama] is the usual choice when other clients share the servers: it places keys as
// libmemcached does with MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED (compat.NewLibmemcached), so a Go
// client and a libmemcached client (PHP's and Python's memcached modules, the memc* tools)
// read and write each key on the same server. [New] takes any pool.Pool, such as a compat
// preset built from a twemproxy, nginx or spymemcached configuration.
//
// PickServer takes no lock and does not allocate: the pool's Locate gives the node, and an
// immutable table, rebuilt when the membership changes, gives the node's address, resolved
// once. Changes through the Selector's Add, Remove and SetWeight are safe while other
// goroutines pick servers: each lookup sees the membership before or after a change.
package gomemcache

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/shardkit/shard/compat"
	"github.com/shardkit/shard/pool"
)

var _ memcache.ServerSelector = (*Selector)(nil)

// ErrConfig reports servers or a pool a Selector cannot be built from: none, an empty or
// malformed server, a node that resolves to no address. Errors of the compat parsers wrap
// compat.ErrConfig instead, and a resolver's own errors are wrapped as they are.
var ErrConfig = errors.New("gomemcache: invalid configuration")

// Options configure a Selector.
type Options struct {
	// Resolve returns the address the client dials for a node name. nil resolves the name
	// as memcache.ServerList.SetServers does: a name holding '/' is a unix socket's path,
	// any other is "host:port" resolved over TCP, where a host alone (as libmemcached and
	// twemproxy name servers on port 11211) means port 11211. Give Resolve when the pool's
	// names are not addresses (twemproxy's named servers, "cache-a").
	Resolve func(name string) (net.Addr, error)
}

// Selector is a memcache.ServerSelector over a pool.Pool. Create it with New or NewKetama.
type Selector struct {
	p       pool.Pool
	resolve func(string) (net.Addr, error)
	// addrs maps node names to their addresses: every current member and perhaps a few
	// that left. It is replaced, never changed, under mu.
	addrs atomic.Pointer[map[string]net.Addr]
	mu    sync.Mutex
}

// New returns a Selector over p and resolves the address of every node of p now, returning
// the first error.
//
// Changes are best made through the Selector's Add, Remove and SetWeight, which resolve a
// new node before it can receive a key. A node added to p directly is resolved at the first
// lookup that lands on it (and PickServer returns the error if that fails).
func New(p pool.Pool, opts Options) (*Selector, error) {
	if p == nil {
		return nil, fmt.Errorf("gomemcache: no pool: %w", ErrConfig)
	}
	s := &Selector{p: p, resolve: opts.Resolve}
	if s.resolve == nil {
		s.resolve = ResolveAddr
	}
	addrs := map[string]net.Addr{}
	for _, n := range p.Nodes() {
		a, err := s.resolveNode(n.Name)
		if err != nil {
			return nil, err
		}
		addrs[n.Name] = a
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("gomemcache: the pool has no node: %w", ErrConfig)
	}
	s.addrs.Store(&addrs)
	return s, nil
}

// NewKetama returns a Selector that places keys as libmemcached 1.1 does with
// MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED set and then the servers pushed
// (memcached_server_push(memcached_servers_parse(list))): MD5 of the key on a continuum of
// 160 MD5 points per server of weight 1 (the ketama of libketama, and of twemproxy's
// "distribution: ketama" with "hash: md5"). Each server is an entry of libmemcached's server
// list, "host:port", "host" for port 11211, or "host:port:weight"; the host is taken as
// written (point names hash it, so write it as the other clients do). The pool is
// compat.NewLibmemcached's; Add and SetWeight take weights as
// memcached_server_add_with_weight does.
func NewKetama(servers ...string) (*Selector, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("gomemcache: no servers: %w", ErrConfig)
	}
	for _, s := range servers {
		if s == "" || strings.ContainsAny(s, ", \t\r\n\v\f") {
			return nil, fmt.Errorf("gomemcache: server %.80q: want host, host:port or host:port:weight: %w", s, ErrConfig)
		}
	}
	cfg, err := compat.ParseLibmemcached([]byte("behavior KETAMA_WEIGHTED 1\nservers " + strings.Join(servers, ",") + "\n"))
	if err != nil {
		return nil, fmt.Errorf("gomemcache: %w", err)
	}
	p, err := compat.NewLibmemcached(cfg)
	if err != nil {
		return nil, fmt.Errorf("gomemcache: %w", err)
	}
	return New(p, Options{})
}

// PickServer returns the address of the server that owns key. It takes no lock and does not
// allocate, except the first time a node that joined the pool directly is seen.
func (s *Selector) PickServer(key string) (net.Addr, error) {
	name := s.p.Locate(key)
	if a, ok := (*s.addrs.Load())[name]; ok {
		return a, nil
	}
	return s.miss(name)
}

// miss resolves a node the table does not have (it joined the pool directly) and publishes
// a table of the current members and that node.
func (s *Selector) miss(name string) (net.Addr, error) {
	if name == "" {
		return nil, memcache.ErrNoServers
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.addrs.Load()
	if a, ok := old[name]; ok {
		return a, nil // published meanwhile
	}
	a, err := s.resolveNode(name)
	if err != nil {
		return nil, err
	}
	next := map[string]net.Addr{name: a}
	for _, n := range s.p.Nodes() {
		if _, done := next[n.Name]; done {
			continue
		}
		na, ok := old[n.Name]
		if !ok {
			if na, err = s.resolveNode(n.Name); err != nil {
				return nil, err
			}
		}
		next[n.Name] = na
	}
	s.addrs.Store(&next)
	return a, nil
}

// Each calls f with the address of every member, in the order they joined, and stops at the
// first error, which it returns. gomemcache's FlushAll and Ping use it.
func (s *Selector) Each(f func(net.Addr) error) error {
	for _, n := range s.p.Nodes() {
		a, ok := (*s.addrs.Load())[n.Name]
		if !ok {
			var err error
			if a, err = s.miss(n.Name); err != nil {
				return err
			}
		}
		if err := f(a); err != nil {
			return err
		}
	}
	return nil
}

// Pool returns the pool the Selector places keys with.
func (s *Selector) Pool() pool.Pool { return s.p }

// Add resolves the new nodes, then adds them to the pool, all or none: a name that does not
// resolve is an error and changes nothing.
func (s *Selector) Add(nodes ...pool.Node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.addrs.Load()
	next := make(map[string]net.Addr, len(*old)+len(nodes))
	for name, a := range *old {
		next[name] = a
	}
	for _, n := range nodes {
		if _, ok := next[n.Name]; ok || n.Name == "" {
			continue // a member, or the pool's error to give
		}
		a, err := s.resolveNode(n.Name)
		if err != nil {
			return err
		}
		next[n.Name] = a
	}
	s.addrs.Store(&next) // before the pool change: a lookup never lands on an unknown node
	if err := s.p.Add(nodes...); err != nil {
		s.addrs.Store(old)
		return err
	}
	return nil
}

// Remove removes the named nodes from the pool, all or none, then forgets their addresses.
func (s *Selector) Remove(names ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.p.Remove(names...); err != nil {
		return err
	}
	old := *s.addrs.Load()
	next := make(map[string]net.Addr, len(old))
	for name, a := range old {
		next[name] = a
	}
	for _, name := range names {
		delete(next, name)
	}
	s.addrs.Store(&next)
	return nil
}

// SetWeight changes the weight of a node of the pool.
func (s *Selector) SetWeight(name string, weight int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p.SetWeight(name, weight)
}

// resolveNode resolves one name and wraps the error with it.
func (s *Selector) resolveNode(name string) (net.Addr, error) {
	a, err := s.resolve(name)
	if err != nil {
		return nil, fmt.Errorf("gomemcache: node %.80q: %w", name, err)
	}
	if a == nil {
		return nil, fmt.Errorf("gomemcache: node %.80q: resolved to no address: %w", name, ErrConfig)
	}
	return fixedAddr{a.Network(), a.String()}, nil
}

// ResolveAddr is the default Resolve: a name holding '/' is a unix socket's path, any other
// "host:port" resolved over TCP, a host alone meaning port 11211.
func ResolveAddr(name string) (net.Addr, error) {
	if strings.Contains(name, "/") {
		return net.ResolveUnixAddr("unix", name)
	}
	if _, _, err := net.SplitHostPort(name); err != nil {
		name = net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"), "11211")
	}
	return net.ResolveTCPAddr("tcp", name)
}

// fixedAddr is an address whose strings are computed once: gomemcache calls String() for
// every request (it keys its idle connections by it), which a *net.TCPAddr builds anew.
type fixedAddr struct{ network, str string }

func (a fixedAddr) Network() string { return a.network }
func (a fixedAddr) String() string  { return a.str }
