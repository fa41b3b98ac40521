package blackhole

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer echoes every line back.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func TestCutHoldsHealDelivers(t *testing.T) {
	p, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(line string) (string, error) {
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			return "", err
		}
		return r.ReadString('\n')
	}
	if got, err := roundTrip("one"); err != nil || got != "one\n" {
		t.Fatalf("before the cut: %q, %v", got, err)
	}

	p.Cut()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if got, err := roundTrip("two"); err == nil {
		t.Fatalf("during the cut the echo came back: %q", got)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("during the cut: %v, want silence (a timeout), not an error", err)
	}
	p.Heal()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "two\n" {
		t.Fatalf("after healing, the held line: %q, %v; want two", got, err)
	}

	p.Reset()
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the connection survived Reset")
	}
}
