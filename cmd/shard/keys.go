package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shardkit/shard/measure"
)

// sample is where plan and compare take their keys: random ones (-keys) or a file (-keyfile).
type sample struct {
	count, keylen int
	file          string
	lim           keyLimits // of -keys and of the file
}

func (s *sample) define(fs *flag.FlagSet, count int, lim keyLimits) {
	s.lim = lim
	intFlag(fs, &s.count, "keys", count, lim.keys, "`N` random keys to place (ignored with -keyfile)")
	intFlag(fs, &s.keylen, "keylen", 16, maxKeyLen, "`length` of the random keys in bytes")
	fs.StringVar(&s.file, "keyfile", "", fmt.Sprintf("read the keys from this `file`, one per line, instead (- for stdin; at most %d keys,\n%d bytes, and %d bytes a key)", lim.keys, lim.bytes, maxKeyLine))
}

func (s *sample) check() error {
	switch {
	case s.file == "" && s.count < 1:
		return badUsage("-keys %d: want at least 1", s.count)
	case s.keylen < 1:
		return badUsage("-keylen %d: want at least 1", s.keylen)
	case s.file == "" && int64(s.count)*int64(s.keylen) > int64(s.lim.bytes): // int64: no wrap on 32-bit
		return badUsage("-keys %d × -keylen %d: want at most %d bytes of keys", s.count, s.keylen, s.lim.bytes)
	}
	return nil
}

// open returns the keys, a phrase that says where they come from, and a function that
// releases the file; the sequence ends with an error if the file cannot be read to its end
// or is over the limits.
func (s *sample) open(e *env) (iter.Seq2[string, error], string, func(), error) {
	if s.file == "" {
		keys := func(yield func(string, error) bool) {
			for k := range measure.RandomKeys(1, s.count, s.keylen) {
				if !yield(k, nil) {
					return
				}
			}
		}
		return keys, fmt.Sprintf("%d random %d-byte keys", s.count, s.keylen), func() {}, nil
	}
	if s.file == "-" {
		return scanKeys(e.stdin, "stdin", s.lim, e.warn), "keys from stdin", func() {}, nil
	}
	f, err := os.Open(s.file)
	if err != nil {
		return nil, "", nil, fmt.Errorf("key file: %w", err)
	}
	return scanKeys(f, s.file, s.lim, e.warn), "keys from " + s.file, func() { f.Close() }, nil
}

// showKey returns key as typed, or quoted as in Go when it is empty, begins with a quote or
// holds a tab, a control character or bytes that are not UTF-8, so that every output line
// reads back to its key.
func showKey(key string) string {
	if key == "" || key[0] == '"' || !utf8.ValidString(key) ||
		strings.IndexFunc(key, func(r rune) bool { return r == '\t' || !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		return strconv.Quote(key)
	}
	return key
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonLine writes v as JSON on one line.
func jsonLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// progress writes one self-overwriting status line to stderr while a long job runs, only
// when stderr is a terminal, so that redirected output stays clean.
type progress struct {
	w     io.Writer // nil: say nothing
	start time.Time
	last  time.Time
	width int
}

func newProgress(e *env) *progress {
	p := &progress{start: time.Now()}
	if e.stderrTerminal {
		p.w = e.stderr
	}
	return p
}

// say shows msg with the time since the start.
func (p *progress) say(msg string) {
	if p.w == nil {
		return
	}
	p.last = time.Now()
	line := fmt.Sprintf("[%4.1fs] %s", p.last.Sub(p.start).Seconds(), msg)
	fmt.Fprintf(p.w, "\r%-*s", p.width, line)
	p.width = max(p.width, len(line))
}

// count shows how many keys are done, at most ten times a second; it is cheap to call for
// every key.
func (p *progress) count(what string, done int) {
	if p.w == nil || done&0x3fff != 0 || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.say(fmt.Sprintf("%s: %d keys", what, done))
}

// done clears the status line.
func (p *progress) done() {
	if p.w != nil && p.width > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.width, "")
		p.width = 0
	}
}
