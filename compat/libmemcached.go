package compat

import (
	"cmp"
	"crypto/md5"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// libmemcached 1.1: the rule of testdata/compat/libmemcached/README.md, from behavior.cc,
// hosts.cc, hash.cc, parse.cc and libhashkit/ of libmemcached-awesome 1.1.4.

var libmemcachedPreset = Preset{
	System: "libmemcached",
	Doc: "a libmemcached 1.1 client: its configuration string (--SERVER=host:port/?weight --DISTRIBUTION=consistent --HASH=md5 ...) " +
		"or its calls, one a line (behavior NAME VALUE, server HOST PORT WEIGHT, servers LIST, namespace PREFIX)",
	New:     oneClient("libmemcached", ParseLibmemcached, NewLibmemcached),
	Checked: 184000,
}

// Libmemcached is the state of a libmemcached client that placement depends on: what
// NewLibmemcached takes and ParseLibmemcached returns. The zero values are libmemcached's
// defaults (MODULA, DEFAULT).
type Libmemcached struct {
	// Distribution is MODULA, CONSISTENT, CONSISTENT_KETAMA (the same as CONSISTENT),
	// CONSISTENT_WEIGHTED or CONSISTENT_KETAMA_SPY; "" means MODULA. RANDOM and
	// VIRTUAL_BUCKET are refused: their placement cannot be reproduced from the
	// configuration.
	Distribution string
	// Hash is the key hash: DEFAULT (one-at-a-time), MD5, CRC, FNV1_64, FNV1A_64, FNV1_32,
	// FNV1A_32, MURMUR, MURMUR3 or JENKINS; "" means DEFAULT. (HSIEH is not in Debian's
	// build.)
	Hash string
	// Weighted is libmemcached's weighted-ketama flag: with it the continuum gives each
	// server MD5 points in proportion to its weight, without it 100 points per server
	// hashed with the key hash. CONSISTENT_WEIGHTED sets it; otherwise libmemcached turns it
	// on when a server of weight above 1 joins a consistent distribution (and off when the
	// distribution is set to CONSISTENT), which ParseLibmemcached follows call by call.
	Weighted bool
	// PointHash is the hash of the unweighted continuum's points when it differs from Hash:
	// libmemcached builds the continuum when a server joins or the distribution changes, not
	// when the hash does, so a HASH set after the servers leaves points of the earlier hash.
	// "" means Hash. A change through the Pool rebuilds with Hash.
	PointHash string
	// SortHosts sorts the servers by host name (bytewise), then port: the order modula
	// indexes and ties follow.
	SortHosts bool
	// Namespace is the key prefix (MEMCACHED_CALLBACK_NAMESPACE); it takes part in the key
	// hash only with HashWithNamespace (HASH_WITH_PREFIX_KEY), which also hashes every key
	// whose prefixed length is over 250 bytes as 0.
	Namespace         string
	HashWithNamespace bool
	// Servers are the servers in libmemcached's order (as added, then sorted when
	// SortHosts).
	Servers []LibmemcachedServer
	// serversLine is the line of the text that added the last servers, when parsed.
	serversLine int
}

// LibmemcachedServer is one server of a client.
type LibmemcachedServer struct {
	// Host is the host name as given (never resolved), or a unix socket's path.
	Host string
	// Port 0 means 11211, except for a unix socket (a Host starting with '/').
	Port int
	// Weight 0 means 1.
	Weight uint32
}

// Name returns the server's node name: "host:port", or the path of a unix socket on port 0.
func (s LibmemcachedServer) Name() string {
	if s.Port == 0 {
		return s.Host
	}
	return s.Host + ":" + strconv.Itoa(s.Port)
}

// libmemcached's enums, by value (include/libmemcached-1.0/types/).
var (
	lmDistributions = []string{"MODULA", "CONSISTENT", "CONSISTENT_KETAMA", "RANDOM",
		"CONSISTENT_KETAMA_SPY", "CONSISTENT_WEIGHTED", "VIRTUAL_BUCKET"}
	lmHashes = []string{"DEFAULT", "MD5", "CRC", "FNV1_64", "FNV1A_64", "FNV1_32", "FNV1A_32",
		"HSIEH", "MURMUR", "JENKINS", "MURMUR3", "CUSTOM"}
	lmHashFuncs = map[string]keyhash.Memcached{
		"DEFAULT": keyhash.OneAtATime, "MD5": keyhash.MD5, "CRC": keyhash.CRC32,
		"FNV1_64": keyhash.FNV64, "FNV1A_64": keyhash.FNV64a, "FNV1_32": keyhash.FNV32,
		"FNV1A_32": keyhash.FNV32a, "MURMUR": keyhash.Murmur, "JENKINS": keyhash.Jenkins,
		"MURMUR3": keyhash.Murmur3,
	}
)

const (
	lmModula = iota
	lmConsistent
	lmKetama
	lmRandom
	lmSpy
	lmWeighted
	lmBucket
)

// NewLibmemcached returns the pool of cfg: every key on the server memcached_generate_hash
// names for it. Add takes a node name as memcached_servers_parse reads an entry
// ("host:port", "host" for port 11211, "/path" of a socket) and its weight as
// memcached_server_add_with_weight does (a weight above 1 turns the weighted flag on under
// a consistent distribution).
func NewLibmemcached(cfg Libmemcached) (pool.Pool, error) {
	dist := slices.Index(lmDistributions, cmp.Or(cfg.Distribution, "MODULA"))
	switch dist {
	case -1:
		return nil, configErr("libmemcached", 0, "distribution %q is not one of %s", cfg.Distribution, strings.Join(lmDistributions, ", "))
	case lmRandom, lmBucket:
		return nil, configErr("libmemcached", 0, "distribution %s places keys at random or by a bucket table the configuration does not hold: there is no placement to reproduce", cfg.Distribution)
	}
	hash, ok := lmHashFuncs[cmp.Or(cfg.Hash, "DEFAULT")]
	if !ok {
		return nil, configErr("libmemcached", 0, "hash %q is not one of DEFAULT, MD5, CRC, FNV1_64, FNV1A_64, FNV1_32, FNV1A_32, MURMUR, MURMUR3, JENKINS", cfg.Hash)
	}
	pointHash, ok := lmHashFuncs[cmp.Or(cfg.PointHash, cfg.Hash, "DEFAULT")]
	if !ok {
		return nil, configErr("libmemcached", 0, "point hash %q is not a hash", cfg.PointHash)
	}
	if len(cfg.Servers) == 0 {
		return nil, configErr("libmemcached", 0, "no servers")
	}
	list := &serverList{weighted: cfg.Weighted || dist == lmWeighted}
	for i, s := range cfg.Servers {
		if len(s.Host) >= 1025 {
			return nil, configErr("libmemcached", 0, "server %d: a host name of %d bytes: libmemcached takes at most 1024", i, len(s.Host))
		}
		if s.Port < 0 || s.Port > 65535 {
			return nil, configErr("libmemcached", 0, "server %d: port %d", i, s.Port)
		}
		if s.Port == 0 && !strings.HasPrefix(s.Host, "/") {
			s.Port = 11211
		}
		if s.Host == "" && s.Port == 0 {
			return nil, configErr("libmemcached", 0, "server %d: no host", i)
		}
		list.servers = append(list.servers, lmServer(s))
	}
	lm := &lmRules{dist: dist, hash: hash, pointHash: pointHash, sort: cfg.SortHosts}
	lm.reorder(list)
	r := &rules{system: "libmemcached", fromNode: lm.fromNode, reorder: lm.reorder, line: cfg.serversLine}
	key := lmKeyHash(hash, cfg.Namespace, cfg.HashWithNamespace)
	if dist == lmModula {
		r.slots = func(dst []int32, l *serverList) []int32 {
			for e := range l.servers {
				dst = append(dst, int32(e))
			}
			return dst
		}
		return newPool(r, list, pool.RingOptions{}, func(k string) uint64 { return uint64(key(k)) })
	}
	r.points = lm.points
	return newPool(r, list, pool.RingOptions{Hash: func(k string) uint64 { return top32(key(k)) }, Ties: pool.TieFirstPoint}, nil)
}

// lmServer returns the list entry of a server.
func lmServer(s LibmemcachedServer) server {
	return server{name: s.Name(), host: s.Host, port: s.Port, weight: float64(max(s.Weight, 1))}
}

// lmKeyHash returns libmemcached's key hash (_generate_hash_wrapper): with the namespace
// flag, the hash of namespace + key copied with strncpy into a 251-byte buffer (so the
// bytes after a NUL in the key are zeros), or 0 when that is over 250 bytes. (It also
// answers 0 for a client of one server, which places every key on that server anyway.)
func lmKeyHash(h keyhash.Memcached, namespace string, withNamespace bool) func(string) uint32 {
	if !withNamespace {
		return h.Sum32
	}
	return func(k string) uint32 {
		n := len(namespace) + len(k)
		if n > 250 {
			return 0
		}
		var buf [250]byte
		copy(buf[:], namespace)
		if nul := strings.IndexByte(k, 0); nul >= 0 {
			k = k[:nul] // strncpy stops at a NUL and pads with zeros
		}
		copy(buf[len(namespace):], k)
		return h.Sum32Bytes(buf[:n])
	}
}

// lmRules are the placement of one client.
type lmRules struct {
	dist            int
	hash, pointHash keyhash.Memcached
	sort            bool
}

func (lm *lmRules) consistent() bool { return lm.dist != lmModula }

// fromNode is memcached_server_add_with_weight of a node's name read as a server entry.
func (lm *lmRules) fromNode(l *serverList, n pool.Node) (server, error) {
	s, _ := lmParseEntry(n.Name)
	if s.Port == 0 && !strings.HasPrefix(s.Host, "/") {
		s.Port = 11211
	}
	if n.Weight > 1 && lm.consistent() {
		l.weighted = true
	}
	return server{name: n.Name, host: s.Host, port: s.Port, weight: float64(n.Weight)}, nil
}

// reorder sorts the servers when the sort flag is on (sort_hosts: strcmp of the host
// names, then the port); qsort's instability only mixes entries that are the same server.
func (lm *lmRules) reorder(l *serverList) {
	if lm.sort {
		slices.SortStableFunc(l.servers, func(a, b server) int {
			return cmp.Or(strings.Compare(a.host, b.host), cmp.Compare(a.port, b.port))
		})
	}
}

// points are the continuum of update_continuum: per server, in list order, points named
// "host-j" (port 11211) or "host:port-j" ("/host:port-j" for CONSISTENT_KETAMA_SPY);
// unweighted, 100 points hashed with the point hash; weighted, MD5 digests giving 4
// points each, as many as float32 arithmetic over the weights gives. Ties go to the
// earlier server (sorted by value, then server index).
func (lm *lmRules) points(dst []pool.RingPoint, l *serverList) []pool.RingPoint {
	pointHash := lm.pointHash
	if l.changed {
		pointHash = lm.hash // every change rebuilds the continuum with the current hash
	}
	var total uint64
	for _, s := range l.servers {
		total += uint64(s.weight)
	}
	n := float32(len(l.servers))
	for e, s := range l.servers {
		base := s.host + ":" + strconv.Itoa(s.port)
		if lm.dist == lmSpy {
			base = "/" + base
		} else if s.port == 11211 {
			base = s.host
		}
		if !l.weighted {
			for j := range 100 {
				dst = append(dst, pool.RingPoint{Node: e, Pos: top32(pointHash.Sum32(base + "-" + strconv.Itoa(j)))})
			}
			continue
		}
		pct := float32(uint32(s.weight)) / float32(total)
		x := float32(float32(float32(float32(pct*160)/4)*n) + 1e-10)
		for j := range int(math.Floor(float64(x))) {
			d := md5.Sum([]byte(base + "-" + strconv.Itoa(j)))
			dst = appendDigestPoints(dst, e, d[:], 4)
		}
	}
	return dst
}
