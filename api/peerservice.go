package api

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	peerv1 "github.com/seqd/seqd/api/gen/seqd/peer/v1"
	"github.com/seqd/seqd/api/gen/seqd/peer/v1/peerv1connect"
	"github.com/seqd/seqd/cluster"
)

// peerService implements the internal seqd.peer.v1.PeerService (calls
// between servers; guarded by the token like AdminService).
type peerService struct{ s *Server }

// Vouch implements PeerService.Vouch (see cluster.Node.Vouch).
func (p peerService) Vouch(ctx context.Context, req *connect.Request[peerv1.VouchRequest]) (*connect.Response[peerv1.VouchResponse], error) {
	m := req.Msg
	if m.GetId() == "" {
		err := connect.NewError(connect.CodeInvalidArgument, errors.New("id is required"))
		p.s.logCall(peerv1connect.PeerServiceVouchProcedure, err)
		return nil, err
	}
	a := p.s.node.Vouch(cluster.VouchRequest{ID: m.GetId(), ClusterID: m.GetClusterId(), HasState: m.GetHasState(), LastIndex: m.GetLastIndex()})
	p.s.logCall(peerv1connect.PeerServiceVouchProcedure, nil)
	return connect.NewResponse(&peerv1.VouchResponse{
		ClusterId: a.ClusterID, Authoritative: a.Authoritative, NodeId: a.NodeID,
		LeaderId: a.LeaderID, LeaderApiAddr: a.LeaderAPIAddr,
		InConfiguration: a.InConfiguration, Voter: a.Voter,
		SeenWithState: a.Seen, RecordedIndex: a.RecordedIndex, RecordedTerm: a.RecordedTerm,
		LastIndex: a.LastIndex, Protocol: a.Protocol, Voters: a.Voters,
	}), nil
}

// Vouch asks the server at apiAddr to vouch for this one (PeerService.Vouch).
// A server of the first release does not serve PeerService: it is asked
// through ClusterStatus instead, as that release did, and its answer is
// never authoritative. It implements cluster.PeerVouch.
func (p Peers) Vouch() cluster.PeerVouch {
	h := p.client()
	listing := p.listing()
	return func(ctx context.Context, apiAddr string, req cluster.VouchRequest) (cluster.VouchAnswer, error) {
		c := peerv1connect.NewPeerServiceClient(h, p.scheme()+apiAddr, p.options()...)
		resp, err := c.Vouch(ctx, connect.NewRequest(&peerv1.VouchRequest{
			Id: req.ID, ClusterId: req.ClusterID, HasState: req.HasState, LastIndex: req.LastIndex,
		}))
		if connect.CodeOf(err) == connect.CodeUnimplemented {
			voter, seen, index, lerr := listing(ctx, apiAddr, req.ID)
			if lerr != nil {
				return cluster.VouchAnswer{}, lerr
			}
			// The first release answers from the leader's view when it
			// knows one; LastIndex is unknown, so it never counts as a
			// just-bootstrapped cluster.
			return cluster.VouchAnswer{InConfiguration: voter, Voter: voter, Seen: seen, RecordedIndex: index, LastIndex: 1<<64 - 1}, nil
		}
		if err != nil {
			return cluster.VouchAnswer{}, err
		}
		m := resp.Msg
		return cluster.VouchAnswer{
			ClusterID: m.GetClusterId(), Authoritative: m.GetAuthoritative(), NodeID: m.GetNodeId(),
			LeaderID: m.GetLeaderId(), LeaderAPIAddr: m.GetLeaderApiAddr(),
			InConfiguration: m.GetInConfiguration(), Voter: m.GetVoter(),
			Seen: m.GetSeenWithState(), RecordedIndex: m.GetRecordedIndex(), RecordedTerm: m.GetRecordedTerm(),
			LastIndex: m.GetLastIndex(), Protocol: m.GetProtocol(), Voters: m.GetVoters(),
		}, nil
	}
}
