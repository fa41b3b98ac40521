package compat

import (
	"cmp"
	"crypto/md5"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard/internal/keyhash"
	"github.com/shardkit/shard/pool"
)

// spymemcached 2.12: the rule of testdata/compat/spymemcached/README.md, from AddrUtil,
// KetamaNodeLocator, KetamaNodeKeyFormatter, ArrayModNodeLocator and DefaultHashAlgorithm of
// spymemcached 2.12.3, and java.net's InetSocketAddress and InetAddress (Java 17).

var spymemcachedPreset = Preset{
	System: "spymemcached",
	Doc: "a spymemcached 2.12 client as key=value lines: servers (AddrUtil's list) or addresses (host/ip:port pairs), locator (ARRAY_MOD or CONSISTENT), " +
		"hash, format (SPYMEMCACHED or LIBMEMCACHED), weights, factory (ketama or builder), hosts (the JVM's hosts table)",
	New:     oneClient("spymemcached", ParseSpymemcached, newSpymemcached),
	Checked: 134000,
}

// Spymemcached is a spymemcached client's placement: what NewSpymemcached takes. The zero
// values are those of ConnectionFactoryBuilder (ARRAY_MOD, NATIVE_HASH).
type Spymemcached struct {
	// Locator is ARRAY_MOD (ArrayModNodeLocator, the default) or CONSISTENT
	// (KetamaNodeLocator).
	Locator string
	// Hash is a DefaultHashAlgorithm: NATIVE_HASH (the default), CRC_HASH, FNV1_64_HASH,
	// FNV1A_64_HASH, FNV1_32_HASH, FNV1A_32_HASH or KETAMA_HASH. NATIVE and the FNV hash a
	// key's UTF-16 code units, the others its UTF-8 bytes.
	Hash string
	// Format names a consistent locator's points (KetamaNodeKeyFormatter.Format):
	// SPYMEMCACHED (the default: the address as Java prints it, "127.0.0.1:11211",
	// "localhost/127.0.0.1:11211") or LIBMEMCACHED (the host name, ":port" unless 11211; a
	// literal address is named by a reverse lookup).
	Format string
	// Servers is AddrUtil.getAddresses's list: "host:port" entries split at white space and
	// commas; each entry is also its node's name.
	Servers string
	// Addresses, instead of Servers, lists servers the application makes itself as
	// new InetSocketAddress(InetAddress.getByAddress(host, ip), port): "host/ip:port" entries
	// ("cache-a/10.0.0.1:11211", as Java prints such an address; an IPv6 ip with or without
	// brackets), split as Servers is; each entry is also its node's name. The host name is
	// kept as given (its case too, and "" when the entry starts with '/'), nothing is looked
	// up, and the weight map knows the server by ip and port.
	Addresses string
	// Weights, when not empty, gives a consistent locator one weight per server, in list
	// order (KetamaConnectionFactory's weight map, keyed by address: a later weight for an
	// address replaces an earlier one).
	Weights []int
	// Hosts stands for the JVM's resolver, which names points: lines as in /etc/hosts
	// ("10.0.0.7 cache-a cache-a.example"), looked up before DefaultHosts. The preset
	// resolves nothing else: a host name found in neither is unresolved, as in a JVM that
	// cannot resolve it, and an address without a name is named by its text.
	Hosts []string
	// lines maps the fields to their text lines, when read from text.
	lines map[string]int
}

// DefaultHosts is the hosts table a Spymemcached preset resolves with when its own does not
// know a name: Debian's /etc/hosts without the machine's own name, as on the machine that
// made the vectors.
var DefaultHosts = []string{"127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"}

// spyHashes are DefaultHashAlgorithm's hashes.
var spyHashes = map[string]func(string) uint32{
	"NATIVE_HASH": keyhash.JavaHashCode, "CRC_HASH": keyhash.CRC32.Sum32,
	"FNV1_64_HASH": keyhash.JavaFNV64, "FNV1A_64_HASH": keyhash.JavaFNV64a,
	"FNV1_32_HASH": keyhash.JavaFNV32, "FNV1A_32_HASH": keyhash.JavaFNV32a,
	"KETAMA_HASH": keyhash.MD5.Sum32,
}

// NewSpymemcached returns the pool of cfg: every key on the node the client's locator's
// getPrimary returns. Add takes a node name as an entry of the server list ("host:port").
func NewSpymemcached(cfg Spymemcached) (pool.Pool, error) {
	cfg.lines = nil
	return newSpymemcached(cfg)
}

// at returns an error naming the line of field, or the field.
func (c *Spymemcached) at(field string, format string, args ...any) error {
	if line, ok := c.lines[field]; ok {
		return configErr("spymemcached", line, "%s: %s", field, sprintf(format, args...))
	}
	return configErr("spymemcached", 0, "%s: %s", field, sprintf(format, args...))
}

func newSpymemcached(cfg Spymemcached) (pool.Pool, error) {
	locator := cmp.Or(cfg.Locator, "ARRAY_MOD")
	if locator != "ARRAY_MOD" && locator != "CONSISTENT" {
		if locator == "VBUCKET" {
			return nil, cfg.at("locator", "VBUCKET places keys by a Couchbase bucket map the configuration does not hold")
		}
		return nil, cfg.at("locator", "%q is not ARRAY_MOD or CONSISTENT", locator)
	}
	hashName := cmp.Or(cfg.Hash, "NATIVE_HASH")
	hash, ok := spyHashes[hashName]
	if !ok {
		return nil, cfg.at("hash", "No enum constant net.spy.memcached.DefaultHashAlgorithm.%s", hashName)
	}
	format := cmp.Or(cfg.Format, "SPYMEMCACHED")
	if format != "SPYMEMCACHED" && format != "LIBMEMCACHED" {
		return nil, cfg.at("format", "No enum constant net.spy.memcached.KetamaNodeKeyFormatter.Format.%s", format)
	}
	hosts, err := parseHosts(append(slices.Clone(cfg.Hosts), DefaultHosts...))
	if err != nil {
		return nil, cfg.at("hosts", "%v", err)
	}
	var entries []spyAddress
	field := "servers"
	switch {
	case cfg.Addresses != "" && cfg.Servers != "":
		return nil, cfg.at("addresses", "give servers or addresses, not both")
	case cfg.Addresses != "":
		field = "addresses"
		entries, err = spyPairs(cfg.Addresses)
	default:
		entries, err = spyAddresses(cfg.Servers)
	}
	if err != nil {
		return nil, cfg.at(field, "%v", err)
	}
	weighted := locator == "CONSISTENT" && len(cfg.Weights) > 0
	if weighted && len(cfg.Weights) != len(entries) {
		return nil, cfg.at("weights", "%d weights for %d servers: spymemcached needs one for each (a missing one throws NullPointerException)", len(cfg.Weights), len(entries))
	}
	sp := &spyRules{hash: hash, hashName: hashName, format: format, hosts: hosts, weighted: weighted, pairs: field == "addresses"}
	list := &serverList{}
	for i, e := range entries {
		s := sp.server(e)
		list.servers = append(list.servers, s)
		if weighted {
			sp.setWeight(list, s.addr, float64(cfg.Weights[i])) // a map: the last weight of an address wins
		}
	}
	r := &rules{system: "spymemcached", fromNode: sp.fromNode, line: cfg.lines[field]}
	if locator == "ARRAY_MOD" {
		r.slots = func(dst []int32, l *serverList) []int32 {
			for e := range l.servers {
				dst = append(dst, int32(e))
			}
			return dst
		}
		return newPool(r, list, pool.RingOptions{}, func(k string) uint64 { return uint64(hash(k)) })
	}
	r.check, r.points = sp.check, sp.points
	if err := sp.check(list); err != nil {
		return nil, cfg.at("weights", "%v", err)
	}
	return newPool(r, list, pool.RingOptions{Hash: func(k string) uint64 { return top32(hash(k)) }, Ties: pool.TieLastPoint}, nil)
}

// spyAddress is one entry of AddrUtil's list, or a host/ip pair.
type spyAddress struct {
	text string // as written: the node's name
	host string
	port int
	ip   netip.Addr // a pair's address; invalid for an entry of AddrUtil's list
}

// spyPairs reads the host/ip:port entries of Spymemcached.Addresses, split as AddrUtil splits.
func spyPairs(s string) ([]spyAddress, error) {
	var out []spyAddress
	for _, entry := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \t\n\v\f\r,", r) }) {
		a, err := spyParsePair(entry)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, errorf("no server in the list ``%s''", s)
	}
	return out, nil
}

// spyParsePair reads "host/ip:port": the host up to the first '/', the ip (a literal, as
// InetAddress.getByName reads one without a lookup) up to the last ':', the port an int in
// [0, 65535] (InetSocketAddress's range).
func spyParsePair(entry string) (spyAddress, error) {
	slash, colon := strings.IndexByte(entry, '/'), strings.LastIndexByte(entry, ':')
	if slash < 0 || colon < slash {
		return spyAddress{}, errorf("%q is not a host/ip:port pair", entry)
	}
	ip, ok := javaLiteral(entry[slash+1 : colon])
	if !ok {
		return spyAddress{}, errorf("%q: %q is not an IP address literal (InetAddress.getByAddress takes the address itself)", entry, entry[slash+1:colon])
	}
	port, err := javaParseInt(entry[colon+1:])
	if err != nil {
		return spyAddress{}, errorf("%q: %v", entry, err)
	}
	if port < 0 || port > 65535 {
		return spyAddress{}, errorf("%q: IllegalArgumentException: port out of range:%d", entry, port)
	}
	return spyAddress{text: entry, host: entry[:slash], port: port, ip: ip}, nil
}

// spyAddresses is AddrUtil.getAddresses: entries split at runs of white space and commas,
// each split at its last ':' into a host and Integer.parseInt of the port.
func spyAddresses(s string) ([]spyAddress, error) {
	if strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) == "" {
		return nil, errorf("No hosts in list:  ``%s''", s)
	}
	var out []spyAddress
	for _, entry := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \t\n\v\f\r,", r) }) {
		a, err := spyParseAddress(entry)
		if err != nil {
			return nil, errorf("%v (in list:  %s)", err, s)
		}
		out = append(out, a)
	}
	if len(out) == 0 { // Java's assert is off: a client of no node, whose every lookup throws
		return nil, errorf("no server in the list ``%s''", s)
	}
	return out, nil
}

func spyParseAddress(entry string) (spyAddress, error) {
	colon := strings.LastIndexByte(entry, ':')
	if colon < 1 {
		return spyAddress{}, errorf("Invalid server ``%s''", entry)
	}
	port, err := javaParseInt(entry[colon+1:])
	if err != nil {
		return spyAddress{}, err
	}
	if port < 0 || port > 65535 {
		return spyAddress{}, errorf("port out of range:%d", port)
	}
	return spyAddress{text: entry, host: entry[:colon], port: port}, nil
}

// javaParseInt is Integer.parseInt of ASCII decimal text: an optional sign, then digits,
// within the range of an int.
func javaParseInt(s string) (int, error) {
	digits := s
	if digits != "" && (digits[0] == '+' || digits[0] == '-') {
		digits = digits[1:]
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, errorf("NumberFormatException: For input string: %q", s)
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, errorf("NumberFormatException: For input string: %q", s)
	}
	return int(v), nil
}

// spyRules are the placement of one client.
type spyRules struct {
	hash     func(string) uint32
	hashName string
	format   string
	hosts    *hostsTable
	weighted bool
	pairs    bool // nodes are host/ip pairs (Spymemcached.Addresses)
}

// server returns the list entry of an address: its point name, and the key of its weight.
func (sp *spyRules) server(a spyAddress) server {
	if a.ip.IsValid() {
		return sp.pairServer(a)
	}
	ip, literal, resolved := sp.hosts.resolve(a.host)
	s := server{name: a.text, weight: 1, addr: "unresolved " + strings.ToLower(a.host) + ":" + strconv.Itoa(a.port)}
	if resolved {
		s.addr = ip.String() + ":" + strconv.Itoa(a.port)
	}
	port := ":" + strconv.Itoa(a.port)
	switch {
	case sp.format == "LIBMEMCACHED":
		// getHostName: the name given, or a reverse lookup of a literal (its text if none).
		name := a.host
		if literal {
			name = sp.hosts.reverse(ip)
		}
		s.point = name
		if a.port != 11211 {
			s.point += port
		}
	case !resolved: // String.valueOf of an unresolved InetSocketAddress
		s.point = a.host + "/<unresolved>" + port
	case literal: // "/1.2.3.4:11211" without its leading '/'
		s.point = javaAddress(ip, true) + port
	default: // "localhost/127.0.0.1:11211"
		s.point = a.host + "/" + javaAddress(ip, true) + port
	}
	return s
}

// pairServer is server for a host/ip pair: the InetAddress holds the host name as given, so
// the SPYMEMCACHED format prints "host/ip:port" (the ip alone when the host is empty, as for
// a literal) and the LIBMEMCACHED one takes the host as getHostName returns it, with no
// reverse lookup.
func (sp *spyRules) pairServer(a spyAddress) server {
	port := ":" + strconv.Itoa(a.port)
	s := server{name: a.text, weight: 1, addr: a.ip.String() + port}
	switch {
	case sp.format == "LIBMEMCACHED":
		s.point = a.host
		if a.port != 11211 {
			s.point += port
		}
	case a.host == "":
		s.point = javaAddress(a.ip, true) + port
	default:
		s.point = a.host + "/" + javaAddress(a.ip, true) + port
	}
	return s
}

// setWeight gives the weight to every entry of the address, as the weight map does.
func (sp *spyRules) setWeight(l *serverList, addr string, w float64) {
	for i := range l.servers {
		if l.servers[i].addr == addr {
			l.servers[i].weight = w
		}
	}
}

// fromNode reads a node's name as an entry of AddrUtil's list; in a weighted locator its
// weight goes into the weight map, for every entry of that address.
func (sp *spyRules) fromNode(l *serverList, n pool.Node) (server, error) {
	parse := spyParseAddress
	if sp.pairs {
		parse = spyParsePair
	}
	a, err := parse(n.Name)
	if err != nil {
		return server{}, configErr("spymemcached", 0, "node %q is not an entry of a server list: %v", n.Name, err)
	}
	s := sp.server(a)
	if sp.weighted {
		s.weight = float64(n.Weight)
		sp.setWeight(l, s.addr, s.weight)
	}
	return s, nil
}

// digests returns the points per node of a weighted locator (setKetamaNodes): float32
// arithmetic over the int sum of the weights, then Java's saturating (int) cast.
func (sp *spyRules) digests(l *serverList) []int {
	var total int32
	for _, s := range l.servers {
		total += int32(s.weight) // a Java int: wraps
	}
	n := float32(len(l.servers))
	out := make([]int, len(l.servers))
	for i, s := range l.servers {
		pct := float32(int32(s.weight)) / float32(total)
		x := float32(float32(float32(pct*160)/4) * n)
		x = float32(float64(x) + 1e-10)
		out[i] = javaInt(math.Floor(float64(x))*4) / 4
	}
	return out
}

// javaInt is Java's (int) of a double: NaN is 0, out of range saturates.
func javaInt(f float64) int {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	case f <= math.MinInt32:
		return math.MinInt32
	}
	return int(f)
}

// check refuses what spymemcached cannot place with: a ring without points (every lookup
// throws NoSuchElementException), or so many points that it would not finish building.
func (sp *spyRules) check(l *serverList) error {
	if !sp.weighted {
		return nil
	}
	points := 0
	for _, d := range sp.digests(l) {
		points += 4 * max(d, 0)
		if points > 1<<22 {
			return errorf("the weights give over %d points (their int sum is %d): spymemcached would not finish building its ring", 1<<22, sumInt32(l))
		}
	}
	if points == 0 {
		return errorf("the weights give no point (their int sum is %d): every lookup throws NoSuchElementException", sumInt32(l))
	}
	return nil
}

func sumInt32(l *serverList) int32 {
	var total int32
	for _, s := range l.servers {
		total += int32(s.weight)
	}
	return total
}

// points are KetamaNodeLocator's: nodes in list order, each point put into a TreeMap, so at
// an equal position the later point wins.
func (sp *spyRules) points(dst []pool.RingPoint, l *serverList) []pool.RingPoint {
	var digests []int
	if sp.weighted {
		digests = sp.digests(l)
	}
	for e, s := range l.servers {
		switch {
		case sp.weighted:
			for i := range max(digests[e], 0) {
				d := md5.Sum([]byte(s.point + "-" + strconv.Itoa(i)))
				dst = appendDigestPoints(dst, e, d[:], 4)
			}
		case sp.hashName == "KETAMA_HASH":
			for i := range 40 {
				d := md5.Sum([]byte(s.point + "-" + strconv.Itoa(i)))
				dst = appendDigestPoints(dst, e, d[:], 4)
			}
		default:
			for i := range 160 {
				dst = append(dst, pool.RingPoint{Node: e, Pos: top32(sp.hash(s.point + "-" + strconv.Itoa(i)))})
			}
		}
	}
	return dst
}

// javaAddress is InetAddress.getHostAddress, bracketed for IPv6 when bracket is set (as
// InetSocketAddress.toString prints it): dotted IPv4, or eight groups of lower-case hex
// without zero compression ("0:0:0:0:0:0:0:1").
func javaAddress(ip netip.Addr, bracket bool) string {
	if ip.Is4() {
		return ip.String()
	}
	b := ip.As16()
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = strconv.FormatUint(uint64(b[2*i])<<8|uint64(b[2*i+1]), 16)
	}
	if bracket {
		return "[" + strings.Join(groups, ":") + "]"
	}
	return strings.Join(groups, ":")
}

// hostsTable is a hosts file: addresses with their names, in order.
type hostsTable struct {
	lines []hostsLine
}

type hostsLine struct {
	ip    netip.Addr
	names []string
}

func parseHosts(lines []string) (*hostsTable, error) {
	t := &hostsTable{}
	for _, line := range lines {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		ip, err := netip.ParseAddr(fields[0])
		if err != nil || ip.Zone() != "" {
			return nil, errorf("%q: a hosts line starts with an IP address", line)
		}
		if len(fields) == 1 {
			return nil, errorf("%q: an address without a name", line)
		}
		t.lines = append(t.lines, hostsLine{ip: ip.Unmap(), names: fields[1:]})
	}
	return t, nil
}

// javaLiteral reads host as InetAddress.getByName reads a literal: an IPv4 address, or an
// IPv6 one with or without brackets (an IPv4-mapped one becomes IPv4).
func javaLiteral(host string) (netip.Addr, bool) {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// resolve returns the address of host as a JVM with this table as its only resolver finds
// it: a literal is itself; a name, its first IPv4 address, else its first IPv6 one (Java
// prefers IPv4).
func (t *hostsTable) resolve(host string) (ip netip.Addr, literal, resolved bool) {
	if ip, ok := javaLiteral(host); ok {
		return ip, true, true
	}
	addrs := t.addresses(host)
	if len(addrs) == 0 {
		return netip.Addr{}, false, false
	}
	if i := slices.IndexFunc(addrs, netip.Addr.Is4); i >= 0 {
		return addrs[i], false, true
	}
	return addrs[0], false, true
}

// addresses returns every address of name, in table order (names match without case).
func (t *hostsTable) addresses(name string) []netip.Addr {
	var out []netip.Addr
	for _, l := range t.lines {
		if slices.ContainsFunc(l.names, func(n string) bool { return strings.EqualFold(n, name) }) {
			out = append(out, l.ip)
		}
	}
	return out
}

// reverse is InetAddress.getHostName of a literal: the first name of the first line of the
// address, if that name resolves back to the address (Java checks), else the address's
// text.
func (t *hostsTable) reverse(ip netip.Addr) string {
	for _, l := range t.lines {
		if l.ip == ip {
			if slices.Contains(t.addresses(l.names[0]), ip) {
				return l.names[0]
			}
			break
		}
	}
	return javaAddress(ip, false)
}

// ParseSpymemcached reads a client's configuration: key=value lines (servers or addresses,
// locator, hash, format, weights, factory, hosts), '#' starting a comment; a later line for a
// key replaces an earlier one. factory=builder is ConnectionFactoryBuilder: no weights, the SPYMEMCACHED
// format. hosts= takes /etc/hosts lines separated by ';'.
func ParseSpymemcached(text []byte) (Spymemcached, error) {
	cfg := Spymemcached{lines: map[string]int{}}
	values := map[string]string{}
	n := 0
	for line := range strings.Lines(string(text)) {
		n++
		line = strings.TrimFunc(line, func(r rune) bool { return r <= ' ' })
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return cfg, configErr("spymemcached", n, "no '=' in %q", line)
		}
		key = strings.TrimFunc(key, func(r rune) bool { return r <= ' ' })
		switch key {
		case "servers", "addresses", "locator", "hash", "format", "weights", "factory", "hosts":
		default:
			return cfg, configErr("spymemcached", n, "unknown key %q (servers, addresses, locator, hash, format, weights, factory, hosts)", key)
		}
		values[key] = strings.TrimFunc(value, func(r rune) bool { return r <= ' ' })
		cfg.lines[key] = n
	}
	cfg.Servers, cfg.Locator, cfg.Hash, cfg.Format = values["servers"], values["locator"], values["hash"], values["format"]
	cfg.Addresses = values["addresses"]
	_, servers := values["servers"]
	_, addresses := values["addresses"]
	switch {
	case servers && addresses:
		return cfg, cfg.at("addresses", "give servers= or addresses=, not both")
	case addresses && cfg.Addresses == "":
		return cfg, cfg.at("addresses", "no server in the list")
	case !servers && !addresses:
		return cfg, configErr("spymemcached", 0, "no servers= or addresses= line")
	}
	for _, w := range strings.Fields(values["weights"]) {
		v, err := javaParseInt(w)
		if err != nil {
			return cfg, cfg.at("weights", "%v", err)
		}
		cfg.Weights = append(cfg.Weights, v)
	}
	for h := range strings.SplitSeq(values["hosts"], ";") {
		if strings.TrimSpace(h) != "" {
			cfg.Hosts = append(cfg.Hosts, h)
		}
	}
	switch f := cmp.Or(values["factory"], "ketama"); {
	case f == "builder":
		cfg.Format, cfg.Weights = "", nil
	case f != "ketama":
		return cfg, cfg.at("factory", "%q is not ketama or builder", f)
	}
	if cmp.Or(cfg.Locator, "ARRAY_MOD") != "CONSISTENT" {
		cfg.Format, cfg.Weights = "", nil // only KetamaConnectionFactory's locator reads them
	}
	return cfg, nil
}
