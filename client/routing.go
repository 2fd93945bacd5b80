package client

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// The routing table.
//
// Every SequenceService answer carries the answering leader's routing
// version (Seqd-Routing-Version: the raft term and a checksum of the
// configuration; it changes on every leader change and every membership
// change). The client remembers the version of the table it holds; when an
// answer shows another version, or a node answers unavailable with a leader
// hint, it asks the cluster for its status (AdminService.ClusterStatus) in
// the background, learns every member's API address and the leader's, and
// sends its next calls straight to the leader. Calls never wait for a
// refresh: until it lands they follow the hints and forwarded answers as
// before. So once a new leader serves, a client pays at most one extra round
// trip (a dead leader's refused connection, or a node that forwards or hints)
// before its calls go to the new leader directly.
//
// The node list is the addresses given to New followed by the members the
// last refresh learned (removed members are dropped at the next refresh).
// Options.DisableRouting keeps the client on the given addresses and the
// leader hints (for clients behind a proxy that cannot reach the members'
// advertised addresses).

// refreshTimeout bounds one routing refresh (ClusterStatus asks every member).
const refreshTimeout = 5 * time.Second

// Routing is the client's view of the cluster.
type Routing struct {
	// Version is the cluster's routing version when the table was last read
	// (0 before the first refresh).
	Version uint64
	// Leader is the API address calls are sent to first.
	Leader string
	// Nodes are the API addresses the client knows, in the order it tries
	// them: the given ones, then learned ones.
	Nodes []string
	// Refreshes counts the routing refreshes that succeeded.
	Refreshes uint64
}

// Routing returns a copy of the client's routing table.
func (c *Client) Routing() Routing {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Routing{Version: c.routeVer.Load(), Leader: c.nodes[c.leader].addr, Refreshes: c.refreshes.Load()}
	for _, n := range c.nodes {
		r.Nodes = append(r.Nodes, n.addr)
	}
	return r
}

// noteRouting looks at an answer's routing version and starts a refresh when
// it differs from the table's.
func (c *Client) noteRouting(h http.Header) {
	if c.opts.DisableRouting {
		return
	}
	v, err := strconv.ParseUint(h.Get(seqd.HeaderRoutingVersion), 10, 64)
	if err != nil || v == c.routeVer.Load() {
		return // no (or a malformed) header, or the table's version
	}
	c.refreshRouting()
}

// refreshRouting starts a background refresh unless one is running.
func (c *Client) refreshRouting() {
	if c.opts.DisableRouting || !c.refreshing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		defer cancel()
		if st := c.readStatus(ctx); st != nil {
			c.applyRouting(st)
		}
	}()
}

// readStatus asks the believed leader, then every other node once, for the
// cluster's status, and returns the first answer that names a leader.
func (c *Client) readStatus(ctx context.Context) *seqv1.ClusterStatusResponse {
	c.mu.Lock()
	order := make([]*node, 0, len(c.nodes))
	order = append(order, c.nodes[c.leader])
	for i, n := range c.nodes {
		if i != c.leader {
			order = append(order, n)
		}
	}
	c.mu.Unlock()
	for _, n := range order {
		actx, cancel := context.WithTimeout(ctx, c.opts.AttemptTimeout)
		r, err := n.admin.ClusterStatus(actx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
		cancel()
		if err == nil && r.Msg.GetLeaderApiAddr() != "" && r.Msg.GetVersion() != 0 {
			return r.Msg
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// applyRouting installs a ClusterStatus answer as the routing table, unless
// the table already holds a later term's.
func (c *Client) applyRouting(st *seqv1.ClusterStatusResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.GetVersion()>>32 < c.routeVer.Load()>>32 {
		return // an answer from before a leader change the client has seen
	}
	// The given addresses, then the members; a node already known keeps
	// its connections.
	nodes := slices.Clone(c.nodes[:c.seeds])
	add := func(a string) {
		if a == "" || indexOf(nodes, a) >= 0 {
			return
		}
		if i := indexOf(c.nodes, a); i >= 0 {
			nodes = append(nodes, c.nodes[i])
		} else {
			nodes = append(nodes, c.newNode(a))
		}
	}
	for _, m := range st.GetNodes() {
		if m.GetInConfiguration() {
			add(m.GetApiAddr())
		}
	}
	add(st.GetLeaderApiAddr())
	c.nodes = nodes
	c.leader = indexOf(nodes, st.GetLeaderApiAddr())
	c.routeVer.Store(st.GetVersion())
	c.refreshes.Add(1)
}
