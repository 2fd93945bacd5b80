package client

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
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
//
// Several raft groups.
//
// A cluster may run several raft groups, each with its own leader; every
// key of a space belongs to one group (seqd.GroupOfKey: the key's section,
// key / section size, picks a slot, and the slot a group). When a refresh
// returns more than one group row, and the slot map the cluster reports is
// the one this build computes, the client keeps a per-group table: the
// number of groups, each space's section size, and per group the leader's
// API address with the highest term seen. A row with a lower term than the
// one held never replaces it; a row with the same term replaces it only
// when it names a leader; a row with a higher term always does, even one
// that names no leader (an election is under way, and the leader is then
// unknown). Group rows are weighed so even in an answer older than the
// routing version the client holds, whose node list is ignored. A space
// once learned stays in the table (a section size never changes). The
// fields of the answer that describe one leader describe group 0: they
// remain the cluster's leader, which every call that is not per-key (admin
// calls, IdService) goes to as with one group. Options.DisableRouting
// turns the table off with the refreshes.
//
// Answers teach the table too. An answer served by one group carries
// Seqd-Group ("<group> <term>"). If its term is higher than the term held
// for that group (or the same, with no leader held), the group's leader
// becomes the hinted address when the answer carries Seqd-Leader (the node
// asked forwarded the call to it), and otherwise the node that answered,
// which served the call itself. A forwarded answer from the node the table
// holds as the group's leader replaces it at the same term as well: that
// node has just said it does not lead the group. An answer with a lower
// term teaches nothing, and an answer of a group other than group 0 never
// moves the cluster's leader.
//
// Next and Current split their keys by group and send each group's share
// to that group's leader, or, when the table knows no leader for it, to
// the cluster's leader, which forwards it. The shares of one call run in
// parallel, their values are merged back in the keys' order, and the call
// succeeds or fails as a whole: the first share to fail cancels the others
// and its error is the call's (values taken by shares that succeeded are
// gaps, which the contract allows). Reserve goes to its key's group's
// leader. Coalescing is per space and group (per space and lane for Next
// on streams, see groupTable.lane), so that each coalesced request goes to
// one leader. A space the table does not know (created since the
// last refresh) is sent whole, as with one group, and a call that succeeds
// on it starts a refresh. When an attempt on a group's presumed leader
// fails with an error worth retrying (unavailable, a transport failure, a
// timeout), the table forgets that leader (its term stays), a refresh
// starts in the background, and the retry goes to the cluster's leader; the
// group's leader is learned again from the forwarded answer's headers or
// from the refresh. With one group, or before the first refresh, there is
// no table and calls go as described above.

// refreshTimeout bounds one routing refresh (ClusterStatus asks every member).
const refreshTimeout = 5 * time.Second

// noGroup routes a call to the cluster's leader rather than a group's.
const noGroup = -1

// groupTable is the per-group routing table of a cluster of several groups.
// It is never modified once stored in Client.groups: a change stores a copy.
type groupTable struct {
	n       int               // groups (more than one)
	spaces  map[string]uint64 // section size by space name
	leaders []groupLeader     // by group
}

// groupLeader is what the table holds of one group's leader.
type groupLeader struct {
	n    *node  // nil: unknown
	term uint64 // the highest term seen for the group
}

// space returns the name of space as servers know it ("" is the default
// space) and its section size, if the table knows it.
func (t *groupTable) space(space string) (string, uint64, bool) {
	if space == "" {
		space = seqd.DefaultSpaceName
	}
	size, ok := t.spaces[space]
	return space, size, ok
}

// lane returns the group whose batcher carries group's coalesced Next
// calls on streams: the first group led by the same server as group (group
// itself when its leader is unknown). Every message costs both sides a
// read, a write and a wake-up whatever it carries, so the groups one
// server leads share one message per round trip instead of one each: with
// three groups led by one server, or six groups on three servers, a
// batcher per group sent three or two times the messages for the same
// calls (BENCHMARKS.md, "One message per server"). The server splits a
// message by group and forwards a share whose group it no longer leads,
// as it does for any client's request, and its stream answer names where
// that group went. So groups share a lane only while their server's
// stream is open: unary answers of several groups name no leader, and
// the client would not learn of a group that moved.
func (t *groupTable) lane(group int) int {
	if group < 0 || group >= len(t.leaders) {
		return group
	}
	n := t.leaders[group].n
	if n == nil || !n.stream.live.Load() {
		return group // no leader known, or its requests go unary
	}
	if off := n.laneOff.Load(); off != 0 {
		if time.Now().UnixNano() < off {
			return group // a request of its lane failed lately (batcher.split)
		}
		n.laneOff.CompareAndSwap(off, 0)
	}
	for g := range group {
		if t.leaders[g].n == n {
			return g
		}
	}
	return group
}

// clone returns a copy of t that may be modified.
func (t *groupTable) clone() *groupTable {
	return &groupTable{n: t.n, spaces: t.spaces, leaders: slices.Clone(t.leaders)}
}

// groupLeader returns the leader of group the table knows, or nil.
func (c *Client) groupLeader(group int) *node {
	if group < 0 {
		return nil
	}
	if t := c.groups.Load(); t != nil && group < len(t.leaders) {
		return t.leaders[group].n
	}
	return nil
}

// forgetGroupLeader forgets n as group's leader (keeping the term), if the
// table still names it.
func (c *Client) forgetGroupLeader(group int, n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.groups.Load()
	if t == nil || group >= len(t.leaders) || t.leaders[group].n != n {
		return
	}
	t = t.clone()
	t.leaders[group].n = nil
	c.groups.Store(t)
}

// newer reports whether what an answer of node n at term says replaces l:
// a higher term; or the same term when no leader is held, or when l's
// leader forwarded the call.
func (l groupLeader) newer(term uint64, n *node, forwarded bool) bool {
	return term > l.term || (term == l.term && (l.n == nil || forwarded && l.n == n))
}

// noteGroup learns from an answer's Seqd-Group header (hdr) that n served
// the call, or forwarded it to hint if not "" (see above). It returns the
// group, or -1 without a valid header.
func (c *Client) noteGroup(t *groupTable, n *node, hdr, hint string) int {
	gs, ts, ok := strings.Cut(hdr, " ")
	if !ok {
		return -1
	}
	g, err1 := strconv.Atoi(gs)
	term, err2 := strconv.ParseUint(ts, 10, 64)
	if err1 != nil || err2 != nil || g < 0 || g >= len(t.leaders) {
		return -1
	}
	if !t.leaders[g].newer(term, n, hint != "") {
		return g // the common case: nothing new, no lock
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t = c.groups.Load()
	if t == nil || g >= len(t.leaders) || !t.leaders[g].newer(term, n, hint != "") {
		return g
	}
	if hint != "" {
		n = c.nodes[c.addNodeLocked(hint)]
	}
	t = t.clone()
	t.leaders[g] = groupLeader{n: n, term: term}
	c.groups.Store(t)
	return g
}

// Routing is the client's view of the cluster.
type Routing struct {
	// Version is the cluster's routing version when the table was last read
	// (0 before the first refresh).
	Version uint64
	// Leader is the API address calls are sent to first (in a cluster of
	// several raft groups, group 0's leader: per-key calls go to the leader
	// of their keys' group, see the package documentation).
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

// noteRouting looks at an answer's routing version v (0: none, or a
// malformed one) and starts a refresh when it differs from the table's.
func (c *Client) noteRouting(v uint64) {
	if c.opts.DisableRouting || v == 0 || v == c.routeVer.Load() {
		return
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
// the table already holds a later term's. The group rows are weighed one by
// one against the per-group table (see above).
func (c *Client) applyRouting(st *seqv1.ClusterStatusResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.GetVersion()>>32 < c.routeVer.Load()>>32 {
		// An answer from before a leader change the client has seen; its
		// group rows may still be news.
		if len(st.GetGroups()) > 1 {
			c.applyGroupsLocked(st)
		}
		return
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
	c.applyGroupsLocked(st)
	c.routeVer.Store(st.GetVersion())
	c.refreshes.Add(1)
}

// applyGroupsLocked updates the per-group table from a ClusterStatus
// answer: none for one group (or a slot map this build does not compute),
// else the answer's spaces added and each group row weighed against the
// leader held. Call with c.mu held.
func (c *Client) applyGroupsLocked(st *seqv1.ClusterStatusResponse) {
	rows := st.GetGroups()
	if len(rows) <= 1 || len(rows) > seqd.MaxGroups ||
		st.GetSlotCount() != seqd.SlotCount || st.GetSlotMapVersion() != seqd.SlotMapVersion {
		c.groups.Store(nil)
		return
	}
	t := &groupTable{n: len(rows), spaces: map[string]uint64{}, leaders: make([]groupLeader, len(rows))}
	if old := c.groups.Load(); old != nil && old.n == t.n {
		maps.Copy(t.spaces, old.spaces)
		copy(t.leaders, old.leaders)
	}
	for _, sp := range st.GetSpaces() {
		if sp.GetSectionSize() > 0 {
			t.spaces[sp.GetName()] = sp.GetSectionSize()
		}
	}
	for _, r := range rows {
		g := int(r.GetGroup())
		if g >= t.n {
			continue
		}
		l, term, addr := t.leaders[g], r.GetTerm(), r.GetLeaderApiAddr()
		switch {
		case term < l.term, term == l.term && addr == "":
			continue // older, or no news
		case addr == "":
			t.leaders[g] = groupLeader{term: term} // an election under way
		default:
			t.leaders[g] = groupLeader{n: c.nodes[c.addNodeLocked(addr)], term: term}
		}
	}
	c.groups.Store(t)
}
