package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The mux wire format is a compatibility contract between servers:
//
//   - Group 0's connections carry no header: the first byte is a raft RPC
//     type of hashicorp/raft's NetworkTransport (0..4 today, always below
//     muxGroup0Limit). A server of the single-group build speaks exactly
//     this, so it and group 0 interoperate during a rolling upgrade.
//   - A connection of group g >= 1 starts with a header the dialler writes
//     before anything else: the byte muxMagic, the byte muxVersion, then g
//     as a uvarint (encoding/binary). Raft's own traffic follows.
//
// The acceptor reads the first byte. Below muxGroup0Limit, the connection
// belongs to group 0 and the byte is handed back to raft; muxMagic starts
// a header; anything else, a header of another version, a group this
// server does not run, or no header within handshakeTimeout closes the
// connection. A header naming group 0 is accepted too.
const (
	muxMagic       = 0xA5
	muxVersion     = 1
	muxGroup0Limit = 0x10
)

// handshakeTimeout bounds how long an incoming connection may take to
// name its group (with TLS, this includes the TLS handshake). It is a
// variable so that tests can shorten it; newMux copies it.
var handshakeTimeout = 5 * time.Second

// errGroupCut is what Dial returns while a test has cut the group.
var errGroupCut = errors.New("raft group cut by test hook")

// muxLayer multiplexes the raft traffic of every group on one stream layer.
// A single goroutine accepts connections from the base layer; each is then
// read for its header by a goroutine of its own and handed to its group.
type muxLayer struct {
	base      raft.StreamLayer
	log       *slog.Logger
	handshake time.Duration
	groups    []*muxGroup
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	closeErr  error
	loopDone  chan struct{} // closed when the accept loop has returned
}

// muxGroup is the stream layer of one group.
type muxGroup struct {
	m      *muxLayer
	id     int
	accept chan net.Conn // unbuffered: the sender gives up when the mux closes

	// open is the group's raft gate (see admission.go): while it is false,
	// Dial fails with errGated and accepted connections are closed, so
	// that this server neither votes nor takes entries in the group. It
	// starts false; only a fence shuts it again (Shut).
	open atomic.Bool

	mu    sync.Mutex
	cut   bool
	conns map[*muxConn]struct{} // open connections, dialled and accepted
}

// newMux starts multiplexing groups raft groups on base, which the mux
// owns from now on: only its Close closes base.
func newMux(base raft.StreamLayer, groups int, log *slog.Logger) *muxLayer {
	m := &muxLayer{base: base, log: log, handshake: handshakeTimeout,
		done: make(chan struct{}), loopDone: make(chan struct{})}
	for g := range groups {
		m.groups = append(m.groups, &muxGroup{m: m, id: g, accept: make(chan net.Conn),
			conns: make(map[*muxConn]struct{})})
	}
	go m.acceptLoop()
	return m
}

// Group returns the stream layer of group g (0 <= g < groups); every call
// returns the same object.
func (m *muxLayer) Group(g int) raft.StreamLayer { return m.groups[g] }

// Close closes the base layer and every group layer: Accept on a group
// layer then fails with an error wrapping net.ErrClosed, and so does Dial.
// Connections already handed to raft stay open, as with any net.Listener.
func (m *muxLayer) Close() error {
	m.shutdown()
	<-m.loopDone
	return m.closeErr
}

func (m *muxLayer) shutdown() {
	m.closeOnce.Do(func() {
		close(m.done)
		m.closeErr = m.base.Close()
	})
}

// Open opens group g's raft gate (see muxGroup.open); it reports whether
// it was already open.
func (m *muxLayer) Open(g int) (was bool) { return m.groups[g].open.Swap(true) }

// Shut closes group g's raft gate again and every connection of the group
// open at that moment (a fenced server: see fence.go).
func (m *muxLayer) Shut(g int) {
	l := m.groups[g]
	l.open.Store(false)
	l.mu.Lock()
	open := slices.Collect(maps.Keys(l.conns))
	l.mu.Unlock()
	for _, c := range open {
		c.Close() // outside l.mu: closing a TLS connection may block
	}
}

// IsOpen reports whether group g's raft gate is open.
func (m *muxLayer) IsOpen(g int) bool { return m.groups[g].open.Load() }

// Cut is a test hook. While group g is cut, its Dial fails with
// errGroupCut and the connections it accepts are closed at once; cutting
// also closes every connection of group g open at that moment, dialled or
// accepted. Other groups are untouched.
func (m *muxLayer) Cut(g int, cut bool) {
	l := m.groups[g]
	l.mu.Lock()
	l.cut = cut
	var open []*muxConn
	if cut {
		open = slices.Collect(maps.Keys(l.conns))
	}
	l.mu.Unlock()
	for _, c := range open {
		c.Close() // outside l.mu: closing a TLS connection may block
	}
}

// acceptLoop hands every connection of the base layer to route, backing
// off on errors like net/http, until the mux or the base layer closes.
func (m *muxLayer) acceptLoop() {
	defer close(m.loopDone)
	var delay time.Duration
	for {
		c, err := m.base.Accept()
		if err == nil {
			delay = 0
			go m.route(c)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			m.shutdown() // the base layer is gone: so is every group's
			return
		}
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		m.log.Warn("raft mux: accept failed", "error", err, "retry_in", delay)
		select {
		case <-m.done:
			return
		case <-time.After(delay):
		}
	}
}

// route reads the header of c and hands c to its group.
func (m *muxLayer) route(c net.Conn) {
	g, first, err := m.readHeader(c)
	if err != nil {
		m.log.Debug("raft mux: refused connection", "remote", c.RemoteAddr(), "error", err)
		c.Close()
		return
	}
	l := m.groups[g]
	if !l.open.Load() {
		m.log.Debug("raft mux: refused connection: the group's raft gate is shut", "remote", c.RemoteAddr(), "group", g)
		c.Close()
		return
	}
	mc := l.track(c, first)
	if mc == nil {
		return
	}
	select {
	case l.accept <- mc:
	case <-m.done:
		mc.Close()
	}
}

// readHeader returns the group of c and the bytes it read that belong to
// raft (the first byte of a group 0 connection).
func (m *muxLayer) readHeader(c net.Conn) (g int, replay []byte, err error) {
	if err := c.SetReadDeadline(time.Now().Add(m.handshake)); err != nil {
		return 0, nil, err
	}
	r := byteReader{c}
	b, err := r.ReadByte()
	switch {
	case err != nil:
		return 0, nil, err
	case b < muxGroup0Limit:
		replay = []byte{b}
	case b != muxMagic:
		return 0, nil, fmt.Errorf("unknown first byte %#x", b)
	default:
		var id uint64
		v, err := r.ReadByte()
		if err == nil && v != muxVersion {
			err = fmt.Errorf("unknown mux version %d", v)
		}
		if err == nil {
			id, err = binary.ReadUvarint(r) // reads at most MaxVarintLen64 bytes
		}
		if err == nil && id >= uint64(len(m.groups)) {
			err = fmt.Errorf("unknown group %d", id)
		}
		if err != nil {
			return 0, nil, err
		}
		g = int(id)
	}
	return g, replay, c.SetReadDeadline(time.Time{})
}

// byteReader reads one byte at a time, so that nothing past the header is
// taken from the connection.
type byteReader struct{ net.Conn }

func (r byteReader) ReadByte() (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(r.Conn, b[:])
	return b[0], err
}

// Accept implements net.Listener.
func (l *muxGroup) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.m.done:
		return nil, l.errClosed()
	}
}

func (l *muxGroup) errClosed() error { return fmt.Errorf("raft group %d: %w", l.id, net.ErrClosed) }

// Close implements net.Listener and does nothing: raft's NetworkTransport
// closes its stream layer when it shuts down, but the listener is shared
// and only the mux's Close closes it.
func (l *muxGroup) Close() error { return nil }

// Addr implements net.Listener: the base layer's address.
func (l *muxGroup) Addr() net.Addr { return l.m.base.Addr() }

// Dial implements raft.StreamLayer, writing the group's header if it has
// one.
func (l *muxGroup) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.m.done:
		return nil, l.errClosed()
	default:
	}
	if !l.open.Load() {
		return nil, errGated
	}
	l.mu.Lock()
	cut := l.cut
	l.mu.Unlock()
	if cut {
		return nil, errGroupCut
	}
	c, err := l.m.base.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	if l.id > 0 {
		if timeout > 0 {
			_ = c.SetWriteDeadline(time.Now().Add(timeout))
		}
		hdr := binary.AppendUvarint([]byte{muxMagic, muxVersion}, uint64(l.id))
		if _, err := c.Write(hdr); err != nil {
			c.Close()
			return nil, err
		}
		_ = c.SetWriteDeadline(time.Time{})
	}
	if mc := l.track(c, nil); mc != nil {
		return mc, nil
	}
	return nil, errGroupCut
}

// track wraps c and records it as open, or closes it and returns nil if
// the group is cut.
func (l *muxGroup) track(c net.Conn, replay []byte) *muxConn {
	mc := &muxConn{Conn: c, g: l, replay: replay}
	l.mu.Lock()
	cut := l.cut
	if !cut {
		l.conns[mc] = struct{}{}
	}
	l.mu.Unlock()
	if cut {
		c.Close()
		return nil
	}
	return mc
}

// muxConn is a connection of one group. Its first reads return the bytes
// the mux read for routing; Close also forgets it.
type muxConn struct {
	net.Conn
	g      *muxGroup
	replay []byte
}

func (c *muxConn) Read(p []byte) (int, error) {
	if len(c.replay) > 0 {
		n := copy(p, c.replay)
		c.replay = c.replay[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *muxConn) Close() error {
	c.g.mu.Lock()
	delete(c.g.conns, c)
	c.g.mu.Unlock()
	return c.Conn.Close()
}
