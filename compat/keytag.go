package compat

import (
	"strings"
	"unicode/utf8"
)

// JedisDefaultKeyTag is Jedis's Sharded.DEFAULT_KEY_TAG_PATTERN: the text between the first
// '{' that has a '}' at least two characters after it and the first such '}'.
const JedisDefaultKeyTag = `\{(.+?)\}`

// keyTag is a Jedis key-tag pattern of the subset this package runs without a regular
// expression engine, so that a lookup never allocates:
//
//	[^] prefix ( body ) suffix
//
// prefix and suffix are literal printable ASCII (metacharacters escaped with a backslash;
// '}' and ']' may stand alone, as Java allows); body is '.' or a negated class of literal
// ASCII characters ("[^:]", "[^\]]"), then '+' or '*', then an optional '?' (lazy). That
// covers Jedis's DEFAULT_KEY_TAG_PATTERN `\{(.+?)\}` and the usual custom ones (`^([^:]+):`,
// `\[(.+?)\]`, `<(.*?)>`). Group 1 always takes part in a match, which Jedis needs.
//
// It matches as java.util.regex.Matcher.find does: the leftmost start, and from there the
// shortest (lazy) or longest (greedy) body after which the suffix follows. '.' matches any
// character but Java's line terminators (\n, \r, U+0085, U+2028, U+2029), a negated class
// any character outside it, line terminators included; characters are UTF-8 sequences.
type keyTag struct {
	anchored       bool
	prefix, suffix string
	dot            bool   // body is '.'; else a negated class of the bytes in set
	set            string // the class's characters
	min            int    // 0 for '*', 1 for '+'
	lazy           bool
}

// parseKeyTag compiles a pattern of the subset, or says why it is outside it.
func parseKeyTag(p string) (*keyTag, error) {
	k := &keyTag{}
	rest := p
	if strings.HasPrefix(rest, "^") {
		k.anchored, rest = true, rest[1:]
	}
	var err error
	if k.prefix, rest, err = keyTagLiteral(rest, "("); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(rest, "(") || strings.HasPrefix(rest, "(?") {
		return nil, errorf("want a capturing group (...)")
	}
	rest = rest[1:]
	switch {
	case strings.HasPrefix(rest, "."):
		k.dot, rest = true, rest[1:]
	case strings.HasPrefix(rest, "[^"):
		rest = rest[2:]
		var set strings.Builder
		for i := 0; ; i++ {
			if rest == "" {
				return nil, errorf("unclosed character class")
			}
			c := rest[0]
			if c == ']' && i > 0 {
				rest = rest[1:]
				break
			}
			if c == '\\' {
				if len(rest) < 2 || !keyTagEscapable(rest[1]) {
					return nil, errorf("only escaped punctuation in a class")
				}
				c, rest = rest[1], rest[1:]
			} else if c == '[' || c == '&' || (c == '-' && i > 0 && len(rest) > 1 && rest[1] != ']') {
				return nil, errorf("no ranges, unions or nested classes in the class")
			}
			if c < 0x20 || c > 0x7e {
				return nil, errorf("only printable ASCII in the class")
			}
			set.WriteByte(c)
			rest = rest[1:]
		}
		k.set = set.String()
	default:
		return nil, errorf("the group must hold '.' or a negated class [^...]")
	}
	switch {
	case strings.HasPrefix(rest, "+"):
		k.min = 1
	case strings.HasPrefix(rest, "*"):
	default:
		return nil, errorf("the group's body must end in + or *")
	}
	rest = rest[1:]
	if strings.HasPrefix(rest, "?") {
		k.lazy, rest = true, rest[1:]
	}
	if !strings.HasPrefix(rest, ")") {
		return nil, errorf("want ')' after the group's body")
	}
	if k.suffix, rest, err = keyTagLiteral(rest[1:], ""); err != nil {
		return nil, err
	}
	if rest != "" {
		return nil, errorf("unexpected %q", rest)
	}
	return k, nil
}

// keyTagLiteral reads literal text up to the first byte in stop (or the end), unescaping.
func keyTagLiteral(s, stop string) (lit, rest string, err error) {
	var b strings.Builder
	for s != "" && !strings.ContainsRune(stop, rune(s[0])) {
		c := s[0]
		switch {
		case c == '\\':
			if len(s) < 2 || !keyTagEscapable(s[1]) {
				return "", "", errorf("only escaped punctuation outside the group (at %q)", s)
			}
			c, s = s[1], s[1:]
		case strings.IndexByte(`^$.|?*+()[{`, c) >= 0:
			return "", "", errorf("metacharacter %q outside the group: only literal text there", c)
		case c < 0x20 || c > 0x7e:
			return "", "", errorf("only printable ASCII outside the group")
		}
		b.WriteByte(c)
		s = s[1:]
	}
	return b.String(), s, nil
}

// keyTagEscapable reports whether "\c" is a literal c in Java and in this subset: ASCII
// punctuation.
func keyTagEscapable(c byte) bool {
	return c > 0x20 && c < 0x7f && !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z')
}

// apply returns group 1 of the leftmost match in key, or key when there is none. It never
// allocates.
func (k *keyTag) apply(key string) string {
	for s := 0; s <= len(key); s++ {
		if s > 0 && k.anchored {
			break
		}
		if s < len(key) && !utf8.RuneStart(key[s]) {
			continue
		}
		if !strings.HasPrefix(key[s:], k.prefix) {
			continue
		}
		p := s + len(k.prefix)
		end := k.run(key, p) // the body can take key[p:e] for any boundary e in [p, end]
		lo := p
		if k.min == 1 {
			if p == end {
				continue
			}
			_, n := utf8.DecodeRuneInString(key[p:])
			lo = p + n
		}
		if k.lazy {
			for from := lo; ; {
				i := strings.Index(key[from:], k.suffix)
				if i < 0 {
					return key // no suffix after lo: no later start can match either
				}
				e := from + i
				if e > end {
					break
				}
				if k.endsAt(key, e) {
					return key[p:e]
				}
				from = e + 1
			}
		} else {
			for e := end; e >= lo; e-- {
				if k.endsAt(key, e) {
					return key[p:e]
				}
			}
		}
	}
	return key
}

// endsAt reports whether the body can end at e: a character boundary where the suffix follows.
func (k *keyTag) endsAt(key string, e int) bool {
	return (e == len(key) || utf8.RuneStart(key[e])) && strings.HasPrefix(key[e:], k.suffix)
}

// run returns the end of the longest run of body characters from p.
func (k *keyTag) run(key string, p int) int {
	i := p
	for i < len(key) {
		c := key[i]
		if k.dot {
			if c == '\n' || c == '\r' || strings.HasPrefix(key[i:], "\u0085") ||
				strings.HasPrefix(key[i:], "\u2028") || strings.HasPrefix(key[i:], "\u2029") {
				return i
			}
		} else if strings.IndexByte(k.set, c) >= 0 {
			return i
		}
		i++
	}
	return i
}
