package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// Streaming coalesced Next requests.
//
// A unary call costs both sides far more CPU than the ids in a coalesced
// request (an HTTP request and its headers, parsed and written on each side,
// and the goroutines of the HTTP stack woken for it). So coalesced Next
// requests travel as messages of one long-lived NextStream call per node
// instead: the batcher that would have sent a unary request to a node (its
// group's leader, or the cluster's leader) writes a message on that node's
// stream, and one goroutine per stream reads the answers, which come in the
// order of the messages, and hands each to its batch's calls.
//
// A stream is NextStream's framed transport (frames.go: an HTTP/1.1
// connection upgraded to length-prefixed messages, which costs both sides
// far less per message than HTTP/2), dialled in the background while the
// node's first requests go unary; or, with Options.HTTPClient, the Connect
// stream over that client (HTTP/2).
//
// Every rule of the unary path holds, because the server serves each
// message as a unary Next and answers in order, and because nothing that
// goes wrong is handled by the stream itself: a message answered with an
// error, and every message in flight on a stream that breaks (a server
// restarted, a connection cut) or that stops answering for
// Options.AttemptTimeout, is handed to the unary path (Client.multi) as a
// request whose attempt failed with that error: retried elsewhere when the
// unary path would retry it (unavailable, a transport failure, a time-out,
// each of which may have taken values: they are gaps), or failed with it
// otherwise. The next message to that node opens a new stream.
//
// A node that answers a new stream with unimplemented (a server older than
// NextStream) took none of its messages: they go as unary calls, and so do
// that node's requests for a minute before the client tries again (a
// rolling upgrade). A stream that fails before any answer backs off the
// same way, from a second, doubling, up to a minute.
//
// Memory: at most maxStreamKeys keys in flight on one stream (a batch that
// would pass it goes as a unary call), which also keeps the answers and
// messages in flight far inside HTTP/2's flow-control windows and the
// sockets' buffers, so that sending a message never waits for the reading
// goroutine.

const (
	// maxStreamKeys bounds the keys in flight on one stream (about 300 KB
	// of messages, 300 KB of answers).
	maxStreamKeys = 32 << 10
	// streamIdle closes a stream that carried nothing for this long.
	streamIdle = 30 * time.Second
	// streamRetryMin and streamRetryMax bound how long a node whose stream
	// failed before any answer gets unary calls only.
	streamRetryMin = time.Second
	streamRetryMax = time.Minute
)

// errStreamTimeout fails the messages of a stream whose oldest message had
// no answer within the attempt time-out.
var errStreamTimeout = errors.New("client: no answer on the stream within the attempt timeout")

// streamSlot is a node's NextStream: the open stream, if any, and until when
// the node gets unary calls only.
type streamSlot struct {
	seq  seqv1connect.SequenceServiceClient // the Connect stream's client (with Options.HTTPClient)
	base string                             // the node's base URL, for the framed transport

	mu      sync.Mutex
	cur     *nodeStream
	live    atomic.Bool   // cur is set: the node's requests go on its stream (groupTable.lane)
	dialing bool          // a framed stream is being opened
	offline time.Time     // no stream before then
	backoff time.Duration // the next offline period after a failed stream
}

func (c *Client) newStreamSlot(baseURL string) streamSlot {
	switch {
	case !c.streaming:
		return streamSlot{}
	case c.opts.HTTPClient != nil:
		return streamSlot{seq: seqv1connect.NewSequenceServiceClient(c.http, baseURL, c.connectOpts...)}
	}
	return streamSlot{base: baseURL}
}

// streamCall is one NextStream call: the Connect stream, or a framed one.
type streamCall interface {
	Send(*seqv1.NextStreamRequest) error
	Receive() (*seqv1.NextStreamResponse, error)
}

// nodeStream is one NextStream call to one node.
type nodeStream struct {
	c      *Client
	n      *node
	call   streamCall
	cancel func()      // ends the call
	timer  *time.Timer // runs check; set and used under mu

	sendMu sync.Mutex // held to queue and write a message, so that pending is in the order sent

	mu       sync.Mutex
	pending  []streamed // sent, not answered, oldest first
	keys     int        // keys in pending
	lastUsed time.Time
	answered bool  // an answer came: the node serves NextStream
	err      error // set once the stream failed or closed
}

// streamed is one batch in flight on a stream.
type streamed struct {
	b    *batcher
	bt   *batch
	sent time.Time
	idx  int // the node's index in Client.nodes, or -1: the group's presumed leader
}

// sendStream sends bt on the stream of the node its request goes to, if
// bt is a Next request and that node takes streams, and reports whether it
// did (the stream's reader then finishes bt).
func (b *batcher) sendStream(bt *batch) bool {
	if b.kind != kindNext || !b.c.streaming {
		return false
	}
	n := b.c.groupLeader(b.group)
	idx := -1
	if n == nil {
		b.c.mu.Lock()
		idx = b.c.leader
		n = b.c.nodes[idx]
		b.c.mu.Unlock()
	}
	st := n.stream.open(b.c, n)
	if st == nil {
		return false
	}
	if bt.gone() {
		b.finish(bt, time.Now(), nil, context.Canceled) // every caller gave up before it was sent
		return true
	}
	return st.send(b, bt, idx)
}

// open returns the node's open stream, opening one if the node takes
// streams now; nil if not (yet: a framed stream is opened in the
// background, and the node's requests go unary until it is).
func (s *streamSlot) open(c *Client, n *node) *nodeStream {
	if s.seq == nil && s.base == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.cur; st != nil {
		return st
	}
	if c.closed.Load() || s.dialing || time.Now().Before(s.offline) {
		return nil
	}
	if s.seq == nil {
		s.dialing = true
		go s.dial(c, n)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	return s.startLocked(c, n, s.seq.NextStream(ctx), cancel)
}

// startLocked makes call the node's stream. Call with s.mu held.
func (s *streamSlot) startLocked(c *Client, n *node, call streamCall, cancel func()) *nodeStream {
	st := &nodeStream{c: c, n: n, call: call, cancel: cancel, lastUsed: time.Now()}
	s.cur = st
	s.live.Store(true)
	st.mu.Lock()
	st.timer = time.AfterFunc(c.streamCheckEvery(), st.check)
	st.mu.Unlock()
	go st.read()
	return st
}

// dial opens a framed stream to n (frames.go) and makes it the node's
// stream, or keeps the node on unary calls for a while if it cannot.
func (s *streamSlot) dial(c *Client, n *node) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.AttemptTimeout)
	f, err := c.dialFrames(ctx, s.base)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dialing = false
	switch {
	case err != nil:
		s.failedLocked(connect.CodeOf(err) == connect.CodeUnimplemented)
	case c.closed.Load():
		f.conn.Close() // Close ran meanwhile

	default:
		s.startLocked(c, n, f, func() { f.conn.Close() })
	}
}

// streamCheckEvery is how often a stream checks that its oldest message is
// answered in time, and whether it has been idle long enough to close.
func (c *Client) streamCheckEvery() time.Duration {
	return max(c.opts.AttemptTimeout/4, time.Millisecond)
}

// send writes bt's request on st, and reports false (nothing sent) if st
// has failed or holds too many keys. idx is the node's index in c.nodes,
// or -1 when st's node is the group's presumed leader.
func (st *nodeStream) send(b *batcher, bt *batch, idx int) bool {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	now := time.Now()
	st.mu.Lock()
	if st.err != nil || st.keys+len(bt.keys) > maxStreamKeys {
		st.mu.Unlock()
		return false
	}
	st.pending = append(st.pending, streamed{b: b, bt: bt, sent: now, idx: idx})
	st.keys += len(bt.keys)
	st.lastUsed = now
	st.mu.Unlock()
	b.c.bRequests.Add(1)
	b.c.bKeys.Add(uint64(len(bt.keys)))
	b.c.bStreamed.Add(1)
	if err := st.call.Send(&seqv1.NextStreamRequest{Space: b.space, Keys: bt.keys}); err != nil && !errors.Is(err, io.EOF) {
		st.fail(err)
	}
	// On io.EOF the server ended the stream: the reader gets its error
	// (unimplemented, say) and fails the messages in flight, this one too.
	return true
}

// read reads the answers of st in order and finishes their batches.
func (st *nodeStream) read() {
	for {
		resp, err := st.call.Receive()
		if err != nil {
			st.fail(err)
			return
		}
		st.mu.Lock()
		if len(st.pending) == 0 {
			st.mu.Unlock()
			st.fail(fmt.Errorf("client: an answer on the stream of %s with no message in flight", st.n.addr))
			return
		}
		p := st.pending[0]
		st.pending[0] = streamed{}
		st.pending = st.pending[1:]
		st.keys -= len(p.bt.keys)
		first := !st.answered
		st.answered = true
		st.mu.Unlock()
		if first {
			st.n.stream.answered()
		}
		st.deliver(p, resp)
	}
}

// deliver finishes p with its answer, or hands it to the unary path.
func (st *nodeStream) deliver(p streamed, resp *seqv1.NextStreamResponse) {
	if resp.GetCode() != 0 {
		// A wire error: the server's answer, as a unary call's error would
		// be (connect.NewError's would read as a transport failure, which
		// afterStream retries).
		e := connect.NewWireError(connect.Code(resp.GetCode()), errors.New(resp.GetMessage()))
		if h := resp.GetLeader(); h != "" {
			e.Meta().Set(seqd.HeaderLeader, h)
		}
		if id := resp.GetLeaderId(); id != "" {
			e.Meta().Set(seqd.HeaderLeaderID, id)
		}
		go p.b.afterStream(p, st.n, e, true)
		return
	}
	vals := resp.GetValues()
	if len(vals) != len(p.bt.keys) {
		p.b.finish(p.bt, p.sent, nil, fmt.Errorf("client: server returned %d values for %d keys", len(vals), len(p.bt.keys)))
		return
	}
	st.c.noteAnswer(st.n, resp.GetRoutingVersion(), resp.GetGroup(), resp.GetLeader())
	p.b.finish(p.bt, p.sent, vals, nil)
}

// fail ends st: the node's next request opens a new stream, and every
// message in flight goes to the unary path with err.
func (st *nodeStream) fail(err error) {
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return
	}
	st.err = err
	pending, answered := st.pending, st.answered
	st.pending, st.keys = nil, 0
	st.timer.Stop()
	st.mu.Unlock()
	st.cancel()
	st.n.stream.closed(st, answered, connect.CodeOf(err) == connect.CodeUnimplemented)
	for _, p := range pending {
		go p.b.afterStream(p, st.n, err, answered)
	}
}

// check fails st when its oldest message has waited longer than the attempt
// time-out, closes it when idle for streamIdle, and otherwise checks again
// later.
func (st *nodeStream) check() {
	now := time.Now()
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return
	}
	late := len(st.pending) > 0 && now.Sub(st.pending[0].sent) > st.c.opts.AttemptTimeout
	idle := len(st.pending) == 0 && now.Sub(st.lastUsed) > streamIdle
	if !late && !idle {
		st.timer.Reset(st.c.streamCheckEvery())
	}
	st.mu.Unlock()
	switch {
	case late:
		st.fail(errStreamTimeout)
	case idle:
		st.fail(errStreamIdle)
	}
}

// errStreamIdle closes a stream that carried nothing for streamIdle.
var errStreamIdle = errors.New("client: stream idle")

// answered notes that the node served a stream: a later failure retries at
// once.
func (s *streamSlot) answered() {
	s.mu.Lock()
	s.backoff = 0
	s.mu.Unlock()
}

// closed forgets st, and keeps the node on unary calls for a while if st
// never had an answer (a minute for a server without NextStream).
func (s *streamSlot) closed(st *nodeStream, answered, unimplemented bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == st {
		s.cur = nil
		s.live.Store(false)
	}
	if !answered && st.err != errStreamIdle {
		s.failedLocked(unimplemented)
	}
}

// failedLocked keeps the node on unary calls after a stream that never
// worked: for a minute when the node does not serve NextStream, else for a
// backoff doubling from a second to a minute. Call with s.mu held.
func (s *streamSlot) failedLocked(unimplemented bool) {
	if unimplemented {
		s.offline = time.Now().Add(streamRetryMax)
		return
	}
	s.backoff = min(max(2*s.backoff, streamRetryMin), streamRetryMax)
	s.offline = time.Now().Add(s.backoff)
}

// afterStream finishes p, whose message failed with err on n's stream, as
// the unary path would have finished an attempt that failed with err: an
// error worth retrying moves the client on (leader hint, another node) and
// the request is retried through Client.multi; any other error is the
// request's. A stream that never had an answer (a server without
// NextStream, which took nothing; or a stream that could not be opened,
// through a proxy that speaks only HTTP/1.1, say) says nothing of the node:
// the request goes to the unary path as it is, which finds out.
func (b *batcher) afterStream(p streamed, n *node, err error, answered bool) {
	code := connect.CodeOf(err)
	retry := code == connect.CodeUnavailable || !connect.IsWireError(err)
	var vals []uint64
	switch {
	case p.bt.gone():
		err = context.Canceled
	case answered && p.bt.splits(err):
		// Another group of the lane may have failed: n answered, so
		// only a failure of the connection says anything of n.
		b.c.retried.Add(1)
		if !connect.IsWireError(err) {
			b.c.attemptFailed(b.group, p.idx, n, err)
		}
		b.split(p.bt, n)
		vals, err = nil, nil
	case !answered || retry:
		if answered {
			b.c.retried.Add(1)
			b.c.attemptFailed(b.group, p.idx, n, err)
		}
		vals, err = b.whole(context.Background(), p.bt)
	}
	b.finish(p.bt, p.sent, vals, err)
}
