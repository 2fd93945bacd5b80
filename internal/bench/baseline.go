package bench

import (
	"context"
	"math"
	"net/http"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// baseline implements SequenceService with one atomic counter: the cost of
// a Connect call on this machine with nothing behind it.
type baseline struct {
	seqv1connect.UnimplementedSequenceServiceHandler
	n atomic.Uint64
}

func (b *baseline) Next(_ context.Context, req *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	keys := req.Msg.GetKeys()
	vals := make([]uint64, len(keys))
	last := b.n.Add(uint64(len(keys)))
	for i := range vals {
		vals[i] = last - uint64(len(keys)-1-i)
	}
	return connect.NewResponse(&seqv1.NextResponse{Values: vals}), nil
}

func (b *baseline) Reserve(_ context.Context, req *connect.Request[seqv1.ReserveRequest]) (*connect.Response[seqv1.ReserveResponse], error) {
	c := req.Msg.GetCount()
	last := b.n.Add(uint64(c))
	return connect.NewResponse(&seqv1.ReserveResponse{First: last - uint64(c) + 1, Count: c}), nil
}

func (b *baseline) Current(_ context.Context, req *connect.Request[seqv1.CurrentRequest]) (*connect.Response[seqv1.CurrentResponse], error) {
	vals := make([]uint64, len(req.Msg.GetKeys()))
	cur := b.n.Load()
	for i := range vals {
		vals[i] = cur
	}
	return connect.NewResponse(&seqv1.CurrentResponse{Values: vals}), nil
}

// newBaselineServer returns an http.Server (seqd's settings: HTTP/1.1 and
// h2c) for the baseline handler, with seqd's handler options; with compress,
// with connect-go's default instead (gzip every response of a client that
// accepts gzip, as connect-go's clients do).
func newBaselineServer(compress bool) *http.Server {
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(4 << 20)}
	if !compress {
		opts = append(opts, connect.WithCompressMinBytes(math.MaxInt32))
	}
	mux := http.NewServeMux()
	mux.Handle(seqv1connect.NewSequenceServiceHandler(&baseline{}, opts...))
	return api.NewHTTPServer(mux)
}
