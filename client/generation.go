package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// generations is the interceptor through which a client takes part in
// fencing (see seqd.Generation): it remembers the newest generation it met
// in answers that handed out values (a generation that has served: a
// server fences itself on the generation a client names, so a client never
// names one it met only in an error, a status answer or a stream's
// opening, such as a restore made by mistake that never served), names it
// on every call (Seqd-Generation: a server of an older
// generation of the lineage learns that a restore replaced its cluster, and
// stops), and refuses an answer from an older generation, from a sibling
// restore of the one it met first, or from another lineage, as if the
// server had been unavailable: such an answer never reaches the caller,
// and the call is tried on another server.
type generations struct {
	mu     sync.Mutex
	known  seqd.Generation
	header []string
}

// errOldGeneration wraps the reasons an answer is refused.
var errOldGeneration = errors.New("answer refused")

// Generation returns the newest generation of the cluster the client has
// met (unknown before the first answer, and from servers of builds before
// generations).
func (c *Client) Generation() seqd.Generation {
	c.gens.mu.Lock()
	defer c.gens.mu.Unlock()
	return c.gens.known
}

// see checks the generation an answer carries, and remembers it if it is
// newer and served (the answer handed out values).
func (g *generations) see(v string, served bool) error {
	if v == "" {
		return nil // a server of a build before generations
	}
	gen, err := seqd.ParseGeneration(v)
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w: %v", errOldGeneration, err))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.known
	switch {
	case gen == k:
		return nil
	case !k.Known() || gen.Supersedes(k):
		if served {
			g.known, g.header = gen, []string{gen.String()}
		}
		return nil
	case gen.Lineage != k.Lineage:
		err = fmt.Errorf("%w: the server belongs to another cluster (lineage %s; this client's cluster is %s)", errOldGeneration, gen.Lineage, k.Lineage)
	case k.Supersedes(gen):
		err = fmt.Errorf("%w: the server's cluster was replaced by a restore (generation %d; this client met generation %d)", errOldGeneration, gen.Number, k.Number)
	default:
		err = fmt.Errorf("%w: the server's cluster is another restore of the same backup (cluster %s; this client met cluster %s first)", errOldGeneration, gen.Cluster, k.Cluster)
	}
	return connect.NewError(connect.CodeUnavailable, err)
}

// name puts the known generation on a request.
func (g *generations) name(h http.Header) {
	g.mu.Lock()
	v := g.header
	g.mu.Unlock()
	if v != nil {
		h[seqd.HeaderGeneration] = v
	}
}

// named returns the known generation's header value ("" while unknown).
func (g *generations) named() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.header == nil {
		return ""
	}
	return g.header[0]
}

// answered checks an answer's generation (on its headers, or on an
// error's metadata); served tells whether it handed out values.
func (g *generations) answered(h http.Header, err error, served bool) error {
	var ce *connect.Error
	if h == nil && errors.As(err, &ce) {
		h = ce.Meta()
	}
	if h == nil {
		return err
	}
	if gerr := g.see(h.Get(seqd.HeaderGeneration), served && err == nil); gerr != nil {
		return gerr
	}
	return err
}

func (g *generations) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		g.name(req.Header())
		resp, err := next(ctx, req)
		var h http.Header
		if resp != nil {
			h = resp.Header()
		}
		if err = g.answered(h, err, handsOutValues(req.Spec().Procedure)); err != nil {
			return nil, err
		}
		return resp, nil
	}
}

func (g *generations) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		g.name(conn.RequestHeader())
		return &checkedStream{StreamingClientConn: conn, g: g, values: handsOutValues(spec.Procedure)}
	}
}

func (g *generations) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// checkedStream checks the server's generation (from the stream's response
// header) on every message before it reaches the caller: a client that met
// a newer generation since the stream opened refuses the rest of it.
type checkedStream struct {
	connect.StreamingClientConn
	g      *generations
	values bool    // the procedure hands out values
	gen    *string // the server's generation, read at the first message
}

func (s *checkedStream) Receive(m any) error {
	if err := s.StreamingClientConn.Receive(m); err != nil {
		return s.g.answered(nil, err, false)
	}
	if s.gen == nil {
		v := s.ResponseHeader().Get(seqd.HeaderGeneration)
		s.gen = &v
	}
	return s.g.see(*s.gen, s.values && servedMessage(m))
}

// handsOutValues reports whether procedure hands out values
// (SequenceService, IdService).
func handsOutValues(procedure string) bool {
	return strings.HasPrefix(procedure, "/"+seqv1connect.SequenceServiceName+"/") ||
		strings.HasPrefix(procedure, "/"+seqv1connect.IdServiceName+"/")
}

// servedMessage reports whether a stream's message handed out values: a
// NextStream answer without an error code.
func servedMessage(m any) bool {
	r, ok := m.(*seqv1.NextStreamResponse)
	return !ok || r.GetCode() == 0
}
