package main_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections from a listener on 127.0.0.1 to one
// address, and can be cut (every connection closed, new ones refused) and
// joined again: a server advertising its raft address through one stops
// hearing its leader while its API and gossip stay up.
type cutProxy struct {
	Addr string
	to   string
	ln   net.Listener
	mu   sync.Mutex
	cut  bool
	hang bool
	open map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{Addr: ln.Addr().String(), to: to, ln: ln, open: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.Cut(true) })
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		if p.hang {
			// Held open, never answered, until Cut or Hang(false).
			p.open[c] = struct{}{}
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		go p.pipe(c)
	}
}

func (p *cutProxy) pipe(c net.Conn) {
	u, err := net.Dial("tcp", p.to)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.open[c], p.open[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.open, c)
	delete(p.open, u)
	p.mu.Unlock()
}

// Hang closes every connection and makes new ones hang (accepted, never
// answered), or, with false, closes the ones held and lets new ones
// through.
func (p *cutProxy) Hang(hang bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang = hang
	for c := range p.open {
		c.Close()
		delete(p.open, c)
	}
}

// Cut closes every connection and refuses new ones (cut), or lets them
// through again.
func (p *cutProxy) Cut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.open {
			c.Close()
		}
	}
}
