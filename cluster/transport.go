package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
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

// diskLayer refuses to dial while the server's disk is full (see disk.go),
// so that it neither campaigns nor leads. (Each group's raft gate, which
// refuses its traffic both ways until the server is vouched for in the
// group, is in the multiplexer above: see muxGroup.open and vouch.go.)
type diskLayer struct {
	raft.StreamLayer
	disk *diskState
}

// errGated is what a group's Dial returns while its raft gate is shut.
var errGated = errors.New("raft traffic refused: this server is not safely part of the group yet")

// Dial implements raft.StreamLayer.
func (g *diskLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if g.disk.Full() {
		return nil, errDiskFull
	}
	c, err := g.StreamLayer.Dial(addr, timeout)
	if err != nil {
		return c, err
	}
	return &outConn{Conn: c, disk: g.disk}, nil
}

// outConn is a raft connection this server dialled. raft keeps such
// connections in a pool and reuses them for later calls (votes, entries),
// so refusing to dial is not enough to stop a server from campaigning or
// leading: every write on it fails (and closes it) while the disk is full.
type outConn struct {
	net.Conn
	disk *diskState
}

func (c *outConn) Write(p []byte) (int, error) {
	if c.disk.Full() {
		c.Conn.Close()
		return 0, errDiskFull
	}
	return c.Conn.Write(p)
}

// tlsLayer runs raft over mutual TLS: both sides present a certificate
// signed by the configured CA, or the connection is refused.
type tlsLayer struct {
	raft.StreamLayer
	server, client *tls.Config
}

// Accept implements net.Listener; the handshake runs on first use.
func (t *tlsLayer) Accept() (net.Conn, error) {
	c, err := t.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(c, t.server), nil
}

// Dial implements raft.StreamLayer.
func (t *tlsLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := t.StreamLayer.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	cfg := t.client.Clone()
	if host, _, err := net.SplitHostPort(string(addr)); err == nil {
		cfg.ServerName = host
	}
	tc := tls.Client(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// RaftTLS holds the files for mutual TLS between servers.
type RaftTLS struct {
	CertFile, KeyFile, CAFile string
}

func (r RaftTLS) enabled() bool { return r.CertFile != "" || r.KeyFile != "" || r.CAFile != "" }

func (r RaftTLS) configs() (server, client *tls.Config, err error) {
	if r.CertFile == "" || r.KeyFile == "" || r.CAFile == "" {
		return nil, nil, fmt.Errorf("%w: raft TLS needs a certificate, a key and a CA", ErrInvalidConfig)
	}
	cert, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: raft TLS key pair: %v", ErrInvalidConfig, err)
	}
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: raft TLS CA: %v", ErrInvalidConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("%w: raft TLS CA %s holds no PEM certificate", ErrInvalidConfig, r.CAFile)
	}
	server = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	client = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool}
	return server, client, nil
}

// noPipeline is raft's network transport with pipelined replication turned
// off. hashicorp/raft's pipeline can deadlock when a follower's answer ends
// the pipeline while a send waits for room (the replication goroutine then
// never returns: the follower gets heartbeats but no entries, and
// Raft.Shutdown hangs); we hit it in the fault tests, and others did too
// (hashicorp/raft#612, grafana/pyroscope#5518). seqd writes few entries (one
// raise per step values per section, a lease renewal every lease/3), so
// replicating one batch at a time costs it nothing that matters.
type noPipeline struct{ *raft.NetworkTransport }

// AppendEntriesPipeline makes raft fall back to synchronous replication.
func (noPipeline) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}
