package main

import (
	"fmt"
	"strings"
)

// backend is one vector set: a backend section exactly as a user writes it. The sets differ
// in their hash-type line and their server lines; the balance line is the same everywhere.
type backend struct {
	name     string
	hashType string   // the hash-type line without "hash-type ", "" for no line at all
	servers  []string // what follows "server " on each line
}

// balance makes HAProxy hash exactly the key: the query argument k, percent-decoded.
const balance = "balance hash urlp(k),url_dec"

// section renders the backend as a user writes it.
func (b backend) section() string {
	var s strings.Builder
	fmt.Fprintf(&s, "backend %s\n    %s\n", b.name, balance)
	if b.hashType != "" {
		fmt.Fprintf(&s, "    hash-type %s\n", b.hashType)
	}
	for _, l := range b.servers {
		fmt.Fprintf(&s, "    server %s\n", l)
	}
	return s.String()
}

// srv returns the line of server s<i> on port 3100<i>, with extra keywords.
func srv(i int, extra string) string {
	l := fmt.Sprintf("s%d 127.0.0.1:%d", i, 31000+i)
	if extra != "" {
		l += " " + extra
	}
	return l
}

func plain(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = srv(i+1, "")
	}
	return s
}

// serverSets are the server lists the hash types are run on. Names do not place keys in
// HAProxy; ids (explicit or given by position), weights and order do.
var serverSets = []struct {
	suffix  string
	servers []string
}{
	{"1", plain(1)},
	{"2", plain(2)},
	{"3", plain(3)},
	{"5", plain(5)},
	{"10", plain(10)},
	{"5-reversed", []string{srv(5, ""), srv(4, ""), srv(3, ""), srv(2, ""), srv(1, "")}},
	{"weights-mixed", []string{srv(1, ""), srv(2, "weight 2"), srv(3, "weight 3"), srv(4, ""), srv(5, "weight 5")}},
	// map-based divides the weights by their greatest common divisor; consistent does not.
	{"weights-gcd", []string{srv(1, "weight 2"), srv(2, "weight 4"), srv(3, "weight 6")}},
	{"weights-max", []string{srv(1, "weight 256"), srv(2, ""), srv(3, "weight 128")}},
	{"weight-0", []string{srv(1, ""), srv(2, "weight 0"), srv(3, ""), srv(4, ""), srv(5, "")}},
	// A backup server takes no keys while an active one is up, but map-based counts its
	// weight in the common divisor.
	{"weights-backup", []string{srv(1, "weight 2"), srv(2, "weight 4"), srv(3, "weight 2"), srv(4, "weight 3 backup")}},
	// A server in maintenance from the start.
	{"disabled", []string{srv(1, ""), srv(2, ""), srv(3, "disabled"), srv(4, ""), srv(5, "")}},
	{"ids-explicit", []string{srv(1, "id 10"), srv(2, "id 20"), srv(3, "id 30"), srv(4, "id 40"), srv(5, "id 50")}},
	{"ids-shuffled", []string{srv(1, "id 5"), srv(2, "id 3"), srv(3, "id 1"), srv(4, "id 4"), srv(5, "id 2")}},
	// Some ids explicit, the others numbered automatically: s1=2 s2=1 s3=4 s4=3 s5=6.
	{"ids-mixed", []string{srv(1, ""), srv(2, "id 1"), srv(3, ""), srv(4, "id 3"), srv(5, "")}},
	// Large ids: id*4096 overflows 32 bits.
	{"ids-large", []string{srv(1, "id 1000000"), srv(2, "id 2147483647"), srv(3, "id 524288"), srv(4, "id 4000"), srv(5, "")}},
	// id 1048577 = 1 + 2^20: its points are those of id 1, the two servers tie everywhere.
	{"ids-wrap", []string{srv(1, ""), srv(2, "id 1048577"), srv(3, "")}},
}

// hashTypes are the hash-type lines, named for the file names.
var hashTypes = func() [][2]string {
	t := [][2]string{
		{"default", ""},                      // no hash-type line: map-based sdbm
		{"map-default", "map-based"},         // map-based sdbm
		{"consistent-default", "consistent"}, // consistent sdbm avalanche
	}
	for _, typ := range []string{"map-based", "consistent"} {
		short := strings.TrimSuffix(typ, "-based")
		for _, fn := range []string{"sdbm", "djb2", "wt6", "crc32"} {
			t = append(t, [2]string{short + "-" + fn, typ + " " + fn})
			t = append(t, [2]string{short + "-" + fn + "-avalanche", typ + " " + fn + " avalanche"})
		}
	}
	return t
}()

func hashType(name string) string {
	for _, t := range hashTypes {
		if t[0] == name {
			return t[1]
		}
	}
	panic("no hash type " + name)
}

// backends returns every vector set: all hash types on five servers, every server set on
// the two defaults (consistent and map-based), and a few server sets on other functions.
func backends() []backend {
	var b []backend
	add := func(ht, set string) {
		for _, s := range serverSets {
			if s.suffix == set {
				b = append(b, backend{ht + "-" + set, hashType(ht), s.servers})
				return
			}
		}
		panic("no server set " + set)
	}
	for _, t := range hashTypes {
		add(t[0], "5")
	}
	for _, s := range serverSets {
		if s.suffix != "5" {
			add("consistent-default", s.suffix)
			add("map-default", s.suffix)
		}
	}
	for _, set := range []string{"10", "weights-mixed", "ids-shuffled", "weights-backup"} {
		add("consistent-crc32", set)
		add("map-wt6-avalanche", set)
	}
	return b
}

// refusal is a backend section haproxy -c refuses (or, in accepted, one it takes although
// it looks wrong).
type refusal struct {
	what    string
	section string
}

func section(lines ...string) string {
	return "backend refused\n    " + strings.Join(lines, "\n    ") + "\n"
}

var refusals = []refusal{
	{"weight-257", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 weight 257")},
	{"weight-negative", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 weight -1")},
	{"id-0", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 id 0")},
	{"id-negative", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 id -5")},
	{"id-not-a-number", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 id one")},
	{"id-over-int32", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 id 3000000000")},
	{"id-duplicate", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 id 7", "server s2 127.0.0.1:31002 id 7")},
	{"name-duplicate", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001", "server s1 127.0.0.1:31002")},
	{"hash-type-unknown", section(balance, "hash-type ketama", "server s1 127.0.0.1:31001")},
	{"hash-type-no-argument", section(balance, "hash-type", "server s1 127.0.0.1:31001")},
	{"hash-function-unknown", section(balance, "hash-type consistent md5", "server s1 127.0.0.1:31001")},
	{"hash-function-uppercase", section(balance, "hash-type consistent SDBM", "server s1 127.0.0.1:31001")},
	{"avalanche-without-function", section(balance, "hash-type consistent avalanche", "server s1 127.0.0.1:31001")},
	{"avalanche-alone", section(balance, "hash-type avalanche", "server s1 127.0.0.1:31001")},
	{"modifier-unknown", section(balance, "hash-type consistent sdbm avalanch", "server s1 127.0.0.1:31001")},
	{"balance-hdr-no-name", section("balance hdr()", "hash-type consistent", "server s1 127.0.0.1:31001")},
	{"balance-hash-no-expression", section("balance hash", "hash-type consistent", "server s1 127.0.0.1:31001")},
	{"server-no-address", section(balance, "hash-type consistent", "server s1")},
	{"server-bad-port", section(balance, "hash-type consistent", "server s1 127.0.0.1:99999")},
	{"server-unknown-keyword", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 wieght 2")},
}

var accepted = []refusal{
	{"weight-not-a-number", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 weight two", "server s2 127.0.0.1:31002")},
	{"weight-no-value", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 weight", "server s2 127.0.0.1:31002")},
	{"weight-trailing-junk", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 weight 3x", "server s2 127.0.0.1:31002")},
	{"name-duplicate-with-ids", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 id 1", "server s1 127.0.0.1:31002 id 2")},
	{"all-weights-0", section(balance, "hash-type consistent", "server s1 127.0.0.1:31001 weight 0", "server s2 127.0.0.1:31002 weight 0")},
	{"hash-type-twice", section(balance, "hash-type map-based djb2", "hash-type consistent", "server s1 127.0.0.1:31001", "server s2 127.0.0.1:31002", "server s3 127.0.0.1:31003")},
}
