package compat

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// gRPC's ring_hash load balancing policy (gRFC A42, with A61's and A76's changes) as grpc-go
// implements it: the rule of testdata/compat/grpc/README.md, from grpc-go v1.85.0's
// balancer/ringhash (config.go, ring.go, picker.go, ringhash.go) and
// internal/envconfig/envconfig.go.

var grpcPreset = Preset{
	System: "grpc",
	Doc: `grpc-go ring_hash: a service config JSON, "loadBalancingConfig": [{"ring_hash_experimental": {...}}], with ` +
		`"endpoints": [{"address", "weight", "hashKey"}]; a key is the request hash header's value`,
	New:     oneClient("grpc", ParseGRPC, newGRPC),
	Checked: 18888,
}

// GRPCRingHash is a grpc-go client's ring_hash placement: its ring_hash_experimental
// configuration, the GRPC_RING_HASH_CAP of its process and the endpoints its resolver gives.
// Zero values mean grpc-go's defaults.
type GRPCRingHash struct {
	// MinRingSize and MaxRingSize bound the ring's size, at most 8388608 each (grpc-go
	// refuses more), MinRingSize <= MaxRingSize. 0 means 1024 and 4096.
	MinRingSize, MaxRingSize uint64
	// RequestHashHeader is the metadata key whose value is the key hashed (gRFC A76); any
	// case, grpc-go lowers it. It must be set: without xDS, grpc-go fails every RPC when it is
	// empty.
	RequestHashHeader string
	// RingHashCap is the GRPC_RING_HASH_CAP environment variable of the client process as a
	// number, which clamps both ring sizes (grpc-go clamps the variable itself to [1, 8388608]).
	// 0 means unset: 4096.
	RingHashCap uint64
	// HasRingHashCap says RingHashCap is set, so that GRPC_RING_HASH_CAP=0 (read as 1) can be
	// written.
	HasRingHashCap bool
	// Endpoints are the resolver's endpoints, each with one address, in any order.
	Endpoints []GRPCEndpoint
	// lines are the text lines of the fields, when read from text.
	lines map[string]int
}

// GRPCEndpoint is one endpoint of the resolver's state.
type GRPCEndpoint struct {
	// Address is where the RPC goes, and what Locate returns. Unique and not empty.
	Address string
	// Weight is the endpoint's weight attribute (experimental/balancer/weight); 0 means 1.
	Weight uint32
	// HashKey is the endpoint's hash key attribute (resolver/ringhash.SetHashKey, gRFC A76):
	// the name of its ring entries. "" means the address.
	HashKey string
}

// grpc-go's bounds and defaults (balancer/ringhash/config.go; internal/envconfig).
const (
	grpcMinRingDefault = 1024
	grpcMaxRingDefault = 4096
	grpcRingUpperBound = 8 * 1024 * 1024
	grpcCapDefault     = 4096
)

// NewGRPC returns the pool of cfg: Locate(key) names the address of the endpoint that grpc-go
// sends an RPC to when its request hash header holds key (several values of the header are
// one key, joined with ","), all endpoints being up. A key is hashed whole with XXH64; grpc-go
// carries only header values of bytes 0x20 to 0x7E and fails an RPC with any other byte
// before it picks an endpoint, so those keys have no gRPC placement (Locate places them by
// the same rule).
//
// The pool is a pool.Ring whose points are grpc-go's ring entries. Every point depends on the
// whole membership (each endpoint's share of the weights scales the ring), so Add, Remove and
// SetWeight rebuild the ring as grpc-go does when its resolver reports the new endpoints: a
// node given to Add is an endpoint with that address as its hash key, and SetWeight sets the
// weight attribute (0 means 1, as in grpc-go). Points at one position (an XXH64 collision of
// two entries' names) go to the first in grpc-go's order of endpoints, where grpc-go's
// unstable sort picks either.
//
// Refused: an empty or missing request hash header (grpc-go fails every RPC without xDS), a
// header grpc-go refuses, ring sizes it refuses, no endpoints, an empty or repeated address, a
// hash key used twice (grpc-go would pick between the two at random), weights whose sum
// wraps to 0 in grpc-go's uint32 arithmetic, and a ring of more than 4194304 entries (which
// only a GRPC_RING_HASH_CAP above that allows).
func NewGRPC(cfg GRPCRingHash) (pool.Pool, error) {
	cfg.lines = nil
	return newGRPC(cfg)
}

func (c *GRPCRingHash) at(field, format string, args ...any) error {
	if line, ok := c.lines[field]; ok {
		return configErr("grpc", line, "%s", sprintf(format, args...))
	}
	return configErr("grpc", 0, "%s: %s", field, sprintf(format, args...))
}

// grpcRules are the ring sizes of one client, after grpc-go's defaults and caps.
type grpcRules struct{ minSize, maxSize uint64 }

func newGRPC(cfg GRPCRingHash) (pool.Pool, error) {
	if err := checkGRPCHeader(cfg.RequestHashHeader); err != nil {
		return nil, cfg.at("requestHashHeader", "%v", err)
	}
	r := &grpcRules{minSize: cfg.MinRingSize, maxSize: cfg.MaxRingSize}
	// parseConfig, config.go:42-62: the bounds are checked before the defaults and the cap.
	if r.minSize > grpcRingUpperBound || r.maxSize > grpcRingUpperBound {
		return nil, cfg.at("ring size", "minRingSize %d, maxRingSize %d: grpc-go refuses a size above %d", r.minSize, r.maxSize, grpcRingUpperBound)
	}
	if r.minSize == 0 {
		r.minSize = grpcMinRingDefault
	}
	if r.maxSize == 0 {
		r.maxSize = grpcMaxRingDefault
	}
	if r.minSize > r.maxSize {
		return nil, cfg.at("ring size", "min %d is greater than max %d: grpc-go refuses it", r.minSize, r.maxSize)
	}
	capSize := uint64(grpcCapDefault)
	if cfg.HasRingHashCap || cfg.RingHashCap != 0 {
		capSize = min(max(cfg.RingHashCap, 1), grpcRingUpperBound) // uint64FromEnv clamps
	}
	r.minSize, r.maxSize = min(r.minSize, capSize), min(r.maxSize, capSize)

	if len(cfg.Endpoints) == 0 {
		return nil, cfg.at("endpoints", "no endpoints: grpc-go fails every RPC (\"produced zero addresses\")")
	}
	list := &serverList{}
	for _, e := range cfg.Endpoints {
		if e.Address == "" {
			return nil, cfg.at("endpoints", "an endpoint with an empty address")
		}
		list.servers = append(list.servers, grpcServer(e.Address, e.Weight, e.HashKey))
	}
	if err := r.check(list); err != nil {
		return nil, cfg.at("endpoints", "%v", err)
	}
	rules := &rules{system: "grpc", check: r.check, points: r.points, line: cfg.lines["endpoints"],
		fromNode: func(_ *serverList, n pool.Node) (server, error) {
			return grpcServer(n.Name, uint32(n.Weight), ""), nil
		}}
	return newPool(rules, list, pool.RingOptions{Hash: keyhash.XXH64, Ties: pool.TieFirstPoint}, nil)
}

// grpcServer is an endpoint as the server list keeps it: point is its hash key, and a weight
// of 0 is 1 (getWeightAttribute, ringhash.go:389).
func grpcServer(addr string, weight uint32, hashKey string) server {
	if hashKey == "" {
		hashKey = addr // hashKey, ringhash.go:112: the first address
	}
	return server{name: addr, point: hashKey, weight: float64(max(weight, 1))}
}

// checkGRPCHeader refuses a requestHashHeader that grpc-go refuses (parseConfig, config.go:63-75:
// lowered, then [0-9a-z_.-] only and no "-bin" suffix), or with which it would not hash a
// key: none (it wants xDS to set the hash) or a pseudo-header (it reads the hash from the
// application's outgoing metadata, where no pseudo-header is, and hashes at random).
func checkGRPCHeader(h string) error {
	h = strings.ToLower(h)
	switch {
	case h == "":
		return errorf("no requestHashHeader: without xDS grpc-go fails every RPC (\"ringhash: expected xDS config selector to set the request hash\")")
	case h[0] == ':':
		return errorf("requestHashHeader %q is a pseudo-header: grpc-go finds no value for it and hashes every RPC at random", h)
	case strings.HasSuffix(h, "-bin"):
		return errorf("invalid requestHashHeader %q: key must not end with \"-bin\"", h)
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return errorf("invalid requestHashHeader %q: header key contains illegal characters not in [0-9a-z-_.]", h)
		}
	}
	return nil
}

// grpcEntry is an endpoint in the ring's order, with its share of the weights.
type grpcEntry struct {
	list   int // index in the server list
	key    string
	weight float64 // normalized: weight / sum of weights
}

// entries returns the endpoints of l sorted by hash key (normalizeWeights, ring.go:216) with
// their normalized weights, and the smallest of those and 1. The sum of the weights is a
// uint32 in grpc-go and wraps; ok is false when it wraps to 0.
func (r *grpcRules) entries(l *serverList) (es []grpcEntry, minWeight float64, ok bool) {
	var sum uint32
	for _, s := range l.servers {
		sum += uint32(s.weight)
	}
	if sum == 0 {
		return nil, 0, false
	}
	es = make([]grpcEntry, len(l.servers))
	minWeight = 1.0
	for i, s := range l.servers {
		nw := float64(uint32(s.weight)) / float64(sum)
		es[i] = grpcEntry{list: i, key: s.point, weight: nw}
		minWeight = math.Min(minWeight, nw)
	}
	slices.SortFunc(es, func(a, b grpcEntry) int { return cmp.Compare(a.key, b.key) })
	return es, minWeight, true
}

// counts returns the number of ring entries of each endpoint of es (newRing, ring.go:148):
// scale = min(ceil(minWeight*minSize)/minWeight, maxSize); walking the endpoints in order,
// the target grows by scale*weight and the endpoint gets entries until the running count
// reaches the target. The count is an integer in a float64 that grows by 1, so the loop ends
// at ceil(target): computed here without the loop, which a wrapped weight sum makes long.
func (r *grpcRules) counts(es []grpcEntry, minWeight float64) []float64 {
	scale := math.Min(math.Ceil(minWeight*float64(r.minSize))/minWeight, float64(r.maxSize))
	out := make([]float64, len(es))
	var currentHashes, targetHashes float64
	for i, e := range es {
		targetHashes += scale * e.weight // written as grpc-go writes it, so that it rounds alike
		if currentHashes < targetHashes {
			n := math.Ceil(targetHashes) - currentHashes
			out[i], currentHashes = n, currentHashes+n
		}
	}
	return out
}

// check refuses a list grpc-go cannot build a ring of, or one larger than a pool holds; and a
// hash key used twice (the picker keeps one endpoint per hash key, whichever comes last in its
// map's random order).
func (r *grpcRules) check(l *serverList) error {
	seen := make(map[string]int, len(l.servers))
	for i, s := range l.servers {
		if j, dup := seen[s.point]; dup {
			if l.servers[j].name == s.name {
				return errorf("address %q is listed twice", s.name)
			}
			return errorf("endpoints %q and %q have the same hash key %q: grpc-go would send its keys to either", l.servers[j].name, s.name, s.point)
		}
		seen[s.point] = i
	}
	es, minWeight, ok := r.entries(l)
	if !ok {
		return errorf("the weights add up to a multiple of 2^32, which grpc-go's uint32 sum wraps to 0: its ring would never end")
	}
	total := 0.0
	for _, n := range r.counts(es, minWeight) {
		total += n
	}
	if total > maxPoints {
		return errorf("a ring of %v entries: a pool holds at most %d", total, maxPoints)
	}
	return nil
}

// points are grpc-go's ring entries: entry i of an endpoint sits at XXH64(hashKey + "_" + i),
// i in decimal from 0 (ring.go:189).
func (r *grpcRules) points(dst []pool.RingPoint, l *serverList) []pool.RingPoint {
	es, minWeight, _ := r.entries(l)
	var buf []byte
	for i, n := range r.counts(es, minWeight) {
		key := es[i].key
		for idx := 0; float64(idx) < n; idx++ {
			buf = strconv.AppendInt(append(append(buf[:0], key...), '_'), int64(idx), 10)
			dst = append(dst, pool.RingPoint{Node: es[i].list, Pos: keyhash.XXH64(string(buf))})
		}
	}
	return dst
}

// ParseGRPC reads a gRPC service config in JSON with the endpoints beside it:
//
//	{
//	  "loadBalancingConfig": [{"ring_hash_experimental": {"minRingSize": 1024, "maxRingSize": 4096, "requestHashHeader": "x-user"}}],
//	  "ringHashCap": 4096,
//	  "endpoints": [{"address": "10.0.0.1:50051", "weight": 2, "hashKey": "a"}, {"address": "10.0.0.2:50051"}]
//	}
//
// The service config is what grpc-go reads (grpc.WithDefaultServiceConfig takes the file as it
// is: it ignores members it does not know, such as "endpoints"); its first load balancing
// policy must be ring_hash_experimental, and "methodConfig", "retryThrottling" and
// "healthCheckConfig" are ignored. "ringHashCap" is the client's GRPC_RING_HASH_CAP, an
// integer. Each endpoint has an address and, optionally, a weight (an integer in [0, 2^32-1])
// and a hash key. Members are written in grpc-go's own case; a member given twice, or one
// this preset does not know, is refused (grpc-go would match names in any case and ignore
// the unknown).
func ParseGRPC(config []byte) (GRPCRingHash, error) {
	cfg := GRPCRingHash{lines: map[string]int{}}
	root, err := parseJSON("grpc", config)
	if err != nil {
		return cfg, err
	}
	fail := func(line int, format string, args ...any) (GRPCRingHash, error) {
		return cfg, configErr("grpc", line, format, args...)
	}
	if root.kind != 'o' {
		return fail(root.line, "want a JSON object: a service config with \"endpoints\"")
	}
	members, err := jsonMembers("grpc", root, "loadBalancingConfig", "loadBalancingPolicy", "methodConfig", "retryThrottling", "healthCheckConfig", "ringHashCap", "endpoints")
	if err != nil {
		return cfg, err
	}
	cfg.lines["ring size"], cfg.lines["requestHashHeader"] = root.line, root.line
	if lbc := members["loadBalancingConfig"]; lbc != nil {
		if err := grpcPolicy(&cfg, lbc); err != nil {
			return cfg, err
		}
	} else if p := members["loadBalancingPolicy"]; p != nil {
		if p.kind != 's' || p.str != "ring_hash_experimental" {
			return fail(p.line, "loadBalancingPolicy is not \"ring_hash_experimental\": this preset reproduces ring_hash_experimental only")
		}
		return fail(p.line, "loadBalancingPolicy names ring_hash_experimental without its configuration: no requestHashHeader, and without xDS grpc-go fails every RPC")
	} else {
		return fail(root.line, "no loadBalancingConfig: grpc-go would use pick_first")
	}
	if c := members["ringHashCap"]; c != nil {
		n, err := grpcUint(c, math.MaxUint64)
		if err != nil {
			return fail(c.line, "ringHashCap: %v", err)
		}
		cfg.RingHashCap, cfg.HasRingHashCap = n, true
	}
	eps := members["endpoints"]
	if eps == nil {
		return fail(root.line, "no \"endpoints\": list the resolver's endpoints")
	}
	cfg.lines["endpoints"] = eps.line
	if eps.kind != 'a' {
		return fail(eps.line, "endpoints must be an array of objects")
	}
	seen := make(map[string]int, len(eps.arr))
	for _, e := range eps.arr {
		if e.kind != 'o' {
			return fail(e.line, "an endpoint must be an object with an address")
		}
		m, err := jsonMembers("grpc", e, "address", "weight", "hashKey")
		if err != nil {
			return cfg, err
		}
		var ep GRPCEndpoint
		a := m["address"]
		if a == nil || a.kind != 's' || a.str == "" {
			return fail(e.line, "an endpoint needs an address, a string that is not empty")
		}
		ep.Address = a.str
		if l, dup := seen[a.str]; dup {
			return fail(a.line, "address %q is listed twice (also on line %d)", a.str, l)
		}
		seen[a.str] = a.line
		if w := m["weight"]; w != nil {
			n, err := grpcUint(w, math.MaxUint32)
			if err != nil {
				return fail(w.line, "weight: %v", err)
			}
			ep.Weight = uint32(n)
		}
		if k := m["hashKey"]; k != nil {
			if k.kind != 's' {
				return fail(k.line, "hashKey must be a string")
			}
			ep.HashKey = k.str
		}
		cfg.Endpoints = append(cfg.Endpoints, ep)
	}
	if len(cfg.Endpoints) == 0 {
		return fail(eps.line, "no endpoints: grpc-go fails every RPC (\"produced zero addresses\")")
	}
	return cfg, nil
}

// grpcPolicy reads a loadBalancingConfig: a list of one-member objects, the first of them
// ring_hash_experimental's.
func grpcPolicy(cfg *GRPCRingHash, lbc *jsonValue) error {
	fail := func(line int, format string, args ...any) error { return configErr("grpc", line, format, args...) }
	if lbc.kind != 'a' || len(lbc.arr) == 0 {
		return fail(lbc.line, "loadBalancingConfig must be a list of policies, ring_hash_experimental first")
	}
	first := lbc.arr[0]
	if first.kind != 'o' || len(first.obj) != 1 {
		return fail(first.line, "a loadBalancingConfig entry must hold exactly one policy")
	}
	policy := first.obj[0]
	if policy.key != "ring_hash_experimental" {
		return fail(policy.line, "the first policy is %q: this preset reproduces ring_hash_experimental only", policy.key)
	}
	v := policy.val
	cfg.lines["ring size"], cfg.lines["requestHashHeader"] = v.line, v.line
	if v.kind != 'o' {
		return fail(v.line, "ring_hash_experimental's configuration must be an object with a requestHashHeader")
	}
	m, err := jsonMembers("grpc", v, "minRingSize", "maxRingSize", "requestHashHeader")
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		dst  *uint64
	}{{"minRingSize", &cfg.MinRingSize}, {"maxRingSize", &cfg.MaxRingSize}} {
		if x := m[f.name]; x != nil && x.kind != 'z' {
			n, err := grpcUint(x, math.MaxUint64)
			if err != nil {
				return fail(x.line, "%s: %v", f.name, err)
			}
			*f.dst = n
			cfg.lines["ring size"] = x.line
		}
	}
	if h := m["requestHashHeader"]; h != nil && h.kind != 'z' {
		if h.kind != 's' {
			return fail(h.line, "requestHashHeader must be a string")
		}
		cfg.RequestHashHeader = h.str
		cfg.lines["requestHashHeader"] = h.line
	}
	return nil
}

// grpcUint reads a JSON integer in [0, limit], as encoding/json reads one into a uint64 or
// uint32: digits only, no sign, fraction or exponent.
func grpcUint(v *jsonValue, limit uint64) (uint64, error) {
	if v.kind != 'n' {
		return 0, errorf("%s, not a number", v.kindName())
	}
	n, err := strconv.ParseUint(string(v.num), 10, 64)
	if err != nil || n > limit {
		return 0, errorf("%s is not an integer in [0, %d]", string(v.num), limit)
	}
	return n, nil
}
