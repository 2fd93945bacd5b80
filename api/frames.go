package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/frame"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// NextStream's framed transport.
//
// The Connect stream (stream.go) costs a server about as much CPU per
// message as a unary call's HTTP/1.1 request: Go's HTTP/2 server reads each
// frame with two system calls and hands every message through three
// goroutines. So the Go client opens its streams as an HTTP/1.1 request for
// the NextStream procedure's path with "Upgrade: seqd.StreamUpgrade"
// instead: the server answers 101 and from then on serves the connection
// from one goroutine, reading each message (an unsigned varint length and a
// NextStreamRequest), serving it with the same answerMessage as the Connect
// stream (a unary Next with the upgrade request's token and Seqd-Forwarded
// headers), and writing the answer the same way, flushed when no further
// message is buffered. The messages, the answers, their order and their
// errors are those of the Connect stream; only the framing differs.
//
// The upgrade request passes admit like a Connect call (the bearer token
// when SequenceService is guarded, the generation: a fenced server answers
// 503), and the 101 answer carries the server's Seqd-Generation, which the
// client checks on every answer of the connection. A message longer than the server's read
// limit, or that does not decode, ends the connection. The connections are
// closed by Close, and a server that is closing refuses upgrades.

// frameConns tracks the upgraded connections, which net/http's Shutdown and
// Close do not know of.
type frameConns struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// withFrames routes an upgrade request for NextStream's path to the framed
// transport, and every other request to h (the SequenceService handler).
func (s *Server) withFrames(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == seqv1connect.SequenceServiceNextStreamProcedure && upgradeTo(r.Header, seqd.StreamUpgrade) {
			s.serveFrames(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// upgradeTo reports whether h asks for an upgrade to proto.
func upgradeTo(h http.Header, proto string) bool {
	has := func(name, token string) bool {
		for _, v := range h.Values(name) {
			for f := range strings.SplitSeq(v, ",") {
				if strings.EqualFold(strings.TrimSpace(f), token) {
					return true
				}
			}
		}
		return false
	}
	return has("Connection", "upgrade") && has("Upgrade", proto)
}

// serveFrames answers an upgrade request and serves the connection.
func (s *Server) serveFrames(w http.ResponseWriter, r *http.Request) {
	gen := generationGuard{s}.header()
	if err := s.admit(seqv1connect.SequenceServiceNextStreamProcedure, r.Header); err != nil {
		status := http.StatusServiceUnavailable
		if connect.CodeOf(err) == connect.CodeUnauthenticated {
			status = http.StatusUnauthorized
		}
		var ce *connect.Error
		msg := "refused"
		if errors.As(err, &ce) {
			msg = ce.Message()
		}
		http.Error(w, msg, status)
		return
	}
	if s.frames.isClosed() {
		http.Error(w, "the server is stopping", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.ProtoMajor != 1 {
		http.Error(w, "the framed NextStream needs an HTTP/1.1 POST", http.StatusBadRequest)
		return
	}
	// The ResponseController reaches the connection through the wrappers
	// in front of the handler (front.go's explainer, metrics).
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.log.Debug("framed stream: hijack failed", "err", err)
		http.Error(w, "the framed NextStream needs an HTTP/1.1 connection", http.StatusBadRequest)
		return
	}
	if !s.frames.add(conn) {
		conn.Close() // closing: the client retries elsewhere
		return
	}
	defer s.frames.remove(conn)
	// The HTTP server's read deadline (ReadHeaderTimeout) stays on a
	// hijacked connection: clear it.
	_ = conn.SetDeadline(time.Time{})
	bw := brw.Writer
	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + seqd.StreamUpgrade + "\r\nConnection: Upgrade\r\n"
	if gen != nil {
		head += seqd.HeaderGeneration + ": " + gen[0] + "\r\n"
	}
	if _, err := bw.WriteString(head + "\r\n"); err != nil {
		return
	}
	if err := bw.Flush(); err != nil {
		return
	}
	err = s.serveFramesOn(r.Context(), brw.Reader, bw, streamHeader(r.Header))
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("framed stream ended", "remote", conn.RemoteAddr().String(), "err", err)
	}
}

// serveFramesOn reads, serves and answers messages until the connection
// ends or a message is malformed, and returns why.
func (s *Server) serveFramesOn(ctx context.Context, br *bufio.Reader, bw *bufio.Writer, hdr http.Header) error {
	in := &seqv1.NextStreamRequest{}
	out := &seqv1.NextStreamResponse{}
	var buf, enc []byte
	for {
		var err error
		if buf, err = frame.Read(br, buf); err != nil {
			return err
		}
		in.Reset()
		if err := proto.Unmarshal(buf, in); err != nil {
			return err
		}
		s.answerMessage(ctx, hdr, in, out)
		if enc, err = frame.Append(enc[:0], out); err != nil {
			return err
		}
		if _, err := bw.Write(enc); err != nil {
			return err
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

func (f *frameConns) add(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	if f.conns == nil {
		f.conns = map[net.Conn]struct{}{}
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *frameConns) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func (f *frameConns) remove(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

// close closes every upgraded connection and refuses new ones.
func (f *frameConns) close() {
	f.mu.Lock()
	f.closed = true
	cs := f.conns
	f.conns = nil
	f.mu.Unlock()
	for c := range cs {
		c.Close()
	}
}
