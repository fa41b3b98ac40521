package main

import (
	"fmt"
	"strings"
)

// The backends every configuration draws from. gen.sh runs this program in a private network
// namespace, so these fixed ports collide with nobody and the server names that contain
// them ("127.0.0.1:21001") are the same on every run.
const (
	listenAddr = "127.0.0.1:22121"
	statsPort  = "22222"
	firstPort  = 21001 // 21001..21025: twenty-five redis-servers
	nTCP       = 25
	port11211  = 11211                // the port nutcracker leaves out of default names
	sockDir    = "/tmp/twemproxy-vec" // unix-socket backends s1.sock, s2.sock
)

// hashes is every value nutcracker 0.5.0 accepts for hash: (HASH_CODEC in
// src/hashkit/nc_hashkit.h), in its order.
var hashes = []string{
	"one_at_a_time", "md5", "crc16", "crc32", "crc32a", "fnv1_64", "fnv1a_64",
	"fnv1_32", "fnv1a_32", "hsieh", "murmur", "jenkins",
}

// server is one line of a pool's servers: list and the redis-server behind it.
type server struct {
	line    string // as written in the YAML, e.g. "127.0.0.1:21001:1 cache-a"
	backend string // "127.0.0.1:21001", or a unix socket path
}

func tcp(port int, weight string, name string) server {
	line := fmt.Sprintf("127.0.0.1:%d:%s", port, weight)
	if name != "" {
		line += " " + name
	}
	return server{line: line, backend: fmt.Sprintf("127.0.0.1:%d", port)}
}

func sock(n int, weight string, name string) server {
	path := fmt.Sprintf("%s/s%d.sock", sockDir, n)
	line := path + ":" + weight
	if name != "" {
		line += " " + name
	}
	return server{line: line, backend: path}
}

// weighted gives servers on ports firstPort, firstPort+1, ... the weights given.
func weighted(weights ...string) []server {
	s := make([]server, len(weights))
	for i, w := range weights {
		s[i] = tcp(firstPort+i, w, "")
	}
	return s
}

// equal gives n default-named servers of weight 1.
func equal(n int) []server {
	s := make([]server, n)
	for i := range s {
		s[i] = tcp(firstPort+i, "1", "")
	}
	return s
}

// ports gives default-named servers of weight 1 on the ports given, in that order.
func ports(ps ...int) []server {
	s := make([]server, len(ps))
	for i, p := range ps {
		s[i] = tcp(p, "1", "")
	}
	return s
}

func named(names ...string) []server {
	s := make([]server, len(names))
	for i, n := range names {
		s[i] = tcp(firstPort+i, "1", n)
	}
	return s
}

func nServers(n int) string {
	if n == 1 {
		return "1 server"
	}
	return fmt.Sprintf("%d servers", n)
}

// config is one nutcracker.yml with one pool; its vectors go to <file>.txt.
type config struct {
	file    string // file stem, also the pool name
	why     string // one comment line at the top of the YAML: what this config shows
	dist    string // distribution:, "" = line left out (default ketama)
	hash    string // hash:, "" = line left out (default fnv1a_64)
	tag     string // hash_tag:, "" = none
	servers []server
}

func (c config) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n%s:\n  listen: %s\n  redis: true\n", c.why, c.file, listenAddr)
	if c.hash != "" {
		fmt.Fprintf(&b, "  hash: %s\n", c.hash)
	}
	if c.dist != "" {
		fmt.Fprintf(&b, "  distribution: %s\n", c.dist)
	}
	if c.tag != "" {
		fmt.Fprintf(&b, "  hash_tag: %q\n", c.tag)
	}
	b.WriteString("  servers:\n")
	for _, s := range c.servers {
		fmt.Fprintf(&b, "   - %s\n", s.line)
	}
	return b.String()
}

// configs lists every configuration vectored. tie holds two server names whose ketama
// points collide (see findTie), in the order they are to be listed.
func configs(tie [2]string) []config {
	cs := []config{{
		file: "default-3", why: "no hash: and no distribution: line: nutcracker's defaults (fnv1a_64, ketama)",
		servers: equal(3),
	}}
	for _, h := range hashes {
		cs = append(cs,
			config{file: "ketama-" + h + "-5", why: "hash " + h + ", ketama, 5 servers of weight 1, default names",
				dist: "ketama", hash: h, servers: equal(5)},
			config{file: "modula-" + h + "-3", why: "hash " + h + ", modula, 3 servers of weight 1, default names",
				dist: "modula", hash: h, servers: equal(3)})
	}
	for _, n := range []int{1, 2, 3, 10} {
		cs = append(cs, config{file: fmt.Sprintf("ketama-md5-%d", n), why: fmt.Sprintf("ketama md5, %s of weight 1", nServers(n)),
			dist: "ketama", hash: "md5", servers: equal(n)})
	}
	cs = append(cs, config{file: "ketama-fnv1a_64-10", why: "ketama fnv1a_64, 10 servers of weight 1",
		dist: "ketama", hash: "fnv1a_64", servers: equal(10)})
	for _, n := range []int{1, 2, 5, 10} {
		cs = append(cs, config{file: fmt.Sprintf("modula-fnv1a_64-%d", n), why: fmt.Sprintf("modula fnv1a_64, %s of weight 1", nServers(n)),
			dist: "modula", hash: "fnv1a_64", servers: equal(n)})
	}
	cs = append(cs, config{file: "modula-md5-10", why: "modula md5, 10 servers of weight 1",
		dist: "modula", hash: "md5", servers: equal(10)})

	// Weights.
	cs = append(cs,
		config{file: "ketama-md5-5w", why: "ketama md5, weights 1 to 5",
			dist: "ketama", hash: "md5", servers: weighted("1", "2", "3", "4", "5")},
		config{file: "ketama-fnv1a_64-10w", why: "ketama fnv1a_64, ten mixed weights",
			dist: "ketama", hash: "fnv1a_64", servers: weighted("3", "1", "4", "1", "5", "9", "2", "6", "5", "3")},
		config{file: "ketama-md5-5-float", why: "ketama md5, weights 6, 6, 6, 6, 1: float32 arithmetic gives 188 points where exact arithmetic gives 192",
			dist: "ketama", hash: "md5", servers: weighted("6", "6", "6", "6", "1")},
		config{file: "ketama-md5-25", why: "ketama md5, 25 servers of weight 1: float32 arithmetic gives each 156 points, not 160",
			dist: "ketama", hash: "md5", servers: equal(25)},
		config{file: "ketama-md5-3-large", why: "ketama md5, weights 1, 100, 10000: the weight-1 server gets no points at all",
			dist: "ketama", hash: "md5", servers: weighted("1", "100", "10000")},
		config{file: "ketama-md5-2-max-and-1", why: "ketama md5, the largest weight nutcracker accepts (2147483647) next to weight 1",
			dist: "ketama", hash: "md5", servers: weighted("2147483647", "1")},
		config{file: "ketama-md5-3-max", why: "ketama md5, three servers of weight 2147483647: the uint32 total weight wraps",
			dist: "ketama", hash: "md5", servers: weighted("2147483647", "2147483647", "2147483647")},
		config{file: "ketama-md5-3-weight-text", why: "ketama md5, weights written 4294967297 (accepted: nc_atoi wraps it to 1), 1 and 02",
			dist: "ketama", hash: "md5", servers: weighted("4294967297", "1", "02")},
		config{file: "modula-md5-3w", why: "modula md5, weights 3, 1, 2",
			dist: "modula", hash: "md5", servers: weighted("3", "1", "2")},
		config{file: "modula-fnv1a_64-5w", why: "modula fnv1a_64, weights 2, 5, 1, 3, 4 on servers listed out of port order",
			dist: "modula", hash: "fnv1a_64", servers: []server{
				tcp(21004, "2", ""), tcp(21002, "5", ""), tcp(21005, "1", ""), tcp(21001, "3", ""), tcp(21003, "4", "")}},
		config{file: "modula-md5-2-large", why: "modula md5, weights 100000 and 1 (one continuum slot per unit of weight)",
			dist: "modula", hash: "md5", servers: weighted("100000", "1")},
	)

	// Names.
	cs = append(cs,
		config{file: "ketama-md5-3-named", why: "ketama md5, explicit names after the weight",
			dist: "ketama", hash: "md5", servers: named("redis-b", "redis-c", "redis-a")},
		config{file: "modula-md5-3-named", why: "modula md5, explicit names: slots follow the names sorted, not the listing",
			dist: "modula", hash: "md5", servers: named("redis-b", "redis-c", "redis-a")},
		config{file: "ketama-md5-5-mixednames", why: "ketama md5, some servers named, some not; one name looks like another server's address",
			dist: "ketama", hash: "md5", servers: []server{
				tcp(21001, "1", "alpha"), tcp(21002, "1", ""), tcp(21003, "1", "beta"), tcp(21004, "1", ""), tcp(21005, "1", "127.0.0.1:21001")}},
		config{file: "modula-md5-4-names-sorted", why: "modula md5, names b, aa, c, a: sorted shortest first, then bytewise (a, b, c, aa)",
			dist: "modula", hash: "md5", servers: named("b", "aa", "c", "a")},
		config{file: "ketama-md5-3-port11211", why: "ketama md5, a server on port 11211 is named by its host alone",
			dist: "ketama", hash: "md5", servers: ports(21001, 21002, port11211)},
		config{file: "modula-md5-3-port11211", why: "modula md5, a server on port 11211 is named by its host alone, which sorts first",
			dist: "modula", hash: "md5", servers: ports(21001, 21002, port11211)},
		config{file: "ketama-md5-3-port-text", why: "ketama md5, ports written with a leading zero: the name keeps the text as written, 011211 still counts as 11211",
			dist: "ketama", hash: "md5", servers: []server{
				{line: "127.0.0.1:011211:1", backend: fmt.Sprintf("127.0.0.1:%d", port11211)},
				{line: "127.0.0.1:021002:1", backend: "127.0.0.1:21002"},
				tcp(21003, "1", "")}},
		config{file: "ketama-md5-3-unix", why: "ketama md5, unix-socket servers without a name are named by their path and a colon",
			dist: "ketama", hash: "md5", servers: []server{sock(1, "1", ""), sock(2, "1", ""), tcp(21001, "1", "")}},
		config{file: "modula-fnv1a_64-3-unix", why: "modula fnv1a_64, unix-socket servers named and unnamed",
			dist: "modula", hash: "fnv1a_64", servers: []server{tcp(21001, "1", ""), sock(2, "2", "sock-two"), sock(1, "1", "")}},
		config{file: "ketama-md5-3-longname", why: "ketama md5, names of 270 and 300 bytes: point names are cut to 272 bytes",
			dist: "ketama", hash: "md5", servers: named(strings.Repeat("n", 270), strings.Repeat("m", 300), "short")},
	)

	// Orderings.
	cs = append(cs,
		config{file: "ketama-md5-5-unsorted", why: "ketama md5, servers listed out of port order",
			dist: "ketama", hash: "md5", servers: ports(21005, 21002, 21004, 21001, 21003)},
		config{file: "modula-md5-5-unsorted", why: "modula md5, servers listed out of port order: slots follow the sorted names",
			dist: "modula", hash: "md5", servers: ports(21005, 21002, 21004, 21001, 21003)},
		config{file: "ketama-md5-2-tie", why: "ketama md5, two names with one point value in common; the name that sorts first owns it",
			dist: "ketama", hash: "md5", servers: named(tie[0], tie[1])},
	)

	// Hash tags.
	cs = append(cs,
		config{file: "ketama-md5-5-tag-braces", why: "ketama md5, hash_tag {}",
			dist: "ketama", hash: "md5", tag: "{}", servers: equal(5)},
		config{file: "modula-fnv1a_64-3-tag-braces", why: "modula fnv1a_64, hash_tag {}",
			dist: "modula", hash: "fnv1a_64", tag: "{}", servers: equal(3)},
		config{file: "ketama-fnv1a_64-5-tag-colons", why: "ketama fnv1a_64, hash_tag :: (both ends the same byte)",
			dist: "ketama", hash: "fnv1a_64", tag: "::", servers: equal(5)},
		config{file: "ketama-md5-5-tag-reversed", why: "ketama md5, hash_tag }{ (closing byte first)",
			dist: "ketama", hash: "md5", tag: "}{", servers: equal(5)},
		config{file: "modula-md5-5-tag-slashdot", why: "modula md5, hash_tag /. (any two bytes)",
			dist: "modula", hash: "md5", tag: "/.", servers: equal(5)},
	)
	return cs
}

// refusal is a configuration nutcracker refuses; it is written as refused-<stem>.yml with
// nutcracker's own message on top.
type refusal struct {
	stem string
	why  string
	body string // the pool, after "<stem>:\n  listen: ...\n"
}

func (r refusal) yaml() string {
	return fmt.Sprintf("%s:\n  listen: %s\n  redis: true\n%s", r.stem, listenAddr, r.body)
}

func refusals() []refusal {
	servers := func(lines ...string) string {
		s := "  servers:\n"
		for _, l := range lines {
			s += "   - " + l + "\n"
		}
		return s
	}
	ok := "127.0.0.1:21002:1"
	return []refusal{
		{"weight-zero", "weight 0", servers("127.0.0.1:21001:0", ok)},
		{"weight-negative", "weight -1", servers("127.0.0.1:21001:-1", ok)},
		{"weight-too-large", "weight 2147483648 (one past the largest int)", servers("127.0.0.1:21001:2147483648", ok)},
		{"weight-not-number", "weight x", servers("127.0.0.1:21001:x", ok)},
		{"weight-missing", "host:port without a weight", servers("127.0.0.1:21001", ok)},
		{"port-missing", "host:weight without a port", servers("127.0.0.1:1", ok)},
		{"port-zero", "port 0", servers("127.0.0.1:0:1", ok)},
		{"port-too-large", "port 65536", servers("127.0.0.1:65536:1", ok)},
		{"unix-path-with-colon", "a unix socket path with a colon in it", servers("/tmp/a:b.sock:1", ok)},
		{"name-with-space", "a name with a space in it (the name is what follows the last space)", servers("127.0.0.1:21001:1 my cache", ok)},
		{"duplicate-name", "two servers with one explicit name", servers("127.0.0.1:21001:1 cache", "127.0.0.1:21002:1 cache")},
		{"duplicate-address", "one host:port twice with different weights (both named 127.0.0.1:21001)", servers("127.0.0.1:21001:1", "127.0.0.1:21001:2")},
		{"duplicate-name-and-address", "an explicit name equal to another server's default name", servers("127.0.0.1:21001:1", "127.0.0.1:21002:1 127.0.0.1:21001")},
		{"duplicate-11211", "two hosts named alike: 127.0.0.1:11211 is named 127.0.0.1", servers("127.0.0.1:11211:1", "127.0.0.1:21002:1 127.0.0.1")},
		{"no-servers", "a pool without servers:", ""},
		{"servers-flow-style", "servers: [] (nutcracker reads block-style YAML only)", "  servers: []\n"},
		{"hash-unknown", "hash: sha1", "  hash: sha1\n" + servers("127.0.0.1:21001:1", ok)},
		{"hash-uppercase", "hash: MD5 (names are case-sensitive)", "  hash: MD5\n" + servers("127.0.0.1:21001:1", ok)},
		{"hash-twice", "hash: given twice", "  hash: md5\n  hash: md5\n" + servers("127.0.0.1:21001:1", ok)},
		{"distribution-unknown", "distribution: consistent", "  distribution: consistent\n" + servers("127.0.0.1:21001:1", ok)},
		{"hash-tag-one-byte", "hash_tag of one byte", "  hash_tag: \"{\"\n" + servers("127.0.0.1:21001:1", ok)},
		{"hash-tag-four-bytes", "hash_tag of four bytes", "  hash_tag: \"{{}}\"\n" + servers("127.0.0.1:21001:1", ok)},
		{"hash-tag-unquoted", "hash_tag: {} unquoted is a YAML mapping, not a string", "  hash_tag: {}\n" + servers("127.0.0.1:21001:1", ok)},
	}
}
