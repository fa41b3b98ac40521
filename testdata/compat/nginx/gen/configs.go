package main

import "fmt"

// upstream is one vector set: an upstream block exactly as a user writes it. Only the
// server lines and the "consistent" flag differ between sets; the hash key is always $key
// (see main.go for how $key is made from the request).
type upstream struct {
	name       string
	consistent bool
	servers    []string // what follows "server " on each line, without the ';'
}

// loopback returns n server lines 127.0.0.1:31001 .. 127.0.0.1:310nn.
func loopback(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("127.0.0.1:%d", 31001+i)
	}
	return s
}

// pick returns the loopback lines at the given 1-based positions, in that order.
func pick(pos ...int) []string {
	s := make([]string, len(pos))
	for i, p := range pos {
		s[i] = fmt.Sprintf("127.0.0.1:%d", 31000+p)
	}
	return s
}

// serverSets are the server lists every method is run on.
var serverSets = []struct {
	suffix  string
	servers []string
}{
	{"1", loopback(1)},
	{"2", loopback(2)},
	{"3", loopback(3)},
	{"5", loopback(5)},
	{"10", loopback(10)},
	// The same five servers in other orders.
	{"5-reversed", pick(5, 4, 3, 2, 1)},
	{"5-shuffled", pick(3, 1, 5, 2, 4)},
	// Weights: mixed, all equal but not 1 (nginx does not divide by a common factor),
	// and large.
	{"weights-mixed", []string{
		"127.0.0.1:31001", "127.0.0.1:31002 weight=2", "127.0.0.1:31003 weight=3",
		"127.0.0.1:31004", "127.0.0.1:31005 weight=5",
	}},
	{"weights-all2", []string{
		"127.0.0.1:31001 weight=2", "127.0.0.1:31002 weight=2", "127.0.0.1:31003 weight=2",
		"127.0.0.1:31004 weight=2", "127.0.0.1:31005 weight=2",
	}},
	{"weights-large", []string{
		"127.0.0.1:31001 weight=100", "127.0.0.1:31002", "127.0.0.1:31003 weight=1000",
	}},
	// Addresses written every way nginx accepts them. 127.0.0.2 has no port (nginx
	// connects to port 80, but "hash consistent" hashes the text as written); ip6-localhost
	// resolves to ::1 only.
	{"addresses", []string{
		"127.0.0.1:31001", "127.0.0.2", "127.0.0.3:80", "[::1]:31004",
		"ip6-localhost:31005", "unix:/srv/shard-nginx.sock",
	}},
	// localhost resolves to ::1 and 127.0.0.1 (Debian's default /etc/hosts): one server
	// line, two peers.
	{"localhost", []string{"localhost:31001", "127.0.0.1:31002", "127.0.0.1:31003"}},
	{"localhost-weights", []string{"127.0.0.1:31002 weight=2", "localhost:31001 weight=3", "127.0.0.1:31003"}},
	// A server marked down keeps its share of the hash space; its keys go elsewhere.
	{"down", []string{
		"127.0.0.1:31001", "127.0.0.1:31002", "127.0.0.1:31003 down",
		"127.0.0.1:31004", "127.0.0.1:31005",
	}},
	{"down-weights", []string{
		"127.0.0.1:31001 weight=2", "127.0.0.1:31002 down", "127.0.0.1:31003 weight=3",
		"127.0.0.1:31004 down", "127.0.0.1:31005",
	}},
}

// upstreams returns every vector set: each server set under "hash $key" and under
// "hash $key consistent".
func upstreams() []upstream {
	var u []upstream
	for _, consistent := range []bool{false, true} {
		method := "hash"
		if consistent {
			method = "chash"
		}
		for _, s := range serverSets {
			u = append(u, upstream{method + "-" + s.suffix, consistent, s.servers})
		}
	}
	return u
}

// refusal is an upstream block nginx -t refuses.
type refusal struct {
	what  string
	block string
}

var refusals = []refusal{
	{"weight-0", "upstream refused {\n    hash $key consistent;\n    server 127.0.0.1:31001 weight=0;\n}\n"},
	{"weight-negative", "upstream refused {\n    hash $key;\n    server 127.0.0.1:31001 weight=-1;\n}\n"},
	{"weight-overflow", "upstream refused {\n    hash $key;\n    server 127.0.0.1:31001 weight=9223372036854775808;\n}\n"},
	// Accepted by "hash" alone; "consistent" allocates 160 points per unit of weight.
	{"weight-huge-consistent", "upstream refused {\n    hash $key consistent;\n    server 127.0.0.1:31001 weight=2147483647;\n}\n"},
	{"weight-not-a-number", "upstream refused {\n    hash $key;\n    server 127.0.0.1:31001 weight=two;\n}\n"},
	{"backup", "upstream refused {\n    hash $key consistent;\n    server 127.0.0.1:31001;\n    server 127.0.0.1:31002 backup;\n}\n"},
	{"hash-bad-flag", "upstream refused {\n    hash $key consistant;\n    server 127.0.0.1:31001;\n}\n"},
	{"hash-no-key", "upstream refused {\n    hash;\n    server 127.0.0.1:31001;\n}\n"},
	{"hash-three-args", "upstream refused {\n    hash $key consistent extra;\n    server 127.0.0.1:31001;\n}\n"},
	{"no-servers", "upstream refused {\n    hash $key consistent;\n}\n"},
	{"unknown-parameter", "upstream refused {\n    hash $key;\n    server 127.0.0.1:31001 wieght=2;\n}\n"},
	{"bad-port", "upstream refused {\n    hash $key;\n    server 127.0.0.1:99999;\n}\n"},
	{"port-zero", "upstream refused {\n    hash $key;\n    server 127.0.0.1:0;\n}\n"},
	{"unknown-host", "upstream refused {\n    hash $key;\n    server no-such-host.invalid:31001;\n}\n"},
	{"missing-semicolon", "upstream refused {\n    hash $key\n    server 127.0.0.1:31001;\n}\n"},
	{"server-no-address", "upstream refused {\n    hash $key;\n    server;\n}\n"},
}

// accepted are blocks that look wrong but nginx -t accepts; main.go records what nginx
// says about each (a warning or nothing) for the README.
var accepted = []refusal{
	{"duplicate-server", "upstream accepted {\n    hash $key consistent;\n    server 127.0.0.1:31001;\n    server 127.0.0.1:31001;\n}\n"},
	{"backup-before-hash", "upstream accepted {\n    server 127.0.0.1:31001;\n    server 127.0.0.1:31002 backup;\n    hash $key consistent;\n}\n"},
	{"hash-twice", "upstream accepted {\n    hash $key;\n    hash $key consistent;\n    server 127.0.0.1:31001;\n}\n"},
	{"weight-huge", "upstream accepted {\n    hash $key;\n    server 127.0.0.1:31001 weight=2147483647;\n}\n"},
}
