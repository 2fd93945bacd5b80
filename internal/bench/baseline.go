package bench

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/cli"
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

// baselineServer serves SequenceService from a handler that only
// increments a counter, on seqd's HTTP server settings.
func baselineServer(prog string, args []string) error {
	fs := cli.NewFlagSet(prog+" baseline-server", prog+" baseline-server [--listen ADDR] [--compress]",
		"Serves seq.v1.SequenceService from a bare connect-go handler (an atomic counter per call,\n"+
			"no raft, no allocator) with seqd's HTTP server and handler options, until interrupted.")
	listen := fs.String("listen", "127.0.0.1:7790", "listen address")
	compress := fs.Bool("compress", false, "gzip responses as connect-go does by default (seqd does not compress SequenceService answers)")
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return cli.Usagef("baseline-server takes no arguments")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := newBaselineServer(*compress)
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "baseline SequenceService on %s\n", ln.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}
