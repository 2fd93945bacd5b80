package client

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"
)

// Protocol selects the wire protocol.
type Protocol string

// The protocols a seqd node speaks.
const (
	Connect Protocol = "connect"
	GRPC    Protocol = "grpc"
	GRPCWeb Protocol = "grpcweb"
)

// Options configures a Client. The zero value is valid.
type Options struct {
	// Protocol defaults to Connect.
	Protocol Protocol
	// HTTPClient defaults to HTTP/1.1 with keep-alive for the Connect and
	// gRPC-Web protocols (one connection per request in flight; on a seqd
	// node an HTTP/1.1 call costs less CPU than an h2c one, see
	// BENCHMARKS.md) and to h2c (HTTP/2 without TLS) for gRPC, which needs
	// HTTP/2, or when HTTP2 is set.
	HTTPClient *http.Client
	// HTTP2 makes the default HTTPClient use h2c for every protocol: one
	// multiplexed connection per node instead of one per request in flight.
	HTTP2 bool
	// RetryFor bounds how long one call keeps retrying unavailable errors
	// (default 15s; the call's context deadline also applies).
	RetryFor time.Duration
	// AttemptTimeout bounds one attempt on one node (default 1s). An attempt
	// that times out, on a node that hangs (paused, or cut off the network),
	// is retried on another node like an unavailable error.
	AttemptTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries (defaults
	// 10ms and 500ms, with jitter).
	MinBackoff, MaxBackoff time.Duration

	// DisableStreaming sends coalesced Next requests as unary calls. By
	// default they travel as messages of one NextStream call per node: on
	// its framed transport (an HTTP/1.1 connection upgraded to
	// length-prefixed messages, over TLS with TLS), or over Connect and
	// HTTP/2 with a given HTTPClient (which must then speak HTTP/2); and as
	// unary calls to a node that does not serve NextStream (an older
	// server) or while a stream to it cannot be opened. The gRPC-Web
	// protocol never streams. See docs/streaming.md.
	DisableStreaming bool

	// DisableCoalescing sends every Next and Current call as its own
	// request. By default, concurrent calls for the same space share
	// requests: a call is sent at once when no request of its kind is in
	// flight, and calls that arrive while MaxInFlight requests are in flight
	// go together in the next one (see coalesce.go). Per-key order and
	// per-caller results are kept either way.
	DisableCoalescing bool
	// MaxBatchKeys bounds the keys of one coalesced request (default 1000,
	// at most 10000); a call with more keys is sent on its own.
	MaxBatchKeys int
	// MaxInFlight bounds the coalesced requests in flight per space and kind
	// of call, and per raft group in a cluster of several (default 1). Above
	// 1, requests leave at least a round trip / MaxInFlight apart (round
	// trips measured as a moving average), so that the requests in flight
	// share the waiting calls evenly.
	MaxInFlight int
	// MaxBatchWait bounds how long a call waits for a free slot: a queued
	// request is sent after this long even if MaxInFlight requests are still
	// in flight (default 5ms; negative: wait for a slot).
	MaxBatchWait time.Duration

	// Token, when set, is sent as a bearer token (Authorization: Bearer
	// Token) with every call: a cluster started with --token requires it on
	// AdminService calls, and with --token-sequence on every call.
	Token string
	// TLS, when set, makes the client call the nodes over HTTPS with this
	// configuration (typically RootCAs: the CA of the cluster's --tls-cert).
	// Addresses without a scheme, given to New or learned from the cluster,
	// are then dialled with https://. The default HTTPClient negotiates
	// HTTP/2 (ALPN) for gRPC or with HTTP2 set, and uses HTTP/1.1 otherwise.
	// A given HTTPClient must carry the TLS configuration itself.
	TLS *tls.Config

	// DisableRouting keeps the client on the addresses given to New and the
	// leader hints nodes send. By default the client also reads the
	// cluster's routing table (ClusterStatus) when it changes and sends
	// calls straight to the leader's advertised API address (see
	// routing.go). Set it when those addresses are not reachable from the
	// client (behind a proxy or a NAT). It also turns off routing by raft
	// group in a cluster of several: every call then goes whole to the
	// believed leader, which forwards each group's share.
	DisableRouting bool

	// Logger receives the client's own logs (today those of embedded
	// generators: grants renewed late, fenced, released). The default is
	// none: the client writes nothing unless given a logger.
	Logger *slog.Logger
}
