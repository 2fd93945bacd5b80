package testcluster

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// FaultLayer is a raft.StreamLayer over TCP that can cut all of a node's
// raft connections, both the ones it dialed and the ones it accepted.
type FaultLayer struct {
	ln net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

var errCut = errors.New("testcluster: link cut")

func listenFaulty(addr string) (*FaultLayer, error) {
	ln, err := listenRetry(addr)
	if err != nil {
		return nil, err
	}
	return &FaultLayer{ln: ln, conns: map[net.Conn]struct{}{}}, nil
}

// Accept implements net.Listener; connections arriving while cut are closed.
func (f *FaultLayer) Accept() (net.Conn, error) {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return nil, err
		}
		if f.track(c) {
			return c, nil
		}
		c.Close()
	}
}

// Close implements net.Listener.
func (f *FaultLayer) Close() error {
	f.Cut()
	return f.ln.Close()
}

// Addr implements net.Listener.
func (f *FaultLayer) Addr() net.Addr { return f.ln.Addr() }

// Dial implements raft.StreamLayer.
func (f *FaultLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	f.mu.Lock()
	cut := f.cut
	f.mu.Unlock()
	if cut {
		return nil, errCut
	}
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if !f.track(c) {
		c.Close()
		return nil, errCut
	}
	return c, nil
}

func (f *FaultLayer) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

// Cut closes every connection and refuses new ones until Heal.
func (f *FaultLayer) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = true
	for c := range f.conns {
		c.Close()
	}
	f.conns = map[net.Conn]struct{}{}
}

// Heal lets connections through again.
func (f *FaultLayer) Heal() {
	f.mu.Lock()
	f.cut = false
	f.mu.Unlock()
}
