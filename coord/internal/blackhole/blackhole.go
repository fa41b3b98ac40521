// Package blackhole is a TCP proxy on 127.0.0.1 that can cut the network between a client
// and a server the way a real partition does: while cut, the bytes sent either way are read
// and dropped, so both ends see silence (no reset, no error) until their own timeouts fire.
// Healing closes the connections that lost data, so that the client dials again through
// the proxy. The tests of package coord use it to partition an etcd client from its server.
package blackhole

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards connections on Addr to a target address, or drops their bytes while cut.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	closed bool
}

// Start listens on a free port of 127.0.0.1 and forwards every connection to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut starts dropping every byte, on the open connections and on new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Heal stops dropping bytes: the connections that were open while cut are closed (their
// streams lost data), new ones are forwarded again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Heal()
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

func (p *Proxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
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
	if p.isCut() {
		io.Copy(io.Discard, in) // a connection made during the cut never reaches the server
		return
	}
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

// pipe copies from src to dst, dropping what it reads while the proxy is cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.isCut() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // serve closes both connections
		}
	}
}
