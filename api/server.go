// Package api serves seqd's Connect API (package seq.v1): the Connect, gRPC
// and gRPC-Web protocols on one port, over HTTP/1.1 and h2c.
//
// Any node answers any call: a node that is not the leader forwards the call
// to the leader it knows (once: a forwarded call that reaches a non-leader
// fails with unavailable). Unavailable errors carry the leader's ID and API
// address in the Seqd-Leader-Id and Seqd-Leader metadata when known.
package api

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/gen/grpc/health/v1/healthv1connect"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/api/gen/seqd/peer/v1/peerv1connect"
	"github.com/seqd/seqd/cluster"
)

// Limits on one call.
const (
	maxMessageBytes = 4 << 20
	forwardTimeout  = 10 * time.Second
	peerStatusWait  = 700 * time.Millisecond
)

// Server implements SequenceService and AdminService on top of a cluster node.
type Server struct {
	node *cluster.Node
	log  *slog.Logger

	peerCfg  Peers
	peerHTTP *http.Client
	peersMu  sync.Mutex
	peers    map[string]*peer

	// token guards AdminService (and SequenceService too when
	// guardSequence is set); empty means no authentication.
	token         string
	guardSequence bool

	answerHdrs answerHeaders // see headers.go
}

// Option configures a Server.
type Option func(*Server)

// WithPeers sets how the server calls other nodes (TLS, token).
func WithPeers(p Peers) Option { return func(s *Server) { s.peerCfg = p } }

// WithToken requires "Authorization: Bearer <token>" on AdminService calls,
// and on SequenceService calls too when guardSequence is set. Health and
// reflection stay open (probes carry no token).
func WithToken(token string, guardSequence bool) Option {
	return func(s *Server) { s.token, s.guardSequence = token, guardSequence }
}

type peer struct {
	seq   seqv1connect.SequenceServiceClient
	admin seqv1connect.AdminServiceClient
}

// New returns a server for node. logger may be nil.
func New(node *cluster.Node, logger *slog.Logger, opts ...Option) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		node:  node,
		log:   logger.With("component", "api"),
		peers: make(map[string]*peer),
	}
	for _, o := range opts {
		o(s)
	}
	s.peerHTTP = s.peerCfg.client()
	s.answerHdrs.servedBy = []string{node.ID()}
	return s
}

// NewH2CClient returns an HTTP client that speaks HTTP/2 without TLS (h2c,
// prior knowledge), as gRPC needs and as Connect prefers.
func NewH2CClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           &p,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// Handler returns the HTTP handler for every service (sequence, admin,
// health, reflection). extra options (interceptors, say) apply to all.
func (s *Server) Handler(extra ...connect.HandlerOption) http.Handler {
	opts := []connect.HandlerOption{
		connect.WithReadMaxBytes(maxMessageBytes),
		// Responses are a few bytes: compressing them costs more than it saves.
		connect.WithCompressMinBytes(1024),
	}
	if s.token != "" {
		opts = append(opts, connect.WithInterceptors(authInterceptor{s}))
	}
	// SequenceService never compresses: its responses are varint-packed
	// numbers that gzip shrinks by about a tenth, at a cost of ~0.2ms to
	// compress and ~0.1ms to decompress a 1000-value response, more than the
	// rest of the call.
	seqOpts := append(append(slices.Clone(opts), connect.WithCompressMinBytes(math.MaxInt32)), extra...)
	opts = append(opts, extra...)
	mux := http.NewServeMux()
	mux.Handle(seqv1connect.NewSequenceServiceHandler(s, seqOpts...))
	mux.Handle(seqv1connect.NewAdminServiceHandler(s, opts...))
	mux.Handle(healthv1connect.NewHealthHandler(health{s}, opts...))
	mux.Handle(peerv1connect.NewPeerServiceHandler(peerService{s}, opts...))
	// Reflection (v1 and v1alpha), so grpcurl and buf curl need no proto files.
	reflector := grpcreflect.NewStaticReflector(seqv1connect.SequenceServiceName, seqv1connect.AdminServiceName, healthv1connect.HealthName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	return mux
}

// NewHTTPServer returns an http.Server for h that accepts HTTP/1.1 and h2c.
func NewHTTPServer(h http.Handler) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           h,
		Protocols:         &p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

func (s *Server) peer(addr string) *peer {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	p := s.peers[addr]
	if p == nil {
		base := s.peerCfg.scheme() + addr
		p = &peer{
			seq:   seqv1connect.NewSequenceServiceClient(s.peerHTTP, base),
			admin: seqv1connect.NewAdminServiceClient(s.peerHTTP, base, s.peerCfg.options()...),
		}
		s.peers[addr] = p
	}
	return p
}

// route runs a call locally on the leader, or forwards it to the leader.
func route[Req, Resp any](
	s *Server, ctx context.Context, req *connect.Request[Req], procedure string,
	local func(context.Context) (*Resp, error),
	remote func(context.Context, *peer, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	resp, err := routeInner(s, ctx, req, local, remote)
	err = s.toConnect(err)
	s.logCall(procedure, err)
	return resp, err
}

func routeInner[Req, Resp any](
	s *Server, ctx context.Context, req *connect.Request[Req],
	local func(context.Context) (*Resp, error),
	remote func(context.Context, *peer, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	if s.node.IsLeader() {
		msg, err := local(ctx)
		if err != nil {
			return nil, err
		}
		resp := connect.NewResponse(msg)
		s.setAnswerHeaders(resp.Header())
		return resp, nil
	}
	id, addr := s.node.Leader()
	if req.Header().Get(seqd.HeaderForwarded) != "" || id == "" || addr == "" || id == s.node.ID() {
		if id == "" {
			return nil, seqd.ErrNoLeader
		}
		return nil, seqd.ErrNotLeader
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, forwardTimeout)
		defer cancel()
	}
	freq := connect.NewRequest(req.Msg)
	freq.Header().Set(seqd.HeaderForwarded, s.node.ID())
	if a := req.Header().Get("Authorization"); a != "" {
		freq.Header().Set("Authorization", a) // the caller's token, already checked here
	}
	resp, err := remote(fctx, s.peer(addr), freq)
	if err != nil {
		if connect.IsWireError(err) {
			return nil, err // the leader's own answer
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.log.Warn("forwarding to the leader failed", "leader", id, "addr", addr, "err", err)
		return nil, fmt.Errorf("%w: leader %s unreachable", seqd.ErrNotLeader, id)
	}
	out := connect.NewResponse(resp.Msg)
	if v := resp.Header().Get(seqd.HeaderRoutingVersion); v != "" {
		out.Header().Set(seqd.HeaderRoutingVersion, v)
	}
	// Tell the caller where the leader is, so that a smart client stops
	// paying for this extra hop.
	out.Header().Set(seqd.HeaderLeader, addr)
	return out, nil
}

func spaceName(name string) (string, error) {
	if name == "" {
		return seqd.DefaultSpaceName, nil
	}
	if !seqd.ValidName(name) {
		return "", fmt.Errorf("%w %q: use 1-64 characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit", errBadSpaceName, name)
	}
	return name, nil
}

func checkKeys(keys []uint64) error {
	if len(keys) == 0 {
		return errNoKeys
	}
	if len(keys) > seqd.MaxKeys {
		return fmt.Errorf("%w: %d keys, at most %d", errTooManyKeys, len(keys), seqd.MaxKeys)
	}
	return nil
}

// Next implements SequenceService.Next.
func (s *Server) Next(ctx context.Context, req *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	space, err := spaceName(req.Msg.GetSpace())
	if err == nil {
		err = checkKeys(req.Msg.GetKeys())
	}
	if err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.SequenceServiceNextProcedure,
		func(ctx context.Context) (*seqv1.NextResponse, error) {
			vals, err := s.node.Allocator().Next(ctx, space, req.Msg.GetKeys())
			if err != nil {
				return nil, err
			}
			return &seqv1.NextResponse{Values: vals}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
			return p.seq.Next(ctx, r)
		})
}

// Reserve implements SequenceService.Reserve.
func (s *Server) Reserve(ctx context.Context, req *connect.Request[seqv1.ReserveRequest]) (*connect.Response[seqv1.ReserveResponse], error) {
	space, err := spaceName(req.Msg.GetSpace())
	count := req.Msg.GetCount()
	if err == nil && (count == 0 || count > seqd.MaxReserveCount) {
		err = fmt.Errorf("%w: count %d, want 1 to %d", errBadCount, count, seqd.MaxReserveCount)
	}
	if err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.SequenceServiceReserveProcedure,
		func(ctx context.Context) (*seqv1.ReserveResponse, error) {
			first, err := s.node.Allocator().Reserve(ctx, space, req.Msg.GetKey(), uint64(count))
			if err != nil {
				return nil, err
			}
			return &seqv1.ReserveResponse{First: first, Count: count}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.ReserveRequest]) (*connect.Response[seqv1.ReserveResponse], error) {
			return p.seq.Reserve(ctx, r)
		})
}

// Current implements SequenceService.Current.
func (s *Server) Current(ctx context.Context, req *connect.Request[seqv1.CurrentRequest]) (*connect.Response[seqv1.CurrentResponse], error) {
	space, err := spaceName(req.Msg.GetSpace())
	if err == nil {
		err = checkKeys(req.Msg.GetKeys())
	}
	if err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.SequenceServiceCurrentProcedure,
		func(ctx context.Context) (*seqv1.CurrentResponse, error) {
			vals, err := s.node.Allocator().Current(ctx, space, req.Msg.GetKeys())
			if err != nil {
				return nil, err
			}
			return &seqv1.CurrentResponse{Values: vals}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.CurrentRequest]) (*connect.Response[seqv1.CurrentResponse], error) {
			return p.seq.Current(ctx, r)
		})
}
