package coord_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/shardkit/shard/coord"
)

// closedPort returns an address on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestOpenRefuses(t *testing.T) {
	eps := servers[0].endpoints
	for _, c := range []struct {
		name      string
		endpoints []string
		prefix    string
		opts      coord.Options
		want      error
		says      string
	}{
		{"no endpoints", nil, "/p/", coord.Options{}, coord.ErrInput, "no etcd endpoints"},
		{"empty endpoint", []string{""}, "/p/", coord.Options{}, coord.ErrInput, "empty etcd endpoint"},
		{"empty prefix", eps, "", coord.Options{}, coord.ErrInput, "empty key prefix"},
		{"negative TTL", eps, "/p/", coord.Options{TTL: -time.Second}, coord.ErrInput, "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := coord.Open(context.Background(), c.endpoints, c.prefix, c.opts)
			if err == nil {
				cl.Close()
			}
			if !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "coord: ") || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Open: %v, want an error wrapping %v that says %q", err, c.want, c.says)
			}
		})
	}
}

// TestOpenUnreachable: nothing listens at the endpoint, or something that never answers
// (a partition from the start): Open fails within its dial timeout, naming the endpoint.
func TestOpenUnreachable(t *testing.T) {
	silent := proxy(t, servers[0].endpoints)
	silent.Cut()
	for name, ep := range map[string]string{
		"closed port": "http://" + closedPort(t),
		"silent":      silent.endpoints()[0],
	} {
		t.Run(name, func(t *testing.T) {
			c, err := coord.Open(context.Background(), []string{ep}, "/p/", coord.Options{DialTimeout: time.Second})
			if err == nil {
				c.Close()
			}
			if !errors.Is(err, coord.ErrUnavailable) || !strings.Contains(err.Error(), ep) {
				t.Fatalf("Open of %s: %v, want ErrUnavailable naming the endpoint", ep, err)
			}
			t.Log(err)
		})
	}
}

func TestClosedClient(t *testing.T) {
	c := open(t, servers[0].endpoints, prefix(t), coord.Options{})
	v := c.View()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Current(); !errors.Is(err, coord.ErrClosed) {
		t.Errorf("Current after Close: %v, want ErrClosed", err)
	}
	if _, err := c.TryMover(context.Background()); !errors.Is(err, coord.ErrClosed) {
		t.Errorf("TryMover after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Wait(context.Background(), 1<<40); !errors.Is(err, coord.ErrClosed) {
		t.Errorf("Wait after Close: %v, want ErrClosed", err)
	}
}
