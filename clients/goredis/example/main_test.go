package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/shardkit/shard/clients/goredis/internal/redisproc"
)

// The example end to end, for every pool: real redis-server processes, the Ring writing,
// every key checked on its server. Skipped where redis-server is not installed.
func TestRun(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip(redisproc.ErrNoRedis.Error())
	}
	for _, kind := range []string{"ring", "rendezvous", "goredis"} {
		var out bytes.Buffer
		if err := run(context.Background(), &out, 3, 300, kind); err != nil {
			t.Fatalf("%s: %v\n%s", kind, err, out.String())
		}
		if !strings.Contains(out.String(), "verified: each of the 300 keys") {
			t.Fatalf("%s: no verification in\n%s", kind, out.String())
		}
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		servers, keys int
		kind          string
	}{{0, 10, "ring"}, {51, 10, "ring"}, {3, 0, "ring"}, {3, 10, "maglev"}} {
		err := run(context.Background(), &bytes.Buffer{}, c.servers, c.keys, c.kind)
		if err == nil || errors.Is(err, redisproc.ErrNoRedis) {
			t.Errorf("run(%d, %d, %q) = %v, want an error", c.servers, c.keys, c.kind, err)
		}
	}
}
