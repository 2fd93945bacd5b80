package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// NextStream implements SequenceService.NextStream: every request message is
// served as a unary Next call would be (s.Next: the same validation, the
// same split by raft group, the same serving here or forwarding once, the
// same error map), one message after the other, and answered by one
// response message in the order the requests came. So a stream keeps every
// rule of the unary call: the values of one message are taken before those
// of the next, and a message answered with an error is the unary call's
// error, leader hint included. The stream itself ends only when the client
// closes it, the connection breaks or the server stops; messages the server
// read but had not answered then may have taken values (gaps), like a unary
// call whose answer was lost.
//
// Flow control bounds the memory a stream holds: the handler reads the next
// message only after it sent the answer to the last one, so a client that
// stops reading answers stops the handler, and HTTP/2's windows then stop
// the client's writes.
func (s *Server) NextStream(ctx context.Context, st *connect.BidiStream[seqv1.NextStreamRequest, seqv1.NextStreamResponse]) error {
	hdr := streamHeader(st.RequestHeader())
	conn := st.Conn()
	in := &seqv1.NextStreamRequest{}
	out := &seqv1.NextStreamResponse{}
	for {
		in.Reset()
		if err := conn.Receive(in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		s.answerMessage(ctx, hdr, in, out)
		if err := conn.Send(out); err != nil {
			return err
		}
	}
}

// streamHeader keeps the headers of a stream's opening that its messages
// carry: the token, Seqd-Forwarded, Seqd-Entry and Seqd-Generation.
func streamHeader(h http.Header) http.Header {
	out := make(http.Header, 4)
	for _, k := range []string{"Authorization", seqd.HeaderForwarded, seqd.HeaderEntry, seqd.HeaderGeneration} {
		if v := h.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out
}

// WithStreamAnswers has the server report every NextStream message it
// answers, on either transport (the Connect stream here, the framed one in
// frames.go): each message is one Next call, so that the metrics count it
// as the interceptor counts a unary Next. code is 0 for values; issued is
// how many values this server issued itself (none when the answer is an
// error or came from the leader it forwarded to); took is the time the
// message took to serve.
func WithStreamAnswers(f func(code connect.Code, issued int, took time.Duration)) Option {
	return func(s *Server) { s.streamAnswers = f }
}

// answerMessage serves one NextStream message (streamNext) and reports the
// answer (WithStreamAnswers). Both transports serve every message through
// it, so none is answered unreported.
func (s *Server) answerMessage(ctx context.Context, hdr http.Header, in *seqv1.NextStreamRequest, out *seqv1.NextStreamResponse) {
	if s.streamAnswers == nil {
		s.streamNext(ctx, hdr, in, out)
		return
	}
	start := time.Now()
	issued := s.streamNext(ctx, hdr, in, out)
	s.streamAnswers(connect.Code(out.GetCode()), issued, time.Since(start))
}

// streamNext serves one NextStream message as a unary Next with the
// stream's headers (streamHeader), into out: it passes admit, as a unary
// call does in the interceptor, so a server fenced while the stream is open
// refuses its next message, and then the path of every per-key call
// (keys.go). Both transports of NextStream (this one and frames.go) serve
// every message with it.
func (s *Server) streamNext(ctx context.Context, hdr http.Header, in *seqv1.NextStreamRequest, out *seqv1.NextStreamResponse) (issued int) {
	*out = seqv1.NextStreamResponse{}
	err := s.admit(seqv1connect.SequenceServiceNextProcedure, hdr)
	var a keysAnswer
	if err == nil {
		a, err = s.keysRequest(ctx, kindNext, hdr, in.GetSpace(), in.GetKeys(), 0)
	}
	if err != nil {
		streamError(out, s.callFailed(seqv1connect.SequenceServiceNextProcedure, err))
		return
	}
	out.Values = a.vals
	// What the headers of a unary answer say (setKeysHeaders), as fields;
	// and, unlike them, where the first forwarded share of several went
	// (serveKeys).
	switch {
	case a.leader != "":
		out.Leader = a.leader
		out.Group = a.fwd.Get(seqd.HeaderGroup)
		out.RoutingVersion, _ = strconv.ParseUint(a.fwd.Get(seqd.HeaderRoutingVersion), 10, 64)
	case a.shares == 1:
		out.Group = groupValue(a.group, a.term)
		out.RoutingVersion = s.node.RoutingVersion()
	default:
		out.RoutingVersion = s.node.RoutingVersion()
	}
	return a.here
}

// streamError fills out with an error (mapped by toConnect) and its leader
// hint.
func streamError(out *seqv1.NextStreamResponse, err error) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		ce = connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
	out.Code = uint32(ce.Code())
	out.Message = ce.Message()
	out.Leader = ce.Meta().Get(seqd.HeaderLeader)
	out.LeaderId = ce.Meta().Get(seqd.HeaderLeaderID)
}
