package compat

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// This file reads a libmemcached client's configuration: the calls of the vector
// generator's .conf format, or libmemcached's own configuration string (memcached(3),
// src/libmemcached/csl/), both applied to a model of the client's state call by call,
// because libmemcached's placement depends on the order of the calls.

// lmClient is the state of a client that placement depends on, and the flags that decide
// whether a call is refused.
type lmClient struct {
	dist      int
	hash      int // index in lmHashes
	pointHash int // the key hash when the continuum was last built
	weighted  bool
	sort      bool
	binary    bool
	verifyKey bool
	udp       bool
	namespace string
	nsSet     bool
	withNS    bool
	servers   []LibmemcachedServer
	// line is the text line being applied, serversLine the last one that added servers.
	line, serversLine int
}

// config returns what NewLibmemcached takes.
func (c *lmClient) config() Libmemcached {
	cfg := Libmemcached{
		Distribution:      lmDistributions[c.dist],
		Hash:              lmHashes[c.hash],
		Weighted:          c.weighted,
		SortHosts:         c.sort,
		Namespace:         c.namespace,
		HashWithNamespace: c.withNS,
		Servers:           slices.Clone(c.servers),
		serversLine:       c.serversLine,
	}
	if c.pointHash != c.hash {
		cfg.PointHash = lmHashes[c.pointHash]
	}
	return cfg
}

// rebuild is run_distribution: the servers are sorted when the sort flag is on, and the
// continuum is rebuilt with the current hash.
func (c *lmClient) rebuild() {
	if c.sort {
		slices.SortStableFunc(c.servers, func(a, b LibmemcachedServer) int {
			return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port))
		})
	}
	c.pointHash = c.hash
}

func (c *lmClient) consistent() bool {
	return c.dist != lmModula && c.dist != lmRandom && c.dist != lmBucket
}

// setDistribution is memcached_behavior_set_distribution: the value is read as a C enum
// (its low 32 bits, signed).
func (c *lmClient) setDistribution(v uint64) error {
	d := int32(uint32(v))
	if d < 0 || int(d) >= len(lmDistributions) {
		return errorf("INVALID ARGUMENTS, Invalid memcached_server_distribution_t (%d)", d)
	}
	switch int(d) {
	case lmConsistent, lmKetama:
		c.weighted = false
	case lmWeighted:
		c.weighted = true
	}
	c.dist = int(d)
	c.rebuild()
	return nil
}

// setHash is hashkit_set_function on the key hash (or, for KETAMA_HASH, on the distribution
// hash that nothing reads). Values past the enum are accepted and change nothing, as C's
// switch without a default does; HSIEH is not in Debian's build, CUSTOM cannot be set so.
func (c *lmClient) setHash(v uint64, key bool) error {
	h := int32(uint32(v))
	switch {
	case h == 7 || h == 11:
		return errorf("INVALID ARGUMENTS, Invalid memcached_hash_t() (%s)", lmHashes[h])
	case h == 12:
		if key {
			c.hash = 0 // HASHKIT_HASH_MAX sets one-at-a-time, then fails
		}
		return errorf("INVALID ARGUMENTS, Invalid memcached_hash_t() (MAX)")
	case h >= 0 && h < 11 && key:
		c.hash = int(h)
	}
	return nil
}

// behaviors are the names of memcached_behavior_t, by value.
var lmBehaviors = []string{"NO_BLOCK", "TCP_NODELAY", "HASH", "KETAMA", "SOCKET_SEND_SIZE",
	"SOCKET_RECV_SIZE", "CACHE_LOOKUPS", "SUPPORT_CAS", "POLL_TIMEOUT", "DISTRIBUTION",
	"BUFFER_REQUESTS", "USER_DATA", "SORT_HOSTS", "VERIFY_KEY", "CONNECT_TIMEOUT",
	"RETRY_TIMEOUT", "KETAMA_WEIGHTED", "KETAMA_HASH", "BINARY_PROTOCOL", "SND_TIMEOUT",
	"RCV_TIMEOUT", "SERVER_FAILURE_LIMIT", "IO_MSG_WATERMARK", "IO_BYTES_WATERMARK",
	"IO_KEY_PREFETCH", "HASH_WITH_PREFIX_KEY", "NOREPLY", "USE_UDP", "AUTO_EJECT_HOSTS",
	"NUMBER_OF_REPLICAS", "RANDOMIZE_REPLICA_READ", "CORK", "TCP_KEEPALIVE", "TCP_KEEPIDLE",
	"LOAD_FROM_FILE", "REMOVE_FAILED_SERVERS", "DEAD_TIMEOUT", "SERVER_TIMEOUT_LIMIT"}

// behaviorSet is memcached_behavior_set (behavior.cc): the behaviors that placement depends
// on change the model; the others are accepted or refused as libmemcached does.
func (c *lmClient) behaviorSet(name string, v uint64) error {
	on := v != 0
	switch name {
	case "DISTRIBUTION":
		return c.setDistribution(v)
	case "KETAMA":
		if on {
			return c.setDistribution(lmKetama)
		}
		return c.setDistribution(lmModula)
	case "KETAMA_WEIGHTED":
		if !on {
			return c.setDistribution(lmKetama)
		}
		c.hash = 1 // MD5
		return c.setDistribution(lmWeighted)
	case "HASH":
		return c.setHash(v, true)
	case "KETAMA_HASH":
		return c.setHash(v, false)
	case "SORT_HOSTS":
		c.sort = on
		c.rebuild()
	case "HASH_WITH_PREFIX_KEY":
		c.withNS = on
	case "BINARY_PROTOCOL":
		if on {
			c.verifyKey = false
		}
		c.binary = on
	case "VERIFY_KEY":
		if c.binary {
			return errorf("INVALID ARGUMENTS, MEMCACHED_BEHAVIOR_VERIFY_KEY if the binary protocol has been enabled")
		}
		c.verifyKey = on
	case "USE_UDP":
		c.udp = on
	case "BUFFER_REQUESTS":
		if c.udp {
			return errorf("INVALID ARGUMENTS, MEMCACHED_BEHAVIOR_BUFFER_REQUESTS cannot be set while MEMCACHED_BEHAVIOR_USE_UDP is enabled")
		}
	case "NOREPLY":
		if c.udp && !on {
			return errorf("INVALID ARGUMENTS, MEMCACHED_BEHAVIOR_NOREPLY cannot be disabled while MEMCACHED_BEHAVIOR_USE_UDP is enabled")
		}
	case "SERVER_FAILURE_LIMIT":
		if !on {
			return errorf("INVALID ARGUMENTS, MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT requires a value greater then zero")
		}
	case "CACHE_LOOKUPS", "USER_DATA", "CORK":
		return errorf("DEPRECATED, MEMCACHED_BEHAVIOR_%s is deprecated", name)
	case "LOAD_FROM_FILE":
		return errorf("INVALID ARGUMENTS, MEMCACHED_BEHAVIOR_LOAD_FROM_FILE can not be set with memcached_behavior_set()")
	case "AUTO_EJECT_HOSTS", "REMOVE_FAILED_SERVERS":
		// Ejecting failed servers rebuilds the placement from the live ones: the preset
		// places keys as when every server is live.
	default:
		if !slices.Contains(lmBehaviors, name) {
			return errorf("INVALID ARGUMENTS, invalid behavior %q", name)
		}
	}
	return nil
}

// serverAdd is memcached_server_add_with_weight.
func (c *lmClient) serverAdd(host string, port uint16, weight uint32) error {
	if port == 0 {
		port = 11211
	}
	if host == "" {
		host = "localhost"
	}
	if len(host) >= 1025 {
		return errorf("INVALID ARGUMENTS, Invalid hostname provided (%d bytes; at most 1024)", len(host))
	}
	c.servers = append(c.servers, LibmemcachedServer{Host: host, Port: int(port), Weight: max(weight, 1)})
	c.serversLine = c.line
	if weight > 1 && c.consistent() {
		c.weighted = true
	}
	c.rebuild()
	return nil
}

// serverAddSocket is memcached_server_add_unix_socket_with_weight.
func (c *lmClient) serverAddSocket(path string, weight uint32) error {
	if path == "" || len(path) >= 1025 {
		return errorf("INVALID ARGUMENTS, Invalid filename for socket provided")
	}
	c.servers = append(c.servers, LibmemcachedServer{Host: path, Weight: max(weight, 1)})
	c.serversLine = c.line
	if weight > 1 && c.consistent() {
		c.weighted = true
	}
	c.rebuild()
	return nil
}

// serverPush is memcached_server_push of a parsed list: any weight above 1 turns the
// weighted flag on, whatever the distribution.
func (c *lmClient) serverPush(list []LibmemcachedServer) {
	if len(list) == 0 {
		return
	}
	for _, s := range list {
		if s.Weight > 1 {
			c.weighted = true
		}
	}
	c.servers = append(c.servers, list...)
	c.serversLine = c.line
	c.rebuild()
}

// setNamespace is memcached_set_namespace: 1 to 127 bytes, each a printable non-space
// ASCII character unless the binary protocol is on.
func (c *lmClient) setNamespace(ns string) error {
	switch {
	case ns == "":
		return errorf("INVALID ARGUMENTS, Invalid namespace, namespace string had value but length was 0")
	case len(ns) > 250:
		return errorf("A BAD KEY WAS PROVIDED, Key provided was too long")
	}
	if !c.binary {
		for i := 0; i < len(ns); i++ {
			if ns[i] <= ' ' || ns[i] >= 0x7f {
				return errorf("A BAD KEY WAS PROVIDED, Key provided had invalid character (%q)", ns[i])
			}
		}
	}
	if len(ns) > 127 {
		return errorf("KEY TOO BIG, a namespace of %d bytes (at most 127)", len(ns))
	}
	c.namespace, c.nsSet = ns, true
	return nil
}

// ParseLibmemcached reads a client's configuration, either libmemcached's configuration
// string (text whose first statement starts with "--", as memcached() takes) or the calls
// of the .conf format, and returns the state it leaves the client in. A call libmemcached
// refuses is refused with an error naming the line.
func ParseLibmemcached(text []byte) (Libmemcached, error) {
	c := &lmClient{}
	var err error
	if lmIsConfigString(string(text)) {
		err = c.applyConfigString(string(text))
	} else {
		err = c.applyCalls(string(text))
	}
	if err != nil {
		return Libmemcached{}, err
	}
	return c.config(), nil
}

// lmIsConfigString reports whether text is a configuration string: its first thing that is
// not a blank or a comment line starts with "--" or a statement keyword.
func lmIsConfigString(text string) bool {
	for line := range strings.Lines(text) {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		upper := strings.ToUpper(t)
		return strings.HasPrefix(t, "--") || slices.ContainsFunc([]string{"INCLUDE", "RESET", "END", "DEBUG", "CSL_ERROR"},
			func(k string) bool { return upper == k || strings.HasPrefix(upper, k+" ") })
	}
	return false
}

// applyCalls applies the .conf calls, one a line (testdata/compat/libmemcached/gen/lmvec.c).
func (c *lmClient) applyCalls(text string) error {
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c.line = n
		verb, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimLeft(rest, " \t")
		fail := func(format string, args ...any) error {
			return configErr("libmemcached", n, "%s: %s", verb, sprintf(format, args...))
		}
		switch verb {
		case "behavior":
			fields := strings.Fields(rest)
			if len(fields) != 2 {
				return fail("want \"behavior NAME VALUE\", found %q", line)
			}
			name := fields[0]
			if i, err := strconv.ParseUint(name, 10, 64); err == nil {
				if i >= uint64(len(lmBehaviors)) {
					return fail("INVALID ARGUMENTS, invalid behavior %d", i)
				}
				name = lmBehaviors[i]
			}
			v, ok := lmValue(fields[1])
			if !ok {
				return fail("value %q is neither a number nor a distribution or hash name", fields[1])
			}
			if err := c.behaviorSet(name, v); err != nil {
				return fail("%s: %v", name, err)
			}
		case "server":
			fields := strings.Fields(rest)
			if len(fields) != 3 {
				return fail("want \"server HOST PORT WEIGHT\", found %q", line)
			}
			port, okPort := strtoul(fields[1])
			weight, okWeight := strtoul(fields[2])
			if !okPort || !okWeight || strings.TrimLeft(fields[1], "+-0123456789") != "" || strings.TrimLeft(fields[2], "+-0123456789") != "" {
				return fail("port %q and weight %q must be numbers", fields[1], fields[2])
			}
			if err := c.serverAdd(fields[0], uint16(port), uint32(weight)); err != nil {
				return fail("%v", err)
			}
		case "servers":
			list, err := lmServersParse(rest)
			if err != nil {
				return fail("memcached_servers_parse returns NULL: %v", err)
			}
			c.serverPush(list)
		case "namespace":
			if err := c.setNamespace(rest); err != nil {
				return fail("%v", err)
			}
		default:
			return configErr("libmemcached", n, "unknown call %q (behavior, server, servers, namespace)", verb)
		}
	}
	return nil
}

// lmValue reads a behavior's value: a number (strtoull) or a distribution or hash name.
func lmValue(s string) (uint64, bool) {
	if i := slices.Index(lmDistributions, s); i >= 0 {
		return uint64(i), true
	}
	if i := slices.Index(lmHashes, s); i >= 0 && i < 11 {
		return uint64(i), true
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// strtoul reads a number as C's strtoul does: leading spaces, a sign, decimal digits up to
// the first other byte (none: 0); a negative number wraps modulo 2^64. It reports false on
// overflow (ERANGE).
func strtoul(s string) (uint64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	var v uint64
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, true
}

// lmServersParse is memcached_servers_parse (parse.cc): entries split at ',' (one space
// after a comma skipped); "host", "host:port", "host:port:weight", "host:port weight",
// "[v6]:port"; a port or weight that overflows strtoul makes the whole list NULL.
func lmServersParse(s string) ([]LibmemcachedServer, error) {
	var list []LibmemcachedServer
	for s != "" {
		entry, rest, comma := strings.Cut(s, ",")
		if comma {
			s = rest
			if strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\t") || strings.HasPrefix(s, "\n") ||
				strings.HasPrefix(s, "\v") || strings.HasPrefix(s, "\f") || strings.HasPrefix(s, "\r") {
				s = s[1:]
			}
		} else {
			s = ""
		}
		if len(entry) >= 8196 {
			return nil, errorf("an entry of %d bytes overflows libmemcached's 8196-byte buffer", len(entry))
		}
		e, err := lmParseEntry(entry)
		if err != nil {
			return nil, err
		}
		if len(e.Host) >= 1025 {
			return nil, errorf("a host name of %d bytes (at most 1024): libmemcached drops the list", len(e.Host))
		}
		if strings.HasPrefix(e.Host, "/") {
			e.Port = 0
		} else if e.Port == 0 {
			e.Port = 11211
		}
		e.Weight = max(e.Weight, 1)
		list = append(list, e)
	}
	return list, nil
}

// lmParseEntry reads one entry of a server list; the port is cut to 16 bits, the weight to
// 32, as libmemcached casts them.
func lmParseEntry(entry string) (LibmemcachedServer, error) {
	var e LibmemcachedServer
	colon := -1
	if open := strings.IndexByte(entry, '['); open >= 0 {
		if close := strings.IndexByte(entry[open+1:], ']'); close >= 0 {
			if c := strings.IndexByte(entry[open+1+close+1:], ':'); c >= 0 {
				colon = open + 1 + close + 1 + c
			}
		} else {
			colon = strings.IndexByte(entry, ':')
		}
	} else {
		colon = strings.IndexByte(entry, ':')
	}
	if colon < 0 {
		e.Host = entry
		return e, nil
	}
	e.Host = entry[:colon]
	rest := entry[colon+1:]
	port, ok := strtoul(rest)
	if !ok {
		return e, errorf("port %q overflows", rest)
	}
	e.Port = int(uint16(port))
	sep := strings.IndexByte(rest, ' ')
	if sep < 0 {
		sep = strings.IndexByte(rest, ':')
	}
	if sep >= 0 {
		weight, ok := strtoul(rest[sep+1:])
		if !ok {
			return e, errorf("weight %q overflows", rest[sep+1:])
		}
		e.Weight = uint32(weight)
	}
	return e, nil
}
