package nodes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// Status is one node's view of itself, from its ClusterStatus.
type Status struct {
	Node     *Node
	Err      error
	State    string // raft state
	Term     uint64
	Serving  bool
	LeaderID string
	// RaftOpen is false while the node refuses raft traffic (not vouched
	// for yet, or never: its log says why); DiskFull while it found its
	// disk full and stands for no election.
	RaftOpen bool
	DiskFull bool
	// Groups is the node's own state in each raft group, by group number
	// (empty from builds that do not report groups).
	Groups map[int]GroupState
	// Generation is the node's cluster generation ("lineage/number/
	// cluster"); Fenced is true once it learned that a restore replaced
	// its cluster (it never serves again), FencedBy naming the newer
	// generation.
	Generation string
	Fenced     bool
	FencedBy   string
}

// GroupState is one node's state in one raft group.
type GroupState struct {
	State   string // raft state
	Term    uint64
	Serving bool // it leads the group and holds its lease
	// RaftOpen is whether it is admitted in the group; Admission the kind
	// of its last admission verdict (cluster/admit: "witness", "stale",
	// "quorum-wait", ...; "" before the first).
	RaftOpen  bool
	Admission string
}

// Admissions describes the admission kind of every group, in group order
// ("witness", or "0:stale 1:leader" when they differ; "" when none is
// known).
func (s Status) Admissions() string {
	var gs []int
	kinds := map[string]bool{}
	for g, st := range s.Groups {
		gs = append(gs, g)
		kinds[st.Admission] = true
	}
	sort.Ints(gs)
	if len(kinds) == 1 {
		return s.Groups[gs[0]].Admission
	}
	var parts []string
	for _, g := range gs {
		parts = append(parts, fmt.Sprintf("%d:%s", g, s.Groups[g].Admission))
	}
	return strings.Join(parts, " ")
}

// Statuses asks every node for its own state, in parallel, each bounded by
// timeout.
func (c *Cluster) Statuses(ctx context.Context, timeout time.Duration) []Status {
	out := make([]Status, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = c.status(ctx, n, timeout)
		}()
	}
	wg.Wait()
	return out
}

// StatusOf asks one node for its own state (ClusterStatus answered from
// its own state, Seqd-Local-Only), bounded by timeout.
func (c *Cluster) StatusOf(ctx context.Context, n *Node, timeout time.Duration) Status {
	return c.status(ctx, n, timeout)
}

func (c *Cluster) status(ctx context.Context, n *Node, timeout time.Duration) Status {
	st := Status{Node: n}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	admin := seqv1connect.NewAdminServiceClient(c.http, "http://"+n.API)
	// Its own state only: a node cut off from its peers answers at once,
	// instead of after asking each of them.
	req := connect.NewRequest(&seqv1.ClusterStatusRequest{})
	req.Header().Set(seqd.HeaderLocalOnly, "1")
	r, err := admin.ClusterStatus(ctx, req)
	if err != nil {
		st.Err = err
		return st
	}
	st.LeaderID = r.Msg.GetLeaderId()
	st.Term = r.Msg.GetTerm()
	for _, x := range r.Msg.GetNodes() {
		if x.GetId() == n.ID {
			st.State, st.Serving = x.GetRaftState(), x.GetServing()
			st.RaftOpen, st.DiskFull = x.GetRaftOpen(), x.GetDiskFull()
			st.Generation, st.Fenced, st.FencedBy = x.GetGeneration(), x.GetFenced(), x.GetFencedBy()
			if x.GetTerm() > 0 {
				st.Term = x.GetTerm()
			}
			for _, g := range x.GetGroups() {
				if st.Groups == nil {
					st.Groups = map[int]GroupState{}
				}
				st.Groups[int(g.GetGroup())] = GroupState{State: g.GetRaftState(), Term: g.GetTerm(), Serving: g.GetServing(),
					RaftOpen: g.GetRaftOpen(), Admission: g.GetAdmission()}
			}
		}
	}
	return st
}

// Leader returns the node that says it is the raft leader and serves, with
// the highest term, or nil.
func (c *Cluster) Leader(ctx context.Context) *Node {
	var best *Status
	sts := c.Statuses(ctx, time.Second)
	for i := range sts {
		s := &sts[i]
		if s.Err == nil && s.Serving && strings.EqualFold(s.State, "leader") && (best == nil || s.Term > best.Term) {
			best = s
		}
	}
	if best == nil {
		return nil
	}
	return best.Node
}

// GroupLeader returns the node that says it leads raft group g and serves
// it, with the highest term, or nil. Group 0 of a node that reports no
// groups is its only group.
func (c *Cluster) GroupLeader(ctx context.Context, g int) *Node {
	var best *Node
	var bestTerm uint64
	for _, s := range c.Statuses(ctx, time.Second) {
		if s.Err != nil {
			continue
		}
		gs, ok := s.Groups[g]
		if !ok && g == 0 {
			gs, ok = GroupState{State: s.State, Term: s.Term, Serving: s.Serving}, true
		}
		if ok && gs.Serving && strings.EqualFold(gs.State, "leader") && (best == nil || gs.Term > bestTerm) {
			best, bestTerm = s.Node, gs.Term
		}
	}
	return best
}

// WaitGroupLeader polls until a node leads and serves group g, or timeout.
func (c *Cluster) WaitGroupLeader(ctx context.Context, g int, timeout time.Duration) *Node {
	deadline := time.Now().Add(timeout)
	for {
		if l := c.GroupLeader(ctx, g); l != nil {
			return l
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitLeader polls until a node leads and serves, or timeout.
func (c *Cluster) WaitLeader(ctx context.Context, timeout time.Duration) *Node {
	deadline := time.Now().Add(timeout)
	for {
		if l := c.Leader(ctx); l != nil {
			return l
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitHealthy polls until every node answers, all name the same leader and
// term, and the leader serves; it returns a description of the last state
// seen when it gives up.
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	return c.WaitHealthyNodes(ctx, timeout, c.Nodes)
}

// WaitHealthyNodes is WaitHealthy for some of the nodes (the others may be
// down).
func (c *Cluster) WaitHealthyNodes(ctx context.Context, timeout time.Duration, ns []*Node) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		sts := make([]Status, len(ns))
		var wg sync.WaitGroup
		for i, n := range ns {
			wg.Add(1)
			go func() { defer wg.Done(); sts[i] = c.status(ctx, n, time.Second) }()
		}
		wg.Wait()
		leaders, terms := map[string]bool{}, map[uint64]bool{}
		serving := false
		var desc []string
		for _, s := range sts {
			if s.Err != nil {
				leaders["?"] = true
				desc = append(desc, fmt.Sprintf("%s: %v", s.Node.ID, s.Err))
				continue
			}
			leaders[s.LeaderID] = true
			terms[s.Term] = true
			serving = serving || (s.Serving && strings.EqualFold(s.State, "leader"))
			desc = append(desc, fmt.Sprintf("%s: %s term %d leader %q serving %v", s.Node.ID, s.State, s.Term, s.LeaderID, s.Serving))
		}
		sort.Strings(desc)
		last = strings.Join(desc, "; ")
		if len(leaders) == 1 && !leaders["?"] && !leaders[""] && len(terms) == 1 && serving {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cluster not healthy within %v: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Member is one server as the cluster's raft configuration lists it.
type Member struct {
	ID            string
	Voter         bool // a voter (else a non-voter, or not in the configuration)
	InConfig      bool // in the raft configuration, as a voter or a non-voter
	SeenWithState bool // the cluster recorded it holding raft state
	RaftState     string
	Serving       bool
	Term          uint64 // the server's own raft term, as it answered
	Applied       uint64 // its applied index
	// RaftOpen is false while the server refuses raft traffic (seqd status
	// notes refusing-raft): not vouched for yet, or never will be (wiped,
	// an older copy, removed, taken for another cluster's member).
	RaftOpen  bool
	DiskFull  bool   // it found its disk full (seqd status notes disk-full)
	ClusterID string // the cluster its data belongs to
	// Generation, Fenced and FencedBy: see Status.
	Generation string
	Fenced     bool
	FencedBy   string
}

// View is the cluster's membership as one node answered it.
type View struct {
	Leader  string // "" if the answering node does not lead
	Term    uint64
	Members map[string]Member
}

// Members asks the running nodes for the raft configuration, preferring the
// answer of a node that says it leads (its configuration is the newest).
func (c *Cluster) Members(ctx context.Context, timeout time.Duration) (View, error) {
	return c.MembersFrom(ctx, c.Nodes, timeout)
}

// MembersFrom is Members asking the running nodes among ns (which may
// include nodes Spare made).
func (c *Cluster) MembersFrom(ctx context.Context, ns []*Node, timeout time.Duration) (View, error) {
	type answer struct {
		r   *seqv1.ClusterStatusResponse
		err error
	}
	answers := make([]answer, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		if st := n.State(); st != Running {
			answers[i].err = fmt.Errorf("%s is %s", n.ID, st)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			admin := seqv1connect.NewAdminServiceClient(c.http, "http://"+n.API)
			r, err := admin.ClusterStatus(cctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
			if err != nil {
				answers[i].err = err
				return
			}
			answers[i].r = r.Msg
		}()
	}
	wg.Wait()
	var best *seqv1.ClusterStatusResponse
	var errs []error
	for _, a := range answers {
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.r.GetLeaderId() != "" && a.r.GetNodeId() == a.r.GetLeaderId():
			if best == nil || a.r.GetTerm() > best.GetTerm() || best.GetNodeId() != best.GetLeaderId() {
				best = a.r
			}
		case best == nil:
			best = a.r
		}
	}
	if best == nil {
		return View{}, fmt.Errorf("no node answered: %w", errors.Join(errs...))
	}
	out := map[string]Member{}
	for _, x := range best.GetNodes() {
		out[x.GetId()] = Member{ID: x.GetId(), Voter: x.GetVoter(), InConfig: x.GetInConfiguration() || x.GetVoter(),
			SeenWithState: x.GetSeenWithState(), RaftState: x.GetRaftState(), Serving: x.GetServing(),
			Term: x.GetTerm(), Applied: x.GetAppliedIndex(), RaftOpen: x.GetRaftOpen(), DiskFull: x.GetDiskFull(),
			ClusterID: x.GetClusterId(), Generation: x.GetGeneration(), Fenced: x.GetFenced(), FencedBy: x.GetFencedBy()}
	}
	v := View{Term: best.GetTerm(), Members: out}
	if best.GetNodeId() == best.GetLeaderId() {
		v.Leader = best.GetLeaderId()
	}
	return v, nil
}
