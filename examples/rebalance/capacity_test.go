package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
)

// The grow phase prints the rebalancing post's [004] capacity plan; user_id % n doubling is
// this run's resize (5 -> 10), so its plan moves what the run's own plan says, and the mover
// copies at least that (writers add messages while it runs).
func TestCapacityOutput(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), small(t.TempDir()), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, re := range []string{
		`capacity \(the rebalancing post \[004\]\): 90 messages, 24 a shard \(the fullest at 75%\)`,
		`user_id % n, n\+1 +in 0 days to  8 shards: +78 of 90 messages move`,
		`user_id % n, doubling in 0 days to 10 shards: +45 of 90 messages move`,
		`this run grows user_id % n to 10 shards \(-grow\): 45 of 90 messages move`,
	} {
		if !regexp.MustCompile(re).Match(out.Bytes()) {
			t.Errorf("output lacks %q:\n%s", re, out.String())
		}
	}
	m := regexp.MustCompile(`copy rate: the mover copied (\d+) messages \(45 planned`).FindSubmatch(out.Bytes())
	if m == nil {
		t.Fatalf("output lacks the copy rate:\n%s", out.String())
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 45 {
		t.Errorf("the mover copied %d messages, fewer than the 45 planned", n)
	}
}
