package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// generationGuard is the interceptor through which every Connect call
// passes Server.admit (guard.go), and that carries generations (see
// seqd.Generation and cluster's fence.go) on every call: it learns the
// generation a caller names in Seqd-Generation (the newest it met of this
// server's lineage: a newer one fences this server), refuses the calls that
// hand out values once this server is fenced (seqd.ErrSuperseded), and puts
// this server's generation on every answer that handed out values (and on
// the opening of a stream that will), so that a client never takes a value
// from a cluster that a restore replaced. Only those answers carry it: a
// client names to servers the newest generation it met, and a server
// fences itself on it, so the header must mean "this generation served"; a
// restore made by mistake that never served (refused by admission) answers
// errors and status calls without it, and fences nothing.
type generationGuard struct{ s *Server }

// genValue caches the Seqd-Generation value of answers.
type genValue struct {
	gen   seqd.Generation
	value []string
}

// servesValues reports whether procedure hands out values.
func servesValues(procedure string) bool {
	return strings.HasPrefix(procedure, "/"+seqv1connect.SequenceServiceName+"/") ||
		strings.HasPrefix(procedure, "/"+seqv1connect.IdServiceName+"/")
}

// check learns the caller's generation and refuses a call that hands out
// values on a fenced server. Only a call that asks for values teaches this
// server a generation: the header means "I took values from this
// generation", and only such a call has passed the token that guards
// values (--token-sequence); a health check, a status read or any other
// call never fences a server, whatever it names.
func (g generationGuard) check(procedure string, h http.Header) error {
	serves := servesValues(procedure)
	if v := h.Get(seqd.HeaderGeneration); v != "" && serves && !g.s.genLearned(v) {
		gen, err := seqd.ParseGeneration(v)
		if err != nil {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("header %s: %w", seqd.HeaderGeneration, err))
		}
		g.s.node.LearnGeneration(gen)
		g.s.genHdr.seen.Store(&v)
	}
	if serves && g.s.node.Fenced() {
		return g.s.toConnect(seqd.ErrSuperseded)
	}
	return nil
}

// genLearned reports whether v is the Seqd-Generation value learned last,
// so that the messages of a stream, which all name the same generation,
// parse it once.
func (s *Server) genLearned(v string) bool {
	last := s.genHdr.seen.Load()
	return last != nil && *last == v
}

// header returns the value answers carry (nil while the server has no
// generation).
func (g generationGuard) header() []string {
	gen := g.s.node.Generation()
	if !gen.Known() {
		return nil
	}
	c := g.s.genHdr.answer.Load()
	if c == nil || c.gen != gen {
		c = &genValue{gen: gen, value: []string{gen.String()}}
		g.s.genHdr.answer.Store(c)
	}
	return c.value
}

// mark puts the generation on an answer that handed out values.
func (g generationGuard) mark(h http.Header) {
	if v := g.header(); v != nil {
		h[seqd.HeaderGeneration] = v
	}
}

func (g generationGuard) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := g.s.admit(req.Spec().Procedure, req.Header()); err != nil {
			return nil, err
		}
		resp, err := next(ctx, req)
		if err == nil && resp != nil && servesValues(req.Spec().Procedure) {
			g.mark(resp.Header())
		}
		return resp, err
	}
}

func (g generationGuard) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (g generationGuard) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := g.s.admit(conn.Spec().Procedure, conn.RequestHeader()); err != nil {
			return err
		}
		if servesValues(conn.Spec().Procedure) {
			g.mark(conn.ResponseHeader()) // checked by the client on every message
		}
		return next(ctx, conn)
	}
}

// generationCache is the Server's cache of the answer header, and of the
// request header it learned last.
type generationCache struct {
	answer atomic.Pointer[genValue]
	seen   atomic.Pointer[string]
}
