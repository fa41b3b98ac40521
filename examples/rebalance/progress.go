package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// progressBar returns a rebalance progress callback that draws a bar on stderr, or nil when
// stderr is not a terminal (CI logs want the summary line, not a hundred redraws).
func progressBar(label string) func(rebalance.Progress) {
	if fi, err := os.Stderr.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	var last time.Time
	return func(p rebalance.Progress) {
		if p.Done < p.Total && time.Since(last) < 50*time.Millisecond {
			return
		}
		last = time.Now()
		const width = 40
		full := width * p.Done / max(p.Total, 1)
		fmt.Fprintf(os.Stderr, "\r%s [%s%s] %d/%d users", label,
			strings.Repeat("#", full), strings.Repeat(".", width-full), p.Done, p.Total)
		if p.Done == p.Total {
			fmt.Fprintln(os.Stderr)
		}
	}
}
