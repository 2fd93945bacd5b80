package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/cluster"
)

// CreateSpace implements AdminService.CreateSpace.
func (s *Server) CreateSpace(ctx context.Context, req *connect.Request[seqv1.CreateSpaceRequest]) (*connect.Response[seqv1.CreateSpaceResponse], error) {
	sp := seqd.Space{Name: req.Msg.GetName(), Step: req.Msg.GetStep(), SectionSize: req.Msg.GetSectionSize()}
	if sp.Step == 0 {
		sp.Step = seqd.DefaultStep
	}
	if sp.SectionSize == 0 {
		sp.SectionSize = seqd.DefaultSectionSize
	}
	if !seqd.ValidName(sp.Name) {
		_, err := spaceName(sp.Name)
		if sp.Name == "" {
			err = fmt.Errorf("%w: a name is required", errBadSpaceName)
		}
		return nil, s.toConnect(err)
	}
	if err := seqd.ValidateSpace(sp); err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.AdminServiceCreateSpaceProcedure,
		func(ctx context.Context) (*seqv1.CreateSpaceResponse, error) {
			again := s.node.SpaceDeleted(sp.Name)
			created, err := s.node.CreateSpace(ctx, sp)
			if err != nil {
				return nil, err
			}
			if again {
				// Created again after a delete: the other groups' records
				// say deleted until they follow (see space_changes.go).
				if err := s.followGroups(ctx, req.Header(), sp.Name); err != nil {
					return nil, err
				}
			}
			return &seqv1.CreateSpaceResponse{Space: spaceMsg(sp), Created: created}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.CreateSpaceRequest]) (*connect.Response[seqv1.CreateSpaceResponse], error) {
			return p.admin.CreateSpace(ctx, r)
		})
}

// ListSpaces implements AdminService.ListSpaces. It is answered by the leader,
// so a space whose creation completed is always listed.
func (s *Server) ListSpaces(ctx context.Context, req *connect.Request[seqv1.ListSpacesRequest]) (*connect.Response[seqv1.ListSpacesResponse], error) {
	return route(s, ctx, req, seqv1connect.AdminServiceListSpacesProcedure,
		func(ctx context.Context) (*seqv1.ListSpacesResponse, error) {
			out := &seqv1.ListSpacesResponse{}
			for _, sp := range s.node.Spaces() {
				out.Spaces = append(out.Spaces, spaceMsg(sp))
			}
			return out, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.ListSpacesRequest]) (*connect.Response[seqv1.ListSpacesResponse], error) {
			return p.admin.ListSpaces(ctx, r)
		})
}

func spaceMsg(sp seqd.Space) *seqv1.Space {
	return &seqv1.Space{Name: sp.Name, Step: sp.Step, SectionSize: sp.SectionSize}
}

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
		return connect.NewResponse(&seqv1.ClusterStatusResponse{
			LeaderId: local.LeaderID, Term: local.Term, LeaderApiAddr: local.LeaderAPIAddr,
			NodeId: local.ID, Nodes: []*seqv1.Node{self}, Version: version, ClusterId: local.ClusterID,
			Groups: routes(local, nil), SlotCount: seqd.SlotCount, SlotMapVersion: seqd.SlotMapVersion,
		}), nil
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

// RemoveNode implements AdminService.RemoveNode: on group 0's leader (the
// call is forwarded there), it removes the server from group 0, then from
// every other group on that group's leader, in parallel (see
// removeFromGroups). A request naming a group is answered only by that
// group's leader.
func (s *Server) RemoveNode(ctx context.Context, req *connect.Request[seqv1.RemoveNodeRequest]) (*connect.Response[seqv1.RemoveNodeResponse], error) {
	id := req.Msg.GetId()
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("id is required"))
	}
	if req.Msg.Group != nil {
		g := int(req.Msg.GetGroup())
		err := s.node.RemoveServerFrom(ctx, g, id)
		if errors.Is(err, seqd.ErrNotLeader) {
			err = &groupError{group: g, err: err}
		}
		if err = s.toConnect(err); err != nil {
			s.logCall(seqv1connect.AdminServiceRemoveNodeProcedure, err)
			return nil, err
		}
		return connect.NewResponse(&seqv1.RemoveNodeResponse{}), nil
	}
	return route(s, ctx, req, seqv1connect.AdminServiceRemoveNodeProcedure,
		func(ctx context.Context) (*seqv1.RemoveNodeResponse, error) {
			err := s.node.RemoveServer(ctx, id)
			if errors.Is(err, cluster.ErrUnknownServer) && s.node.Groups() > 1 && s.inAnyGroup(id) {
				err = nil // removed from group 0 before; the others still list it
			}
			if err == nil {
				err = s.removeFromGroups(ctx, req.Header(), id)
			}
			if err != nil {
				return nil, err
			}
			return &seqv1.RemoveNodeResponse{}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.RemoveNodeRequest]) (*connect.Response[seqv1.RemoveNodeResponse], error) {
			return p.admin.RemoveNode(ctx, r)
		})
}

// inAnyGroup reports whether a group other than group 0 lists server id,
// as this server knows their configurations.
func (s *Server) inAnyGroup(id string) bool {
	for g := 1; g < s.node.Groups(); g++ {
		if s.node.InGroup(g, id) {
			return true
		}
	}
	return false
}

// removeFromGroups removes server id, already removed from group 0, from
// every other group, each on its leader (here, or forwarded once per
// attempt), in parallel. A group that no longer lists it is done; a group
// without a reachable leader is tried again, with backoff, until the call's
// deadline (removeWait without one), since an election after a failure
// takes a moment. If a group still lists the server then, it fails with
// errRemovePartial (deadline_exceeded, which clients do not retry: a
// retried RemoveNode would remove the same ID again, and a wiped server
// may have rejoined under it as a new one meanwhile); the group removes
// it later by itself, following group 0 (see cluster.mirrorMembership).
func (s *Server) removeFromGroups(ctx context.Context, hdr http.Header, id string) error {
	left, first := s.onEveryGroup(ctx, removeWait, func(ctx context.Context, g int) error {
		return s.removeFromGroup(ctx, hdr, g, id)
	})
	if first == nil {
		return nil
	}
	s.log.Warn("a removed server is still listed by groups that could not remove it in time; they remove it by themselves once they can",
		"id", id, "groups", left, "err", first)
	return fmt.Errorf("%w: %s was removed from group 0, but group(s) %s still list it (%v); each removes it by itself once it has a leader: check with seqd status",
		errRemovePartial, id, strings.Join(left, ", "), first)
}

// removeWait bounds removeFromGroups when the call has no deadline.
const removeWait = 15 * time.Second

// removeFromGroup removes server id from group g on its leader: here, or
// forwarded once to the leader this server knows. A server that knows no
// leader of the group (the removed server itself, refused by the group)
// asks every other server in turn: only the group's leader does it. A
// group that does not list the server is done.
func (s *Server) removeFromGroup(ctx context.Context, hdr http.Header, g int, id string) error {
	var err error
	send := func(ctx context.Context, p *peer, h http.Header) error {
		r := connect.NewRequest(&seqv1.RemoveNodeRequest{Id: id, Group: proto.Uint32(uint32(g))})
		maps.Copy(r.Header(), h)
		_, err := p.admin.RemoveNode(ctx, r)
		return err
	}
	if s.node.Group(g).IsLeader() {
		err = s.node.RemoveServerFrom(ctx, g, id)
	} else {
		_, err = s.forwardOnce(ctx, hdr, g, forwardTimeout, send)
	}
	if lid, _ := s.node.GroupLeader(g); errors.Is(err, seqd.ErrNoLeader) || (lid == s.node.ID() && errors.Is(err, seqd.ErrNotLeader)) {
		for _, m := range s.node.Members() {
			// Servers of this cluster in group 0's configuration only: a
			// server of another cluster in gossip may lead a group listing
			// a server of the same ID.
			if !m.Alive || m.ID == s.node.ID() || m.APIAddr == "" || m.Cluster != s.node.ClusterID() || !s.node.InGroup(0, m.ID) {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, forwardTimeout)
			e := send(actx, s.peer(m.APIAddr), forwardHeader(s.node.ID(), hdr))
			cancel()
			if e == nil || connect.CodeOf(e) == connect.CodeNotFound {
				return nil
			}
			if connect.CodeOf(e) != connect.CodeUnavailable {
				return e
			}
		}
	}
	if errors.Is(err, cluster.ErrUnknownServer) || connect.CodeOf(err) == connect.CodeNotFound {
		return nil // not (or no longer) in the group
	}
	return err
}

// retryRemove reports whether a group's removal failed for want of a
// leader (or of a reachable one), which an election mends.
func retryRemove(err error) bool {
	return errors.Is(err, seqd.ErrNoLeader) || errors.Is(err, seqd.ErrNotLeader) ||
		connect.CodeOf(err) == connect.CodeUnavailable
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

// Backup implements AdminService.Backup. With one raft group it is answered
// only by the serving leader: others answer unavailable with the leader's
// address. With several, this server gathers every group's part from the
// group's serving leader, here or forwarded once to it (a part asked for
// with the request's group is answered only by its leader, never
// forwarded), and streams the backup merged from them; a part that fails
// fails the call, with its group's leader hint.
func (s *Server) Backup(ctx context.Context, req *connect.Request[seqv1.BackupRequest], stream *connect.ServerStream[seqv1.BackupResponse]) error {
	w := &chunkWriter{stream: stream, buf: make([]byte, 0, backupChunk)}
	var err error
	switch {
	case req.Msg.Group != nil:
		g := int(req.Msg.GetGroup())
		if g >= s.node.Groups() {
			err = fmt.Errorf("%w: group %d of %d", seqd.ErrInvalidArgument, g, s.node.Groups())
			break
		}
		err = s.backupPart(ctx, req.Header(), g, w, false)
	case s.node.Groups() == 1:
		_, err = s.node.Backup(w)
	default:
		_, err = s.node.BackupGroups(ctx, w, func(ctx context.Context, g int, w io.Writer) error {
			return s.backupPart(ctx, req.Header(), g, w, true)
		})
	}
	if err == nil {
		err = w.flush()
	}
	err = s.toConnect(err)
	s.logCall(seqv1connect.AdminServiceBackupProcedure, err)
	return err
}

const backupChunk = 256 << 10

// backupForwardTimeout bounds a group's part fetched from its leader when
// the call has no deadline.
const backupForwardTimeout = 5 * time.Minute

// backupPart writes group g's part of a backup (cluster.Node.BackupGroup)
// to w: here if this server leads the group, else, when forward is set,
// fetched from the group's leader (toGroupLeader). Its errors name the
// group, for the leader hint.
func (s *Server) backupPart(ctx context.Context, hdr http.Header, g int, w io.Writer, forward bool) error {
	var err error
	switch {
	case s.node.Group(g).IsLeader():
		_, err = s.node.BackupGroup(g, w)
	case !forward:
		err = seqd.ErrNotLeader
		if id, _ := s.node.GroupLeader(g); id == "" {
			err = seqd.ErrNoLeader
		}
	default:
		var werr error // a local write's failure, not the leader's
		_, err = s.forwardOnce(ctx, hdr, g, backupForwardTimeout, func(ctx context.Context, p *peer, h http.Header) error {
			req := connect.NewRequest(&seqv1.BackupRequest{Group: proto.Uint32(uint32(g))})
			maps.Copy(req.Header(), h)
			stream, err := p.admin.Backup(ctx, req)
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
				if _, werr = w.Write(stream.Msg().GetData()); werr != nil {
					return werr
				}
			}
			return stream.Err()
		})
		if werr != nil {
			err = werr
		}
	}
	if err != nil {
		return &groupError{group: g, err: fmt.Errorf("group %d's part of the backup: %w", g, err)}
	}
	return nil
}

// chunkWriter sends what is written to it as BackupResponse messages.
type chunkWriter struct {
	stream *connect.ServerStream[seqv1.BackupResponse]
	buf    []byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), backupChunk-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == backupChunk {
			if err := w.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.stream.Send(&seqv1.BackupResponse{Data: w.buf})
	w.buf = w.buf[:0]
	return err
}

// LocateKeys implements AdminService.LocateKeys.
func (s *Server) LocateKeys(ctx context.Context, req *connect.Request[seqv1.LocateKeysRequest]) (*connect.Response[seqv1.LocateKeysResponse], error) {
	space, err := spaceName(req.Msg.GetSpace())
	if err == nil {
		err = checkKeys(req.Msg.GetKeys())
	}
	keys := req.Msg.GetKeys()
	out := &seqv1.LocateKeysResponse{Groups: make([]uint32, len(keys)), Slots: make([]uint32, len(keys))}
	var locate func(uint64) (int, uint32)
	if err == nil {
		locate, err = s.node.Locator(ctx, space)
	}
	for i := 0; err == nil && i < len(keys); i++ {
		var g int
		g, out.Slots[i] = locate(keys[i])
		out.Groups[i] = uint32(g)
	}
	if err != nil {
		err = s.toConnect(err)
		s.logCall(seqv1connect.AdminServiceLocateKeysProcedure, err)
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// drainWait bounds a DrainNode call without a deadline.
const drainWait = 30 * time.Second

// DrainNode implements AdminService.DrainNode: the named server drains
// itself; another server forwards the call to it once.
func (s *Server) DrainNode(ctx context.Context, req *connect.Request[seqv1.DrainNodeRequest]) (*connect.Response[seqv1.DrainNodeResponse], error) {
	id := req.Msg.GetId()
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("id is required"))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, drainWait)
		defer cancel()
	}
	var (
		resp *connect.Response[seqv1.DrainNodeResponse]
		err  error
	)
	if id == s.node.ID() {
		var led int
		led, err = s.node.Drain(ctx, !req.Msg.GetUndo())
		if errors.Is(err, cluster.ErrDrainIncomplete) {
			err = fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
		}
		resp = connect.NewResponse(&seqv1.DrainNodeResponse{GroupsLed: uint32(led)})
	} else {
		addr := ""
		for _, m := range s.node.Members() {
			if m.ID == id && m.Alive {
				addr = m.APIAddr
			}
		}
		switch {
		case req.Header().Get(seqd.HeaderForwarded) != "":
			err = seqd.ErrNotLeader // forwarded to a server that is not the one named
		case addr == "":
			err = fmt.Errorf("%w: no live server %q in gossip", cluster.ErrUnknownServer, id)
		default:
			freq := connect.NewRequest(req.Msg)
			copyHeader(freq.Header(), forwardHeader(s.node.ID(), req.Header()))
			resp, err = s.peer(addr).admin.DrainNode(ctx, freq)
			if err != nil && !connect.IsWireError(err) && ctx.Err() == nil {
				s.log.Warn("forwarding a drain failed", "id", id, "addr", addr, "err", err)
				err = fmt.Errorf("%w: server %s unreachable", seqd.ErrNotServing, id)
			}
		}
	}
	if err != nil {
		err = s.toConnect(err)
		s.logCall(seqv1connect.AdminServiceDrainNodeProcedure, err)
		return nil, err
	}
	return resp, nil
}
