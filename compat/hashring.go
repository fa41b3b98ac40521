package compat

import (
	"math"
	"strconv"
	"strings"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// npm hashring 3.x: the rule of testdata/compat/hashring/README.md, from index.js of
// hashring 3.2.0 and connection-parse 0.0.7.

var hashringPreset = Preset{
	System:  "hashring",
	Doc:     `npm hashring 3.x: the constructor's arguments as JSON, {"servers": [...] or {...}, "algorithm": "md5", "options": {...}}`,
	New:     oneClient("hashring", ParseHashring, newHashring),
	Checked: 74000,
}

// Hashring is a HashRing's placement: what NewHashring takes. Zero values mean hashring's
// defaults.
type Hashring struct {
	// Servers in the order hashring reads them (for an object of weights, JavaScript's key
	// order: integer-like keys first).
	Servers []HashringServer
	// Algorithm is a digest name as Node's crypto.createHash takes it (any case): md5,
	// sha1, sha224, sha256, sha384, sha512, sha512-224, sha512-256, sha3-224, sha3-256,
	// sha3-384, sha3-512, md5-sha1, or an alias of one; "" means md5.
	Algorithm string
	// VnodeCount is the option 'vnode count': vnodes per server before weighting. 0 means 40.
	VnodeCount float64
	// Replicas is the option replicas: points per digest. 0 means 4.
	Replicas float64
	// Compatibility is the option compatibility: "hash_ring" gives 3 points per digest, any
	// other non-empty value 4; either way Replicas is ignored.
	Compatibility string
	// DefaultPort is the option 'default port': the vnodes of a server whose port equals it
	// are named by its host alone. 0 means none.
	DefaultPort float64
	// lines are the text lines of the servers, and of the options, when read from text.
	lines map[string]int
}

// HashringServer is one server.
type HashringServer struct {
	// Name is the server string, which get returns: "host:port" usually; any text works.
	Name string
	// Weight: 0 means 1; a server with a negative weight gets no vnode.
	Weight float64
	// Vnodes is the server's own vnode count (a {vnodes: n} value), used instead of its
	// weighted share unless it equals VnodeCount; 0 means none.
	Vnodes float64
}

// hashringDigests are the names crypto.createHash takes for the digests Go has, lower case.
var hashringDigests = map[string]keyhash.Digest{
	"md5": keyhash.DigestMD5, "rsa-md5": keyhash.DigestMD5, "md5withrsaencryption": keyhash.DigestMD5, "ssl3-md5": keyhash.DigestMD5,
	"sha1": keyhash.DigestSHA1, "rsa-sha1": keyhash.DigestSHA1, "rsa-sha1-2": keyhash.DigestSHA1, "sha1withrsaencryption": keyhash.DigestSHA1, "ssl3-sha1": keyhash.DigestSHA1,
	"sha224": keyhash.DigestSHA224, "rsa-sha224": keyhash.DigestSHA224, "sha224withrsaencryption": keyhash.DigestSHA224,
	"sha256": keyhash.DigestSHA256, "rsa-sha256": keyhash.DigestSHA256, "sha256withrsaencryption": keyhash.DigestSHA256, "sha-256": keyhash.DigestSHA256,
	"sha384": keyhash.DigestSHA384, "rsa-sha384": keyhash.DigestSHA384, "sha384withrsaencryption": keyhash.DigestSHA384,
	"sha512": keyhash.DigestSHA512, "rsa-sha512": keyhash.DigestSHA512, "sha512withrsaencryption": keyhash.DigestSHA512,
	"sha512-224": keyhash.DigestSHA512_224, "rsa-sha512/224": keyhash.DigestSHA512_224, "sha512-224withrsaencryption": keyhash.DigestSHA512_224,
	"sha512-256": keyhash.DigestSHA512_256, "rsa-sha512/256": keyhash.DigestSHA512_256, "sha512-256withrsaencryption": keyhash.DigestSHA512_256,
	"sha3-224": keyhash.DigestSHA3_224, "rsa-sha3-224": keyhash.DigestSHA3_224, "id-rsassa-pkcs1-v1_5-with-sha3-224": keyhash.DigestSHA3_224,
	"sha3-256": keyhash.DigestSHA3_256, "rsa-sha3-256": keyhash.DigestSHA3_256, "id-rsassa-pkcs1-v1_5-with-sha3-256": keyhash.DigestSHA3_256,
	"sha3-384": keyhash.DigestSHA3_384, "rsa-sha3-384": keyhash.DigestSHA3_384, "id-rsassa-pkcs1-v1_5-with-sha3-384": keyhash.DigestSHA3_384,
	"sha3-512": keyhash.DigestSHA3_512, "rsa-sha3-512": keyhash.DigestSHA3_512, "id-rsassa-pkcs1-v1_5-with-sha3-512": keyhash.DigestSHA3_512,
	"md5-sha1": keyhash.DigestMD5SHA1,
}

// hashringElsewhere are digests Node offers that the Go standard library does not.
var hashringElsewhere = []string{"ripemd", "ripemd160", "rmd160", "rsa-ripemd160", "ripemd160withrsa", "blake2b512",
	"blake2s256", "sm3", "rsa-sm3", "sm3withrsaencryption", "shake128", "shake256"}

// NewHashring returns the pool of cfg: every key on the server HashRing.get returns. Add
// takes a node as a server string with that weight.
func NewHashring(cfg Hashring) (pool.Pool, error) {
	cfg.lines = nil
	return newHashring(cfg)
}

func (c *Hashring) at(field, format string, args ...any) error {
	if line, ok := c.lines[field]; ok {
		return configErr("hashring", line, "%s", sprintf(format, args...))
	}
	return configErr("hashring", 0, "%s: %s", field, sprintf(format, args...))
}

func newHashring(cfg Hashring) (pool.Pool, error) {
	name := strings.ToLower(cfg.Algorithm)
	if name == "" {
		name = "md5"
	}
	digest, ok := hashringDigests[name]
	if !ok {
		for _, other := range hashringElsewhere {
			if name == other {
				return nil, cfg.at("algorithm", "%s is a Node digest that the Go standard library does not have: not supported", cfg.Algorithm)
			}
		}
		return nil, cfg.at("algorithm", "Error: Digest method not supported (%q)", cfg.Algorithm)
	}
	h := &hashringRules{digest: digest, vnode: cfg.VnodeCount, replicas: cfg.Replicas, defaultPort: cfg.DefaultPort}
	if h.vnode == 0 {
		h.vnode = 40
	}
	if cfg.Replicas == 0 {
		h.replicas = 4
	}
	switch {
	case cfg.Compatibility == "hash_ring":
		h.replicas = 3
	case cfg.Compatibility != "":
		h.replicas = 4
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"vnode count", h.vnode}, {"replicas", h.replicas}, {"default port", h.defaultPort}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return nil, cfg.at("options", "%s is %v: hashring would place nothing or never finish", f.name, f.v)
		}
	}
	h.replicas = max(h.replicas, 1) // replicas <= 0 mean 1
	if len(cfg.Servers) == 0 {
		return nil, cfg.at("servers", "no servers: get returns undefined for every key")
	}
	list := &serverList{}
	for i, s := range cfg.Servers {
		if s.Name == "" {
			return nil, cfg.at("servers", "server %d: an empty server string", i)
		}
		if math.IsNaN(s.Weight) || math.IsInf(s.Weight, 0) || math.IsNaN(s.Vnodes) || math.IsInf(s.Vnodes, 0) {
			return nil, cfg.at("servers", "server %q: weight %v, vnodes %v", s.Name, s.Weight, s.Vnodes)
		}
		list.servers = append(list.servers, h.server(s.Name, s.Weight, s.Vnodes))
	}
	if err := h.check(list); err != nil {
		return nil, cfg.at("servers", "%v", err)
	}
	r := &rules{system: "hashring", check: h.check, points: h.points, line: cfg.lines["servers"],
		fromNode: func(_ *serverList, n pool.Node) (server, error) { return h.server(n.Name, float64(n.Weight), 0), nil }}
	return newPool(r, list, pool.RingOptions{Hash: func(k string) uint64 { return top32(digest.First32(k)) }, Ties: pool.TieFirstPoint}, nil)
}

// hashringRules are the placement of one ring.
type hashringRules struct {
	digest                       keyhash.Digest
	vnode, replicas, defaultPort float64
}

// server returns the entry of a server string: connection-parse's host (the text before the
// first ':') names its vnodes when its port (Number of the text between the first and the
// second ':') equals the default port.
func (h *hashringRules) server(name string, weight, vnodes float64) server {
	if weight == 0 {
		weight = 1
	}
	s := server{name: name, weight: weight, vnodes: vnodes, point: name}
	parts := strings.Split(name, ":")
	port := math.NaN()
	if len(parts) > 1 {
		port = jsStringToNumber(parts[1])
	}
	if h.defaultPort != 0 && port == h.defaultPort {
		s.point = parts[0]
	}
	return s
}

// lengths returns the vnodes of each server (continuum): floor(weight / total * vnodes *
// servers) in float64, in that order, or the server's own vnode count when it has one that
// differs from the global one.
func (h *hashringRules) lengths(l *serverList) []float64 {
	total := 0.0
	for _, s := range l.servers {
		total += s.weight
	}
	out := make([]float64, len(l.servers))
	for i, s := range l.servers {
		vn := s.vnodes
		if vn == 0 {
			vn = h.vnode
		}
		out[i] = math.Floor(s.weight / total * vn * float64(len(l.servers)))
		if vn != h.vnode {
			out[i] = vn
		}
	}
	return out
}

// check refuses a ring hashring cannot place with: weights that sum to 0 (its vnode loop
// never ends), no point at all (get returns undefined), or more points than a ring holds.
func (h *hashringRules) check(l *serverList) error {
	points := 0.0
	for _, n := range h.lengths(l) {
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return errorf("the weights sum to 0: hashring's vnode loop would never end")
		}
		points += max(math.Ceil(n), 0) * math.Ceil(h.replicas)
	}
	if points == 0 {
		return errorf("no server gets a point: get returns undefined for every key")
	}
	if points > 1<<22 {
		return errorf("%v points: at most %d here", points, 1<<22)
	}
	return nil
}

// points are hashring's: vnode i of a server is the digest of its string (or its host, at
// the default port), '-' and i; point j of a vnode is digest bytes 4j..4j+3 little-endian,
// bytes past the digest reading 0. Servers in order; a stable sort keeps the earlier of
// equal points first, which wins.
func (h *hashringRules) points(dst []pool.RingPoint, l *serverList) []pool.RingPoint {
	var buf [64]byte
	replicas := int(math.Ceil(h.replicas))
	for e, n := range h.lengths(l) {
		for i := 0; float64(i) < n; i++ {
			d := h.digest.Append(buf[:0], l.servers[e].point+"-"+strconv.Itoa(i))
			dst = appendDigestPoints(dst, e, d, replicas)
		}
	}
	return dst
}

// ParseHashring reads the three arguments of new HashRing(servers, algorithm, options) as
// JSON ({"servers": ..., "algorithm": ..., "options": {...}}), with hashring's and
// JavaScript's reading of each, and refuses what hashring refuses or cannot place with.
func ParseHashring(text []byte) (Hashring, error) {
	cfg := Hashring{lines: map[string]int{}}
	root, err := readJSON(text)
	if err != nil {
		e := err.(*jsError)
		return cfg, configErr("hashring", e.line, "%s", msg(e.msg))
	}
	fail := func(line int, format string, args ...any) (Hashring, error) {
		return cfg, configErr("hashring", line, format, args...)
	}
	if root.kind != jsObject {
		return fail(root.line, "want an object of servers, algorithm and options")
	}
	for i, k := range root.keys {
		if k != "servers" && k != "algorithm" && k != "options" {
			return fail(root.vals[i].line, "unknown key %q (servers, algorithm, options)", k)
		}
	}
	if a := root.get("algorithm"); a != nil {
		cfg.lines["algorithm"] = a.line
		switch {
		case !jsTruthy(a): // algorithm || 'md5'
		case a.kind == jsString:
			cfg.Algorithm = a.str
		default:
			return fail(a.line, "the algorithm is a name of a digest (a function cannot be written in JSON)")
		}
	}
	if o := root.get("options"); o != nil {
		cfg.lines["options"] = o.line
		if o.kind != jsObject {
			return fail(o.line, "options must be an object")
		}
		if v := o.get("vnode count"); v != nil {
			if v.kind != jsNumber {
				return fail(v.line, "'vnode count' must be a number (hashring compares it with ===)")
			}
			if v.num <= 0 {
				return fail(v.line, "'vnode count' %v gives no vnode: get returns undefined for every key", v.num)
			}
			cfg.VnodeCount = v.num
		}
		if c := o.get("compatibility"); jsTruthy(c) {
			cfg.Compatibility = "other"
			if c.kind == jsString {
				cfg.Compatibility = c.str
			}
		} else if r := o.get("replicas"); r != nil {
			n := jsNumberOf(r)
			if math.IsNaN(n) {
				return fail(r.line, "replicas is not a number: hashring makes no point, and get returns undefined for every key")
			}
			cfg.Replicas = max(n, 1) // 0 and below mean 1
			if math.IsInf(n, 1) || n > 1<<20 {
				return fail(r.line, "replicas %v: hashring would not finish building its ring", n)
			}
		}
		if p := o.get("default port"); jsTruthy(p) && p.kind == jsNumber {
			cfg.DefaultPort = p.num // another value never equals (===) a port, a Number: as none
		}
	}
	s := root.get("servers")
	if s == nil {
		return fail(root.line, "no servers")
	}
	cfg.lines["servers"] = s.line
	return cfg, hashringServers(&cfg, s)
}

// hashringServers reads the servers argument as connection-parse does.
func hashringServers(cfg *Hashring, s *jsValue) error {
	fail := func(line int, format string, args ...any) error { return configErr("hashring", line, format, args...) }
	switch s.kind {
	case jsString:
		if s.str == "" { // falsy: no servers
			return fail(s.line, "no servers: get returns undefined for every key")
		}
		cfg.Servers = append(cfg.Servers, HashringServer{Name: s.str})
	case jsArray:
		for _, item := range s.items {
			switch item.kind {
			case jsString:
				cfg.Servers = append(cfg.Servers, HashringServer{Name: item.str})
			case jsObject:
				if w := jsNumberOf(item.get("weight")); w != 0 && !math.IsNaN(w) {
					return fail(item.line, "TypeError: Cannot read properties of undefined (reading 'weight'): connection-parse reads a weight of a server object in a list from its missing value")
				}
				host, port := item.get("host"), item.get("port")
				for _, k := range item.keys {
					if k != "host" && k != "port" && k != "weight" {
						return fail(item.line, "a server object in a list with %q: only host and port are supported", k)
					}
				}
				if host == nil || host.kind != jsString || port == nil || !(port.kind == jsString || port.kind == jsNumber && port.num == math.Trunc(port.num) && math.Abs(port.num) < 1e21) {
					return fail(item.line, "a server object in a list needs a host string and an integer port")
				}
				p := port.str
				if port.kind == jsNumber {
					p = strconv.FormatFloat(port.num+0, 'f', -1, 64)
				}
				cfg.Servers = append(cfg.Servers, HashringServer{Name: host.str + ":" + p})
			default:
				return fail(item.line, "TypeError: a server in a list must be a string (or an object with host and port)")
			}
		}
	case jsObject:
		for i, name := range s.keys {
			v := s.vals[i]
			var weight, vnodes float64
			switch v.kind {
			case jsNull:
				return fail(v.line, "TypeError: Cannot read properties of null (reading 'weight'): server %q", name)
			case jsObject:
				weight = jsNumberOf(v.get("weight"))
				if vn := v.get("vnodes"); vn != nil {
					vnodes = jsNumberOf(vn)
				}
			case jsArray:
				weight = math.NaN() // [].weight is undefined
			default:
				weight = jsNumberOf(v)
			}
			if math.IsNaN(weight) || weight == 0 { // || 1
				weight = 1
			}
			if math.IsNaN(vnodes) { // || 0
				vnodes = 0
			}
			cfg.Servers = append(cfg.Servers, HashringServer{Name: name, Weight: weight, Vnodes: vnodes})
		}
	case jsNull:
		return fail(s.line, "no servers: get returns undefined for every key")
	default:
		return fail(s.line, "TypeError: servers must be a string, a list or an object of weights")
	}
	if len(cfg.Servers) == 0 {
		return fail(s.line, "no servers: get returns undefined for every key")
	}
	return nil
}
