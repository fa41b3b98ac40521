package main

import (
	"strings"
	"testing"
)

// The command runs on the committed vectors and finds the peers it can run not exact.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out, "../../../testdata/compat", 1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| serialx/hashring | libmemcached/weighted-md5-3.txt", "compat twemproxy ketama-md5-10.yml", "pool.Ring, default options"} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
