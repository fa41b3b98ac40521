// Package blackhole is a TCP proxy on 127.0.0.1 that can cut the network between a client
// and a server the way a real partition does: while cut, nothing crosses in either
// direction and neither end sees an error (no reset, no close) until its own timeouts fire;
// bytes already sent wait, as TCP keeps retransmitting them, and flow again when the cut
// heals. The tests of package coord use it to partition an etcd client from its server.
package blackhole

import (
	"net"
	"sync"
)

// Proxy forwards connections on Addr to a target address, or holds them while cut.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	healed chan struct{} // closed while the network is whole
	conns  map[net.Conn]struct{}
	closed bool
}

// Start listens on a free port of 127.0.0.1 and forwards every connection to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	healed := make(chan struct{})
	close(healed)
	p := &Proxy{ln: ln, target: target, healed: healed, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops every byte from crossing, on the open connections and on new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
		p.healed = make(chan struct{})
	default: // already cut
	}
}

// Heal lets the held bytes and new ones cross again: the partition is over and the open
// connections go on.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
	default:
		close(p.healed)
	}
}

// Reset closes every open connection and heals: both ends lose their connections, as when
// a server restarts, and the client must dial again.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	p.Heal()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Reset()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// wait returns once the network is whole.
func (p *Proxy) wait() {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	<-healed
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			in.Close()
			return
		}
		go p.serve(in)
	}
}

func (p *Proxy) serve(in net.Conn) {
	defer in.Close()
	p.wait() // a connection made during the cut reaches the server only once it heals
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer out.Close()
	if !p.track(out) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(out, in); done <- struct{}{} }()
	go func() { p.pipe(in, out); done <- struct{}{} }()
	<-done // one side ended: close both (deferred), which ends the other
}

// pipe copies from src to dst, holding what it read while the proxy is cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // serve closes both connections
		}
	}
}
