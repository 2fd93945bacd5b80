package api

import (
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/seqd/seqd/api/gen/grpc/health/v1/healthv1connect"
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

	peerCfg   Peers
	peerHTTP  *http.Client
	frontHTTP *http.Client // forwards of Sequences (peers.go)
	peersMu   sync.Mutex
	peers     map[string]*peer

	// token guards AdminService (and SequenceService too when
	// guardSequence is set); empty means no authentication.
	token         string
	guardSequence bool

	answerHdrs answerHeaders   // see headers.go
	genHdr     generationCache // see generation.go
	frames     frameConns      // NextStream's framed transport (frames.go)

	streamAnswers func(code connect.Code, issued int, took time.Duration) // WithStreamAnswers (stream.go)

	ids ids // service-mode flake ids (id.go)

	seqs Sequences // in-process calls of the other front ends (frontends.go)
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
	s.seqs.s = s
	s.peerHTTP = s.peerCfg.client()
	s.frontHTTP = s.peerCfg.frontClient()
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
	opts := append(jsonCodecs(),
		// front (front.go) refuses a body over maxMessageBytes first, with
		// invalid_argument; this bounds what a compressed body expands to.
		connect.WithReadMaxBytes(maxMessageBytes),
		// Responses are a few bytes: compressing them costs more than it saves.
		connect.WithCompressMinBytes(1024),
	)
	// Every call passes admit (guard.go): the token, the generation.
	opts = append(opts, connect.WithInterceptors(generationGuard{s}))
	// SequenceService never compresses: its responses are varint-packed
	// numbers that gzip shrinks by about a tenth, at a cost of ~0.2ms to
	// compress and ~0.1ms to decompress a 1000-value response, more than the
	// rest of the call.
	seqOpts := append(append(slices.Clone(opts), connect.WithCompressMinBytes(math.MaxInt32)), extra...)
	opts = append(opts, extra...)
	mux := http.NewServeMux()
	seqPath, seqHandler := seqv1connect.NewSequenceServiceHandler(s, seqOpts...)
	mux.Handle(seqPath, s.withFrames(seqHandler))
	mux.Handle(seqv1connect.NewAdminServiceHandler(s, opts...))
	mux.Handle(seqv1connect.NewIdServiceHandler(s, seqOpts...))
	mux.Handle(healthv1connect.NewHealthHandler(health{s}, opts...))
	mux.Handle(peerv1connect.NewPeerServiceHandler(peerService{s}, opts...))
	// Reflection (v1 and v1alpha), so grpcurl and buf curl need no proto files.
	reflector := grpcreflect.NewStaticReflector(seqv1connect.SequenceServiceName, seqv1connect.AdminServiceName, seqv1connect.IdServiceName, healthv1connect.HealthName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	// Leaf's HTTP API (leaf.go) answers in its own plain-text format, so it
	// stands beside front, not behind it (front would read its 404s as the
	// mux's own); everything else goes through front.
	top := http.NewServeMux()
	top.Handle("/api/segment/get/{tag}", getOnly(s.leafSegment))
	top.Handle("/api/snowflake/get/{key}", getOnly(s.leafSnowflake))
	top.Handle("/", front(mux))
	return top
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
