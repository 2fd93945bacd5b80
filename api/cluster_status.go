package api

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/cluster"
)

// ClusterStatus implements AdminService.ClusterStatus. The answering node
// reports the leader and term as it knows them, and asks every other known
// node for its own state (a node that does not answer quickly is reported as
// "unreachable").
func (s *Server) ClusterStatus(ctx context.Context, req *connect.Request[seqv1.ClusterStatusRequest]) (*connect.Response[seqv1.ClusterStatusResponse], error) {
	local := s.node.Status()
	self := nodeMsg(local)
	// The routing version is the one setAnswerHeaders puts on every answer
	// (cluster.Node.RoutingVersion, computed in one place): a client that
	// read this status holds the version answers carry, and refreshes only
	// when it changes.
	version := local.RoutingVersion
	if req.Header().Get(seqd.HeaderLocalOnly) != "" {
		resp := connect.NewResponse(&seqv1.ClusterStatusResponse{
			LeaderId: local.LeaderID, Term: local.Term, LeaderApiAddr: local.LeaderAPIAddr,
			NodeId: local.ID, Nodes: []*seqv1.Node{self}, Version: version, ClusterId: local.ClusterID,
			Groups: routes(local, nil), SlotCount: seqd.SlotCount, SlotMapVersion: seqd.SlotMapVersion,
		})
		if g := req.Header().Get(seqd.HeaderReadIndex); g != "" {
			i, err := strconv.Atoi(g)
			if err != nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: not a group: %q", seqd.HeaderReadIndex, g))
			}
			index, err := s.node.ReadIndex(ctx, i)
			if err != nil {
				return nil, s.toConnect(err)
			}
			resp.Header().Set(seqd.HeaderReadIndex, strconv.FormatUint(index, 10))
		}
		return resp, nil
	}

	// Every node in the raft configuration or in gossip.
	type known struct {
		id, api, raft, gossip string
		voter, inConfig       bool
	}
	byID := map[string]*known{}
	var order []string
	add := func(id string) *known {
		k := byID[id]
		if k == nil {
			k = &known{id: id}
			byID[id] = k
			order = append(order, id)
		}
		return k
	}
	add(local.ID)
	if conf, err := s.node.Configuration(); err == nil {
		for _, c := range conf {
			k := add(c.ID)
			k.raft, k.voter, k.inConfig = c.RaftAddr, c.Voter, true
		}
	}
	for _, m := range s.node.Members() {
		if !m.Alive {
			continue
		}
		k := add(m.ID)
		k.api, k.gossip = m.APIAddr, m.GossipAddr
		if k.raft == "" {
			k.raft = m.RaftAddr
		}
	}

	nodes := make([]*seqv1.Node, len(order))
	var wg sync.WaitGroup
	for i, id := range order {
		k := byID[id]
		if id == local.ID {
			nodes[i] = self
			continue
		}
		nodes[i] = &seqv1.Node{Id: k.id, ApiAddr: k.api, RaftAddr: k.raft, GossipAddr: k.gossip, RaftState: "unreachable", Voter: k.voter, InConfiguration: k.inConfig}
		if k.api == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, peerStatusWait)
			defer cancel()
			r := connect.NewRequest(&seqv1.ClusterStatusRequest{})
			r.Header().Set(seqd.HeaderLocalOnly, "1")
			resp, err := s.peer(k.api).admin.ClusterStatus(pctx, r)
			if err != nil || len(resp.Msg.GetNodes()) != 1 || resp.Msg.GetNodes()[0].GetId() != k.id {
				return
			}
			n := resp.Msg.GetNodes()[0]
			// This node's view of the configuration decides voter and
			// membership (on the leader it is the newest).
			n.Voter, n.InConfiguration = k.voter, k.inConfig
			nodes[i] = n
		}()
	}
	wg.Wait()
	for _, n := range nodes {
		n.SeenWithState, n.RecordedIndex = s.node.ServerSeen(n.GetId())
	}
	var spaces []*seqv1.Space
	for _, sp := range s.node.Spaces() {
		spaces = append(spaces, spaceMsg(sp))
	}
	return connect.NewResponse(&seqv1.ClusterStatusResponse{
		LeaderId: local.LeaderID, Term: local.Term, LeaderApiAddr: local.LeaderAPIAddr,
		NodeId: local.ID, Nodes: nodes, Version: version, ClusterId: local.ClusterID,
		Groups: routes(local, nodes), SlotCount: seqd.SlotCount, SlotMapVersion: seqd.SlotMapVersion,
		Spaces: spaces,
	}), nil
}

// routes is the routing table as this node knows it: per group, the leader
// and term, and whether a node that answered (nodes) says it serves the
// group as leader in that term or a later one, which then decides.
func routes(local cluster.LocalStatus, nodes []*seqv1.Node) []*seqv1.GroupRoute {
	out := make([]*seqv1.GroupRoute, len(local.Groups))
	for i, g := range local.Groups {
		out[i] = &seqv1.GroupRoute{
			Group: uint32(g.Group), LeaderId: g.LeaderID, LeaderApiAddr: g.LeaderAPIAddr, Term: g.Term,
			Serving: g.Serving, Voters: g.Voters, FirstSlot: g.FirstSlot, EndSlot: g.EndSlot, PreferredLeader: g.Preferred,
		}
	}
	for _, n := range nodes {
		for _, gs := range n.GetGroups() {
			i := int(gs.GetGroup())
			if i >= len(out) || !gs.GetServing() || gs.GetTerm() < out[i].Term {
				continue
			}
			r := out[i]
			r.LeaderId, r.LeaderApiAddr, r.Term, r.Serving = n.GetId(), n.GetApiAddr(), gs.GetTerm(), true
		}
	}
	return out
}

func nodeMsg(st cluster.LocalStatus) *seqv1.Node {
	return &seqv1.Node{
		Id: st.ID, ApiAddr: st.APIAddr, RaftAddr: st.RaftAddr, GossipAddr: st.GossipAddr,
		RaftState: strings.ToLower(st.State), Voter: st.Voter, LastContact: durationpb.New(st.LastContact),
		Term: st.Term, AppliedIndex: st.AppliedIndex, Serving: st.Serving,
		InConfiguration: st.InConfiguration,
		ClusterId:       st.ClusterID, Protocol: st.Protocol, RaftOpen: st.RaftOpen, DiskFull: st.DiskFull,
		Generation: st.Generation, Fenced: st.Fenced, FencedBy: st.FencedBy,
		Groups: groupStates(st.Groups),
	}
}

func groupStates(gs []cluster.GroupStatus) []*seqv1.GroupState {
	out := make([]*seqv1.GroupState, len(gs))
	for i, g := range gs {
		out[i] = &seqv1.GroupState{Group: uint32(g.Group), RaftState: strings.ToLower(g.State), Term: g.Term,
			AppliedIndex: g.AppliedIndex, Serving: g.Serving, RaftOpen: g.RaftOpen, Admission: g.Admission, Protocol: g.Protocol}
	}
	return out
}
