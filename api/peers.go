package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	peerv1 "github.com/seqd/seqd/api/gen/seqd/peer/v1"
	"github.com/seqd/seqd/api/gen/seqd/peer/v1/peerv1connect"
	"github.com/seqd/seqd/cluster"
)

// Peers says how this node calls the other nodes' APIs (to forward calls,
// gather ClusterStatus, and for the leader's membership checks).
type Peers struct {
	// HTTP is the client; nil means NewH2CClient() (or an HTTP/2 TLS client
	// when TLS is set).
	HTTP *http.Client
	// TLS, when set, makes peer calls over HTTPS with this configuration
	// (its RootCAs must trust the other nodes' API certificates).
	TLS *tls.Config
	// Token, when set, is sent as a bearer token on internal calls.
	Token string
}

func (p Peers) scheme() string {
	if p.TLS != nil {
		return "https://"
	}
	return "http://"
}

func (p Peers) client() *http.Client {
	if p.HTTP != nil {
		return p.HTTP
	}
	if p.TLS != nil {
		var protos http.Protocols
		protos.SetHTTP2(true)
		protos.SetHTTP1(true)
		return &http.Client{Transport: &http.Transport{TLSClientConfig: p.TLS, Protocols: &protos, MaxIdleConnsPerHost: 64}}
	}
	return NewH2CClient()
}

// frontClient is the HTTP client of the forwards of the other front ends'
// calls (Sequences, frontends.go) that do not go on a forward stream
// (fwdstream.go): HTTP/1.1 with keep-alive, one connection
// per forward in flight, which costs a server less CPU per call than h2c
// (the Go client's default for the Connect protocol, for the same reason).
func (p Peers) frontClient() *http.Client {
	if p.HTTP != nil {
		return p.HTTP
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: p.TLS, Protocols: &protos,
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}
}

func (p Peers) options() []connect.ClientOption {
	if p.Token == "" {
		return nil
	}
	return []connect.ClientOption{connect.WithInterceptors(bearer(p.Token))}
}

// bearer adds an Authorization header to outgoing unary and streaming calls.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Header().Get("Authorization") == "" {
			req.Header().Set("Authorization", "Bearer "+string(b))
		}
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// BearerToken returns a client interceptor that sends token as a bearer token.
func BearerToken(token string) connect.Interceptor { return bearer(token) }

type peer struct {
	base  string  // the peer's base URL
	fwd   fwdSlot // the forward stream of Next shares (fwdstream.go)
	seq   seqv1connect.SequenceServiceClient
	front seqv1connect.SequenceServiceClient // over frontHTTP
	admin seqv1connect.AdminServiceClient
	id    seqv1connect.IdServiceClient
	peer  peerv1connect.PeerServiceClient
}

// via picks the client a share is forwarded with.
type via func(*peer) seqv1connect.SequenceServiceClient

func viaConnect(p *peer) seqv1connect.SequenceServiceClient { return p.seq }
func viaFront(p *peer) seqv1connect.SequenceServiceClient   { return p.front }

func (s *Server) peer(addr string) *peer {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	p := s.peers[addr]
	if p == nil {
		base := s.peerCfg.scheme() + addr
		p = &peer{
			base:  base,
			seq:   seqv1connect.NewSequenceServiceClient(s.peerHTTP, base),
			front: seqv1connect.NewSequenceServiceClient(s.frontHTTP, base),
			admin: seqv1connect.NewAdminServiceClient(s.peerHTTP, base, s.peerCfg.options()...),
			id:    seqv1connect.NewIdServiceClient(s.peerHTTP, base, s.peerCfg.options()...),
			peer:  peerv1connect.NewPeerServiceClient(s.peerHTTP, base, s.peerCfg.options()...),
		}
		s.peers[addr] = p
	}
	return p
}

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
	a, err := p.s.node.Vouch(cluster.VouchRequest{ID: m.GetId(), Generation: peerGeneration(m.GetLineage(), m.GetGeneration(), m.GetClusterId()),
		Group: int(m.GetGroup()), HasState: m.GetHasState(), LastIndex: m.GetLastIndex()})
	if err != nil {
		err = p.s.toConnect(err)
		p.s.logCall(peerv1connect.PeerServiceVouchProcedure, err)
		return nil, err
	}
	p.s.logCall(peerv1connect.PeerServiceVouchProcedure, nil)
	resp := &peerv1.VouchResponse{
		ClusterId: a.Generation.Cluster, Group: uint32(a.Group), Authoritative: a.Authoritative, NodeId: a.NodeID,
		LeaderId: a.LeaderID, LeaderApiAddr: a.LeaderAPIAddr,
		InConfiguration: a.InConfiguration, Voter: a.Voter,
		SeenWithState: a.Seen, RecordedIndex: a.RecordedIndex, RecordedTerm: a.RecordedTerm,
		LastIndex: a.LastIndex, Protocol: a.Protocol, Voters: a.Voters,
		Lineage: a.Generation.Lineage, Generation: a.Generation.Number, Admitted: a.Admitted, ContactMs: a.ContactMs,
	}
	if a.Generation.Number > 0 {
		resp.RestoredFrom = a.Generation.Lineage // for builds before generations
	}
	return connect.NewResponse(resp), nil
}

// Space implements PeerService.Space (see cluster.Node.AnswerSpace).
func (p peerService) Space(ctx context.Context, req *connect.Request[peerv1.SpaceRequest]) (*connect.Response[peerv1.SpaceResponse], error) {
	name, err := spaceName(req.Msg.GetName())
	var rec cluster.SpaceRecord
	if err == nil {
		rec, err = p.s.node.AnswerSpace(name)
	}
	if err != nil {
		err = p.s.toConnect(err)
		p.s.logCall(peerv1connect.PeerServiceSpaceProcedure, err)
		return nil, err
	}
	return connect.NewResponse(&peerv1.SpaceResponse{
		Found: rec.Live(), Step: rec.Space.Step, SectionSize: rec.Space.SectionSize,
		Version: rec.Version, Deleted: !rec.Live() && rec.Space.SectionSize != 0,
	}), nil
}

// Host returns the client through which the cluster host asks other
// servers (cluster.Peers): one HTTP client shared by all its calls.
func (p Peers) Host() cluster.Peers {
	return peerClient{p: p, h: p.client(), listing: p.listing()}
}

// peerClient implements cluster.Peers over the other servers' APIs.
type peerClient struct {
	p       Peers
	h       *http.Client
	listing func(ctx context.Context, apiAddr, id string) (listed, seen bool, index uint64, err error)
}

// Space asks the server at apiAddr, group 0's leader, for a space
// (PeerService.Space).
func (c peerClient) Space(ctx context.Context, apiAddr, name string) (cluster.SpaceRecord, error) {
	pc := peerv1connect.NewPeerServiceClient(c.h, c.p.scheme()+apiAddr, c.p.options()...)
	resp, err := pc.Space(ctx, connect.NewRequest(&peerv1.SpaceRequest{Name: name}))
	if err != nil {
		return cluster.SpaceRecord{}, err
	}
	m := resp.Msg
	rec := cluster.SpaceRecord{Space: seqd.Space{Name: name, Step: m.GetStep(), SectionSize: m.GetSectionSize()}, Version: m.GetVersion()}
	switch {
	case m.GetFound() && rec.Live():
		return rec, nil
	case m.GetDeleted():
		rec.Space.Step = 0
		return rec, nil
	}
	return cluster.SpaceRecord{}, nil // none (or, from a build before versions, a deletion)
}

// Clock implements PeerService.Clock: this server's wall clock and the
// protocol it speaks, after making its data unreadable to builds that do
// not speak the protocol a leader is about to move to (move_to).
func (p peerService) Clock(_ context.Context, req *connect.Request[peerv1.ClockRequest]) (*connect.Response[peerv1.ClockResponse], error) {
	if to := req.Msg.GetMoveTo(); to > 0 {
		if to > cluster.ProtocolVersion {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("this server speaks protocol %d, not %d", cluster.ProtocolVersion, to))
		}
		if err := p.s.node.PromiseProtocol(to); err != nil {
			return nil, p.s.toConnect(err)
		}
	}
	return connect.NewResponse(&peerv1.ClockResponse{UnixMs: p.s.node.WallMs(), Protocol: cluster.ProtocolVersion}), nil
}

// Speaks asks the server at apiAddr which protocol its build speaks
// (PeerService.Clock): 0 from builds that do not say, and from builds
// before PeerService.Clock (unimplemented), which speak at most 2.
func (c peerClient) Speaks(ctx context.Context, apiAddr string, moveTo uint64) (uint64, error) {
	pc := peerv1connect.NewPeerServiceClient(c.h, c.p.scheme()+apiAddr, c.p.options()...)
	resp, err := pc.Clock(ctx, connect.NewRequest(&peerv1.ClockRequest{MoveTo: moveTo}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return resp.Msg.GetProtocol(), nil
}

// Clock reads the wall clock of the server at apiAddr (PeerService.Clock).
func (c peerClient) Clock(ctx context.Context, apiAddr string) (int64, error) {
	pc := peerv1connect.NewPeerServiceClient(c.h, c.p.scheme()+apiAddr, c.p.options()...)
	resp, err := pc.Clock(ctx, connect.NewRequest(&peerv1.ClockRequest{}))
	if err != nil {
		return 0, err
	}
	return resp.Msg.GetUnixMs(), nil
}

// Vouch asks the server at apiAddr to vouch for this one (PeerService.Vouch).
// A server of the first release does not serve PeerService: it is asked
// through ClusterStatus instead, as that release did, and its answer is
// never authoritative.
func (c peerClient) Vouch(ctx context.Context, apiAddr string, req cluster.VouchRequest) (cluster.VouchAnswer, error) {
	pc := peerv1connect.NewPeerServiceClient(c.h, c.p.scheme()+apiAddr, c.p.options()...)
	resp, err := pc.Vouch(ctx, connect.NewRequest(&peerv1.VouchRequest{
		Id: req.ID, ClusterId: req.Generation.Cluster, Lineage: req.Generation.Lineage, Generation: req.Generation.Number,
		Group: uint32(req.Group), HasState: req.HasState, LastIndex: req.LastIndex,
	}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		if req.Group != 0 {
			return cluster.VouchAnswer{}, err // the first release runs one group
		}
		voter, seen, index, lerr := c.listing(ctx, apiAddr, req.ID)
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
		Generation: peerGeneration(m.GetLineage(), m.GetGeneration(), m.GetClusterId()), Admitted: m.GetAdmitted(), ContactMs: m.GetContactMs(),
		Group: int(m.GetGroup()), Authoritative: m.GetAuthoritative(), NodeID: m.GetNodeId(),
		LeaderID: m.GetLeaderId(), LeaderAPIAddr: m.GetLeaderApiAddr(),
		InConfiguration: m.GetInConfiguration(), Voter: m.GetVoter(),
		Seen: m.GetSeenWithState(), RecordedIndex: m.GetRecordedIndex(), RecordedTerm: m.GetRecordedTerm(),
		LastIndex: m.GetLastIndex(), Protocol: m.GetProtocol(), Voters: m.GetVoters(),
	}, nil
}

// peerGeneration is the generation a peer message carries. A server of a
// build before generations sends its cluster ID only: its generation is
// unknown, but its cluster ID still tells clusters apart (admit compares
// Generation.Cluster).
func peerGeneration(lineage string, number uint64, cluster string) seqd.Generation {
	return seqd.Generation{Lineage: lineage, Number: number, Cluster: cluster}
}

// listing asks the cluster, through the node at apiAddr (and then through
// the leader it names), whether server id is a voter in the raft
// configuration and whether it was seen holding raft state, as servers of
// the first release answer (through ClusterStatus). Vouch falls back to it
// for such servers.
func (p Peers) listing() func(ctx context.Context, apiAddr, id string) (listed, seen bool, index uint64, err error) {
	h := p.client()
	return func(ctx context.Context, apiAddr, id string) (listed, seen bool, index uint64, err error) {
		for hop := 0; hop < 2; hop++ {
			c := seqv1connect.NewAdminServiceClient(h, p.scheme()+apiAddr, p.options()...)
			resp, err := c.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
			if err != nil {
				return false, false, 0, err
			}
			st := resp.Msg
			// Ask the leader, unless it is the server asking (whose own
			// answer would vouch for itself).
			if la := st.GetLeaderApiAddr(); hop == 0 && la != "" && la != apiAddr && st.GetLeaderId() != st.GetNodeId() && st.GetLeaderId() != id {
				apiAddr = la // ask the leader: its configuration is the newest
				continue
			}
			for _, n := range st.GetNodes() {
				if n.GetId() == id {
					return n.GetVoter(), n.GetSeenWithState(), n.GetRecordedIndex(), nil
				}
			}
			return false, false, 0, nil
		}
		return false, false, 0, errors.New("no answer from the leader")
	}
}

// Progress asks the node at apiAddr for its own raft term and applied
// index in a group (ClusterStatus answered locally).
func (c peerClient) Progress(ctx context.Context, apiAddr string, group int) (uint64, uint64, error) {
	term, applied, _, err := c.localStatus(ctx, apiAddr, group, false)
	return term, applied, err
}

// ReadIndex asks the node at apiAddr, as a group's leader, for its read
// index of the group (ClusterStatus answered locally, with
// HeaderReadIndex); a build that does not know the question answers
// without the header, and then its applied index stands for it.
func (c peerClient) ReadIndex(ctx context.Context, apiAddr string, group int) (uint64, error) {
	_, applied, index, err := c.localStatus(ctx, apiAddr, group, true)
	if err != nil {
		return 0, err
	}
	if index == "" {
		return applied, nil
	}
	return strconv.ParseUint(index, 10, 64)
}

// localStatus asks the node at apiAddr for its own state of a group, and
// (readIndex) for its read index, as the answer's HeaderReadIndex has it.
func (c peerClient) localStatus(ctx context.Context, apiAddr string, group int, readIndex bool) (term, applied uint64, index string, err error) {
	ac := seqv1connect.NewAdminServiceClient(c.h, c.p.scheme()+apiAddr, c.p.options()...)
	r := connect.NewRequest(&seqv1.ClusterStatusRequest{})
	r.Header().Set(seqd.HeaderLocalOnly, "1")
	if readIndex {
		r.Header().Set(seqd.HeaderReadIndex, strconv.Itoa(group))
	}
	resp, err := ac.ClusterStatus(ctx, r)
	if err != nil {
		return 0, 0, "", err
	}
	index = resp.Header().Get(seqd.HeaderReadIndex)
	if len(resp.Msg.GetNodes()) != 1 {
		return 0, 0, "", fmt.Errorf("peer %s answered with %d nodes", apiAddr, len(resp.Msg.GetNodes()))
	}
	n := resp.Msg.GetNodes()[0]
	if group == 0 && len(n.GetGroups()) == 0 {
		return n.GetTerm(), n.GetAppliedIndex(), index, nil // a build without groups
	}
	for _, g := range n.GetGroups() {
		if int(g.GetGroup()) == group {
			return g.GetTerm(), g.GetAppliedIndex(), index, nil
		}
	}
	return 0, 0, "", fmt.Errorf("peer %s runs no group %d", apiAddr, group)
}
