package compat

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardkit/shard/internal/proxyhash"
	"github.com/shardkit/shard/pool"
)

var nginxPreset = Preset{
	System: "nginx",
	Doc:    "an nginx configuration with `upstream` blocks using `hash $key` or `hash $key consistent`; the name picks the upstream",
	New: func(config []byte, name string) (pool.Pool, error) {
		u, err := ParseNginx(config, name, nil)
		if err != nil {
			return nil, err
		}
		return NewNginx(u)
	},
	Checked: 59970,
}

// NginxUpstream is what NewNginx needs of an nginx upstream block (nginx 1.22's upstream hash
// module, ngx_http_upstream_hash_module).
type NginxUpstream struct {
	Name string
	// Consistent is `hash $key consistent` (Karger's ring as Cache::Memcached::Fast builds
	// it); false is `hash $key` (weighted modulo as Cache::Memcached does it).
	Consistent bool
	// Servers in the order written. Backup servers are left out: the hash never looks at
	// them.
	Servers []NginxServer
	// Line is where the block starts, for errors; 0 when built in code.
	Line int
}

// NginxServer is one `server` line of an upstream block.
type NginxServer struct {
	// Address as written, without parameters: "10.0.0.7:8080", "10.0.0.8" (port 80),
	// "[::1]:8080", "backend.example", "unix:/run/app.sock". It is the node's name, and under
	// `consistent` what the ring hashes (so two spellings of one address are two servers).
	Address string
	// Weight is the server's weight, in [1, pool.MaxWeight]; 0 means 1.
	Weight int
	// Down is the `down` parameter: the server takes no key, but under `hash` its weight
	// still counts and under `consistent` its points still hide equal points of later
	// servers, as in nginx.
	Down bool
	// Addresses is how many addresses the host name resolved to when nginx started (nginx
	// makes one peer of each, and under `hash` each peer takes the line's weight); 0 means 1.
	Addresses int
	// Line is where the line is, for errors; 0 when built in code.
	Line int
}

// NewNginx returns a pool that places keys as nginx places the value of the `hash` directive
// over upstream u. Its nodes are the servers that are not down, named by their addresses as
// written.
//
// Under `hash` (u.Consistent false) it is a pool.Modula: a key goes to the server of slot
// ((CRC32(key) >> 16) & 0x7fff) % W of a table where every peer fills its weight (W is the
// sum); the slots of a down server are holes, and a key that lands on one is rehashed as nginx
// rehashes (adding the same 15 bits of CRC32 of the probe number's digits followed by the
// key) up to 20 times. Under `consistent` it is a pool.Ring of 160 points per unit of weight,
// point j of a server at CRC32(host, 0, port, point j-1) (host and port cut from the address
// text as nginx cuts them), equal points kept once for the server written first, and a key
// at the first point at or after CRC32(key).
//
// Round robin cannot be reproduced, so three cases follow rules of our own, and nginx puts
// those keys on no fixed server:
//   - the empty key: nginx never hashes it and sends it round robin; Locate("") hashes it like
//     any other key (CRC32("") = 0: the first server's slot under `hash`, the server of the
//     smallest point under `consistent`);
//   - a key whose 21 probes all miss under `hash` (nginx gives up after 20 rehashes and goes
//     round robin): Locate takes the next slots in order from the last probe instead;
//   - under `consistent`, a key whose point is followed by 21 or more points of down servers
//     before one of a server that is up: Locate takes that server, nginx round robin.
//
// AppendN gives the servers in the order nginx tries them for one request when the earlier
// ones fail (proxy_next_upstream): the continued rehashes under `hash`, the next points
// clockwise under `consistent`.
//
// Changes follow nginx. Remove marks a server down: under `hash` its slots become holes, so
// only its keys move, each to the server AppendN gave it second; under `consistent` its
// points go. Add of a server the block has (a down one, or a removed one) brings it back in
// place; Add of another appends a `server` line at the end (under `hash` that changes the
// table size and so moves most keys, as a reload of such a configuration would). SetWeight
// changes the line's weight.
func NewNginx(u NginxUpstream) (pool.Pool, error) {
	lines, err := nginxLines(u)
	if err != nil {
		return nil, err
	}
	var nodes []pool.Node
	for _, l := range lines {
		if !l.down {
			nodes = append(nodes, pool.Node{Name: l.address, Weight: l.weight})
		}
	}
	if len(nodes) == 0 {
		return nil, configErr("nginx", u.Line, "upstream %q: every server is down: no server takes keys", u.Name)
	}
	var p pool.Pool
	if u.Consistent {
		p, err = pool.NewRing(nodes, pool.RingOptions{
			Hash:   nginxChashKey,
			Points: func(dst []pool.RingPoint, nodes []pool.Node) []pool.RingPoint { return nginxPoints(dst, lines, nodes) },
			Ties:   pool.TieFirstPoint,
		})
	} else {
		p, err = pool.NewModula(nodes, pool.ModulaOptions{
			Hash:   nginxHashKey,
			Slots:  func(dst []int32, nodes []pool.Node) []int32 { return nginxSlots(dst, lines, nodes) },
			Rehash: nginxRehash,
		})
	}
	if err != nil {
		return nil, poolErr("nginx", u.Line, err)
	}
	return p, nil
}

// nginxLine is a server line as the placement functions read it.
type nginxLine struct {
	address   string
	weight    int
	addresses int
	down      bool
	host      string // the address cut as ngx_http_upstream_init_chash cuts it
	port      string
}

// nginxLines validates the servers of u and returns them as lines.
func nginxLines(u NginxUpstream) ([]nginxLine, error) {
	if len(u.Servers) == 0 {
		return nil, configErr("nginx", u.Line, "upstream %q: no servers are inside upstream", u.Name)
	}
	seen := make(map[string]int, len(u.Servers))
	lines := make([]nginxLine, len(u.Servers))
	total := 0
	for i, s := range u.Servers {
		switch {
		case s.Address == "":
			return nil, configErr("nginx", s.Line, "server %d of upstream %q has no address", i+1, u.Name)
		case s.Weight < 0 || s.Weight > pool.MaxWeight:
			return nil, configErr("nginx", s.Line, "server %q: weight %d: a pool takes weights in [1, %d]", s.Address, s.Weight, pool.MaxWeight)
		case s.Addresses < 0:
			return nil, configErr("nginx", s.Line, "server %q: %d addresses", s.Address, s.Addresses)
		}
		if j, dup := seen[s.Address]; dup {
			return nil, configErr("nginx", s.Line, "server %q is written twice (also server %d): nginx accepts the copy, but a pool needs distinct servers", s.Address, j+1)
		}
		seen[s.Address] = i
		if total += nginxUnits(u.Consistent, max(s.Weight, 1), max(s.Addresses, 1)); total > maxPoints {
			return nil, limitErr("nginx", s.Line, map[bool]string{false: "slots", true: "points"}[u.Consistent], total)
		}
		host, port := nginxHostPort(s.Address)
		lines[i] = nginxLine{address: s.Address, weight: max(s.Weight, 1), addresses: max(s.Addresses, 1), down: s.Down, host: host, port: port}
	}
	return lines, nil
}

// nginxUnits is what a line costs: 160 points per unit of weight under `consistent`, its
// weight per address under `hash`.
func nginxUnits(consistent bool, weight, addresses int) int {
	if consistent {
		return 160 * weight
	}
	return weight * addresses
}

// nginxHostPort cuts an address text as ngx_http_upstream_init_chash does: "unix:" and the
// path; else the digits after the last ':' are the port if a ':' ends the run of digits;
// else all of it is the host and the port is empty (no default port 80).
func nginxHostPort(s string) (host, port string) {
	if len(s) >= 5 && strings.EqualFold(s[:5], "unix:") {
		return s[5:], ""
	}
	for j := len(s) - 1; j >= 0; j-- {
		c := s[j]
		if c == ':' {
			return s[:j], s[j+1:]
		}
		if c < '0' || c > '9' {
			break
		}
	}
	return s, ""
}

// nginxMembers returns, for each line, the index of its node in nodes or -1, and the members
// that no line has (added after the block was read), in join order.
func nginxMembers(lines []nginxLine, nodes []pool.Node) (index []int32, extra []int32) {
	at := make(map[string]int32, len(nodes))
	for i, n := range nodes {
		at[n.Name] = int32(i)
	}
	index = make([]int32, len(lines))
	for i, l := range lines {
		index[i] = -1
		if j, ok := at[l.address]; ok {
			index[i] = j
			delete(at, l.address)
		}
	}
	for i, n := range nodes {
		if _, ok := at[n.Name]; ok {
			extra = append(extra, int32(i))
		}
	}
	return index, extra
}

// nginxSlots is the `hash` table: every peer of every line in order fills the line's weight,
// the slots of lines that are not members (down) being holes; members added later follow as
// lines of one address.
func nginxSlots(dst []int32, lines []nginxLine, nodes []pool.Node) []int32 {
	index, extra := nginxMembers(lines, nodes)
	if nginxTotal(false, lines, nodes, index, extra) > maxPoints {
		return tooManySlots()
	}
	fill := func(node int32, weight int) {
		for range weight {
			dst = append(dst, node)
		}
	}
	for i, l := range lines {
		w := l.weight
		if index[i] >= 0 {
			w = nodes[index[i]].Weight
		}
		fill(index[i], w*l.addresses)
	}
	for _, j := range extra {
		fill(j, nodes[j].Weight)
	}
	return dst
}

// nginxTotal counts the slots or points of a membership before they are made.
func nginxTotal(consistent bool, lines []nginxLine, nodes []pool.Node, index, extra []int32) int {
	total := 0
	for i, l := range lines {
		w := l.weight
		if index[i] >= 0 {
			w = nodes[index[i]].Weight
		}
		total += nginxUnits(consistent, w, l.addresses)
	}
	for _, j := range extra {
		total += nginxUnits(consistent, nodes[j].Weight, 1)
	}
	return total
}

func nginxHashKey(key string) uint64 { return uint64(proxyhash.NginxPart(key, 0)) }

func nginxRehash(key string, probe int, h uint64) uint64 {
	return h + uint64(proxyhash.NginxPart(key, probe))
}

// nginxChashKey places a key on the ring: its CRC32 in the top 32 bits, where the points are.
func nginxChashKey(key string) uint64 { return uint64(proxyhash.CRC32(key)) << 32 }

// nginxPoints is the `consistent` ring: 160 points per unit of weight for every line in
// order, equal values kept once for the line that made them first (a stable sort, then
// duplicates dropped, as ngx_http_upstream_init_chash does on glibc), then the points of lines
// that are not members dropped, since nginx walks past them.
func nginxPoints(dst []pool.RingPoint, lines []nginxLine, nodes []pool.Node) []pool.RingPoint {
	index, extra := nginxMembers(lines, nodes)
	if nginxTotal(true, lines, nodes, index, extra) > maxPoints {
		return tooManyPoints()
	}
	type point struct {
		pos  uint32
		node int32
	}
	var all []point
	add := func(host, port string, weight int, node int32) {
		base := proxyhash.NginxBase(host, port)
		prev := uint32(0)
		for range 160 * weight {
			prev = proxyhash.NginxPoint(base, prev)
			all = append(all, point{prev, node})
		}
	}
	for i, l := range lines {
		w := l.weight
		if index[i] >= 0 {
			w = nodes[index[i]].Weight
		}
		add(l.host, l.port, w, index[i])
	}
	for _, j := range extra {
		host, port := nginxHostPort(nodes[j].Name)
		add(host, port, nodes[j].Weight, j)
	}
	slices.SortStableFunc(all, func(a, b point) int { return int(int64(a.pos) - int64(b.pos)) })
	for i, p := range all {
		if (i == 0 || p.pos != all[i-1].pos) && p.node >= 0 {
			dst = append(dst, pool.RingPoint{Node: int(p.node), Pos: uint64(p.pos) << 32})
		}
	}
	return dst
}

// ParseNginx reads the upstream block named name from an nginx configuration (a whole
// nginx.conf or only the block; blocks are found at any depth), as nginx 1.22 reads it: every
// `server` line with its parameters (weight=, down, backup, max_fails=, fail_timeout=,
// max_conns=), the `hash` directive with its key and `consistent`, and the errors `nginx -t`
// gives, with their line numbers. name may be "" when the text has one upstream block.
//
// The load-balancing method must be `hash` (the last one written wins, as in nginx);
// `keepalive*`, `zone`, `resolver*`, `queue` and `state` are accepted and play no part.
//
// resolve returns how many addresses a host name has, as nginx resolves it once at start-up
// (only `hash` without `consistent` counts them: each address is a peer with the line's
// weight). Nil uses NginxResolve. IP addresses and unix sockets are one address and are not
// resolved.
func ParseNginx(config []byte, name string, resolve func(host string) (int, error)) (NginxUpstream, error) {
	if resolve == nil {
		resolve = NginxResolve
	}
	dirs, err := nginxDirectives(config)
	if err != nil {
		return NginxUpstream{}, err
	}
	var blocks []*nginxDirective
	var find func(ds []*nginxDirective)
	find = func(ds []*nginxDirective) {
		for _, d := range ds {
			if d.args[0] == "upstream" && d.block != nil {
				blocks = append(blocks, d)
			} else {
				find(d.block)
			}
		}
	}
	find(dirs)
	var names []string
	var block *nginxDirective
	for _, b := range blocks {
		if len(b.args) != 2 {
			return NginxUpstream{}, configErr("nginx", b.line, `invalid number of arguments in "upstream" directive`)
		}
		names = append(names, b.args[1])
		if b.args[1] == name || name == "" && len(blocks) == 1 {
			block = b
		}
	}
	if block == nil {
		if name == "" && len(blocks) > 1 {
			return NginxUpstream{}, configErr("nginx", 0, "%d upstream blocks (%s): name one", len(blocks), strings.Join(names, ", "))
		}
		return NginxUpstream{}, configErr("nginx", 0, "no upstream block named %q (found: %s)", name, strings.Join(names, ", "))
	}
	return nginxUpstream(block, resolve)
}

// nginxUpstream reads one upstream block.
func nginxUpstream(block *nginxDirective, resolve func(string) (int, error)) (NginxUpstream, error) {
	u := NginxUpstream{Name: block.args[1], Line: block.line}
	method, methodLine := "", 0
	hashed := false // a hash directive came before: backup is refused from then on
	for _, d := range block.block {
		if d.block != nil {
			return u, configErr("nginx", d.line, `"%s" directive is not allowed here`, d.args[0])
		}
		switch d.args[0] {
		case "hash":
			if len(d.args) < 2 || len(d.args) > 3 {
				return u, configErr("nginx", d.line, `invalid number of arguments in "hash" directive`)
			}
			if len(d.args) == 3 && d.args[2] != "consistent" {
				return u, configErr("nginx", d.line, "invalid parameter %q", d.args[2])
			}
			method, methodLine, hashed = "hash", d.line, true
			u.Consistent = len(d.args) == 3
		case "ip_hash", "least_conn", "random", "least_time", "sticky", "ntlm":
			method, methodLine, hashed = d.args[0], d.line, true
		case "server":
			s, backup, err := nginxServer(d, hashed, resolve)
			if err != nil {
				return u, err
			}
			if !backup {
				u.Servers = append(u.Servers, s)
			}
		case "keepalive", "keepalive_requests", "keepalive_time", "keepalive_timeout", "zone",
			"resolver", "resolver_timeout", "queue", "state":
		default:
			return u, configErr("nginx", d.line, "unknown directive %q", d.args[0])
		}
	}
	switch {
	case method == "":
		return u, configErr("nginx", block.line, "upstream %q has no hash directive: its round robin places no key on a fixed server", u.Name)
	case method != "hash":
		return u, configErr("nginx", methodLine, "%s: this preset reproduces `hash $key` and `hash $key consistent` only", method)
	case len(u.Servers) == 0:
		return u, configErr("nginx", block.end, "no servers are inside upstream")
	}
	return u, nil
}

// nginxServer reads a server line as ngx_http_upstream_server does: parameters first, then
// the address. It reports whether the server is a backup.
func nginxServer(d *nginxDirective, hashed bool, resolve func(string) (int, error)) (NginxServer, bool, error) {
	if len(d.args) < 2 {
		return NginxServer{}, false, configErr("nginx", d.line, `invalid number of arguments in "server" directive`)
	}
	s := NginxServer{Address: d.args[1], Weight: 1, Line: d.line}
	backup := false
	invalid := func(p string) error { return configErr("nginx", d.line, "invalid parameter %q", p) }
	for _, p := range d.args[2:] {
		switch {
		case strings.HasPrefix(p, "weight="):
			w, ok := nginxAtoi(p[len("weight="):])
			if !ok || w == 0 {
				return s, false, invalid(p)
			}
			if w > pool.MaxWeight {
				return s, false, configErr("nginx", d.line, "%s: a pool takes weights up to %d", p, pool.MaxWeight)
			}
			s.Weight = int(w)
		case strings.HasPrefix(p, "max_conns="), strings.HasPrefix(p, "max_fails="):
			if _, ok := nginxAtoi(p[len("max_conns="):]); !ok {
				return s, false, invalid(p)
			}
		case strings.HasPrefix(p, "fail_timeout="):
			if !nginxTime(p[len("fail_timeout="):]) {
				return s, false, invalid(p)
			}
		case p == "backup":
			if hashed {
				return s, false, configErr("nginx", d.line, `balancing method does not support parameter "backup"`)
			}
			backup = true
		case p == "down":
			s.Down = true
		default:
			return s, false, invalid(p)
		}
	}
	n, err := nginxAddress(s.Address, resolve)
	if err != nil {
		return s, false, configErr("nginx", d.line, "%v in upstream %q", err, s.Address)
	}
	s.Addresses = n
	return s, backup, nil
}

// nginxAtoi is ngx_atoi: decimal digits only, at least one, no overflow of a 64-bit integer.
func nginxAtoi(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// nginxTime is ngx_parse_time's syntax for seconds: numbers each followed by a unit (y M w d
// h m s), the last one's unit optional.
func nginxTime(s string) bool {
	if s == "" {
		return false
	}
	for s != "" {
		i := len(s) - len(strings.TrimLeft(s, "0123456789"))
		if i == 0 {
			return false
		}
		s = s[i:]
		if s != "" {
			if !strings.ContainsRune("yMwdhms", rune(s[0])) {
				return false
			}
			s = s[1:]
		}
	}
	return true
}

// nginxAddress checks an upstream server address as ngx_parse_url does and returns how many
// addresses it stands for.
func nginxAddress(a string, resolve func(string) (int, error)) (int, error) {
	if len(a) >= 5 && strings.EqualFold(a[:5], "unix:") {
		switch {
		case len(a) == 5:
			return 0, errString("no path in the unix domain socket")
		case len(a)-5 >= 108:
			return 0, errString("too long path in the unix domain socket")
		}
		return 1, nil
	}
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return 0, errString("invalid host")
		}
		if ip := net.ParseIP(a[1:end]); ip == nil || !strings.Contains(a[1:end], ":") {
			return 0, errString("invalid IPv6 address")
		}
		rest := a[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return 0, errString("invalid host")
			}
			if err := nginxPort(rest[1:]); err != nil {
				return 0, err
			}
		}
		return 1, nil
	}
	if strings.ContainsAny(a, "/?") {
		return 0, errString("invalid host")
	}
	host := a
	if i := strings.IndexByte(a, ':'); i >= 0 {
		host = a[:i]
		if err := nginxPort(a[i+1:]); err != nil {
			return 0, err
		}
	}
	if host == "" {
		return 0, errString("no host")
	}
	if ip := net.ParseIP(host); ip != nil && ip.To4() != nil && strings.Count(host, ".") == 3 {
		return 1, nil
	}
	n, err := resolve(host)
	if err != nil || n < 1 {
		return 0, errString("host not found")
	}
	return n, nil
}

func nginxPort(p string) error {
	if n, ok := nginxAtoi(p); !ok || n < 1 || n > 65535 {
		return errString("invalid port")
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

// NginxResolve returns how many addresses nginx's getaddrinfo would give host on a Debian
// system with its default /etc/hosts, so that a configuration places keys the same on every
// machine where the names are local: "localhost" (and names under ".localhost", RFC 6761)
// has two, 127.0.0.1 and ::1; "ip6-localhost" and "ip6-loopback" have one; names under
// ".invalid" have none (RFC 6761). Other names are looked up with the system's resolver,
// within five seconds.
func NginxResolve(host string) (int, error) {
	if n, known := nginxKnownHost(host); known {
		if n == 0 {
			return 0, errString("host not found")
		}
		return n, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	return len(addrs), err
}

// nginxKnownHost returns the number of addresses of the names NginxResolve answers without
// a resolver.
func nginxKnownHost(host string) (n int, known bool) {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return 2, true
	case h == "ip6-localhost" || h == "ip6-loopback":
		return 1, true
	case h == "invalid" || strings.HasSuffix(h, ".invalid"):
		return 0, true
	}
	return 0, false
}

// nginxDirective is a directive of an nginx configuration: its words, the line nginx reports
// for it (the line of the ';' or '{' that ends it), and its block if it has one (with the
// line of the closing '}').
type nginxDirective struct {
	args  []string
	line  int
	block []*nginxDirective
	end   int
}

// nginxDirectives parses the configuration syntax of ngx_conf_file.c: words separated by
// spaces, ';' ending a directive, '{' and '}' around a block, '#' comments, "..." and '...'
// with backslash escapes.
func nginxDirectives(src []byte) ([]*nginxDirective, error) {
	line := 1
	i := 0
	type frame struct {
		dirs  []*nginxDirective
		owner *nginxDirective
	}
	stack := []frame{{}}
	var words []string
	for {
		// Skip spaces and comments.
		for i < len(src) {
			c := src[i]
			if c == '\n' {
				line++
			}
			if c == '#' {
				for i < len(src) && src[i] != '\n' {
					i++
				}
				continue
			}
			if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
				break
			}
			i++
		}
		if i == len(src) {
			if len(words) > 0 {
				return nil, configErr("nginx", line, "unexpected end of file, expecting \";\" or \"}\"")
			}
			if len(stack) > 1 {
				return nil, configErr("nginx", line, `unexpected end of file, expecting "}"`)
			}
			return stack[0].dirs, nil
		}
		top := &stack[len(stack)-1]
		switch c := src[i]; c {
		case ';', '{':
			i++
			if len(words) == 0 {
				return nil, configErr("nginx", line, "unexpected %q", string(c))
			}
			d := &nginxDirective{args: words, line: line}
			words = nil
			top.dirs = append(top.dirs, d)
			if c == '{' {
				stack = append(stack, frame{owner: d})
			}
		case '}':
			i++
			if len(words) > 0 || len(stack) == 1 {
				return nil, configErr("nginx", line, `unexpected "}"`)
			}
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			f.owner.block = f.dirs
			if f.owner.block == nil {
				f.owner.block = []*nginxDirective{}
			}
			f.owner.end = line
		default:
			var w strings.Builder
			if c == '"' || c == '\'' {
				i++
				for {
					if i == len(src) {
						return nil, configErr("nginx", line, "unexpected end of file in a quoted string")
					}
					b := src[i]
					i++
					if b == '\n' {
						line++
					}
					if b == c {
						break
					}
					if b == '\\' && i < len(src) {
						switch n := src[i]; n {
						case '"', '\'', '\\':
							b = n
							i++
						case 't':
							b = '\t'
							i++
						case 'r':
							b = '\r'
							i++
						case 'n':
							b = '\n'
							i++
						}
					}
					w.WriteByte(b)
				}
				if i < len(src) && !strings.ContainsRune(" \t\r\n;{})", rune(src[i])) {
					return nil, configErr("nginx", line, "unexpected %q", string(src[i]))
				}
			} else {
				for i < len(src) && !strings.ContainsRune(" \t\r\n;{}", rune(src[i])) {
					if src[i] == '\\' && i+1 < len(src) {
						i++
					}
					w.WriteByte(src[i])
					i++
				}
			}
			words = append(words, w.String())
		}
	}
}
