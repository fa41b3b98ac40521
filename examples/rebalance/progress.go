package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// progress draws "label [####....] done/total unit" on one line of a terminal, redrawn at
// most every 50 ms, so that loading, moving and verifying 50k users are not 30 s of silence.
// main gives it stderr only when stderr is a terminal: CI logs get the summary lines, not a
// hundred redraws. A nil *progress draws nothing. Calls must not overlap.
type progress struct {
	w           io.Writer
	label, unit string
	last        time.Time
}

// newProgress returns a progress drawn on w, or nil if w is nil.
func newProgress(w io.Writer, label, unit string) *progress {
	if w == nil {
		return nil
	}
	return &progress{w: w, label: label, unit: unit}
}

// show draws done of total, unless it drew less than 50 ms ago.
func (p *progress) show(done, total int) {
	if p == nil || time.Since(p.last) < 50*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.draw(done, total)
}

// end draws done of total and ends the line.
func (p *progress) end(done, total int) {
	if p == nil {
		return
	}
	p.draw(done, total)
	fmt.Fprintln(p.w)
}

func (p *progress) draw(done, total int) {
	const width = 40
	full := width * min(done, total) / max(total, 1)
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d %s", p.label,
		strings.Repeat("#", full), strings.Repeat(".", width-full), done, total, p.unit)
}

// moved is a rebalance progress callback that draws on p, or nil if p is nil.
func (p *progress) moved() func(rebalance.Progress) {
	if p == nil {
		return nil
	}
	return func(r rebalance.Progress) {
		if r.Done == r.Total {
			p.end(r.Done, r.Total)
		} else {
			p.show(r.Done, r.Total)
		}
	}
}
