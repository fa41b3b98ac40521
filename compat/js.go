package compat

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// This file reads JSON as JavaScript's JSON.parse does, keeping what a JavaScript library
// sees: object keys in JavaScript's order (integer-like keys first, ascending, then the
// others as inserted; a repeated key keeps its first place and its last value), numbers as
// float64, and JavaScript's conversions of values to numbers and booleans.

// jsValue is a parsed JSON value.
type jsValue struct {
	kind  jsKind
	num   float64
	str   string
	b     bool
	items []jsValue  // array
	keys  []string   // object keys, in JavaScript's order
	vals  []*jsValue // object values, by key
	line  int        // where the value starts
}

type jsKind uint8

const (
	jsNull jsKind = iota
	jsBool
	jsNumber
	jsString
	jsArray
	jsObject
)

// get returns the value of an object's key, or nil.
func (v *jsValue) get(key string) *jsValue {
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

// readJSON parses text as one JSON value.
func readJSON(text []byte) (*jsValue, error) {
	return readJSONLines(text, &lineCounter{text: text})
}

// readJSONLines is readJSON counting lines with lines, a counter of text.
func readJSONLines(text []byte, lines *lineCounter) (*jsValue, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	lineAt := func(offset int64) int {
		for offset < int64(len(text)) && strings.IndexByte(" \t\r\n", text[offset]) >= 0 {
			offset++
		}
		return lines.at(offset)
	}
	var read func() (*jsValue, error)
	read = func() (*jsValue, error) {
		line := lineAt(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(lines, dec, err)
		}
		v := &jsValue{line: line}
		switch t := tok.(type) {
		case nil:
		case bool:
			v.kind, v.b = jsBool, t
		case json.Number:
			v.kind = jsNumber
			if v.num, err = strconv.ParseFloat(string(t), 64); err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, &jsError{line, string(sprintf("number %s: %v", t, err))}
			}
		case string:
			v.kind, v.str = jsString, t
		case json.Delim:
			if t == '[' {
				v.kind = jsArray
				for dec.More() {
					item, err := read()
					if err != nil {
						return nil, err
					}
					v.items = append(v.items, *item)
				}
			} else {
				v.kind = jsObject
				index := map[string]int{} // key -> place in v.keys
				for dec.More() {
					keyTok, err := dec.Token()
					if err != nil {
						return nil, jsonError(lines, dec, err)
					}
					key := keyTok.(string)
					val, err := read()
					if err != nil {
						return nil, err
					}
					if i, ok := index[key]; ok {
						*v.vals[i] = *val // a repeated key: its last value, at its first place
						continue
					}
					index[key] = len(v.keys)
					v.keys, v.vals = append(v.keys, key), append(v.vals, val)
				}
				jsOrder(v)
			}
			if _, err := dec.Token(); err != nil { // the closing delimiter
				return nil, jsonError(lines, dec, err)
			}
		}
		return v, nil
	}
	v, err := read()
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &jsError{lineAt(dec.InputOffset()), "text after the JSON value"}
	}
	return v, nil
}

func jsonError(lines *lineCounter, dec *json.Decoder, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	offset := dec.InputOffset()
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		offset = syntax.Offset
	}
	return &jsError{lines.at(offset), excerpt(err.Error())}
}

// jsError is JSON that does not parse, at a line.
type jsError struct {
	line int
	msg  string
}

func (e *jsError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// jsOrder puts an object's keys in JavaScript's order: array indices (canonical decimal
// integers below 2^32 - 1) ascending first, then the other keys in insertion order.
func jsOrder(v *jsValue) {
	type kv struct {
		key   string
		val   *jsValue
		index uint64
	}
	var indices, others []kv
	for i, k := range v.keys {
		if n, err := strconv.ParseUint(k, 10, 32); err == nil && n < math.MaxUint32 && strconv.FormatUint(n, 10) == k {
			indices = append(indices, kv{k, v.vals[i], n})
		} else {
			others = append(others, kv{k, v.vals[i], 0})
		}
	}
	slices.SortStableFunc(indices, func(a, b kv) int { return cmp.Compare(a.index, b.index) })
	v.keys, v.vals = v.keys[:0], v.vals[:0]
	for _, e := range append(indices, others...) {
		v.keys, v.vals = append(v.keys, e.key), append(v.vals, e.val)
	}
}

// jsNumberOf is JavaScript's Number(v) (the unary +) of a JSON value.
func jsNumberOf(v *jsValue) float64 {
	if v == nil { // undefined
		return math.NaN()
	}
	switch v.kind {
	case jsNull:
		return 0
	case jsBool:
		if v.b {
			return 1
		}
		return 0
	case jsNumber:
		return v.num
	case jsString:
		return jsStringToNumber(v.str)
	case jsArray: // via Array.prototype.toString: the elements joined with ","
		switch len(v.items) {
		case 0:
			return 0
		case 1:
			item := v.items[0]
			switch item.kind {
			case jsNull:
				return 0
			case jsNumber:
				return item.num + 0 // -0 prints as "0"
			case jsString, jsArray:
				return jsNumberOf(&item)
			}
		}
	}
	return math.NaN() // "[object Object]", "true", "1,2", ...
}

// jsTruthy is JavaScript's Boolean(v).
func jsTruthy(v *jsValue) bool {
	if v == nil {
		return false
	}
	switch v.kind {
	case jsNull:
		return false
	case jsBool:
		return v.b
	case jsNumber:
		return v.num != 0 && !math.IsNaN(v.num)
	case jsString:
		return v.str != ""
	}
	return true
}

// jsStringToNumber is ECMAScript's StringToNumber: white space trimmed, "" is 0, decimal
// literals with an optional sign, Infinity, and 0x, 0o, 0b integers (unsigned); anything
// else is NaN.
func jsStringToNumber(s string) float64 {
	s = strings.TrimFunc(s, func(r rune) bool {
		return r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == ' ' ||
			r == '\u00a0' || r == '\u2028' || r == '\u2029' || r == '\ufeff' || unicode.Is(unicode.Zs, r)
	})
	if s == "" {
		return 0
	}
	if len(s) > 2 && s[0] == '0' {
		base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[s[1]]
		if base != 0 {
			n, ok := new(big.Int).SetString(s[2:], base)
			if !ok || strings.ContainsAny(s[2:], "_+-") {
				return math.NaN()
			}
			f, _ := new(big.Float).SetInt(n).Float64()
			return f
		}
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return math.NaN()
	}
	if body == "Infinity" {
		if s[0] == '-' {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	if !jsDecimal(body) {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return math.NaN()
	}
	return f
}

// jsDecimal reports whether s is an unsigned StrDecimalLiteral without Infinity:
// digits [. digits] or . digits, then an optional exponent.
func jsDecimal(s string) bool {
	i, digits := 0, 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}
