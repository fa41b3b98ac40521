package compat

import (
	"crypto/md5"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// uhashring 2.x HashRing: the rule of testdata/compat/uhashring/README.md, from
// uhashring/ring.py, ring_meta.py and ring_ketama.py of Debian's python3-uhashring 2.1.

var uhashringPreset = Preset{
	System:  "uhashring",
	Doc:     `uhashring HashRing: its arguments as JSON, {"nodes": [...] or {name: weight or {"weight": w, "vnodes": v}}, "hash_fn": "ketama", "vnodes": n, "replicas": n}`,
	New:     oneClient("uhashring", ParseUhashring, newUhashring),
	Checked: 43446,
}

// Uhashring is a HashRing's placement: what NewUhashring takes.
type Uhashring struct {
	// Nodes in the order of the nodes argument (a dict's insertion order).
	Nodes []UhashringNode
	// Ketama is hash_fn="ketama": the KetamaRing (32-bit points, 4 per MD5 digest, shares
	// of the total weight), instead of the default MetaRing (the first 64 bits of one MD5
	// digest per point, vnodes times weight points per node).
	Ketama bool
	// Vnodes is the ring's vnodes argument, what a node added with Add gets. 0 means
	// uhashring's default: 160, or 40 with Ketama.
	Vnodes int
	// Replicas is the replicas argument of the KetamaRing, points per digest, in [1, 4]. 0
	// means 4. Unused without Ketama (uhashring ignores it).
	Replicas int
	// line is the line of the nodes argument when read from text.
	line int
}

// UhashringNode is one node: its name (what get_node returns and what the points are named
// after), its weight and its vnode count, as uhashring's node configuration holds them.
type UhashringNode struct {
	Name string
	// Weight is the node's weight: uhashring's default is 1 (ParseUhashring writes it); 0
	// gives the node no point.
	Weight int
	// Vnodes is the node's own vnodes: 0 means the ring's Vnodes, a negative count gives
	// the node no point (as uhashring's vnodes 0 does; ParseUhashring writes that as -1).
	Vnodes int
}

// uhashringMax bounds a weight, and vnodes a node's vnode count, so that the KetamaRing's
// share vnodes * nodes * weight fits 128 bits; a ring holds at most 4194304 points anyway.
const uhashringMax = min(1<<40, math.MaxInt) // 2^40, or int's maximum on 32-bit platforms

// NewUhashring returns the pool of cfg: every key on the node HashRing.get_node names. A
// key is hashed as its bytes (str(key).encode("utf-8"): for a Python str, its UTF-8 text).
// The nodes are the names in order, their weights clamped to [1, pool.MaxWeight]; Add
// takes a node with its weight and the ring's vnodes, as ring[name] = {"weight": w} does,
// and every change rebuilds the ring as the KetamaRing does (the MetaRing, given a node it
// already has, adds that node's new points and keeps its old ones; a pool rebuilds).
func NewUhashring(cfg Uhashring) (pool.Pool, error) {
	cfg.line = 0
	return newUhashring(cfg)
}

func newUhashring(cfg Uhashring) (pool.Pool, error) {
	u := &uhashringRules{ketama: cfg.Ketama, vnodes: cfg.Vnodes, replicas: cfg.Replicas}
	if u.vnodes == 0 {
		u.vnodes = 160
		if u.ketama {
			u.vnodes = 40
		}
	}
	if u.replicas == 0 {
		u.replicas = 4
	}
	fail := func(format string, args ...any) error { return configErr("uhashring", cfg.line, format, args...) }
	if u.ketama && (u.replicas < 1 || u.replicas > 4) {
		return nil, fail("replicas %d: the KetamaRing reads 4 points from a 16-byte digest, so 1 to 4 (0 and below give no point, 5 and above fail with IndexError)", u.replicas)
	}
	if u.vnodes < 0 || u.vnodes > uhashringMax {
		return nil, fail("vnodes %d: at most %d here, and not negative", u.vnodes, uhashringMax)
	}
	if len(cfg.Nodes) == 0 {
		return nil, fail("no nodes: get_node returns None for every key")
	}
	list := &serverList{}
	seen := map[string]bool{}
	for i, n := range cfg.Nodes {
		if n.Name == "" {
			return nil, fail("node %d: an empty name", i)
		}
		if seen[n.Name] {
			return nil, fail("node %q is listed twice: give each node once", n.Name)
		}
		seen[n.Name] = true
		if n.Weight < 0 || n.Weight > uhashringMax || n.Vnodes > uhashringMax {
			return nil, fail("node %q: weight %d, vnodes %d: a weight in [0, %d] and at most %d vnodes here", n.Name, n.Weight, n.Vnodes, uhashringMax, uhashringMax)
		}
		vn := float64(n.Vnodes)
		if n.Vnodes == 0 {
			vn = float64(u.vnodes)
		}
		list.servers = append(list.servers, server{name: n.Name, weight: float64(n.Weight), vnodes: max(vn, 0)})
	}
	if err := u.check(list); err != nil {
		return nil, fail("%v", err)
	}
	r := &rules{system: "uhashring", check: u.check, points: u.points, line: cfg.line,
		fromNode: func(_ *serverList, n pool.Node) (server, error) {
			return server{name: n.Name, weight: float64(n.Weight), vnodes: float64(u.vnodes)}, nil
		}}
	hash := func(k string) uint64 { return uhashringMD5(k) }
	if u.ketama {
		hash = func(k string) uint64 { return top32(keyhash.DigestMD5.First32(k)) }
	}
	return newPool(r, list, pool.RingOptions{Hash: hash, Lookup: pool.RingAfter, Ties: pool.TieLastPoint}, nil)
}

// uhashringMD5 is the MetaRing's hash of a key or point name, int(md5(...).hexdigest(), 16)
// cut to its top 64 bits: the first 8 digest bytes, big-endian. Positions that differ only
// below those bits (odds 2^-64 for a pair) compare equal here, where uhashring orders them.
func uhashringMD5(s string) uint64 {
	var buf [md5.Size]byte
	return binary.BigEndian.Uint64(keyhash.DigestMD5.Append(buf[:0], s))
}

// uhashringRules are the placement of one ring.
type uhashringRules struct {
	ketama           bool
	vnodes, replicas int
}

// lengths returns the vnodes (point names) of each node: vnodes * weight (MetaRing), or
// vnodes * nodes * weight // total weight (KetamaRing, exact integers), and the total.
func (u *uhashringRules) lengths(l *serverList) ([]uint64, uint64, error) {
	out := make([]uint64, len(l.servers))
	var sum uint64
	for _, s := range l.servers {
		sum += uint64(s.weight)
	}
	if u.ketama && sum == 0 {
		return nil, 0, errorf("the weights sum to 0: the KetamaRing fails with ZeroDivisionError")
	}
	total := uint64(0)
	for i, s := range l.servers {
		if u.ketama {
			hi, lo := bits.Mul64(uint64(s.vnodes)*uint64(len(l.servers)), uint64(s.weight))
			out[i], _ = bits.Div64(hi, lo, sum) // < vnodes*nodes, as weight <= sum
		} else {
			hi, lo := bits.Mul64(uint64(s.vnodes), uint64(s.weight))
			if hi != 0 || lo > 1<<22 {
				return nil, 0, errorf("node %q: %d vnodes of weight %v: more points than a ring holds", s.name, uint64(s.vnodes), s.weight)
			}
			out[i] = lo
		}
		total += out[i]
		if total > 1<<22 {
			return nil, 0, errorf("more than %d points", 1<<22)
		}
	}
	return out, total, nil
}

// check refuses a ring uhashring cannot place with.
func (u *uhashringRules) check(l *serverList) error {
	_, total, err := u.lengths(l)
	switch {
	case err != nil:
		return err
	case total == 0:
		return errorf("no node gets a point: get_node returns None for every key")
	case u.ketama && total*uint64(u.replicas) > 1<<22:
		return errorf("%d points: at most %d here", total*uint64(u.replicas), 1<<22)
	}
	return nil
}

// points are uhashring's: vnode w of a node is named "<name>-<w>"; the MetaRing gives it
// one point, the top 64 bits of its MD5; the KetamaRing gives it replicas points, digest
// bytes 4i..4i+3 little-endian (ketama's points). Nodes in order, each node's points in
// order; of equal positions the last written wins (a dict assignment).
func (u *uhashringRules) points(dst []pool.RingPoint, l *serverList) []pool.RingPoint {
	lengths, _, _ := u.lengths(l) // checked
	var buf []byte
	for e, n := range lengths {
		for w := range n {
			buf = strconv.AppendUint(append(append(buf[:0], l.servers[e].name...), '-'), w, 10)
			d := md5.Sum(buf)
			if !u.ketama {
				dst = append(dst, pool.RingPoint{Node: e, Pos: binary.BigEndian.Uint64(d[:8])})
				continue
			}
			dst = appendDigestPoints(dst, e, d[:], u.replicas)
		}
	}
	return dst
}

// ParseUhashring reads HashRing's arguments written as JSON: {"nodes": ..., "hash_fn":
// "ketama", "vnodes": n, "replicas": n}, nodes being a name, a list of names, or an object
// of name to weight or to a node configuration ({"weight": w, "vnodes": v}; its other keys,
// hostname, port, instance and nodename, place no key and are ignored, as are keys
// uhashring does not know). Of a name given twice in an object the value written last
// counts, at the place of the first, as a Python dict literal keeps it; a name listed
// twice in a list is one node.
func ParseUhashring(text []byte) (Uhashring, error) {
	var cfg Uhashring
	v, err := parseJSON("uhashring", text)
	if err != nil {
		return cfg, err
	}
	fail := func(line int, format string, args ...any) (Uhashring, error) {
		return cfg, configErr("uhashring", line, format, args...)
	}
	if v.kind != 'o' {
		return fail(v.line, "want an object of HashRing's arguments (nodes, hash_fn, vnodes, replicas), not %s", v.kindName())
	}
	var nodes *jsonValue
	for _, m := range v.obj {
		switch m.key {
		case "nodes":
			nodes = m.val
		case "hash_fn":
			switch {
			case m.val.kind == 's' && m.val.str == "ketama":
				cfg.Ketama = true
			case m.val.kind == 'z':
			default:
				return fail(m.line, "hash_fn: only \"ketama\" or null (the default MetaRing): a function cannot be written in JSON")
			}
		case "vnodes", "replicas":
			if m.val.kind == 'z' {
				continue
			}
			n, ok := jsonInt(m.val)
			if !ok || n < 0 || n > uhashringMax {
				return fail(m.line, "%s must be an integer in [0, %d]", m.key, uhashringMax)
			}
			if m.key == "vnodes" {
				cfg.Vnodes = int(n)
				if n == 0 {
					return fail(m.line, "vnodes 0 gives no node a point: get_node returns None for every key")
				}
			} else if cfg.Replicas = int(n); n == 0 {
				cfg.Replicas = -1 // checked below: no point with the KetamaRing, unused without
			}
		case "weight_fn":
			return fail(m.line, "weight_fn: a function cannot be written in JSON")
		default:
			return fail(m.line, "%q is no argument of HashRing (nodes, hash_fn, vnodes, replicas)", m.key)
		}
	}
	if nodes == nil {
		return fail(v.line, "no nodes")
	}
	cfg.line = nodes.line
	if cfg.Replicas == -1 {
		if cfg.Ketama {
			return fail(nodes.line, "replicas 0 gives no point: get_node returns None for every key")
		}
		cfg.Replicas = 0
	}
	err = uhashringNodes(&cfg, nodes)
	return cfg, err
}

// uhashringNodes reads the nodes argument as HashRing._configure_nodes does.
func uhashringNodes(cfg *Uhashring, nodes *jsonValue) error {
	fail := func(line int, format string, args ...any) error { return configErr("uhashring", line, format, args...) }
	index := map[string]int{}
	put := func(n UhashringNode) {
		if i, ok := index[n.Name]; ok {
			cfg.Nodes[i] = n
			return
		}
		index[n.Name] = len(cfg.Nodes)
		cfg.Nodes = append(cfg.Nodes, n)
	}
	switch nodes.kind {
	case 's':
		put(UhashringNode{Name: nodes.str, Weight: 1})
	case 'a':
		for _, item := range nodes.arr {
			if item.kind != 's' {
				return fail(item.line, "a node of a list must be a name (a string), not %s", item.kindName())
			}
			if _, ok := index[item.str]; !ok {
				put(UhashringNode{Name: item.str, Weight: 1})
			}
		}
	case 'o':
		for _, m := range nodes.obj {
			n := UhashringNode{Name: m.key, Weight: 1}
			switch m.val.kind {
			case 'b':
				return fail(m.line, "node %q: a boolean weight is not reproduced here: write 1 or 0", m.key)
			case 'n':
				w, ok := jsonInt(m.val)
				if !ok {
					return fail(m.line, "node %q: the weight must be an integer (range() refuses %s)", m.key, excerpt(string(m.val.num)))
				}
				n.Weight = int(w)
			case 'o':
				for _, c := range m.val.obj {
					if c.key != "weight" && c.key != "vnodes" {
						continue // hostname, port, instance, nodename, or unknown: no placement
					}
					x, ok := jsonInt(c.val)
					if !ok {
						return fail(c.line, "node %q: %s must be an integer", m.key, c.key)
					}
					if c.key == "weight" {
						n.Weight = int(x)
					} else if n.Vnodes = int(x); x == 0 {
						n.Vnodes = -1 // no point
					}
				}
			default:
				return fail(m.line, "ValueError: node configuration should be a dict or an int, got %s", m.val.kindName())
			}
			if n.Weight < 0 || n.Vnodes < -1 {
				return fail(m.line, "node %q: a negative weight or vnode count is not reproduced here", m.key)
			}
			put(n)
		}
	default:
		return fail(nodes.line, "ValueError: nodes configuration should be a list or a dict, got %s", nodes.kindName())
	}
	if len(cfg.Nodes) == 0 {
		return fail(nodes.line, "no nodes: get_node returns None for every key")
	}
	return nil
}

// jsonInt reads a JSON integer in [-uhashringMax, uhashringMax].
func jsonInt(v *jsonValue) (int64, bool) {
	if v.kind != 'n' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v.num), 10, 64)
	return n, err == nil && n >= -uhashringMax && n <= uhashringMax
}
