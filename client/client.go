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
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/seqd/seqd/api/idmsg"
)

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

	gens generations // see generation.go
	// streaming tells whether coalesced Next requests go on streams
	// (stream.go).
	streaming bool
	bStreamed atomic.Uint64

	closed atomic.Bool // see Close (close.go)
}

type node struct {
	addr   string
	seq    seqv1connect.SequenceServiceClient
	admin  seqv1connect.AdminServiceClient
	id     seqv1connect.IdServiceClient
	health healthv1connect.HealthClient
	stream streamSlot // the node's NextStream (stream.go)
	// laneOff: until then (Unix ns), the groups the node leads share no
	// lane (batcher.split).
	laneOff atomic.Int64
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
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
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
	c.connectOpts = append(c.connectOpts, connect.WithInterceptors(&c.gens))
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
	return c.sendShare(ctx, kind, space, keys, group, group)
}

// sendShare is send for a share of keys of raft group home (noGroup: of
// several) that goes through group's batcher, home's lane
// (groupTable.lane).
func (c *Client) sendShare(ctx context.Context, kind batchKind, space string, keys []uint64, group, home int) ([]uint64, error) {
	if c.coalesce(keys) {
		return c.batcher(kind, space, group).join(ctx, keys, home)
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
		runs, err := idmsg.Runs(resp, uint32(len(keys)))
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
