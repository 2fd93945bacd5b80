// Package client is the Go client for seqd.
//
// A Client takes the API addresses of several nodes, remembers which one
// leads, and retries calls that fail with unavailable (no leader, a leader
// still waiting out its predecessor's lease, a node that is down) on other
// nodes with exponential backoff, following the leader hint that nodes send.
// Retrying Next or Reserve after an unavailable error is safe: a value is
// returned at most once, so a retry can only leave a gap, never a repeat.
//
// Concurrent Next calls (and Current calls) for the same space are
// coalesced into multi-key requests unless Options.DisableCoalescing is set:
// a call is sent at once when no request of its kind is in flight (no added
// latency when idle), and calls that arrive while requests are in flight go
// together in the next one. Each call still gets exactly the values for its
// own keys, and a call that completed before another began gets the smaller
// value for the same key. See coalesce.go for the rules and BatchStats for
// counters. Coalesced Next requests travel as messages of one long-lived
// NextStream call per node (on its framed transport, frames.go) when the
// node serves it, and as unary calls otherwise (stream.go).
//
// The client caches the cluster's routing table (the members' API addresses
// and the leader's), refreshes it in the background when an answer carries a
// new routing version or a node hints at another leader, and sends calls
// straight to the leader; see routing.go and Options.DisableRouting. In a
// cluster of several raft groups, Next, Current and Reserve calls go to the
// leader of the group owning each key instead: a call whose keys span
// several groups is split into one request per group, sent in parallel.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/gen/grpc/health/v1/healthv1connect"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
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
	// of call, and per raft group in a cluster of several (default 4). Above
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
}

// Client calls a seqd cluster. It is safe for concurrent use.
type Client struct {
	opts        Options
	http        *http.Client
	connectOpts []connect.ClientOption // protocol and token, for every node

	mu     sync.Mutex
	nodes  []*node // known nodes, in the order given, then learned ones
	leader int     // index into nodes of the node believed to lead
	seeds  int     // nodes[:seeds] are the addresses given to New

	// The routing table (routing.go): the version of the last refresh
	// (written under mu), and whether a refresh runs.
	routeVer   atomic.Uint64
	refreshing atomic.Bool
	refreshes  atomic.Uint64
	// groups is the per-group routing table of a cluster of several raft
	// groups (routing.go), replaced whole under mu; nil for one group or
	// before the first refresh.
	groups atomic.Pointer[groupTable]
	// forwarded counts the SequenceService answers that a node forwarded
	// (they carry Seqd-Leader); tests read it.
	forwarded atomic.Uint64
	// retried counts attempts tried again after an attempt failed (a test
	// hook: a retried share may go through a node that forwards it).
	retried atomic.Uint64

	batchers                 sync.Map // batcherKey → *batcher
	bCalls, bRequests, bKeys atomic.Uint64

	// streaming tells whether coalesced Next requests go on streams
	// (stream.go).
	streaming bool
	bStreamed atomic.Uint64
}

type node struct {
	addr   string
	seq    seqv1connect.SequenceServiceClient
	admin  seqv1connect.AdminServiceClient
	id     seqv1connect.IdServiceClient
	health healthv1connect.HealthClient
	stream streamSlot // the node's NextStream (stream.go)
}

// ErrNoAddrs is returned by New without addresses.
var ErrNoAddrs = errors.New("client: no node addresses")

// New returns a client for the nodes at addrs ("host:port" or a URL).
func New(addrs []string, opts Options) (*Client, error) {
	if opts.Protocol == "" {
		opts.Protocol = Connect
	}
	switch opts.Protocol {
	case Connect, GRPC, GRPCWeb:
	default:
		return nil, fmt.Errorf("client: unknown protocol %q (want connect, grpc or grpcweb)", opts.Protocol)
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = 15 * time.Second
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 10 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(500*time.Millisecond, opts.MinBackoff)
	}
	if opts.MaxBatchKeys <= 0 {
		opts.MaxBatchKeys = DefaultMaxBatchKeys
	}
	opts.MaxBatchKeys = min(opts.MaxBatchKeys, maxServerKeys)
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxBatchWait == 0 {
		opts.MaxBatchWait = DefaultMaxBatchWait
	}
	c := &Client{opts: opts, http: opts.HTTPClient}
	if c.http == nil {
		h2 := opts.Protocol == GRPC || opts.HTTP2
		switch {
		case opts.TLS != nil:
			c.http = newTLS(opts.TLS, h2)
		case h2:
			c.http = newH2C()
		default:
			c.http = newHTTP1()
		}
	}
	switch opts.Protocol {
	case GRPC:
		c.connectOpts = append(c.connectOpts, connect.WithGRPC())
	case GRPCWeb:
		c.connectOpts = append(c.connectOpts, connect.WithGRPCWeb())
	}
	if opts.Token != "" {
		c.connectOpts = append(c.connectOpts, connect.WithInterceptors(bearer("Bearer "+opts.Token)))
	}
	c.streaming = !opts.DisableStreaming && opts.Protocol != GRPCWeb
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a != "" {
			c.addNodeLocked(a)
		}
	}
	if len(c.nodes) == 0 {
		return nil, ErrNoAddrs
	}
	c.seeds = len(c.nodes)
	return c, nil
}

// newTLS returns the default client over TLS: HTTP/2 when h2 (HTTP/1.1
// also offered, as ALPN picks), else HTTP/1.1 as newHTTP1.
func newTLS(cfg *tls.Config, h2 bool) *http.Client {
	var p http.Protocols
	p.SetHTTP1(true)
	t := &http.Transport{
		TLSClientConfig:     cfg.Clone(),
		Protocols:           &p,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	if h2 {
		p.SetHTTP2(true)
		t.MaxIdleConnsPerHost = 64
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: oneWrite{t}}
}

func newH2C() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, MaxIdleConnsPerHost: 64}}
}

// newHTTP1 keeps up to 256 idle connections per node, so that even many
// concurrent uncoalesced callers reuse their connections.
func newHTTP1() *http.Client {
	var p http.Protocols
	p.SetHTTP1(true)
	return &http.Client{Transport: oneWrite{&http.Transport{
		Protocols:           &p,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}}}
}

// baseURL returns the URL of the node at addr: addr itself if it has a
// scheme, else http://addr, or https://addr over TLS.
func (c *Client) baseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/")
	}
	if c.opts.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// addNodeLocked adds addr if new and returns its index. Call with c.mu held
// (or before c is shared).
func (c *Client) addNodeLocked(addr string) int {
	if i := indexOf(c.nodes, addr); i >= 0 {
		return i
	}
	c.nodes = append(c.nodes, c.newNode(addr))
	return len(c.nodes) - 1
}

// indexOf returns the index of the node at addr in nodes, or -1.
func indexOf(nodes []*node, addr string) int {
	return slices.IndexFunc(nodes, func(n *node) bool { return n.addr == addr })
}

// newNode returns the RPC clients for the node at addr.
func (c *Client) newNode(addr string) *node {
	u := c.baseURL(addr)
	return &node{
		addr:   addr,
		seq:    seqv1connect.NewSequenceServiceClient(c.http, u, c.connectOpts...),
		admin:  seqv1connect.NewAdminServiceClient(c.http, u, c.connectOpts...),
		id:     seqv1connect.NewIdServiceClient(c.http, u, c.connectOpts...),
		health: healthv1connect.NewHealthClient(c.http, u, c.connectOpts...),
		stream: c.newStreamSlot(u),
	}
}

// Leader returns the address of the node the client currently sends calls to.
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[c.leader].addr
}

// Next returns one new value per key (values[i] is for keys[i]).
func (c *Client) Next(ctx context.Context, space string, keys ...uint64) ([]uint64, error) {
	if t := c.groups.Load(); t != nil {
		return c.byGroup(ctx, t, kindNext, space, keys)
	}
	if c.coalesce(keys) {
		return c.batcher(kindNext, space, noGroup).do(ctx, keys)
	}
	return c.multi(ctx, kindNext, space, keys, nil, noGroup)
}

// send sends the keys of one call, or of one group's share of it, through
// the batcher of (kind, space, group) or on their own.
func (c *Client) send(ctx context.Context, kind batchKind, space string, keys []uint64, group int) ([]uint64, error) {
	if c.coalesce(keys) {
		return c.batcher(kind, space, group).do(ctx, keys)
	}
	return c.multi(ctx, kind, space, keys, nil, group)
}

// coalesce reports whether a call for keys goes through a batcher.
func (c *Client) coalesce(keys []uint64) bool {
	return !c.opts.DisableCoalescing && len(keys) > 0 && len(keys) <= c.opts.MaxBatchKeys
}

// multi sends one Next or Current request (with retries, until gone) to
// group's leader (noGroup: the cluster's leader).
func (c *Client) multi(ctx context.Context, kind batchKind, space string, keys []uint64, gone func() bool, group int) ([]uint64, error) {
	var vals []uint64
	switch kind {
	case kindIDs:
		resp, err := callUntil(c, ctx, gone, noGroup, func(ctx context.Context, n *node) (*seqv1.NextIdsResponse, error) {
			r, err := n.id.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: space, Count: uint32(len(keys)), Runs: true}))
			return msgFrom(c, n, r, err)
		})
		if err != nil {
			return nil, err
		}
		runs, err := runsOf(resp, uint32(len(keys)))
		if err != nil {
			return nil, err
		}
		vals = make([]uint64, 0, len(keys))
		for _, r := range runs {
			for i := range int64(r.Count) {
				vals = append(vals, uint64(r.First+i))
			}
		}
	case kindNext:
		resp, err := callUntil(c, ctx, gone, group, func(ctx context.Context, n *node) (*seqv1.NextResponse, error) {
			r, err := n.seq.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: space, Keys: keys}))
			return msgFrom(c, n, r, err)
		})
		if err != nil {
			return nil, err
		}
		vals = resp.GetValues()
	default:
		resp, err := callUntil(c, ctx, gone, group, func(ctx context.Context, n *node) (*seqv1.CurrentResponse, error) {
			r, err := n.seq.Current(ctx, connect.NewRequest(&seqv1.CurrentRequest{Space: space, Keys: keys}))
			return msgFrom(c, n, r, err)
		})
		if err != nil {
			return nil, err
		}
		vals = resp.GetValues()
	}
	if len(vals) != len(keys) {
		return nil, fmt.Errorf("client: server returned %d values for %d keys", len(vals), len(keys))
	}
	return vals, nil
}

// Reserve returns the first of count consecutive new values for key.
func (c *Client) Reserve(ctx context.Context, space string, key uint64, count uint32) (uint64, error) {
	group, known := noGroup, true
	if t := c.groups.Load(); t != nil {
		var name string
		var size uint64
		if name, size, known = t.space(space); known {
			group = seqd.GroupOfKey(name, size, key, t.n)
		}
	}
	resp, err := callUntil(c, ctx, nil, group, func(ctx context.Context, n *node) (*seqv1.ReserveResponse, error) {
		r, err := n.seq.Reserve(ctx, connect.NewRequest(&seqv1.ReserveRequest{Space: space, Key: key, Count: count}))
		return msgFrom(c, n, r, err)
	})
	if err != nil {
		return 0, err
	}
	if !known {
		c.refreshRouting() // the space exists: learn its section size
	}
	return resp.GetFirst(), nil
}

// Current returns, per key, the last value issued (or a larger one after a failover).
func (c *Client) Current(ctx context.Context, space string, keys ...uint64) ([]uint64, error) {
	if t := c.groups.Load(); t != nil {
		return c.byGroup(ctx, t, kindCurrent, space, keys)
	}
	if c.coalesce(keys) {
		return c.batcher(kindCurrent, space, noGroup).do(ctx, keys)
	}
	return c.multi(ctx, kindCurrent, space, keys, nil, noGroup)
}

// CreateSpace creates a space (step and sectionSize 0 take the server's defaults).
func (c *Client) CreateSpace(ctx context.Context, name string, step, sectionSize uint64) (*seqv1.CreateSpaceResponse, error) {
	return call(c, ctx, func(ctx context.Context, n *node) (*seqv1.CreateSpaceResponse, error) {
		r, err := n.admin.CreateSpace(ctx, connect.NewRequest(&seqv1.CreateSpaceRequest{Name: name, Step: step, SectionSize: sectionSize}))
		return msg(r, err)
	})
}

// ListSpaces lists every space.
func (c *Client) ListSpaces(ctx context.Context) ([]*seqv1.Space, error) {
	resp, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.ListSpacesResponse, error) {
		r, err := n.admin.ListSpaces(ctx, connect.NewRequest(&seqv1.ListSpacesRequest{}))
		return msg(r, err)
	})
	if err != nil {
		return nil, err
	}
	return resp.GetSpaces(), nil
}

// ClusterStatus asks one node (the current leader if known) for the cluster's state.
func (c *Client) ClusterStatus(ctx context.Context) (*seqv1.ClusterStatusResponse, error) {
	return call(c, ctx, func(ctx context.Context, n *node) (*seqv1.ClusterStatusResponse, error) {
		r, err := n.admin.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
		return msg(r, err)
	})
}
