package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const vectorDir = "../../../testdata/compat"

func load(t *testing.T) ([]*Case, []string) {
	t.Helper()
	keys, err := readKeys(filepath.Join(vectorDir, "keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cases, err := readCases(vectorDir)
	if err != nil {
		t.Fatal(err)
	}
	return cases, keys
}

func caseOf(t *testing.T, cases []*Case, file string) *Case {
	t.Helper()
	i := slices.IndexFunc(cases, func(c *Case) bool { return c.File == file })
	if i < 0 {
		t.Fatalf("no case %s", file)
	}
	return cases[i]
}

// The cases are read as the vectors mean them: our presets, which reproduce every vector
// in package compat's tests, agree with every key of every file read here.
func TestCasesMatchPresets(t *testing.T) {
	cases, keys := load(t)
	for _, c := range cases {
		n, err := presetAgreement(c, keys)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(c.Keys) {
			t.Errorf("%s: our preset places %d of %d keys as recorded", c.File, n, len(c.Keys))
		}
	}
	for _, s := range systems {
		if !slices.ContainsFunc(cases, func(c *Case) bool { return c.System == s.dir }) {
			t.Errorf("no vector file read for %s", s.dir)
		}
	}
}

// What a peer is given: the names a system hashes, the addresses as written, the weights.
func TestCaseFields(t *testing.T) {
	cases, _ := load(t)
	for _, tc := range []struct {
		file            string
		hashed, addrs   string
		weights         string
		twemproxyHashed bool
	}{
		{file: "libmemcached/weighted-md5-5w-11211.txt", hashed: "127.0.0.1 127.0.0.2", addrs: "127.0.0.1:11211 127.0.0.2:11211", weights: "[1 2 3 4 5]"},
		{file: "twemproxy/ketama-md5-3-named.txt", hashed: "redis-b redis-c", addrs: "127.0.0.1:21001 127.0.0.1:21002", weights: "[1 1 1]"},
		{file: "spymemcached/ketama-ketama-spy-5-localhost.txt", hashed: "localhost/127.0.0.1:24101 localhost/127.0.0.1:24102", addrs: "localhost:24101 localhost:24102", weights: "[1 1 1 1 1]"},
		{file: "nginx/chash-down-weights.txt", hashed: "127.0.0.1:31001 127.0.0.1:31002", addrs: "127.0.0.1:31001 127.0.0.1:31002", weights: "[2 1 3 1 1]"},
	} {
		c := caseOf(t, cases, tc.file)
		if got := strings.Join(c.Hashed[:2], " "); got != tc.hashed {
			t.Errorf("%s: hashed names %q, want %q", tc.file, got, tc.hashed)
		}
		if got := strings.Join(c.Addrs[:2], " "); got != tc.addrs {
			t.Errorf("%s: addresses %q, want %q", tc.file, got, tc.addrs)
		}
		if got := fmt.Sprint(c.Weights); got != tc.weights {
			t.Errorf("%s: weights %s, want %s", tc.file, got, tc.weights)
		}
	}
}

// try counts agreement as text, reports what a peer cannot express or refuses, and
// survives a peer that panics while building or answering.
func TestTry(t *testing.T) {
	cases, keys := load(t)
	c := caseOf(t, cases, "twemproxy/ketama-md5-5.txt")
	p, err := preset(c)
	if err != nil {
		t.Fatal(err)
	}
	peer := func(build func(*Case) (Lookup, error)) Peer {
		return Peer{Name: "test", Takes: func(*Case) bool { return true }, Build: build}
	}
	for _, tc := range []struct {
		name  string
		build func(*Case) (Lookup, error)
		agree int // -1: fewer than all, more than none
		note  string
	}{
		{"our preset", func(c *Case) (Lookup, error) { return Lookup{Answer: p.Locate, Vocab: c.Names}, nil }, len(c.Keys), ""},
		{"always the first", func(c *Case) (Lookup, error) {
			return Lookup{Answer: func(string) string { return c.Names[0] }, Vocab: c.Names}, nil
		}, -1, ""},
		{"panics on the empty key", func(c *Case) (Lookup, error) {
			return Lookup{Answer: func(k string) string {
				if k == "" {
					panic("empty")
				}
				return p.Locate(k)
			}, Vocab: c.Names}, nil
		}, len(c.Keys) - 1, ""},
		{"inexpressible", func(*Case) (Lookup, error) { return Lookup{}, fmt.Errorf("%w weights", errInexpressible) }, 0, "cannot express weights"},
		{"panics when built", func(*Case) (Lookup, error) { panic("no port") }, 0, "panics: no port"},
	} {
		o := try(peer(tc.build), c, keys)
		if o.note != tc.note {
			t.Errorf("%s: note %q, want %q", tc.name, o.note, tc.note)
		}
		if tc.agree >= 0 && o.agree != tc.agree || tc.agree < 0 && (o.agree == 0 || o.agree == len(c.Keys)) {
			t.Errorf("%s: %d of %d keys agree", tc.name, o.agree, len(c.Keys))
		}
	}
}

// The command runs end to end with a peer built in: it is summarised, and timed once, on
// the first timed configuration it takes, next to our preset.
func TestRun(t *testing.T) {
	defer func(saved []Peer) { peers = saved }(peers)
	peers = []Peer{{
		Name: "first-server", Config: "always the first server", Claim: "nothing",
		Takes: func(c *Case) bool { return c.System == "nginx" },
		Build: func(c *Case) (Lookup, error) {
			return Lookup{Answer: func(string) string { return c.Names[0] }, Vocab: c.Names}, nil
		},
	}}
	var out strings.Builder
	if err := run(&out, vectorDir, 1, true); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"| first-server ", "| shardkit/shard compat ", "nginx/chash-10.txt", "compat nginx preset"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "| first-server, always the first server"); n != 1 {
		t.Errorf("the peer is timed %d times, want once:\n%s", n, text)
	}
}

func TestSummarize(t *testing.T) {
	got := summarize([]string{"cannot express weights", "refuses x", "cannot express weights"})
	if want := "2: cannot express weights; 1: refuses x"; got != want {
		t.Errorf("summarize = %q, want %q", got, want)
	}
}
