package compat

import (
	"cmp"
	"crypto/md5"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// twemproxy (nutcracker) 0.5: the rule of testdata/compat/twemproxy/README.md, from
// nc_conf.c, nc_server.c, nc_ketama.c and nc_modula.c.

var twemproxyPreset = Preset{
	System: "twemproxy",
	Doc:    "a nutcracker.yml (twemproxy 0.5); name picks the pool when it holds several",
	New: func(config []byte, name string) (pool.Pool, error) {
		cfgs, err := ParseTwemproxy(config)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, c := range cfgs {
			if c.Name == name || name == "" && len(cfgs) == 1 {
				return newTwemproxy(c)
			}
			names = append(names, strconv.Quote(c.Name))
		}
		if name == "" {
			return nil, configErr("twemproxy", 0, "the file holds %d pools (%s): name one", len(cfgs), strings.Join(names, ", "))
		}
		return nil, configErr("twemproxy", 0, "no pool %q in the file (it holds %s)", name, strings.Join(names, ", "))
	},
	Checked: 128000,
}

// Twemproxy is one pool of a nutcracker.yml: what NewTwemproxy takes. The zero values of
// Hash and Distribution mean nutcracker's defaults.
type Twemproxy struct {
	// Name is the pool's name; it does not take part in placement.
	Name string
	// Hash is one of nutcracker's key hashes: one_at_a_time, md5, crc16, crc32, crc32a,
	// fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins. "" means fnv1a_64.
	Hash string
	// Distribution is ketama or modula; "" means ketama. random is refused: it sends each
	// request to a random server, so no placement can be reproduced.
	Distribution string
	// HashTag is two bytes, "{}" for example, or "" for none: with a tag, a key that holds
	// the first byte and, after it, the second with at least one byte between hashes only
	// the bytes between.
	HashTag string
	// Servers are the pool's servers in the order written; nutcracker orders them by name.
	Servers []TwemproxyServer
	// lines are the text lines of the servers, when the pool was read from text.
	lines []int
}

// TwemproxyServer is one line of servers:.
type TwemproxyServer struct {
	// Addr is "host:port", or the path of a unix socket ("/..."). The text counts: the
	// default name is the host, ':' and the port as written (leading zeros kept), the host
	// alone for port 11211, and a socket's path followed by ':'.
	Addr string
	// Weight is in [1, 2147483647].
	Weight int
	// Name is the server's name, "" for the default one. The name is what ketama hashes,
	// what orders the servers and what Locate returns.
	Name string
}

// twemproxyHashes maps nutcracker's hash names (HASH_CODEC, hashkit/nc_hashkit.h).
var twemproxyHashes = map[string]keyhash.Memcached{
	"one_at_a_time": keyhash.OneAtATime, "md5": keyhash.MD5, "crc16": keyhash.CRC16,
	"crc32": keyhash.CRC32, "crc32a": keyhash.CRC32a, "fnv1_64": keyhash.FNV64,
	"fnv1a_64": keyhash.FNV64a, "fnv1_32": keyhash.FNV32, "fnv1a_32": keyhash.FNV32a,
	"hsieh": keyhash.Hsieh, "murmur": keyhash.Murmur, "jenkins": keyhash.Jenkins,
}

// NewTwemproxy returns the pool of cfg: every key on the server nutcracker 0.5 sends it to.
// Add takes a node as a server of that name and weight.
func NewTwemproxy(cfg Twemproxy) (pool.Pool, error) {
	cfg.lines = nil
	return newTwemproxy(cfg)
}

// at returns an error naming where server i came from: its line, or its place in Servers.
func (c *Twemproxy) at(i int, format string, args ...any) error {
	if c.lines != nil {
		return configErr("twemproxy", c.lines[i], format, args...)
	}
	return configErr("twemproxy", 0, "%s (%s): %s", c.where(i), c.Servers[i].Addr, sprintf(format, args...))
}

// where names server i: "line N" or "server i".
func (c *Twemproxy) where(i int) string {
	if c.lines != nil {
		return fmt.Sprintf("line %d", c.lines[i])
	}
	return fmt.Sprintf("server %d", i)
}

// list checks cfg and returns its servers in nutcracker's order.
func (c *Twemproxy) list() (*serverList, keyhash.Memcached, bool, error) {
	hash, ok := twemproxyHashes[cmp.Or(c.Hash, "fnv1a_64")]
	if !ok {
		return nil, 0, false, configErr("twemproxy", 0, "hash %q is not a valid hash", c.Hash)
	}
	dist := cmp.Or(c.Distribution, "ketama")
	if dist == "random" {
		return nil, 0, false, configErr("twemproxy", 0, "distribution random sends each request to random() %% servers, whatever the key: there is no placement to reproduce")
	}
	if dist != "ketama" && dist != "modula" {
		return nil, 0, false, configErr("twemproxy", 0, "distribution %q is not a valid distribution (ketama, modula or random)", c.Distribution)
	}
	if c.HashTag != "" && len(c.HashTag) != 2 {
		return nil, 0, false, configErr("twemproxy", 0, "hash_tag %q is not two bytes", c.HashTag)
	}
	if len(c.Servers) == 0 {
		return nil, 0, false, configErr("twemproxy", 0, "pool %q has no servers", c.Name)
	}
	list := &serverList{}
	byName := map[string]int{}
	for i, s := range c.Servers {
		if s.Weight < 1 || s.Weight > math.MaxInt32 {
			return nil, 0, false, c.at(i, "weight %d: nutcracker takes 1 to 2147483647", s.Weight)
		}
		name := cmp.Or(s.Name, twemproxyName(s.Addr))
		if name == "" {
			return nil, 0, false, c.at(i, "an empty server name")
		}
		if j, dup := byName[name]; dup {
			return nil, 0, false, c.at(i, "pool %q has servers with same name %q (this one and the one of %s): nutcracker refuses it", c.Name, name, c.where(j))
		}
		byName[name] = i
		list.servers = append(list.servers, server{name: name, weight: float64(s.Weight)})
	}
	twemproxyOrder(list)
	ketama := dist == "ketama"
	if err := (&twemproxyRules{ketama: ketama}).check(list); err != nil {
		if c.lines != nil {
			return nil, 0, false, configErr("twemproxy", c.lines[0], "pool %q: %v", c.Name, err)
		}
		return nil, 0, false, configErr("twemproxy", 0, "pool %q: %v", c.Name, err)
	}
	return list, hash, ketama, nil
}

func newTwemproxy(cfg Twemproxy) (pool.Pool, error) {
	list, hash, ketama, err := cfg.list()
	if err != nil {
		return nil, err
	}
	tm := &twemproxyRules{ketama: ketama}
	r := &rules{
		system: "twemproxy",
		fromNode: func(_ *serverList, n pool.Node) (server, error) {
			return server{name: n.Name, weight: float64(n.Weight)}, nil
		},
		reorder: twemproxyOrder,
		check:   tm.check,
	}
	if len(cfg.lines) > 0 {
		r.line = slices.Max(cfg.lines)
	}
	if ketama {
		r.points = tm.points
		return newPool(r, list, pool.RingOptions{Hash: twemproxyKeyHash(hash, cfg.HashTag, 32), Ties: pool.TieFirstPoint}, nil)
	}
	r.slots = twemproxySlots
	return newPool(r, list, pool.RingOptions{}, twemproxyKeyHash(hash, cfg.HashTag, 0))
}

// twemproxyKeyHash returns nutcracker's hash of a key (server_pool_idx), shifted left by
// shift (32 for a ring position): with a hash tag, a key holding the tag's first byte and,
// after it, its second with a byte or more between hashes only the bytes between; an empty
// key hashes to 0 (server_pool_hash), not to the hash of no bytes.
func twemproxyKeyHash(hash keyhash.Memcached, tag string, shift uint) func(string) uint64 {
	if tag == "" {
		return func(k string) uint64 {
			if k == "" {
				return 0
			}
			return uint64(hash.Sum32(k)) << shift
		}
	}
	return func(k string) uint64 {
		if start := strings.IndexByte(k, tag[0]); start >= 0 {
			if end := strings.IndexByte(k[start+1:], tag[1]); end > 0 {
				k = k[start+1 : start+1+end]
			}
		}
		if k == "" {
			return 0
		}
		return uint64(hash.Sum32(k)) << shift
	}
}

// twemproxyName returns nutcracker's default name of a server (conf_add_server): the host
// and the port as written, the host alone for port 11211, a socket's path and ':'.
func twemproxyName(addr string) string {
	if strings.HasPrefix(addr, "/") {
		return addr + ":"
	}
	colon := strings.LastIndexByte(addr, ':')
	if colon < 0 {
		return addr
	}
	if port, ok := ncAtoi(addr[colon+1:]); ok && port == 11211 {
		return addr[:colon]
	}
	return addr
}

// twemproxyOrder sorts the servers as nutcracker does to find duplicates, an order it keeps
// (conf_validate_server, string_compare): the shorter name first, then bytewise.
func twemproxyOrder(l *serverList) {
	slices.SortStableFunc(l.servers, func(a, b server) int {
		return cmp.Or(cmp.Compare(len(a.name), len(b.name)), strings.Compare(a.name, b.name))
	})
}

// twemproxyRules are the placement of one pool.
type twemproxyRules struct {
	ketama bool
}

// twemproxyDigests returns how many MD5 digests (4 points each) each server of l gets
// (ketama_update): float32 arithmetic over a uint32 total, as nutcracker computes it.
func twemproxyDigests(l *serverList) (digests []int, total uint32) {
	for _, s := range l.servers {
		total += uint32(s.weight) // wraps, as nutcracker's uint32 does
	}
	n := float32(len(l.servers))
	for _, s := range l.servers {
		pct := float32(uint32(s.weight)) / float32(total)
		x := float32(float32(float32(pct*160)/4) * n)
		x = float32(float64(x) + 1e-10) // (float)(x + 0.0000000001): a double sum rounded back
		digests = append(digests, int(math.Floor(float64(x))))
	}
	return digests, total
}

// check refuses what nutcracker cannot run: weights whose uint32 sum is 0 (a division by
// zero), more ketama points than nutcracker allocates ((servers + 10) * 160), more modula
// slots than a pool.Modula holds.
func (t *twemproxyRules) check(l *serverList) error {
	digests, total := twemproxyDigests(l)
	if total == 0 {
		return errors.New("the weights sum to 0 modulo 2^32: nutcracker divides by it")
	}
	if t.ketama {
		points := 0
		for _, d := range digests {
			points += 4 * d
		}
		if limit := (len(l.servers) + 10) * 160; points > limit {
			return errorf("weights that give %d ketama points, more than the %d nutcracker allocates (it would write past them)", points, limit)
		}
		return nil
	}
	slots := 0
	for _, s := range l.servers {
		slots += int(s.weight)
	}
	if slots > 1<<22 {
		return errorf("weights that sum to %d modula slots: at most %d here (nutcracker allocates 8 bytes a slot)", slots, 1<<22)
	}
	return nil
}

// points are ketama's: digest i of a server is the MD5 of its name, '-' and i, cut to 272
// bytes (KETAMA_MAX_HOSTLEN - 1), and gives 4 points; servers in name order, ties to the
// earlier point (a stable sort, then the first point >= the key's hash).
func (t *twemproxyRules) points(dst []pool.RingPoint, l *serverList) []pool.RingPoint {
	digests, _ := twemproxyDigests(l)
	for e, s := range l.servers {
		for i := range digests[e] {
			name := s.name + "-" + strconv.Itoa(i)
			d := md5.Sum([]byte(name[:min(len(name), 272)]))
			dst = appendDigestPoints(dst, e, d[:], 4)
		}
	}
	return dst
}

// twemproxySlots are modula's: each server in name order fills weight consecutive slots.
func twemproxySlots(dst []int32, l *serverList) []int32 {
	for e, s := range l.servers {
		for range int(s.weight) {
			dst = append(dst, int32(e))
		}
	}
	return dst
}

// ncAtoi is nutcracker's _nc_atoi: decimal digits only, accumulated in a C int that wraps
// modulo 2^32; an empty text or a negative result is invalid.
func ncAtoi(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	var v uint32
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + uint32(s[i]-'0')
	}
	if int32(v) < 0 {
		return 0, false
	}
	return int(v), true
}

// ParseTwemproxy reads the pools of a nutcracker.yml, refusing what nutcracker 0.5 refuses
// with an error that names the line.
func ParseTwemproxy(config []byte) ([]Twemproxy, error) {
	pools, err := readNutcrackerYAML(config)
	if err != nil {
		return nil, err
	}
	if len(pools) == 0 {
		return nil, configErr("twemproxy", 0, "the file has no pools")
	}
	var out []Twemproxy
	poolLine := map[string]int{}
	listenLine := map[string]int{}
	for _, p := range pools {
		if first, dup := poolLine[p.name]; dup {
			return nil, configErr("twemproxy", p.line, "a second pool named %q (the first is on line %d): nutcracker refuses it", p.name, first)
		}
		poolLine[p.name] = p.line
		cfg, listen, err := twemproxyPool(p)
		if err != nil {
			return nil, err
		}
		if _, _, _, err := cfg.list(); err != nil {
			return nil, err
		}
		if first, dup := listenLine[listen.value]; dup {
			return nil, configErr("twemproxy", listen.line, "pool %q listens on %q like the pool on line %d: nutcracker refuses it", p.name, listen.value, first)
		}
		listenLine[listen.value] = listen.line
		out = append(out, cfg)
	}
	return out, nil
}

// twemproxyDirectives are nutcracker's directives (conf_commands) by kind.
var twemproxyDirectives = map[string]string{
	"listen": "listen", "hash": "hash", "hash_tag": "hash_tag", "distribution": "distribution",
	"timeout": "num", "backlog": "num", "client_connections": "num", "redis_db": "num",
	"server_connections": "num", "server_retry_timeout": "num", "server_failure_limit": "num",
	"redis": "bool", "tcpkeepalive": "bool", "preconnect": "bool", "auto_eject_hosts": "bool",
	"redis_auth": "string", "servers": "servers",
}

// twemproxyPool checks the directives of one pool (conf_set_*, conf_validate_pool) and
// returns its configuration and its listen directive.
func twemproxyPool(p yamlPool) (Twemproxy, yamlDirective, error) {
	cfg := Twemproxy{Name: p.name}
	seen := map[string]yamlDirective{}
	fail := func(line int, format string, args ...any) error {
		return configErr("twemproxy", line, "pool %q: %s", p.name, sprintf(format, args...))
	}
	var servers *yamlDirective
	for i, d := range p.directives {
		kind, known := twemproxyDirectives[d.key]
		if !known {
			return cfg, d, fail(d.line, "directive %q is unknown", d.key)
		}
		if d.isSeq != (kind == "servers") {
			if d.isSeq {
				return cfg, d, fail(d.line, "directive %q takes one value, not a list", d.key)
			}
			return cfg, d, fail(d.line, "servers: takes a list (\"- host:port:weight [name]\" lines)")
		}
		if first, dup := seen[d.key]; dup {
			if kind == "servers" {
				return cfg, d, fail(d.line, "a second servers: list (the first is on line %d): nutcracker allows one sequence directive", first.line)
			}
			return cfg, d, fail(d.line, "directive %q is a duplicate (first on line %d)", d.key, first.line)
		}
		seen[d.key] = d
		switch kind {
		case "listen":
			if err := twemproxyListen(d.value); err != "" {
				return cfg, d, fail(d.line, "directive \"listen\" %s", err)
			}
		case "hash":
			if _, ok := twemproxyHashes[d.value]; !ok {
				return cfg, d, fail(d.line, "directive \"hash\" is not a valid hash: %q (names are lower case: md5, fnv1a_64, ...)", d.value)
			}
			cfg.Hash = d.value
		case "hash_tag":
			if len(d.value) != 2 {
				return cfg, d, fail(d.line, "directive \"hash_tag\" is not a valid hash tag string with two characters: %q", d.value)
			}
			cfg.HashTag = d.value
		case "distribution":
			switch d.value {
			case "ketama", "modula":
				cfg.Distribution = d.value
			case "random":
				return cfg, d, fail(d.line, "distribution random sends each request to random() %% servers, whatever the key: there is no placement to reproduce")
			default:
				return cfg, d, fail(d.line, "directive \"distribution\" is not a valid distribution: %q (ketama, modula or random)", d.value)
			}
		case "num":
			if _, ok := ncAtoi(d.value); !ok {
				return cfg, d, fail(d.line, "directive %q is not a number: %q", d.key, d.value)
			}
			if v, _ := ncAtoi(d.value); v == 0 && d.key == "server_connections" {
				return cfg, d, fail(d.line, "directive \"server_connections:\" cannot be 0")
			}
		case "bool":
			if d.value != "true" && d.value != "false" {
				return cfg, d, fail(d.line, "directive %q is not \"true\" or \"false\": %q", d.key, d.value)
			}
		case "servers":
			servers = &p.directives[i]
		}
	}
	listen, ok := seen["listen"]
	if !ok {
		return cfg, listen, fail(p.line, "directive \"listen:\" is missing")
	}
	if servers == nil {
		return cfg, listen, fail(p.line, "no servers: list (nutcracker: missing sequence directive)")
	}
	if auth, ok := seen["redis_auth"]; ok && seen["redis"].value != "true" {
		return cfg, listen, fail(auth.line, "directive \"redis_auth:\" is only valid for a redis pool")
	}
	for _, item := range servers.items {
		s, err := twemproxyServerLine(item.value)
		if err != "" {
			return cfg, listen, fail(item.line, "directive \"servers\" %s: %q", err, item.value)
		}
		cfg.Servers = append(cfg.Servers, s)
		cfg.lines = append(cfg.lines, item.line)
	}
	return cfg, listen, nil
}

// twemproxyListen checks a listen value (conf_set_listen): "host:port" with a valid port,
// or "/path [permissions]" with octal permissions up to 0777. nutcracker also resolves the
// host; a preset cannot, and does not.
func twemproxyListen(v string) string {
	if strings.HasPrefix(v, "/") {
		if sp := strings.LastIndexByte(v, ' '); sp >= 0 {
			perm := v[sp+1:]
			digits := len(perm) - len(strings.TrimLeft(perm, "01234567"))
			if n, err := strconv.ParseUint("0"+perm[:digits], 8, 32); err != nil || n > 0o777 {
				return "has an invalid file permission in \"socket_path permission\" format string"
			}
		}
		return ""
	}
	colon := strings.LastIndexByte(v, ':')
	if colon < 0 {
		return "has an invalid \"hostname:port\" format string"
	}
	if port, ok := ncAtoi(v[colon+1:]); !ok || port < 1 || port > 65535 {
		return "has an invalid port in \"hostname:port\" format string"
	}
	return ""
}

// twemproxyServerLine reads "host:port:weight [name]" or "/path:weight [name]" from the end,
// as conf_add_server does, and returns nutcracker's complaint if it has one.
func twemproxyServerLine(v string) (TwemproxyServer, string) {
	const format = "has an invalid \"hostname:port:weight [name]\"or \"/path/unix_socket:weight [name]\" format string"
	var s TwemproxyServer
	rest := v
	hasName := false
	if sp := strings.LastIndexByte(rest, ' '); sp >= 0 {
		s.Name, rest, hasName = rest[sp+1:], rest[:sp], true
	}
	colon := strings.LastIndexByte(rest, ':')
	if colon < 0 {
		return s, format
	}
	weightText := rest[colon+1:]
	rest = rest[:colon]
	unix := strings.HasPrefix(v, "/")
	portText := ""
	if colon := strings.LastIndexByte(rest, ':'); colon >= 0 {
		if unix { // a third field: the path holds a ':'
			return s, format
		}
		portText, rest = rest[colon+1:], rest[:colon]
		if strings.IndexByte(rest, 0) >= 0 { // the fourth delimiter nutcracker looks for: NUL
			return s, format
		}
	} else if !unix {
		return s, format
	}
	w, ok := ncAtoi(weightText)
	switch {
	case !ok:
		return s, "has an invalid weight in \"hostname:port:weight [name]\" format string"
	case w == 0:
		return s, "has a zero weight in \"hostname:port:weight [name]\" format string"
	}
	s.Weight = w
	if !unix {
		if p, ok := ncAtoi(portText); !ok || p < 1 || p > 65535 {
			return s, "has an invalid port in \"hostname:port:weight [name]\" format string"
		}
		s.Addr = rest + ":" + portText
	} else {
		s.Addr = rest
	}
	if hasName && s.Name == "" {
		return s, "has an empty name after its last space"
	}
	return s, ""
}
