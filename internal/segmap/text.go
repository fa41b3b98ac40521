package segmap

import (
	"bytes"
	"fmt"
	"strconv"
)

// The text form of a Map, shared by the directories of package shard and package pool:
//
//	directory entries=2
//	"1" 4
//	"user:42" 0
//
// A header gives the number of entries, so that a truncated file is an error, then one line
// per entry in increasing byte order of the keys, each key once: the key as a Go string
// literal (strconv.Quote, so any bytes survive), one space, and the value in the caller's
// form. Every line ends in '\n'.

const header = "directory entries="

// AppendText appends the text form of m to b, the values written by appendValue.
func AppendText[V comparable](b []byte, m *Map[V], appendValue func([]byte, V) []byte) []byte {
	b = strconv.AppendInt(append(b, header...), int64(m.Len()), 10)
	b = append(b, '\n')
	for k, v := range m.Sorted() {
		b = strconv.AppendQuote(b, k)
		b = appendValue(append(b, ' '), v)
		b = append(b, '\n')
	}
	return b
}

// ParseText reads the text form. value turns the field after a key into its value, or says
// what is wrong with it. The final '\n' may be missing; nothing else is tolerated (no blank
// lines, no '\r', no other spacing, no backquoted keys). Errors say "line N: " and what was
// wrong; they wrap value's errors, which should name the key.
func ParseText[V comparable](text []byte, value func(key string, field []byte) (V, error)) (*Map[V], error) {
	text, _ = bytes.CutSuffix(text, []byte("\n"))
	if bytes.HasSuffix(text, []byte("\n")) {
		return nil, fmt.Errorf("line %d: blank line at the end", bytes.Count(text, []byte("\n"))+1)
	}
	head, body, _ := bytes.Cut(text, []byte("\n"))
	count, ok := bytes.CutPrefix(head, []byte(header))
	n, err := strconv.ParseUint(string(count), 10, 31)
	if !ok || err != nil || len(count) > 1 && count[0] == '0' {
		return nil, fmt.Errorf("line 1: %.40q: want \"%sN\"", head, header)
	}
	// The count is not trusted to size anything: each entry takes at least 5 bytes.
	keys := make([]string, 0, min(int(n), len(body)/5+1))
	vals := make([]V, 0, cap(keys))
	line := 1
	for len(body) > 0 {
		line++
		var l []byte
		l, body, _ = bytes.Cut(body, []byte("\n"))
		if len(l) == 0 || l[0] != '"' {
			return nil, fmt.Errorf("line %d: %.40q: want a quoted key, a space and a value", line, l)
		}
		q, err := strconv.QuotedPrefix(string(l))
		if err != nil {
			return nil, fmt.Errorf("line %d: %.40q: the key is not a valid Go string literal", line, l)
		}
		field, ok := bytes.CutPrefix(l[len(q):], []byte(" "))
		if !ok {
			return nil, fmt.Errorf("line %d: %.40q: want one space after the key", line, l)
		}
		key, _ := strconv.Unquote(q) // QuotedPrefix checked it
		if len(keys) > 0 && key <= keys[len(keys)-1] {
			return nil, fmt.Errorf("line %d: key %.40q after %.40q: keys must be in increasing byte order, each once", line, key, keys[len(keys)-1])
		}
		v, err := value(key, field)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		keys, vals = append(keys, key), append(vals, v)
	}
	if uint64(len(keys)) != n {
		return nil, fmt.Errorf("line 1: %s%d, but %d entries follow", header, n, len(keys))
	}
	return Build(func(yield func(string, V) bool) {
		for i, k := range keys {
			if !yield(k, vals[i]) {
				return
			}
		}
	})
}
