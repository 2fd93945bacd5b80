package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/cluster"
)

// RemoveNode implements AdminService.RemoveNode: on group 0's leader (the
// call is forwarded there), it removes the server from group 0, then from
// every other group on that group's leader, in parallel (see
// removeFromGroups). It answers not_found when no group's leader listed the
// server. A request naming a group is answered only by that group's leader.
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
			if err != nil && !errors.Is(err, cluster.ErrUnknownServer) {
				return nil, err
			}
			// Group 0 no longer listing the server may mean an earlier
			// removal stopped part way: the other groups' leaders say
			// whether they still list it (this server's copy of their
			// configurations may lag behind a removal they committed).
			removed, rerr := s.removeFromGroups(ctx, req.Header(), id)
			if rerr != nil {
				return nil, rerr
			}
			if err != nil && removed == 0 {
				return nil, err // no group listed it
			}
			return &seqv1.RemoveNodeResponse{}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.RemoveNodeRequest]) (*connect.Response[seqv1.RemoveNodeResponse], error) {
			return p.admin.RemoveNode(ctx, r)
		})
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
// removed counts the groups whose leader removed the server in this call.
func (s *Server) removeFromGroups(ctx context.Context, hdr http.Header, id string) (removed int, err error) {
	var n atomic.Int32
	left, first := s.onEveryGroup(ctx, hdr, removeWait, func(ctx context.Context, own http.Header, g int) error {
		did, err := s.removeFromGroup(ctx, own, g, id)
		if did {
			n.Add(1)
		}
		return err
	})
	if first == nil {
		return int(n.Load()), nil
	}
	s.log.Warn("a removed server is still listed by groups that could not remove it in time; they remove it by themselves once they can",
		"id", id, "groups", left, "err", first)
	return int(n.Load()), fmt.Errorf("%w: %s was removed from group 0, but group(s) %s still list it (%v); each removes it by itself once it has a leader: check with seqd status",
		errRemovePartial, id, strings.Join(left, ", "), first)
}

// removeWait bounds removeFromGroups when the call has no deadline.
const removeWait = 15 * time.Second

// removeFromGroup removes server id from group g on its leader: here, or
// forwarded once to the leader this server knows. A server that knows no
// leader of the group (the removed server itself, refused by the group)
// asks every other server in turn: only the group's leader does it. A
// group that does not list the server is done; removed says whether the
// leader removed it now.
func (s *Server) removeFromGroup(ctx context.Context, hdr http.Header, g int, id string) (removed bool, err error) {
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
			if e == nil || connect.CodeOf(e) != connect.CodeUnavailable {
				err = e
				break
			}
		}
	}
	if errors.Is(err, cluster.ErrUnknownServer) || connect.CodeOf(err) == connect.CodeNotFound {
		return false, nil // not (or no longer) in the group
	}
	return err == nil, err
}

// retryOnGroup reports whether a group's share of a call on every group
// (a removal, a space change's follow) failed for want of a leader, of a
// reachable one or of one that serves yet, which an election or the end of
// a predecessor's lease mends.
func retryOnGroup(err error) bool {
	return errors.Is(err, seqd.ErrNoLeader) || errors.Is(err, seqd.ErrNotLeader) ||
		errors.Is(err, seqd.ErrNotServing) || connect.CodeOf(err) == connect.CodeUnavailable
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
