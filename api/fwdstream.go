package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/frame"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// Forwards over a framed stream.
//
// The Next shares that the other front ends (Sequences: resp/, leaf.go)
// forward to a group's leader go as messages of one framed NextStream
// connection from this server to that leader (frames.go's transport, the
// Go client's streams: one HTTP/1.1 connection upgraded to length-prefixed
// messages), shared by every such forward to that server, several messages
// in flight, instead of one unary HTTP request each: a unary request costs
// both servers far more CPU than the few keys of a share.
//
// Nothing else changes. The stream is opened with the forward's own header
// (forwardHeader: Seqd-Forwarded, the token and Seqd-Entry; a forward whose
// token or entry is not the stream's goes unary), which the leader checks on
// the upgrade and, with its generation, again on every message (admit, as
// for a unary call); it serves each message as a unary Next (streamNext,
// where a forwarded call is never forwarded again) and answers in order.
// An answer with an error is the leader's answer, as a unary call's error
// is: forwardOnce returns it as it is (unavailable with the leader hint
// when the leader lost its group, which Sequences retries with the new
// leader). A stream that breaks (the leader stopped or was cut off), or on
// which a forward's deadline passes before its answer, is closed, and every
// message in flight on it fails as a unary forward that could not reach
// the leader fails (unavailable: retried); such a message may have taken
// values that nobody receives, a gap, as with a unary answer lost on the
// way, and never a repeat, since a failed message is never sent again: a
// retry is a new call for new values. The next forward to that server
// opens a new stream.
//
// A server that does not grant the upgrade (one that refuses the token, a
// fenced or stopping one) gets this forward, and its forwards for a
// backoff from a second, doubling up to a minute, as unary calls, whose
// answer (the same refusal, with the same code, or a value) is the answer.
//
// Memory: at most fwdInFlight messages in flight on one stream (a forward
// waits for a free place, within its deadline), each of at most
// seqd.MaxKeys keys.

const (
	// fwdInFlight bounds the messages in flight on one forward stream.
	fwdInFlight = 64
	// fwdIdle closes a stream that carried nothing for this long.
	fwdIdle = 30 * time.Second
	// fwdRetryMin and fwdRetryMax bound how long forwards to a server whose
	// upgrade failed go as unary calls.
	fwdRetryMin = time.Second
	fwdRetryMax = time.Minute
)

var (
	// errFwdStalled closes a stream on which a forward's deadline passed
	// before its answer came.
	errFwdStalled = errors.New("forward stream: no answer within the forward's deadline")
	errFwdIdle    = errors.New("forward stream: idle")
	errFwdClosed  = errors.New("forward stream: this server is closing")
)

// fwdSlot is the forward stream to one server: the open one, if any, and
// until when forwards to it go unary.
type fwdSlot struct {
	mu      sync.Mutex
	cur     *fwdConn
	dialing chan struct{} // closed when the dial in progress ends
	offline time.Time
	backoff time.Duration
	closed  bool // the server is closing: no more streams

	dials    atomic.Uint64 // streams opened
	refusals atomic.Uint64 // streams asked for and not opened
	sent     atomic.Uint64 // messages sent on them
}

// fwdConn is one open forward stream.
type fwdConn struct {
	slot  *fwdSlot
	conn  net.Conn
	r     *bufio.Reader
	auth  string        // the Authorization it was opened with
	entry string        // and the Seqd-Entry (keys.go, noteValues)
	room  chan struct{} // a place per message in flight

	sendMu sync.Mutex // held to queue and write a message, so that pending is in the order sent
	enc    []byte

	mu       sync.Mutex
	pending  []*fwdCall // sent, not answered, oldest first
	lastUsed time.Time
	idle     *time.Timer
	err      error // set once the stream failed or closed
}

// fwdCall is one message in flight and, once done is closed, its answer.
type fwdCall struct {
	done chan struct{}
	resp *seqv1.NextStreamResponse
	err  error
}

// streamNextShare forwards a Next share to the leader p over p's forward
// stream, and reports false when it did not (no stream to that server now,
// or the forward's header is not the stream's): the caller then forwards it
// unary. The answer is as remoteShare's.
func (s *Server) streamNextShare(ctx context.Context, p *peer, h http.Header, space string, keys []uint64,
) (vals []uint64, fwd http.Header, sent bool, err error) {
	c := s.fwdOpen(ctx, p, h)
	if c == nil {
		return nil, nil, false, nil
	}
	resp, err := c.call(ctx, &seqv1.NextStreamRequest{Space: space, Keys: keys})
	if err != nil {
		return nil, nil, true, err
	}
	if code := resp.GetCode(); code != 0 {
		// The leader's answer, as a unary call's error would carry it.
		e := connect.NewWireError(connect.Code(code), errors.New(resp.GetMessage()))
		if v := resp.GetLeader(); v != "" {
			e.Meta().Set(seqd.HeaderLeader, v)
		}
		if v := resp.GetLeaderId(); v != "" {
			e.Meta().Set(seqd.HeaderLeaderID, v)
		}
		return nil, nil, true, e
	}
	fwd = make(http.Header, 2)
	if v := resp.GetGroup(); v != "" {
		fwd.Set(seqd.HeaderGroup, v)
	}
	if v := resp.GetRoutingVersion(); v != 0 {
		fwd.Set(seqd.HeaderRoutingVersion, strconv.FormatUint(v, 10))
	}
	return resp.GetValues(), fwd, true, nil
}

// fwdOpen returns p's open forward stream, opening one if there is none
// (one dial at a time: the others wait for it); nil when forwards to p go
// unary for now, or when h's token or entry mark is not the stream's.
func (s *Server) fwdOpen(ctx context.Context, p *peer, h http.Header) *fwdConn {
	sl := &p.fwd
	for {
		sl.mu.Lock()
		if c := sl.cur; c != nil {
			sl.mu.Unlock()
			if c.auth != h.Get("Authorization") || c.entry != h.Get(seqd.HeaderEntry) {
				return nil
			}
			return c
		}
		if sl.closed || s.frames.isClosed() || time.Now().Before(sl.offline) {
			sl.mu.Unlock()
			return nil
		}
		if ch := sl.dialing; ch != nil {
			sl.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		ch := make(chan struct{})
		sl.dialing = ch
		sl.mu.Unlock()
		// The dial belongs to the stream, not to this forward: it runs
		// under its own bound (fwdDial), so that a forward whose deadline
		// passes meanwhile never counts as a server that refused.
		go s.fwdDialSlot(sl, p.base, h, ch)
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}

// fwdDialSlot opens the forward stream of sl to the server at base, then
// records it as sl's stream, or the failure as a time of unary forwards,
// and closes ch.
func (s *Server) fwdDialSlot(sl *fwdSlot, base string, h http.Header, ch chan struct{}) {
	c, err := s.fwdDial(context.Background(), base, h)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.dialing = nil
	defer close(ch)
	switch {
	case err == nil && sl.closed:
		c.conn.Close()
		return
	case err != nil:
		sl.refusals.Add(1)
		sl.backoff = min(max(2*sl.backoff, fwdRetryMin), fwdRetryMax)
		sl.offline = time.Now().Add(sl.backoff)
		s.log.Debug("forward stream: not opened; forwarding unary for a while", "addr", base, "for", sl.backoff, "err", err)
		return
	}
	sl.backoff = 0
	sl.dials.Add(1)
	c.slot = sl
	sl.cur = c
	c.mu.Lock()
	c.idle = time.AfterFunc(fwdIdle, c.checkIdle)
	c.mu.Unlock()
	go c.read()
}

// fwdDial opens a forward stream to the server at base with header h.
func (s *Server) fwdDial(ctx context.Context, base string, h http.Header) (*fwdConn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := frame.Dial(dctx, u, s.peerCfg.TLS)
	if err != nil {
		return nil, err
	}
	dl, _ := dctx.Deadline()
	_ = conn.SetDeadline(dl)
	resp, r, err := frame.Upgrade(conn, u, h)
	if err == nil && resp.StatusCode != http.StatusSwitchingProtocols {
		err = frame.Refused(u.Host, resp)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return &fwdConn{conn: conn, r: r, auth: h.Get("Authorization"), entry: h.Get(seqd.HeaderEntry), room: make(chan struct{}, fwdInFlight), lastUsed: time.Now()}, nil
}

// call sends m and waits for its answer, within ctx (which has a
// deadline: forwardOnce sets one). A forward whose deadline passes before
// its answer closes the stream (errFwdStalled).
func (c *fwdConn) call(ctx context.Context, m *seqv1.NextStreamRequest) (*seqv1.NextStreamResponse, error) {
	select {
	case c.room <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fc := &fwdCall{done: make(chan struct{})}
	c.sendMu.Lock()
	c.mu.Lock()
	if err := c.err; err != nil {
		c.mu.Unlock()
		c.sendMu.Unlock()
		return nil, err
	}
	c.pending = append(c.pending, fc)
	c.lastUsed = time.Now()
	c.mu.Unlock()
	c.slot.sent.Add(1)
	var err error
	if c.enc, err = frame.Append(c.enc[:0], m); err == nil {
		// A leader that stops reading holds the write, and every forward
		// queued behind it, only until this forward's deadline.
		dl, _ := ctx.Deadline()
		_ = c.conn.SetWriteDeadline(dl)
		_, err = c.conn.Write(c.enc)
	}
	c.sendMu.Unlock()
	if err != nil {
		c.fail(err) // fails fc too
	}
	select {
	case <-fc.done:
		return fc.resp, fc.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c.fail(errFwdStalled)
		}
		return nil, ctx.Err()
	}
}

// read reads the answers in order and hands each to its call.
func (c *fwdConn) read() {
	var buf []byte
	for {
		var err error
		buf, err = frame.Read(c.r, buf)
		resp := &seqv1.NextStreamResponse{}
		if err == nil {
			err = proto.Unmarshal(buf, resp)
		}
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.mu.Unlock()
			c.fail(fmt.Errorf("forward stream to %s: an answer with no message in flight", c.conn.RemoteAddr()))
			return
		}
		fc := c.pending[0]
		c.pending[0] = nil
		c.pending = c.pending[1:]
		c.mu.Unlock()
		<-c.room
		fc.resp = resp
		close(fc.done)
	}
}

// fail ends c: every message in flight fails with err (wrapped, so that
// forwardOnce reads it as a leader that could not be reached), and the next
// forward opens a new stream.
func (c *fwdConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = fmt.Errorf("forward stream to %s: %w", c.conn.RemoteAddr(), err)
	pending := c.pending
	c.pending = nil
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	c.conn.Close()
	sl := c.slot
	sl.mu.Lock()
	if sl.cur == c {
		sl.cur = nil
	}
	sl.mu.Unlock()
	for _, fc := range pending {
		fc.err = c.err
		close(fc.done)
	}
}

// checkIdle closes c once it carried nothing for fwdIdle.
func (c *fwdConn) checkIdle() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if len(c.pending) > 0 || time.Since(c.lastUsed) < fwdIdle {
		c.idle.Reset(fwdIdle)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.fail(errFwdIdle)
}

// close closes the slot's stream and opens no other.
func (sl *fwdSlot) close() {
	sl.mu.Lock()
	sl.closed = true
	c := sl.cur
	sl.mu.Unlock()
	if c != nil {
		c.fail(errFwdClosed)
	}
}

// closeForwards closes every forward stream of this server (Close).
func (s *Server) closeForwards() {
	s.peersMu.Lock()
	ps := make([]*peer, 0, len(s.peers))
	for _, p := range s.peers {
		ps = append(ps, p)
	}
	s.peersMu.Unlock()
	for _, p := range ps {
		p.fwd.close()
	}
}
