package cluster

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// tcpLayer is raft's stream layer over TCP.
type tcpLayer struct {
	net.Listener
	advertise net.Addr
}

func newTCPLayer(bind string, advertise net.Addr) (*tcpLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &tcpLayer{Listener: ln, advertise: advertise}, nil
}

// Addr returns the advertised address (what other servers dial).
func (t *tcpLayer) Addr() net.Addr { return t.advertise }

// Dial implements raft.StreamLayer.
func (t *tcpLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// gatedLayer refuses every incoming raft connection while closed, so that
// the node can neither vote nor take entries. A node whose data directory
// was wiped starts closed (see gossip.checkWiped): it lost its vote
// record, so letting it vote in a configuration that still lists it could
// elect two leaders in one term. Opening is one-way.
type gatedLayer struct {
	raft.StreamLayer
	open atomic.Bool
}

var errGated = errors.New("raft traffic refused: this server is not safely part of the cluster yet")

// Accept implements net.Listener, closing connections while the gate is shut.
func (g *gatedLayer) Accept() (net.Conn, error) {
	for {
		c, err := g.StreamLayer.Accept()
		if err != nil || g.open.Load() {
			return c, err
		}
		c.Close()
	}
}

// Dial implements raft.StreamLayer.
func (g *gatedLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if !g.open.Load() {
		return nil, errGated
	}
	return g.StreamLayer.Dial(addr, timeout)
}
