//go:build byhand

// This file needs the peers, which the Go module proxy does not serve: run.sh brings them
// and builds it (README.md). Each peer is set up the way its README or doc says gives the
// compatibility it claims; what it answers is compared as text with what that server is
// called in the peer's own terms (a label, or an address as the peer prints it).

package main

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"net"
	"slices"
	"strings"

	mcpyhash "github.com/dgryski/dgohash"
	goketama "github.com/dgryski/go-ketama"
	ngketama "github.com/ngerakines/ketama"
	rcketama "github.com/rckclmbr/goketama/ketama"
	wrketama "github.com/wrighty/ketama"

	golemconfig "github.com/TysonAndre/golemproxy/config"
	"github.com/TysonAndre/golemproxy/sharded/distribution"
	"github.com/alicebob/shredis"
	"github.com/bydsky/nchash"
	"github.com/signalfx/golib/v3/gojavahash"
	"github.com/thatguystone/gomcketama"
)

func init() {
	peers = append(peers,
		Peer{"dgryski/go-ketama", "New (HashFunc1), Label = the name the system hashes", libketama, libketamaFamily, goKetama(goketama.HashFunc1)},
		Peer{"dgryski/go-ketama", "NewWithHash(HashFunc2), as lestrrat/go-memcache-ketama-selector", libketama, libketamaFamily, goKetama(goketama.HashFunc2)},
		Peer{"wrighty/ketama", "Make / MakeWithWeights, host = the name the system hashes", libketama, libketamaFamily, wrighty},
		Peer{"ngerakines/ketama", "NewRing(160), Add(name, weight), Bake", "libketama-style hashing", libketamaFamily, ngerakines},
		Peer{"rckclmbr/goketama", "ketama.New, ServerAddr(address), Memory = weight", libketama, libketamaFamily, rckclmbr(true, nil)},
		Peer{"rckclmbr/goketama", "ketama.New, ServerAddr(address), Memory 0 (unweighted), MD5", "libmemcached CONSISTENT, HASH MD5", libmemcachedUnweighted("MD5"), rckclmbr(false, nil)},
		Peer{"jehiah/memcache_pycompat", "its NewClient: goketama unweighted, dgohash Jenkins one-at-a-time", "libmemcached CONSISTENT, default hash", libmemcachedUnweighted("DEFAULT"), rckclmbr(false, func() hash.Hash { return mcpyhash.NewJenkins32() })},
		Peer{"thatguystone/gomcketama", "KetamaServerSelector.AddServer(address)", "spymemcached KetamaNodeLocator, KETAMA_HASH", spymemcached("KETAMA_HASH"), addServers(func() selector { return &gomcketama.KetamaServerSelector{} })},
		Peer{"signalfx/golib gojavahash", "JavaServerSelector.AddServer(address)", "spymemcached KetamaNodeLocator, NATIVE_HASH", spymemcached("NATIVE_HASH"), addServers(func() selector { return &gojavahash.JavaServerSelector{} })},
		Peer{"alicebob/shredis", "New(shard name -> address), name = the nutcracker name", "twemproxy ketama, fnv1a_64, weights 1", twemproxy("ketama"), shredisPeer},
		Peer{"TysonAndre/golemproxy", "config.ParseFile(the nutcracker.yml), sharded/distribution", "twemproxy ketama, fnv1a_64", twemproxy("ketama"), golemproxy},
		Peer{"TysonAndre/golemproxy", "config.ParseFile(the nutcracker.yml), sharded/distribution", "twemproxy modula, fnv1a_64", twemproxy("modula"), golemproxy},
		Peer{"bydsky/nchash", "New / NewWithWeights(address -> weight, 160)", "nginx hash $key consistent", nginxConsistent, nchashPeer},
	)
}

const libketama = "libketama: libmemcached KETAMA_WEIGHTED, twemproxy ketama md5, spymemcached KETAMA_HASH"

// libketamaFamily takes the configurations whose continuum is libketama's: MD5 points, 4 a
// digest, 40·n·w/W digests a server, keys hashed with MD5.
func libketamaFamily(c *Case) bool {
	switch c.System {
	case "libmemcached":
		l := c.Libmemcached
		return l.Weighted && l.Hash == "MD5" && l.Distribution != "CONSISTENT_KETAMA_SPY" && !l.HashWithNamespace
	case "twemproxy":
		t := c.Twemproxy
		return (t.Distribution == "" || t.Distribution == "ketama") && t.Hash == "md5" && t.HashTag == ""
	case "spymemcached":
		return c.Spymemcached.Locator == "CONSISTENT" && c.Spymemcached.Hash == "KETAMA_HASH"
	}
	return false
}

// libmemcachedUnweighted takes libmemcached's unweighted continuum (100 points a server,
// hashed with the key hash) with the key hash h.
func libmemcachedUnweighted(h string) func(c *Case) bool {
	return func(c *Case) bool {
		l := c.Libmemcached
		return c.System == "libmemcached" && (l.Distribution == "CONSISTENT" || l.Distribution == "CONSISTENT_KETAMA") &&
			!l.Weighted && l.Hash == h && (l.PointHash == "" || l.PointHash == h) && !l.HashWithNamespace
	}
}

// spymemcached takes spymemcached's KetamaNodeLocator with the hash h and its default
// point names (the address as Java prints it).
func spymemcached(h string) func(c *Case) bool {
	return func(c *Case) bool {
		s := c.Spymemcached
		return c.System == "spymemcached" && s.Locator == "CONSISTENT" && s.Hash == h && (s.Format == "" || s.Format == "SPYMEMCACHED")
	}
}

// twemproxy takes nutcracker pools of the distribution d with its default hash, fnv1a_64.
func twemproxy(d string) func(c *Case) bool {
	return func(c *Case) bool {
		t := c.Twemproxy
		return c.System == "twemproxy" && (t.Distribution == d || t.Distribution == "" && d == "ketama") && (t.Hash == "" || t.Hash == "fnv1a_64")
	}
}

func nginxConsistent(c *Case) bool { return c.System == "nginx" && c.Nginx.Consistent }

func allOne(weights []int) bool {
	return !slices.ContainsFunc(weights, func(w int) bool { return w != 1 })
}

func goKetama(h goketama.HashFunc) func(c *Case) (Lookup, error) {
	return func(c *Case) (Lookup, error) {
		buckets := make([]goketama.Bucket, len(c.Hashed))
		for i := range buckets {
			buckets[i] = goketama.Bucket{Label: c.Hashed[i], Weight: c.Weights[i]}
		}
		k, err := goketama.NewWithHash(buckets, h)
		if err != nil {
			return Lookup{}, err
		}
		return Lookup{Answer: k.Hash, Vocab: c.Hashed}, nil
	}
}

func wrighty(c *Case) (Lookup, error) {
	var k *wrketama.Continuum
	if allOne(c.Weights) {
		k = wrketama.Make(c.Hashed)
	} else {
		hosts := map[string]uint{}
		for i, h := range c.Hashed {
			if c.Weights[i] < 0 {
				return Lookup{}, fmt.Errorf("%w a negative weight", errInexpressible)
			}
			hosts[h] = uint(c.Weights[i])
		}
		k = wrketama.MakeWithWeights(hosts)
	}
	return Lookup{Answer: k.GetHost, Vocab: c.Hashed}, nil
}

// ngerakines makes 160 × weight points a server; it is not run where that is absurd.
func ngerakines(c *Case) (Lookup, error) {
	points := 0
	for _, w := range c.Weights {
		points += 160 * w
	}
	if points > 1e7 {
		return Lookup{}, fmt.Errorf("%w these weights (160 points per unit)", errInexpressible)
	}
	r := ngketama.NewRing(160)
	for i, h := range c.Hashed {
		r.Add(h, c.Weights[i])
	}
	r.Bake()
	return Lookup{Answer: r.Hash, Vocab: c.Hashed}, nil
}

// textAddr is a net.Addr that prints as the text it was given, the address type
// memcache_pycompat hands to goketama so that host names are hashed as written.
type textAddr string

func (a textAddr) Network() string { return "tcp" }
func (a textAddr) String() string  { return string(a) }

// rckclmbr sets goketama up over the configuration's addresses: resolved as its
// NewFromFile resolves them when newHash is nil, as written (memcache_pycompat) otherwise.
func rckclmbr(weighted bool, newHash func() hash.Hash) func(c *Case) (Lookup, error) {
	return func(c *Case) (Lookup, error) {
		servers := make([]rcketama.ServerInfo, len(c.Addrs))
		vocab := make([]string, len(c.Addrs))
		for i, a := range c.Addrs {
			var addr net.Addr = textAddr(a)
			if newHash == nil {
				var err error
				if addr, err = rcketama.ServerAddr(a); err != nil {
					return Lookup{}, err
				}
			}
			servers[i] = rcketama.ServerInfo{Addr: addr}
			if weighted {
				servers[i].Memory = uint64(c.Weights[i])
			}
			vocab[i] = addr.String()
		}
		k := rcketama.New(servers, newHash)
		return Lookup{Answer: answerAddr(k.PickServer), Vocab: vocab, Time: timeAddr(k.PickServer)}, nil
	}
}

// selector is what gomcketama's and gojavahash's gomemcache selectors have in common.
type selector interface {
	AddServer(server string) error
	PickServer(key string) (net.Addr, error)
}

// addServers sets a selector up over the configuration's addresses, as written.
func addServers(newSelector func() selector) func(c *Case) (Lookup, error) {
	return func(c *Case) (Lookup, error) {
		if !allOne(c.Weights) {
			return Lookup{}, fmt.Errorf("%w weights", errInexpressible)
		}
		s := newSelector()
		for _, a := range c.Addrs {
			if err := s.AddServer(a); err != nil {
				return Lookup{}, err
			}
		}
		return Lookup{Answer: answerAddr(s.PickServer), Vocab: resolved(c.Addrs), Time: timeAddr(s.PickServer)}, nil
	}
}

// resolved prints addresses as a net.TCPAddr resolved from them prints, which is how the
// gomemcache selectors answer.
func resolved(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		if r, err := net.ResolveTCPAddr("tcp", a); err == nil {
			out[i] = r.String()
		}
	}
	return out
}

func answerAddr(pick func(string) (net.Addr, error)) func(string) string {
	return func(key string) string {
		a, err := pick(key)
		if err != nil {
			return "error: " + err.Error()
		}
		return a.String()
	}
}

// timeAddr turns a selector's answer into an int without allocating (a TCP address's
// String allocates): the port, or the length of a textAddr.
func timeAddr(pick func(string) (net.Addr, error)) func(string) int {
	return func(key string) int {
		switch a, _ := pick(key); a := a.(type) {
		case *net.TCPAddr:
			return a.Port
		case textAddr:
			return len(a)
		}
		return 0
	}
}

// shredisPeer names the shards as nutcracker names its servers. Addresses take no part in
// placement; "no-dial" makes shredis's connection loops fail at once, without a socket.
func shredisPeer(c *Case) (Lookup, error) {
	if !allOne(c.Weights) {
		return Lookup{}, fmt.Errorf("%w weights", errInexpressible)
	}
	if c.Twemproxy.HashTag != "" {
		return Lookup{}, fmt.Errorf("%w hash_tag", errInexpressible)
	}
	shards := map[string]string{}
	for _, name := range c.Hashed {
		shards[name] = "no-dial"
	}
	s := shredis.New(shards)
	return Lookup{Answer: s.Addr, Vocab: c.Hashed, Close: s.Close}, nil
}

// golemproxy reads the pool with golemproxy's own parser and builds its distribution as its
// sharded.New does (buckets in configuration order, one server answers without hashing).
func golemproxy(c *Case) (Lookup, error) {
	pools, err := golemconfig.ParseFile(c.ConfigPath)
	switch {
	case err != nil && strings.Contains(err.Error(), "unsupported hash \"\""):
		return Lookup{}, errors.New("refuses a pool without hash: (nutcracker's default)")
	case err != nil && strings.Contains(err.Error(), "expected IP:port:weight"):
		return Lookup{}, errors.New("refuses unix socket servers")
	case err != nil:
		return Lookup{}, err
	}
	var conf golemconfig.Config
	for _, p := range pools {
		conf = p
	}
	buckets := make([]distribution.Bucket, len(conf.Servers))
	for i, s := range conf.Servers {
		buckets[i] = distribution.Bucket{Label: s.Key, Weight: int(s.Weight), Data: i}
	}
	var get func(uint32) int
	switch {
	case len(buckets) == 1:
		get = func(uint32) int { return 0 }
	case conf.Distribution == "ketama":
		k, err := distribution.NewKetama(buckets)
		if err != nil {
			return Lookup{}, err
		}
		get = k.Get
	case conf.Distribution == "modula":
		m, err := distribution.NewModula(buckets)
		if err != nil {
			return Lookup{}, err
		}
		get = m.Get
	default:
		return Lookup{}, fmt.Errorf("refused: distribution %q", conf.Distribution)
	}
	server := func(key string) int { return get(golemFNV(key)) }
	return Lookup{Answer: func(key string) string { return c.Names[server(key)] }, Vocab: c.Names, Time: server}, nil
}

// golemFNV is golemproxy's key hash for fnv1a_64 (its sharded package keeps it unexported):
// the low 32 bits of hash/fnv's 64-bit FNV-1a, through the hash.Hash64 interface as there.
func golemFNV(key string) uint32 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return uint32(h.Sum64())
}

// nchashPeer leaves down servers out: nginx passes over their points, and nchash has no
// such flag.
func nchashPeer(c *Case) (Lookup, error) {
	weights := map[string]int{}
	var up []string
	plain := true
	for _, s := range c.Nginx.Servers {
		if s.Down {
			plain = false
			continue
		}
		up = append(up, s.Address)
		weights[s.Address] = max(s.Weight, 1)
		plain = plain && s.Weight <= 1
	}
	var ch *nchash.Chash
	if plain {
		ch = nchash.New(up)
	} else {
		ch = nchash.NewWithWeights(weights, 160)
	}
	answer := func(key string) string {
		s, err := ch.Get(key)
		if err != nil {
			return "error: " + err.Error()
		}
		return s
	}
	return Lookup{Answer: answer, Vocab: c.Names}, nil
}
