package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/coord/embedded"
)

// cutProxy forwards TCP connections to target; while cut, it closes the open ones and every
// new one at once, so an etcd client behind it gets no keepalive answered.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if cut {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestTrustedRecordWaits: a child whose etcd session is not trusted when it starts (no
// keepalive answered within the TTL, as on a loaded machine) waits for the client's next
// session instead of exiting, which failed a whole -procs run; other errors still end it at
// once.
func TestTrustedRecordWaits(t *testing.T) {
	ctx := context.Background()
	eps, stop, err := embedded.Start(filepath.Join(t.TempDir(), "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	u, err := url.Parse(eps[0])
	if err != nil {
		t.Fatal(err)
	}
	px := startCutProxy(t, u.Host)
	cl, err := coord.Open(ctx, []string{"http://" + px.ln.Addr().String()}, "/t/", coord.Options{TTL: time.Second, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rev, err := cl.Update(ctx, 0, coord.Placement{Layout: userLayout(5)})
	if err == nil {
		_, err = cl.Wait(ctx, rev)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := trustedRecord(ctx, cl, 0); err != nil {
		t.Fatalf("connected: %v", err)
	}
	px.setCut(true)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, _, err := cl.Current(); errors.Is(err, coord.ErrLeaseExpired) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session is still trusted 20 s after the cut")
		}
	}
	if err := trustedRecord(ctx, cl, 0); !errors.Is(err, coord.ErrLeaseExpired) {
		t.Fatalf("cut, no wait: %v, want ErrLeaseExpired", err)
	}
	go func() { time.Sleep(time.Second); px.setCut(false) }()
	start := time.Now()
	if err := trustedRecord(ctx, cl, 30*time.Second); err != nil {
		t.Fatalf("cut for 1 s, then healed: %v", err)
	}
	t.Logf("trusted again after %v", time.Since(start).Round(time.Millisecond))

	other, err := coord.Open(ctx, eps, "/no-record/", coord.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	start = time.Now()
	if err := trustedRecord(ctx, other, 30*time.Second); !errors.Is(err, coord.ErrNoRecord) || time.Since(start) > 5*time.Second {
		t.Fatalf("no record: %v after %v, want ErrNoRecord at once", err, time.Since(start))
	}
}
