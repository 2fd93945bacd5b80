package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

const muxWait = 5 * time.Second // the longest any test waits for a condition

// newTestMux returns a mux over a fresh TCP listener on 127.0.0.1, every
// group's gate open, closed when the test ends.
func newTestMux(t *testing.T, groups int) *muxLayer {
	t.Helper()
	m := newShutMux(t, groups)
	for g := range groups {
		m.Open(g)
	}
	return m
}

// newShutMux is newTestMux with every group's gate shut.
func newShutMux(t *testing.T, groups int) *muxLayer {
	t.Helper()
	tl, err := newTCPLayer("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	tl.advertise = tl.Listener.Addr()
	m := newMux(tl, groups, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { m.Close() })
	return m
}

func muxAddr(m *muxLayer) raft.ServerAddress {
	return raft.ServerAddress(m.Group(0).Addr().String())
}

// acceptAll collects the connections of every group of m, one channel per
// group, until m closes; collected connections are closed when the test
// ends.
func acceptAll(t *testing.T, m *muxLayer) []chan net.Conn {
	chans := make([]chan net.Conn, len(m.groups))
	for g := range chans {
		ch := make(chan net.Conn, 16)
		chans[g] = ch
		go func() {
			for {
				c, err := m.Group(g).Accept()
				if err != nil {
					return
				}
				ch <- c
			}
		}()
		t.Cleanup(func() {
			for {
				select {
				case c := <-ch:
					c.Close()
				default:
					return
				}
			}
		})
	}
	return chans
}

func waitConn(t *testing.T, ch <-chan net.Conn, what string) net.Conn {
	t.Helper()
	select {
	case c := <-ch:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(muxWait):
		t.Fatalf("%s: no connection accepted", what)
		return nil
	}
}

func expectNoConn(t *testing.T, chans []chan net.Conn) {
	t.Helper()
	for g, ch := range chans {
		select {
		case c := <-ch:
			c.Close()
			t.Errorf("group %d accepted an unexpected connection", g)
		default:
		}
	}
}

func dial(t *testing.T, l raft.StreamLayer, addr raft.ServerAddress) net.Conn {
	t.Helper()
	c, err := l.Dial(addr, muxWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func rawDial(t *testing.T, m *muxLayer, data []byte) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", string(muxAddr(m)), muxWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	return c
}

// readAll reads c until EOF, bounded by muxWait.
func readAll(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(muxWait))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expectClosed checks that the other end closed c: a read fails, and not
// by timing out.
func expectClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(muxWait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: read returned %v, want the connection closed", what, err)
	}
}

// expectOpen checks that data written on a arrives on b.
func expectOpen(t *testing.T, a, b net.Conn, what string) {
	t.Helper()
	msg := []byte("ping " + what)
	if _, err := a.Write(msg); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	_ = b.SetReadDeadline(time.Now().Add(muxWait))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("%s: read %q, %v; want %q", what, got, err, msg)
	}
}

func TestMuxRoutesByGroup(t *testing.T) {
	a, b := newTestMux(t, 3), newTestMux(t, 3)
	chans := acceptAll(t, b)
	for g := range 3 {
		// The first byte is a raft RPC type, which group 0 must replay.
		payload := []byte{0x01, 'g', byte('0' + g)}
		c := dial(t, a.Group(g), muxAddr(b))
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		c.Close()
		s := waitConn(t, chans[g], fmt.Sprint("group ", g))
		if got := readAll(t, s); !bytes.Equal(got, payload) {
			t.Errorf("group %d read %q, want %q", g, got, payload)
		}
	}
	expectNoConn(t, chans)
}

func TestMuxLegacyPeer(t *testing.T) {
	m := newTestMux(t, 3)
	chans := acceptAll(t, m)
	payload := []byte{0x00, 'o', 'l', 'd'}
	rawDial(t, m, payload).Close()
	if got := readAll(t, waitConn(t, chans[0], "legacy")); !bytes.Equal(got, payload) {
		t.Errorf("read %q, want %q", got, payload)
	}
	expectNoConn(t, chans)
}

func TestMuxRejectsBadHeaders(t *testing.T) {
	old := handshakeTimeout
	handshakeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { handshakeTimeout = old })
	m := newTestMux(t, 3)
	chans := acceptAll(t, m)

	silent := rawDial(t, m, nil)
	silentClosed := make(chan struct{})
	go func() {
		_ = silent.SetReadDeadline(time.Now().Add(muxWait))
		_, _ = silent.Read(make([]byte, 1))
		close(silentClosed)
	}()
	bad := map[string][]byte{
		"unknown group":  {muxMagic, muxVersion, 7},
		"wrong version":  {muxMagic, muxVersion + 1, 1},
		"garbage":        {0x7F, 0, 0, 0},
		"overlong group": append([]byte{muxMagic, muxVersion}, bytes.Repeat([]byte{0xFF}, 11)...),
	}
	conns := map[string]net.Conn{}
	for what, data := range bad {
		conns[what] = rawDial(t, m, data)
	}

	// A good connection gets through while the silent one still waits.
	good := dial(t, m.Group(2), muxAddr(m))
	expectOpen(t, good, waitConn(t, chans[2], "good"), "good")
	select {
	case <-silentClosed:
		t.Error("the good connection waited for the silent one: the accept loop is blocked")
	default:
	}

	for what, c := range conns {
		expectClosed(t, c, what)
	}
	select {
	case <-silentClosed:
	case <-time.After(muxWait):
		t.Fatal("silent connection still open")
	}
	expectClosed(t, silent, "silent")
	expectNoConn(t, chans)
}

func TestMuxCut(t *testing.T) {
	a, b := newTestMux(t, 3), newTestMux(t, 3)
	ach, bch := acceptAll(t, a), acceptAll(t, b)

	in1 := dial(t, a.Group(1), muxAddr(b)) // accepted by b
	bin1 := waitConn(t, bch[1], "in1")
	out1 := dial(t, b.Group(1), muxAddr(a)) // dialled by b
	aout1 := waitConn(t, ach[1], "out1")
	in2 := dial(t, a.Group(2), muxAddr(b))
	bin2 := waitConn(t, bch[2], "in2")
	expectOpen(t, in1, bin1, "in1")
	expectOpen(t, out1, aout1, "out1")

	b.Cut(1, true)
	expectClosed(t, in1, "accepted group 1 conn")
	expectClosed(t, aout1, "dialled group 1 conn")
	if _, err := b.Group(1).Dial(muxAddr(a), muxWait); !errors.Is(err, errGroupCut) {
		t.Errorf("Dial on a cut group: %v, want errGroupCut", err)
	}
	expectClosed(t, dial(t, a.Group(1), muxAddr(b)), "new incoming group 1 conn")
	expectOpen(t, in2, bin2, "group 2 after cut")
	expectOpen(t, bin2, in2, "group 2 back after cut")

	b.Cut(1, false)
	expectOpen(t, dial(t, b.Group(1), muxAddr(a)), waitConn(t, ach[1], "after uncut"), "dial after uncut")
	expectOpen(t, dial(t, a.Group(1), muxAddr(b)), waitConn(t, bch[1], "in after uncut"), "accept after uncut")
	expectNoConn(t, bch)
	expectNoConn(t, ach)
}

// TestMuxGate: a group whose raft gate is shut dials nothing and closes
// what it is sent, while the other groups of the same listener carry their
// traffic; opening the gate lets the group's traffic through.
func TestMuxGate(t *testing.T) {
	a, b := newTestMux(t, 3), newShutMux(t, 3)
	b.Open(0)
	b.Open(2)
	ach, bch := acceptAll(t, a), acceptAll(t, b)

	if _, err := b.Group(1).Dial(muxAddr(a), muxWait); !errors.Is(err, errGated) {
		t.Errorf("Dial on a shut group: %v, want errGated", err)
	}
	expectClosed(t, dial(t, a.Group(1), muxAddr(b)), "incoming conn of a shut group")
	in2 := dial(t, a.Group(2), muxAddr(b))
	expectOpen(t, in2, waitConn(t, bch[2], "group 2"), "group 2 beside a shut group")
	in0 := dial(t, a.Group(0), muxAddr(b))
	if _, err := in0.Write([]byte{0x01}); err != nil { // group 0 has no header: raft's first byte routes it
		t.Fatal(err)
	}
	b0 := waitConn(t, bch[0], "group 0")
	if _, err := io.ReadFull(b0, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	expectOpen(t, in0, b0, "group 0 beside a shut group")

	if b.Open(1) {
		t.Error("Open reported the gate already open")
	}
	expectOpen(t, dial(t, b.Group(1), muxAddr(a)), waitConn(t, ach[1], "out after open"), "dial after open")
	expectOpen(t, dial(t, a.Group(1), muxAddr(b)), waitConn(t, bch[1], "in after open"), "accept after open")
	expectNoConn(t, bch)
	expectNoConn(t, ach)
}

func TestMuxCloseUnblocksAccept(t *testing.T) {
	m := newTestMux(t, 2)
	if err := m.Group(1).Close(); err != nil {
		t.Errorf("group Close: %v", err)
	}
	errs := make(chan error, 2)
	for g := range 2 {
		go func() {
			_, err := m.Group(g).Accept()
			errs <- err
		}()
	}
	m.Close()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
			}
		case <-time.After(muxWait):
			t.Fatal("Accept still blocked after Close")
		}
	}
	if _, err := m.Group(1).Dial(muxAddr(m), muxWait); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Dial after Close: %v, want net.ErrClosed", err)
	}
}

// TestMuxRaftTransports runs real raft transports of two groups on two
// muxes and sends a vote request in each group, each way.
func TestMuxRaftTransports(t *testing.T) {
	muxes := []*muxLayer{newTestMux(t, 2), newTestMux(t, 2)}
	trans := make([][]*raft.NetworkTransport, 2) // [side][group]
	for side, m := range muxes {
		for g := range 2 {
			tr := raft.NewNetworkTransport(m.Group(g), 3, time.Second, io.Discard)
			t.Cleanup(func() { tr.Close() })
			trans[side] = append(trans[side], tr)
		}
	}
	term := func(side, g int) uint64 { return uint64(10*side + g + 1) }
	// Every consumer grants only the votes meant for its own group.
	wrong := make(chan string, 8)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	for side := range 2 {
		for g := range 2 {
			go func() {
				for {
					var rpc raft.RPC
					select {
					case rpc = <-trans[side][g].Consumer():
					case <-stop:
						return
					}
					req, ok := rpc.Command.(*raft.RequestVoteRequest)
					want := term(1-side, g)
					if !ok || req.Term != want {
						wrong <- fmt.Sprintf("side %d group %d got %#v", side, g, rpc.Command)
					}
					rpc.Respond(&raft.RequestVoteResponse{Term: want, Granted: ok && req.Term == want}, nil)
				}
			}()
		}
	}
	for side := range 2 {
		for g := range 2 {
			var resp raft.RequestVoteResponse
			target := trans[1-side][g].LocalAddr()
			req := &raft.RequestVoteRequest{Term: term(side, g)}
			if err := trans[side][g].RequestVote("peer", target, req, &resp); err != nil {
				t.Fatalf("side %d group %d: %v", side, g, err)
			}
			if !resp.Granted {
				t.Errorf("side %d group %d: vote reached the wrong group", side, g)
			}
		}
	}
	select {
	case w := <-wrong:
		t.Error(w)
	default:
	}
}
