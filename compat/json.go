package compat

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
)

// jsonValue is a JSON value with the line it starts on, so that the JSON presets can name the
// line of what they refuse. Objects keep their members in order, duplicates included.
type jsonValue struct {
	line int
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, 'z' null
	str  string
	num  json.Number
	obj  []jsonMember
	arr  []*jsonValue
}

type jsonMember struct {
	key  string
	line int
	val  *jsonValue
}

// parseJSON reads one JSON value from data, nothing after it.
func parseJSON(system string, data []byte) (*jsonValue, error) {
	return parseJSONLines(system, data, &lineCounter{text: data})
}

// parseJSONLines is parseJSON counting lines with lines, a counter of data.
func parseJSONLines(system string, data []byte, lines *lineCounter) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	lineAt := lines.at
	fail := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return configErr(system, lineAt(se.Offset), "%v", err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return configErr(system, lineAt(int64(len(data))), "unexpected end of JSON input")
		}
		return configErr(system, lineAt(dec.InputOffset()), "%v", err)
	}
	var value func() (*jsonValue, error)
	value = func() (*jsonValue, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail(err)
		}
		v := &jsonValue{line: lineAt(dec.InputOffset() - 1)}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' {
				v.kind = 'o'
				for dec.More() {
					k, err := dec.Token()
					if err != nil {
						return nil, fail(err)
					}
					m := jsonMember{key: k.(string), line: lineAt(dec.InputOffset() - 1)}
					if m.val, err = value(); err != nil {
						return nil, err
					}
					v.obj = append(v.obj, m)
				}
			} else {
				v.kind = 'a'
				for dec.More() {
					e, err := value()
					if err != nil {
						return nil, err
					}
					v.arr = append(v.arr, e)
				}
			}
			if _, err := dec.Token(); err != nil { // the closing delimiter
				return nil, fail(err)
			}
		case string:
			v.kind, v.str = 's', t
		case json.Number:
			v.kind, v.num = 'n', t
		case bool:
			v.kind = 'b'
		case nil:
			v.kind = 'z'
		}
		return v, nil
	}
	v, err := value()
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, configErr(system, lineAt(dec.InputOffset()), "more than one JSON value")
	}
	return v, nil
}

// kindName names a JSON kind in errors.
func (v *jsonValue) kindName() string {
	return map[byte]string{'o': "an object", 'a': "an array", 's': "a string", 'n': "a number", 'b': "a boolean", 'z': "null"}[v.kind]
}

// jsonMembers returns the members of object o by name, refusing a name given twice and one
// not in known.
func jsonMembers(system string, o *jsonValue, known ...string) (map[string]*jsonValue, error) {
	out := make(map[string]*jsonValue, len(o.obj))
	for _, m := range o.obj {
		if !slices.Contains(known, m.key) {
			return nil, configErr(system, m.line, "unknown member %q (known here: %s)", m.key, strings.Join(known, ", "))
		}
		if _, dup := out[m.key]; dup {
			return nil, configErr(system, m.line, "%q is given twice", m.key)
		}
		out[m.key] = m.val
	}
	return out, nil
}
