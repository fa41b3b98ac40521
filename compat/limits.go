package compat

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"github.com/shardkit/shard/internal/ring"
	"github.com/shardkit/shard/pool"
)

// maxPoints is the most points or slots a pool of this module holds (pool.Ring's and
// pool.Modula's limit).
const maxPoints = ring.MaxPoints

// limitErr refuses a configuration whose points or slots, counted up to a line, exceed what a
// pool holds; it wraps pool.ErrLimit besides ErrConfig.
func limitErr(system string, line int, what string, count int) error {
	return &ConfigError{System: system, Line: line, Msg: fmt.Sprintf("%d %s or more: a pool holds at most %d", count, what, maxPoints), Err: pool.ErrLimit}
}

// tooManyPoints is what a point generator returns for a membership of more points than a ring
// holds, without making them: a slice one longer than the limit, so that the change fails with
// pool.ErrLimit. Its memory is never written, so the operating system backs little of it.
func tooManyPoints() []pool.RingPoint { return make([]pool.RingPoint, maxPoints+1) }

// tooManySlots is tooManyPoints for a modulo table.
func tooManySlots() []int32 { return make([]int32, maxPoints+1) }

// maxExcerpt is the most bytes of a configuration's text an error quotes: an error names the
// line and quotes a short excerpt of what is wrong, never the whole line, which may be as long
// as the input.
const maxExcerpt = 80

// excerpt returns s, or its first maxExcerpt-3 bytes and "..." when it is longer.
func excerpt(s string) string {
	if len(s) <= maxExcerpt {
		return s
	}
	return s[:maxExcerpt-3] + "..."
}

// excerptArgs returns args with every string and byte slice longer than maxExcerpt cut to an
// excerpt, and the number a strconv error quotes likewise, so that an error made of them is
// short whatever the input.
func excerptArgs(args []any) []any {
	var out []any
	for i, a := range args {
		var cut any
		switch v := a.(type) {
		case string:
			if len(v) > maxExcerpt {
				cut = excerpt(v)
			}
		case []byte:
			if len(v) > maxExcerpt {
				cut = excerpt(string(v[:maxExcerpt]) + "...")
			}
		case *strconv.NumError:
			if len(v.Num) > maxExcerpt {
				cut = &strconv.NumError{Func: v.Func, Num: excerpt(v.Num), Err: v.Err}
			}
		}
		if cut == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(args)
		}
		out[i] = cut
	}
	if out == nil {
		return args
	}
	return out
}

// errorf is fmt.Errorf with excerpts of long arguments.
func errorf(format string, args ...any) error {
	return fmt.Errorf(format, excerptArgs(args)...)
}

// sprintf is fmt.Sprintf with excerpts of long arguments. Its result is a msg, which
// excerptArgs leaves whole when it is an argument of another message.
func sprintf(format string, args ...any) msg {
	return msg(fmt.Sprintf(format, excerptArgs(args)...))
}

// msg is a message made of excerpts already: short, whatever the input.
type msg string

// lineCounter gives the 1-based line of byte offsets of a text. Each call counts the line
// breaks between the offset asked and the one before, so that a parser that asks as it goes
// takes time in proportion to the text, not to its square.
type lineCounter struct {
	text    []byte
	off     int // the offset of the last call
	line    int // its line, less one
	scanned int // the bytes counted over, for the tests
}

// at returns the line of offset off, clamped to the text.
func (c *lineCounter) at(off int64) int {
	o := int(min(max(off, 0), int64(len(c.text))))
	c.scanned += max(o-c.off, c.off-o)
	if o >= c.off {
		c.line += bytes.Count(c.text[c.off:o], newline)
	} else {
		c.line -= bytes.Count(c.text[o:c.off], newline)
	}
	c.off = o
	return c.line + 1
}

var newline = []byte("\n")
