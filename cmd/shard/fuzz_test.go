package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkit/shard/pool"
)

// FuzzParseNodes: any -nodes text parses or is a usage error, never a panic, and what parses
// reads back: every name is non-empty and the text is the names and weights as given.
func FuzzParseNodes(f *testing.F) {
	for _, s := range []string{"a", "a,b:2,c", "10.0.0.7:6379:1", "a:", ":1", "a,,b", "a:-1", "a:+1", "a:99999999999999999999", "x:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		nodes, err := parseNodes(list)
		if err != nil {
			var u usageError
			if !errors.As(err, &u) {
				t.Fatalf("parseNodes(%q): %v is not a usage error", list, err)
			}
			return
		}
		var parts []string
		for _, n := range nodes {
			if n.Name == "" || n.Weight < 0 || n.Weight == 0 && strings.Contains(n.Name, ":") {
				t.Fatalf("parseNodes(%q) = %+v", list, nodes)
			}
			if strings.Contains(n.Name, ",") {
				t.Fatalf("parseNodes(%q): name %q holds a comma", list, n.Name)
			}
			part := n.Name // no weight given: the name holds no ':'
			if n.Weight > 0 {
				part += ":" + strconv.Itoa(n.Weight)
			}
			parts = append(parts, part)
		}
		again, err := parseNodes(strings.Join(parts, ","))
		if err != nil || len(again) != len(nodes) {
			t.Fatalf("parseNodes(%q) = %+v, which does not read back: %v", list, nodes, err)
		}
		for i := range nodes {
			if again[i] != (pool.Node{Name: nodes[i].Name, Weight: nodes[i].Weight}) {
				t.Fatalf("parseNodes(%q): node %d reads back as %+v", list, i, again[i])
			}
		}
	})
}

// FuzzShowKey: every printed key is one field of one line and reads back to the key.
func FuzzShowKey(f *testing.F) {
	for _, s := range []string{"", "user:1", "a\tb", "\xff", "\"q", "日本", "a b", "\n", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		shown := showKey(key)
		if strings.ContainsAny(shown, "\t\n\r") {
			t.Fatalf("showKey(%q) = %q holds a tab or a line break", key, shown)
		}
		back := shown
		if strings.HasPrefix(shown, `"`) {
			var err error
			if back, err = strconv.Unquote(shown); err != nil {
				t.Fatalf("showKey(%q) = %q does not unquote: %v", key, shown, err)
			}
		}
		if back != key {
			t.Fatalf("showKey(%q) = %q reads back as %q", key, shown, back)
		}
	})
}

// FuzzMoveFlag: any -move value is accepted as a well-formed run or refused, never a panic.
func FuzzMoveFlag(f *testing.F) {
	for _, s := range []string{"0-99:2", "3:1", "3", "5-3:1", "-1:2", "1:-2", "a:b", "1-:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var tf tableFlags
		if err := tf.addMove(v); err != nil {
			return
		}
		m := tf.moves[0]
		if m.First < 0 || m.Last < m.First || m.To < 0 {
			t.Fatalf("-move %q accepted as %+v", v, m)
		}
	})
}

// FuzzParseTable: any text is a saved table of one of the three kinds or an error that names
// the file, never a panic, and what it takes in memory follows the text, besides the largest
// state a few bytes may describe (a Memento state of 2^22 buckets in one run: 120 MB).
func FuzzParseTable(f *testing.F) {
	for _, name := range []string{"parts.txt", "slots.txt", "trie.txt", "pool.txt", "parts-bad.txt", "trie-bad.txt", "pool-bad.txt", "keys.txt"} {
		f.Add([]byte(fixtures[name]))
	}
	f.Add([]byte("hash=xxh64 partitions=65536 shards=1\n0-65535 0\n"))
	f.Add([]byte("memento v1\nbuckets 4194304\nnode \"a\" weight 1 buckets 0-4194303\nremoved\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		var tab *savedTable
		var err error
		if got := allocated(func() { tab, err = parseTable("f.txt", text) }); got > uint64(64*len(text)+160<<20) {
			t.Fatalf("%d bytes of text: %d bytes allocated", len(text), got)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.txt: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if _, err := parseTable("again", tab.text()); err != nil {
			t.Fatalf("%s does not read back: %v", tab.describe(), err)
		}
	})
}
