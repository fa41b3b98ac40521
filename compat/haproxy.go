package compat

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard/internal/proxyhash"
	"github.com/shardkit/shard/pool"
)

var haproxyPreset = Preset{
	System: "haproxy",
	Doc:    "an HAProxy configuration (backend or listen sections with balance, hash-type and server lines); the name picks the section",
	New: func(config []byte, name string) (pool.Pool, error) {
		b, err := ParseHAProxy(config, name)
		if err != nil {
			return nil, err
		}
		return NewHAProxy(b)
	},
	Checked: 118000,
}

// HAProxyBackend is what NewHAProxy needs of an HAProxy 2.6 backend that balances by hash.
type HAProxyBackend struct {
	Name string
	// Consistent is `hash-type consistent`; false is `hash-type map-based`, HAProxy's default.
	Consistent bool
	// Function is the hash function of the hash-type line: "sdbm" (the default, also for
	// ""), "djb2", "wt6" or "crc32".
	Function string
	// Avalanche applies HAProxy's full_hash to the key's hash: `hash-type ... <fn>
	// avalanche`, and `hash-type consistent` without a function (sdbm with avalanche).
	Avalanche bool
	// BalanceFactor is `hash-balance-factor`, in percent: 0 for none, else above 100. Under
	// consistent it bounds every server's connections (see NewHAProxyBounded); NewHAProxy
	// refuses it there. HAProxy ignores it under map-based, and so does NewHAProxy.
	BalanceFactor int
	// Servers in the order written.
	Servers []HAProxyServer
	// Line is where the section starts, for errors; 0 when built in code.
	Line int
}

// HAProxyServer is one `server` line.
type HAProxyServer struct {
	// Name is the server's name, which names the node; it places nothing.
	Name string
	// ID is the `id` keyword, in [1, 2147483647]; 0 numbers the server automatically as
	// HAProxy does (by position, skipping the ids taken).
	ID int
	// Weight is HAProxy's weight, in [0, 256]; note that 0 is not 1 here: a server of weight 0
	// takes no keys, as in HAProxy, whose default is 1 (the parser fills it in).
	Weight int
	// Disabled and Backup servers take no keys (backups take keys only when no active server
	// can, which a pool never lets happen), but they keep their ids and their place in the
	// automatic numbering.
	Disabled, Backup bool
	// Line is where the line is, for errors; 0 when built in code.
	Line int
}

// NewHAProxy returns a pool that places keys as HAProxy 2.6 places the string a hash-based
// `balance` yields (the value of `balance hash <expr>`, the URI for `balance uri`, the
// parameter for `balance url_param`, the header's first value for `balance hdr(...)`; the
// raw address bytes for `balance source`). Its nodes are the servers that take keys: weight
// above 0, neither disabled nor backup, named by their names.
//
// The key's hash is sdbm, djb2, wt6 or crc32, then full_hash under avalanche. Under
// map-based it is a pool.Modula: the key goes to slot hash % T of HAProxy's table of T slots
// (the weights divided by their greatest common divisor, filled by HAProxy's smooth weighted
// order, recalc_server_map). Under consistent it is a pool.Ring: 16 points per unit of weight
// at full_hash(id * 4096 + j), HAProxy's server id deciding where a server's points are, and
// a key goes to the nearest point in either direction, the one below on equal distance, equal
// points in configuration order (RingNearestPoint, TieFirstPoint): so ids, not names or
// order, place keys, and ids that differ by a multiple of 2^20 share their points.
//
// Every key has a place, the empty one too: HAProxy hashes an empty value (`?k=`) as the empty
// string. When the balance expression finds nothing at all (no such parameter or header),
// HAProxy goes round robin, and such a request has no fixed server.
//
// Changes follow HAProxy's runtime commands. Remove is `disable server`: the server keeps its
// line and id, its points or slots go (under consistent only its keys move); Add of a server
// the section has (a removed, disabled, backup or weight-0 one) enables it in place with its
// id; Add of another appends a `server` line without an id, numbered automatically after the
// section's servers. SetWeight is `set server weight`. Under map-based any change rebuilds
// the table, as in HAProxy.
func NewHAProxy(b HAProxyBackend) (pool.Pool, error) {
	if b.BalanceFactor != 0 && b.Consistent {
		return nil, configErr("haproxy", b.Line, "backend %q: hash-balance-factor %d moves keys by the servers' load: a pool cannot reproduce it; NewHAProxyBounded does", b.Name, b.BalanceFactor)
	}
	p, _, err := newHAProxy(b)
	return p, err
}

// newHAProxy is NewHAProxy without the check of the balance factor; it also returns the
// server lines.
func newHAProxy(b HAProxyBackend) (pool.Pool, []haproxyLine, error) {
	hash, err := haproxyHash(b)
	if err != nil {
		return nil, nil, err
	}
	lines, err := haproxyLines(b)
	if err != nil {
		return nil, nil, err
	}
	var nodes []pool.Node
	for _, l := range lines {
		if l.takes {
			nodes = append(nodes, pool.Node{Name: l.name, Weight: l.weight})
		}
	}
	if len(nodes) == 0 {
		return nil, nil, configErr("haproxy", b.Line, "backend %q: no server takes keys (weight 0, disabled or backup): HAProxy answers 503 or uses its backups", b.Name)
	}
	var p pool.Pool
	if b.Consistent {
		p, err = pool.NewRing(nodes, pool.RingOptions{
			Hash: func(key string) uint64 { return uint64(hash(key)) << 32 },
			Points: func(dst []pool.RingPoint, nodes []pool.Node) []pool.RingPoint {
				return haproxyPoints(dst, lines, nodes)
			},
			Lookup: pool.RingNearestPoint,
			Ties:   pool.TieFirstPoint,
		})
	} else {
		p, err = pool.NewModula(nodes, pool.ModulaOptions{
			Hash:  func(key string) uint64 { return uint64(hash(key)) },
			Slots: func(dst []int32, nodes []pool.Node) []int32 { return haproxyMap(dst, lines, nodes) },
		})
	}
	if err != nil {
		return nil, nil, poolErr("haproxy", b.Line, err)
	}
	return p, lines, nil
}

// haproxyHash returns the key hash of the backend's hash-type.
func haproxyHash(b HAProxyBackend) (func(string) uint32, error) {
	var f func(string) uint32
	switch b.Function {
	case "", "sdbm":
		f = proxyhash.SDBM
	case "djb2":
		f = proxyhash.DJB2
	case "wt6":
		f = proxyhash.WT6
	case "crc32":
		f = proxyhash.CRC32
	default:
		return nil, configErr("haproxy", b.Line, "'hash-type' only supports 'sdbm', 'djb2', 'crc32', or 'wt6' hash functions (not %q)", b.Function)
	}
	if b.Avalanche {
		return func(key string) uint32 { return proxyhash.Avalanche(f(key)) }, nil
	}
	return f, nil
}

// haproxyLine is a server line as the placement functions read it.
type haproxyLine struct {
	name   string
	id     int // explicit id, or 0
	weight int
	takes  bool // weight above 0, not disabled, not backup
}

// haproxyLines validates the servers of b as HAProxy does and returns them as lines.
func haproxyLines(b HAProxyBackend) ([]haproxyLine, error) {
	names := make(map[string]HAProxyServer, len(b.Servers))
	ids := make(map[int]HAProxyServer, len(b.Servers))
	lines := make([]haproxyLine, len(b.Servers))
	total := 0
	for i, s := range b.Servers {
		switch {
		case s.Name == "":
			return nil, configErr("haproxy", s.Line, "server %d of backend %q has no name", i+1, b.Name)
		case s.Weight < 0 || s.Weight > 256:
			return nil, configErr("haproxy", s.Line, "'server %s/%s' : weight of server %s is not within 0 and 256 (%d).", b.Name, s.Name, s.Name, s.Weight)
		case s.ID < 0 || s.ID > math.MaxInt32:
			return nil, configErr("haproxy", s.Line, "'server %s/%s' : 'id' : custom id has to be > 0.", b.Name, s.Name)
		}
		if s.ID > 0 {
			if o, dup := ids[s.ID]; dup {
				return nil, configErr("haproxy", s.Line, "'server %s/%s' : 'id' : custom id %d already used at line %d ('server %s').", b.Name, s.Name, s.ID, o.Line, o.Name)
			}
			ids[s.ID] = s
		}
		if o, dup := names[s.Name]; dup {
			if s.ID == 0 || o.ID == 0 {
				return nil, configErr("haproxy", s.Line, "backend '%s', another server named '%s' was already defined at line %d, please use distinct names.", b.Name, s.Name, o.Line)
			}
			return nil, configErr("haproxy", s.Line, "server %q is named twice (also at line %d): HAProxy accepts it with explicit ids, but a pool needs distinct names", s.Name, o.Line)
		}
		names[s.Name] = s
		if total += 16 * s.Weight; b.Consistent && total > maxPoints {
			return nil, limitErr("haproxy", s.Line, "points", total)
		}
		lines[i] = haproxyLine{name: s.Name, id: s.ID, weight: s.Weight, takes: s.Weight > 0 && !s.Disabled && !s.Backup}
	}
	return lines, nil
}

// haproxyServers returns the servers of the membership: every line of the section, members
// with their weights and the others taking no keys, then the members no line has, and each
// one's id, numbered as check_config_validity numbers them: a counter from 1 gives a server
// without an id the smallest id at or above it not taken, and grows by one after every server.
func haproxyServers(lines []haproxyLine, nodes []pool.Node) (servers []haproxyLine, node []int32) {
	at := make(map[string]int32, len(nodes))
	for i, n := range nodes {
		at[n.Name] = int32(i)
	}
	taken := make(map[int]bool, len(lines)+len(nodes))
	for _, l := range lines {
		if j, ok := at[l.name]; ok {
			l.weight, l.takes = nodes[j].Weight, true
			delete(at, l.name)
			node = append(node, j)
		} else {
			l.takes = false
			node = append(node, -1)
		}
		if l.id > 0 {
			taken[l.id] = true
		}
		servers = append(servers, l)
	}
	for i, n := range nodes {
		if _, ok := at[n.Name]; ok {
			servers = append(servers, haproxyLine{name: n.Name, weight: n.Weight, takes: true})
			node = append(node, int32(i))
		}
	}
	next := 1
	for i := range servers {
		if servers[i].id == 0 {
			for taken[next] {
				next++
			}
			servers[i].id = next
			taken[next] = true
		}
		next++
	}
	return servers, node
}

// haproxyMap is the map-based table (init_server_map and recalc_server_map, lb_map.c): the
// weights divided by the greatest common divisor of every server's nonzero weight, then T
// slots, each given to the server whose score, raised by its weight, gives the largest
// (score + T) / T, the first such in order, whose score then drops by T.
//
// HAProxy scans every server for every slot, which takes time T × servers: 5000 servers took
// 47 s. This builds the same table in time T log(servers). At slot t (from 1), a server of
// weight w chosen c times before has score t·w - c·T, which stays above -T (the scores sum to
// 0 before each slot, and the server chosen has the largest quotient, at least 1), so its
// quotient is floor(t·w/T) + 1 - c. That changes only when the server is chosen (down by one)
// and when floor(t·w/T) steps up, w times in all; the servers wait in a heap by quotient
// and order, and each step up is an event filed under its slot.
func haproxyMap(dst []int32, lines []haproxyLine, nodes []pool.Node) []int32 {
	servers, node := haproxyServers(lines, nodes)
	g := 0
	for _, s := range servers {
		if s.weight > 0 {
			g = gcd(g, s.weight)
		}
	}
	total := 0
	for _, s := range servers {
		if s.takes {
			total += s.weight / g
		}
	}
	if total > maxPoints {
		return tooManySlots()
	}
	if total == 1 {
		for i, s := range servers {
			if s.takes {
				return append(dst, node[i])
			}
		}
	}
	dst = slices.Grow(dst, total)
	h := &mapHeap{}
	// due[t] is the first server whose floor(t·w/T) steps up at slot t, then[i] the next.
	due := make([]int32, total+1)
	then := make([]int32, len(servers))
	for i := range due {
		due[i] = -1
	}
	file := func(i int, steps int) { // file server i's next step up after steps of them
		w := servers[i].weight / g
		if w == 0 {
			return
		}
		// int64: (steps+1)·T reaches w·T, up to 2^16 · 2^22, past a 32-bit int.
		if t := (int64(steps+1)*int64(total) + int64(w) - 1) / int64(w); t <= int64(total) {
			then[i], due[t] = due[t], int32(i)
		}
	}
	steps := make([]int, len(servers))
	for i, s := range servers {
		if s.takes {
			h.push(mapEntry{server: int32(i)})
			file(i, 0)
		}
	}
	for t := 1; t <= total; t++ {
		for i := due[t]; i >= 0; {
			next := then[i] // before file changes it
			steps[i]++
			h.add(i, 1)
			file(int(i), steps[i])
			i = next
		}
		best := h.top()
		dst = append(dst, node[best])
		h.add(best, -1)
	}
	return dst
}

// mapEntry is a server of haproxyMap's heap: its quotient less one, and its place in order.
type mapEntry struct {
	quotient int
	server   int32
}

// mapHeap holds haproxyMap's servers, the largest quotient first, of equal ones the first in
// order, with each server's place in the heap so that its quotient can change.
type mapHeap struct {
	e  []mapEntry
	at map[int32]int
}

func (h *mapHeap) less(a, b int) bool {
	x, y := h.e[a], h.e[b]
	return x.quotient > y.quotient || x.quotient == y.quotient && x.server < y.server
}

func (h *mapHeap) swap(a, b int) {
	h.e[a], h.e[b] = h.e[b], h.e[a]
	h.at[h.e[a].server], h.at[h.e[b].server] = a, b
}

func (h *mapHeap) push(e mapEntry) {
	if h.at == nil {
		h.at = map[int32]int{}
	}
	h.e = append(h.e, e)
	h.at[e.server] = len(h.e) - 1
	h.up(len(h.e) - 1)
}

func (h *mapHeap) top() int32 { return h.e[0].server }

// add adds d to server's quotient and restores the heap.
func (h *mapHeap) add(server int32, d int) {
	i := h.at[server]
	h.e[i].quotient += d
	h.up(i)
	h.down(h.at[server])
}

func (h *mapHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *mapHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h.e) {
			return
		}
		if c+1 < len(h.e) && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			return
		}
		h.swap(i, c)
		i = c
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// haproxyPoints is the consistent tree (chash_init_server_tree, lb_chash.c): point j of the
// server with id id at full_hash(id * 4096 + j) modulo 2^32, 16 points per unit of weight,
// servers in order.
func haproxyPoints(dst []pool.RingPoint, lines []haproxyLine, nodes []pool.Node) []pool.RingPoint {
	servers, node := haproxyServers(lines, nodes)
	total := 0
	for _, s := range servers {
		if s.takes {
			total += 16 * s.weight
		}
	}
	if total > maxPoints {
		return tooManyPoints()
	}
	for i, s := range servers {
		if !s.takes {
			continue
		}
		for j := range 16 * s.weight {
			v := proxyhash.Avalanche(uint32(s.id)*4096 + uint32(j))
			dst = append(dst, pool.RingPoint{Node: int(node[i]), Pos: uint64(v) << 32})
		}
	}
	return dst
}

// ParseHAProxy reads the backend or listen section named name from an HAProxy 2.6
// configuration (name may be "" when the text has one such section), as HAProxy reads it:
// the `balance` line (which must hash: source, uri, url_param, hdr(...), rdp-cookie, hash),
// the `hash-type` line, `server` lines with their keywords (weight, id, disabled, enabled,
// backup and the others, which place nothing), `default-server` lines, and what `defaults`
// sections before it set. The errors are HAProxy's, with their line numbers.
func ParseHAProxy(config []byte, name string) (HAProxyBackend, error) {
	var (
		sections []*haproxySection
		cur      *haproxySection
		defaults = &haproxySection{}
	)
	for i, raw := range strings.Split(string(config), "\n") {
		line := i + 1
		words, err := haproxyWords(raw)
		if err != nil {
			return HAProxyBackend{}, configErr("haproxy", line, "%v", err)
		}
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "defaults", "frontend", "backend", "listen":
			s := defaults.inherit(words[0], line)
			if len(words) > 1 {
				s.name = words[1]
			}
			if words[0] == "defaults" {
				defaults = s
			} else {
				sections = append(sections, s)
			}
			cur = s
			continue
		case "global", "peers", "resolvers", "userlist", "mailers", "program", "http-errors",
			"ring", "cache", "fcgi-app", "crt-store", "traces":
			cur = nil
			continue
		}
		if cur == nil {
			continue
		}
		if err := cur.read(words, line); err != nil {
			return HAProxyBackend{}, err
		}
	}
	var names []string
	var pick *haproxySection
	count := 0
	for _, s := range sections {
		if s.kind == "frontend" {
			continue
		}
		count++
		names = append(names, s.name)
		if s.name == name || name == "" {
			pick = s
		}
	}
	switch {
	case count == 0:
		return HAProxyBackend{}, configErr("haproxy", 0, "no backend or listen section")
	case name == "" && count > 1:
		return HAProxyBackend{}, configErr("haproxy", 0, "%d backend and listen sections (%s): name one", count, strings.Join(names, ", "))
	case pick == nil:
		return HAProxyBackend{}, configErr("haproxy", 0, "no backend or listen section named %q (found: %s)", name, strings.Join(names, ", "))
	}
	return pick.backend()
}

// haproxySection is what a proxy section has set so far.
type haproxySection struct {
	kind, name  string
	line        int
	balance     string // the algorithm word, "" for none
	balanceLine int
	b           HAProxyBackend
	typeLine    int
	dflt        HAProxyServer
	names       map[string]int // server name -> line, for the duplicate check
}

// inherit starts a section of kind at line from the defaults in d.
func (d *haproxySection) inherit(kind string, line int) *haproxySection {
	s := &haproxySection{kind: kind, line: line, balance: d.balance, balanceLine: d.balanceLine,
		typeLine: d.typeLine, dflt: d.dflt}
	s.b.Consistent, s.b.Function, s.b.Avalanche = d.b.Consistent, d.b.Function, d.b.Avalanche
	s.b.BalanceFactor = d.b.BalanceFactor
	if d.line == 0 {
		s.dflt = HAProxyServer{Weight: 1}
	}
	return s
}

// read takes one line of the section.
func (s *haproxySection) read(w []string, line int) error {
	fail := func(format string, args ...any) error { return configErr("haproxy", line, format, args...) }
	switch w[0] {
	case "balance":
		if s.kind == "frontend" {
			return nil
		}
		algo, arg := "", ""
		if len(w) > 1 {
			algo = w[1]
		}
		if len(w) > 2 {
			arg = w[2]
		}
		switch {
		case algo == "hash":
			if arg == "" {
				return fail("balance hash requires a sample expression.")
			}
		case algo == "url_param":
			if arg == "" {
				return fail("'balance url_param' requires an URL parameter name.")
			}
		case strings.HasPrefix(algo, "hdr(") && strings.HasSuffix(algo, ")"):
			if algo == "hdr()" {
				return fail("balance hdr requires an http header field name.")
			}
			algo = "hdr"
		case strings.HasPrefix(algo, "rdp-cookie(") && strings.HasSuffix(algo, ")"):
			algo = "rdp-cookie"
		case strings.HasPrefix(algo, "random(") && strings.HasSuffix(algo, ")"):
			algo = "random"
		case algo == "roundrobin", algo == "static-rr", algo == "leastconn", algo == "first",
			algo == "source", algo == "uri", algo == "rdp-cookie", algo == "random":
		default:
			return fail("'balance' only supports 'roundrobin', 'static-rr', 'leastconn', 'source', 'uri', 'url_param', 'hdr(name)', 'rdp-cookie(name)', 'random' and 'hash' options (not %q).", algo)
		}
		s.balance, s.balanceLine = algo, line
	case "hash-type":
		if s.kind == "frontend" {
			return nil
		}
		arg := func(i int) string {
			if i < len(w) {
				return w[i]
			}
			return ""
		}
		switch arg(1) {
		case "consistent":
			s.b.Consistent = true
		case "map-based":
			s.b.Consistent = false
		case "avalanche":
			return fail("experimental feature 'hash-type avalanche' is not supported anymore, please use 'hash-type map-based sdbm avalanche' instead.")
		default:
			return fail("'hash-type' only supports 'consistent' and 'map-based'.")
		}
		s.b.Function, s.b.Avalanche = "sdbm", s.b.Consistent && arg(2) == ""
		if fn := arg(2); fn != "" {
			switch fn {
			case "sdbm", "djb2", "wt6", "crc32":
				s.b.Function = fn
			default:
				return fail("'hash-type' only supports 'sdbm', 'djb2', 'crc32', or 'wt6' hash functions.")
			}
			switch arg(3) {
			case "avalanche":
				s.b.Avalanche = true
			case "":
			default:
				return fail("'hash-type' only supports 'avalanche' as a modifier for hash functions.")
			}
		}
		s.typeLine = line
	case "hash-balance-factor":
		// cfgparse-listen.c: atol into an int, then 0 or above 100.
		if len(w) < 2 || w[1] == "" {
			return fail("'hash-balance-factor' expects an integer argument.")
		}
		v := int32(atol(w[1]))
		if v != 0 && v <= 100 {
			return fail("'hash-balance-factor' must be 0 or greater than 100.")
		}
		s.b.BalanceFactor = int(v)
	case "default-server":
		srv := s.dflt
		if err := haproxyKeywords(&srv, w[1:], s.name, line); err != nil {
			return err
		}
		s.dflt = srv
	case "server":
		if s.kind == "defaults" || s.kind == "frontend" {
			return fail("'server' not allowed in a %s section.", s.kind)
		}
		if len(w) < 3 {
			return fail("'server' expects <name> and <addr>[:<port>] as arguments.")
		}
		srv := s.dflt
		srv.Name, srv.Line = w[1], line
		if err := haproxyAddress(w[2]); err != nil {
			return fail("'server %s/%s' : %v", s.name, srv.Name, err)
		}
		if err := haproxyKeywords(&srv, w[3:], s.name+"/"+srv.Name, line); err != nil {
			return err
		}
		s.b.Servers = append(s.b.Servers, srv)
	}
	return nil
}

// backend returns the section as a backend, or why it cannot place keys.
func (s *haproxySection) backend() (HAProxyBackend, error) {
	b := s.b
	b.Name, b.Line = s.name, s.line
	switch s.balance {
	case "source", "uri", "url_param", "hdr", "rdp-cookie", "hash":
	case "":
		return b, configErr("haproxy", s.line, "%s %q has no balance line: its default, roundrobin, places no key on a fixed server", s.kind, s.name)
	default:
		return b, configErr("haproxy", s.balanceLine, "balance %s places no key on a fixed server: this preset reproduces the hash-based algorithms", s.balance)
	}
	if len(b.Servers) == 0 {
		return b, configErr("haproxy", s.line, "%s %q has no server", s.kind, s.name)
	}
	return b, nil
}

// haproxyArgs is how many arguments each server keyword of HAProxy 2.6 takes (srv_kws and
// the SSL ones); only weight, id, disabled, enabled, backup and no-backup change placement.
var haproxyArgs = func() map[string]int {
	m := map[string]int{}
	for _, k := range strings.Fields(`agent-check allow-0rtt backup check check-send-proxy check-ssl
		check-via-socks4 disabled enabled force-sslv3 force-tlsv10 force-tlsv11 force-tlsv12
		force-tlsv13 no-agent-check no-backup no-check no-check-ssl no-send-proxy no-send-proxy-v2
		no-send-proxy-v2-ssl no-send-proxy-v2-ssl-cn no-ssl no-ssl-reuse no-sslv3 no-tls-tickets
		no-tlsv10 no-tlsv11 no-tlsv12 no-tlsv13 no-verifyhost no-tfo non-stick send-proxy
		send-proxy-v2 send-proxy-v2-ssl send-proxy-v2-ssl-cn ssl ssl-reuse stick tfo tls-tickets`) {
		m[k] = 0
	}
	for _, k := range strings.Fields(`addr agent-addr agent-inter agent-port agent-send alpn ca-file
		check-alpn check-proto check-sni ciphers ciphersuites client-sigalgs cookie crl-file crt
		curves downinter error-limit fall fastinter id init-addr inter log-proto maxconn maxqueue
		max-reuse minconn namespace npn observe on-error on-marked-down on-marked-up pool-low-conn
		pool-max-conn pool-purge-delay port proto proxy-v2-options redir resolve-net resolve-opts
		resolve-prefer resolvers rise shard sigalgs slowstart sni socks4 source ssl-max-ver
		ssl-min-ver tcp-ut track usesrc interface verify verifyhost weight ws`) {
		m[k] = 1
	}
	return m
}()

// haproxyKeywords applies server keywords to srv (who names it in errors).
func haproxyKeywords(srv *HAProxyServer, w []string, who string, line int) error {
	for i := 0; i < len(w); i++ {
		n, ok := haproxyArgs[w[i]]
		if !ok {
			return configErr("haproxy", line, "'server %s' : unknown keyword '%s'", who, w[i])
		}
		arg := ""
		if n > 0 && i+1 < len(w) {
			arg = w[i+1]
		}
		switch w[i] {
		case "weight":
			if v := int32(atol(arg)); v < 0 || v > 256 {
				return configErr("haproxy", line, "'server %s' : weight of server %s is not within 0 and 256 (%d).", who, srv.Name, v)
			} else {
				srv.Weight = int(v)
			}
		case "id":
			if v := int32(atol(arg)); v <= 0 {
				return configErr("haproxy", line, "'server %s' : 'id' : custom id has to be > 0.", who)
			} else {
				srv.ID = int(v)
			}
		case "disabled":
			srv.Disabled = true
		case "enabled":
			srv.Disabled = false
		case "backup":
			srv.Backup = true
		case "no-backup":
			srv.Backup = false
		}
		i += n
	}
	return nil
}

// atol is the C library's atol as glibc has it: leading spaces, a sign, the digits that
// follow; 0 without digits; the long's bounds on overflow.
func atol(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v int64
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := int64(s[i] - '0')
		if !neg && v > (math.MaxInt64-d)/10 {
			return math.MaxInt64
		}
		if neg && -v < (math.MinInt64+d)/10 {
			return math.MinInt64
		}
		if neg {
			v = v*10 - d
		} else {
			v = v*10 + d
		}
	}
	return v
}

// haproxyAddress checks a server address as far as placement cares: a port after the last
// ':' (or after "]:" for a bracketed IPv6 address) must be in [0, 65535] or an offset
// (+N, -N). Addresses with a family prefix ("unix@", "ipv4@", ...) and "/"-paths are taken
// as they are.
func haproxyAddress(a string) error {
	if strings.Contains(a, "@") || strings.HasPrefix(a, "/") {
		return nil
	}
	port := ""
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return errString("invalid address: '" + excerpt(a) + "'")
		}
		port, _ = strings.CutPrefix(a[end+1:], ":")
	} else if i := strings.LastIndexByte(a, ':'); i >= 0 {
		port = a[i+1:]
	}
	digits := strings.TrimLeft(port, "+-")
	if port == "" || strings.HasPrefix(port, "$") {
		return nil
	}
	if v, err := strconv.Atoi(digits); err != nil || v > 65535 || strings.TrimLeft(digits, "0123456789") != "" {
		return errString("invalid port '" + excerpt(port) + "'")
	}
	return nil
}

// haproxyWords splits a configuration line into words as HAProxy does: spaces separate them,
// '#' starts a comment, "..." and '...' quote, a backslash escapes the next byte.
func haproxyWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // inside a word
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(line) {
				i++
				w.WriteByte(line[i])
			} else {
				w.WriteByte(c)
			}
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			in = true
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == '#':
			i = len(line)
		case c == ' ' || c == '\t' || c == '\r':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, errString("unmatched quote")
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}
