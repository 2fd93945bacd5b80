package api_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/sections"
)

// A prototype of a bidirectional streaming Next, to measure whether it is
// worth a proto change: `rpc NextStream(stream NextRequest) returns (stream
// NextResponse)`, each request message answered by one response message, in
// order, on one long-lived HTTP/2 stream per client. It reuses the existing
// messages, so no generated code is needed: the handler and the client are
// built with connect.NewBidiStreamHandler and connect.NewClient on a path of
// their own, next to the real SequenceService on the same server.

const streamProcedure = "/seq.v1.SequenceService/NextStream"

// streamServer serves the real API plus the prototype stream from one node.
func streamServer(b *testing.B) string {
	leader := benchLeader(b)
	alloc := leader.Node().Allocator()
	mux := http.NewServeMux()
	mux.Handle("/", api.New(leader.Node(), nil).Handler())
	mux.Handle(streamProcedure, connect.NewBidiStreamHandler(streamProcedure,
		func(ctx context.Context, s *connect.BidiStream[seqv1.NextRequest, seqv1.NextResponse]) error {
			return serveNextStream(ctx, alloc, s)
		}, connect.WithCompressMinBytes(math.MaxInt32)))
	ln := listen(b)
	srv := api.NewHTTPServer(mux)
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func serveNextStream(ctx context.Context, alloc *sections.Allocator, s *connect.BidiStream[seqv1.NextRequest, seqv1.NextResponse]) error {
	for {
		req, err := s.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		space := req.GetSpace()
		if space == "" {
			space = "default"
		}
		vals, err := alloc.Next(ctx, space, req.GetKeys())
		if err != nil {
			return connect.NewError(connect.CodeUnavailable, err)
		}
		if err := s.Send(&seqv1.NextResponse{Values: vals}); err != nil {
			return err
		}
	}
}

// streamClient coalesces concurrent callers onto one stream: up to depth
// request messages in flight, each carrying every call queued when it left;
// responses come back in order.
type streamClient struct {
	stream *connect.BidiStreamForClient[seqv1.NextRequest, seqv1.NextResponse]
	depth  int

	mu       sync.Mutex
	cond     *sync.Cond
	keys     []uint64
	waiters  []*streamWaiter
	inFlight [][]*streamWaiter // FIFO of sent messages' callers
	err      error
}

type streamWaiter struct {
	off, n int
	vals   []uint64
	done   chan struct{}
}

func newStreamClient(ctx context.Context, addr string, depth int) *streamClient {
	cl := connect.NewClient[seqv1.NextRequest, seqv1.NextResponse](api.NewH2CClient(), "http://"+addr+streamProcedure)
	c := &streamClient{stream: cl.CallBidiStream(ctx), depth: depth}
	c.cond = sync.NewCond(&c.mu)
	go c.sendLoop()
	go c.receiveLoop()
	return c
}

func (c *streamClient) Next(key uint64) ([]uint64, error) {
	w := &streamWaiter{done: make(chan struct{}, 1)}
	c.mu.Lock()
	w.off, w.n = len(c.keys), 1
	c.keys = append(c.keys, key)
	c.waiters = append(c.waiters, w)
	c.cond.Signal()
	c.mu.Unlock()
	<-w.done
	if w.vals == nil {
		return nil, c.err
	}
	return w.vals, nil
}

func (c *streamClient) sendLoop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil {
		for c.err == nil && (len(c.waiters) == 0 || len(c.inFlight) >= c.depth) {
			c.cond.Wait()
		}
		if c.err != nil {
			return
		}
		keys, ws := c.keys, c.waiters
		c.keys, c.waiters = nil, nil
		c.inFlight = append(c.inFlight, ws)
		c.mu.Unlock()
		err := c.stream.Send(&seqv1.NextRequest{Space: "default", Keys: keys})
		c.mu.Lock()
		if err != nil {
			c.fail(err)
		}
	}
}

func (c *streamClient) receiveLoop() {
	for {
		resp, err := c.stream.Receive()
		c.mu.Lock()
		if err != nil {
			c.fail(err)
			c.mu.Unlock()
			return
		}
		ws := c.inFlight[0]
		c.inFlight = c.inFlight[1:]
		c.cond.Signal()
		c.mu.Unlock()
		vals := resp.GetValues()
		for _, w := range ws {
			w.vals = vals[w.off : w.off+w.n : w.off+w.n]
			w.done <- struct{}{}
		}
	}
}

// fail ends every call waiting. Call with c.mu held.
func (c *streamClient) fail(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	for _, ws := range append(c.inFlight, c.waiters) {
		for _, w := range ws {
			w.done <- struct{}{}
		}
	}
	c.inFlight, c.waiters = nil, nil
	c.cond.Broadcast()
}

// BenchmarkStreamPrototypeNext is 64 callers (32 per CPU) of single-key Next
// over one coalescing bidi stream (2 messages in flight); ns/op is per id.
// Compare with BenchmarkStreamPrototypeUnaryCoalesced on the same server.
func BenchmarkStreamPrototypeNext(b *testing.B) {
	addr := streamServer(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newStreamClient(ctx, addr, 2)
	var n atomic.Uint64
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(n.Add(7919) % 1000000); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStreamPrototypeUnaryCoalesced is the same load through package
// client (coalesced unary Next) against the same server.
func BenchmarkStreamPrototypeUnaryCoalesced(b *testing.B) {
	c, err := client.New([]string{streamServer(b)}, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var n atomic.Uint64
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx, "default", n.Add(7919)%1000000); err != nil {
				b.Fatal(err)
			}
		}
	})
}
