package compat

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads the YAML of a nutcracker.yml. nutcracker (nc_conf.c) accepts one shape
// only: a mapping of pool names, each a mapping of directives whose values are scalars,
// with one block sequence of scalars (servers:). It refuses flow collections ([...],
// {...}), anchors, aliases, tags, document markers and YAML directives, and empty values.
// This reader takes that shape with block mappings and sequences, plain, single-quoted and
// double-quoted scalars and comments, refuses what nutcracker refuses, and refuses with a
// plain message the YAML nutcracker would read but this reader does not (multi-line and
// block scalars), so that nothing is read differently.

// yamlPool is one pool of a nutcracker.yml: its name, and its directives in order.
type yamlPool struct {
	name       string
	line       int
	directives []yamlDirective
}

// yamlDirective is "key: value", or "servers:" with its items.
type yamlDirective struct {
	key   string
	line  int
	value string     // a scalar directive's value
	items []yamlItem // a sequence's items (isSeq)
	isSeq bool
}

type yamlItem struct {
	value string
	line  int
}

// readNutcrackerYAML returns the pools of text, or an error naming the line.
func readNutcrackerYAML(text []byte) ([]yamlPool, error) {
	text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf")) // a byte order mark
	var (
		pools      []yamlPool
		cur        *yamlPool
		rootIndent = -1 // indentation of the pools
		dirIndent  = -1 // indentation of the current pool's directives
		pending    *yamlDirective
		itemInd    = -1 // indentation of the pending sequence's items
		// cont is the plain scalar that the next line continues if it is indented more
		// than contAfter (YAML folds the line break into a space).
		cont      *string
		contAfter int
	)
	fail := func(line int, format string, args ...any) error {
		return configErr("twemproxy", line, format, args...)
	}
	// finish closes a directive left without a value: an empty scalar, which nutcracker
	// refuses, unless items followed.
	finish := func() error {
		if pending != nil && !pending.isSeq {
			return fail(pending.line, "directive %q has no value", pending.key)
		}
		pending, itemInd = nil, -1
		return nil
	}
	// plain returns whether a scalar's text was plain (may continue on the next lines).
	plain := func(text string) bool { return text[0] != '"' && text[0] != '\'' }
	for i, raw := range strings.Split(string(text), "\n") {
		n := i + 1
		raw = strings.TrimSuffix(raw, "\r")
		if !utf8.ValidString(raw) {
			return nil, fail(n, "not valid UTF-8 (YAML text must be)")
		}
		body := strings.TrimLeft(raw, " ")
		indent := len(raw) - len(body)
		if strings.HasPrefix(body, "\t") {
			return nil, fail(n, "a tab in the indentation (YAML indents with spaces)")
		}
		content, err := stripComment(body)
		if err != nil {
			return nil, fail(n, "%v", err)
		}
		if content == "" {
			cont = nil // a blank or comment line ends a plain scalar
			continue
		}
		if cont != nil && indent > contAfter {
			if strings.Contains(content+" ", ": ") {
				return nil, fail(n, "a continued value holds \": \", which YAML reads as a mapping")
			}
			*cont += " " + content
			continue
		}
		cont = nil
		if rootIndent < 0 {
			rootIndent = indent
		}
		if indent == rootIndent {
			switch {
			case content == "---" || strings.HasPrefix(content, "--- ") || content == "...":
				return nil, fail(n, "a YAML document marker: nutcracker allows one document without markers")
			case content[0] == '%':
				return nil, fail(n, "a YAML directive: nutcracker refuses them")
			}
			if err := finish(); err != nil {
				return nil, err
			}
			key, _, present, err := splitKey(content)
			if err != nil {
				return nil, fail(n, "%v", err)
			}
			if present {
				return nil, fail(n, "%q is at the top level with a value: the top level holds pools, each a mapping of directives", key)
			}
			pools = append(pools, yamlPool{name: key, line: n})
			cur, dirIndent = &pools[len(pools)-1], -1
			continue
		}
		if indent < rootIndent {
			return nil, fail(n, "indented less than the pools")
		}
		if content == "-" || strings.HasPrefix(content, "- ") || strings.HasPrefix(content, "-\t") {
			if pending == nil || (pending.isSeq && indent != itemInd) || (!pending.isSeq && indent < dirIndent) {
				return nil, fail(n, "a list item where none belongs: only servers: holds a list, its items indented alike")
			}
			item := strings.TrimLeft(content[1:], " \t")
			if item == "" {
				return nil, fail(n, "an empty list item")
			}
			if item[0] == '-' && (item == "-" || item[1] == ' ' || item[1] == '\t') {
				return nil, fail(n, "a list in a list: nutcracker allows one level")
			}
			value, err := scalar(item, false)
			if err != nil {
				return nil, fail(n, "%v", err)
			}
			pending.isSeq, itemInd = true, indent
			pending.items = append(pending.items, yamlItem{value: value, line: n})
			if plain(item) {
				cont, contAfter = &pending.items[len(pending.items)-1].value, indent
			}
			continue
		}
		if dirIndent < 0 {
			dirIndent = indent
		}
		if indent != dirIndent {
			if pending != nil && !pending.isSeq && indent > dirIndent {
				return nil, fail(n, "a mapping under directive %q: nutcracker allows directives two levels deep", pending.key)
			}
			return nil, fail(n, "indented by %d where the pool's directives are indented by %d", indent, dirIndent)
		}
		if err := finish(); err != nil {
			return nil, err
		}
		key, value, present, err := splitKey(content)
		if err != nil {
			return nil, fail(n, "%v", err)
		}
		cur.directives = append(cur.directives, yamlDirective{key: key, line: n, value: value})
		switch d := &cur.directives[len(cur.directives)-1]; {
		case !present: // a sequence follows, or nothing (refused by finish)
			pending = d
		case value == "":
			return nil, fail(n, "directive %q has an empty value", key)
		case plain(strings.TrimSpace(content[strings.Index(content, ":")+1:])):
			cont, contAfter = &d.value, indent
		}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return pools, nil
}

// stripComment removes a comment (a '#' at the start or after a space, outside quotes) and
// trailing spaces.
func stripComment(s string) (string, error) {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0 && c == quote:
			if quote == '\'' && i+1 < len(s) && s[i+1] == '\'' {
				i++
				continue
			}
			quote = 0
		case quote == 0 && (c == '"' || c == '\'') && quoteStarts(s, i):
			quote = c
		case quote == 0 && c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimRight(s[:i], " \t"), nil
		}
	}
	if quote != 0 {
		return "", errors.New("a quoted value that does not end on its line (multi-line values are not supported)")
	}
	return strings.TrimRight(s, " \t"), nil
}

// quoteStarts reports whether a quote at s[i] opens a quoted scalar: at the start of a
// value, a key or a list item, not inside a plain scalar (where it is an ordinary byte).
func quoteStarts(s string, i int) bool {
	before := strings.TrimRight(s[:i], " \t")
	return before == "" || before == "-" || strings.HasSuffix(before, ":") && i > len(before)
}

// splitKey splits "key: value" and reads both scalars; present tells whether a value was
// written (an empty quoted value is present).
func splitKey(content string) (key, value string, present bool, err error) {
	var rest string
	if content[0] == '"' || content[0] == '\'' {
		end := quotedEnd(content)
		if end < 0 {
			return "", "", false, errors.New("a quoted key that does not end")
		}
		if key, err = scalar(content[:end], true); err != nil {
			return "", "", false, err
		}
		rest = strings.TrimLeft(content[end:], " \t")
		if !strings.HasPrefix(rest, ":") {
			return "", "", false, errors.New(`expected "key: value"`)
		}
		rest = rest[1:]
	} else {
		colon := -1
		for i := 0; i < len(content); i++ {
			if content[i] == ':' && (i+1 == len(content) || content[i+1] == ' ' || content[i+1] == '\t') {
				colon = i
				break
			}
		}
		if colon < 0 {
			return "", "", false, errorf(`expected "key: value", found %q`, content)
		}
		if key, err = scalar(strings.TrimRight(content[:colon], " \t"), true); err != nil {
			return "", "", false, err
		}
		rest = content[colon+1:]
	}
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", "", false, errors.New("expected a space after the colon")
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return key, "", false, nil
	}
	value, err = scalar(rest, false)
	return key, value, true, err
}

// quotedEnd returns the index just past the quoted scalar that starts s, or -1.
func quotedEnd(s string) int {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++
		case s[i] == q:
			return i + 1
		}
	}
	return -1
}

// scalar reads one scalar: quoted, or plain (refusing what YAML would read as something
// else: a mapping, a flow collection, an anchor, alias or tag, a block scalar).
func scalar(s string, isKey bool) (string, error) {
	if s == "" {
		return "", errors.New("an empty key")
	}
	switch c := s[0]; c {
	case '"', '\'':
		end := quotedEnd(s)
		if end < 0 {
			return "", errors.New("a quoted value that does not end on its line (multi-line values are not supported)")
		}
		if strings.TrimSpace(s[end:]) != "" {
			return "", errorf("text after a quoted value: %q", s[end:])
		}
		if c == '\'' {
			return strings.ReplaceAll(s[1:end-1], "''", "'"), nil
		}
		return unescapeDouble(s[1 : end-1])
	case '[':
		return "", errors.New("a flow sequence ([...]): nutcracker refuses flow style (\"flow sequence start token is disallowed\")")
	case '{':
		return "", errors.New("a flow mapping ({...}): nutcracker refuses flow style (\"flow mapping start token is disallowed\"); quote a hash_tag: \"{}\"")
	case '&':
		return "", errors.New("a YAML anchor: nutcracker refuses anchors")
	case '*':
		return "", errors.New("a YAML alias: nutcracker refuses aliases")
	case '!':
		return "", errors.New("a YAML tag: nutcracker refuses tags")
	case '|', '>':
		return "", errors.New("a block scalar (| or >) is not supported: write the value on the line")
	case '@', '`', '%', ',', ']', '}', '#':
		return "", errorf("a value cannot start with %q in YAML: quote it", c)
	case '?', ':', '-':
		if len(s) == 1 || s[1] == ' ' || s[1] == '\t' {
			return "", errorf("a value cannot start with %q and a space in YAML: quote it", c)
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t') {
			if isKey {
				break
			}
			return "", errorf("%q holds \": \" or ends with ':', which YAML reads as a mapping: nutcracker allows directives two levels deep; quote it", s)
		}
	}
	return s, nil
}

// yamlEscapes are YAML's one-character escapes.
var yamlEscapes = map[byte]string{'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", '\t': "\t", 'n': "\n", 'v': "\v",
	'f': "\f", 'r': "\r", 'e': "\x1b", ' ': " ", '"': `"`, '/': "/", '\\': `\`, 'N': "\u0085", '_': "\u00a0",
	'L': "\u2028", 'P': "\u2029"}

// unescapeDouble reads the escapes of a double-quoted YAML scalar.
func unescapeDouble(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) {
			return "", errors.New("a backslash at the end of a quoted value")
		}
		if r, ok := yamlEscapes[s[i]]; ok {
			b.WriteString(r)
			continue
		}
		width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[i]]
		if width == 0 || i+width >= len(s) {
			return "", errorf("an unknown escape \\%c in a quoted value", s[i])
		}
		v, err := strconv.ParseUint(s[i+1:i+1+width], 16, 32)
		if err != nil {
			return "", errorf("a bad escape \\%s in a quoted value", s[i:i+1+width])
		}
		if s[i] == 'x' {
			b.WriteByte(byte(v))
		} else {
			b.WriteRune(rune(v))
		}
		i += width
	}
	return b.String(), nil
}
