package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	peerv1 "github.com/seqd/seqd/api/gen/seqd/peer/v1"
	"github.com/seqd/seqd/api/gen/seqd/peer/v1/peerv1connect"
)

// Space changes (UpdateSpace, DeleteSpace, a space created again after a
// delete) are decided by group 0's serving leader; then every other
// group's leader is asked to follow at once (followGroups), so that when
// the call answers, no group serves the old state any more. A group that
// cannot be reached in time follows by itself within seconds (group's
// copySpaces), and the call says so (deadline_exceeded).

// errFollowPartial means a space change was committed in group 0 but not
// every other group followed in time.
var errFollowPartial = errors.New("change not yet followed by every group")

// UpdateSpace implements AdminService.UpdateSpace.
func (s *Server) UpdateSpace(ctx context.Context, req *connect.Request[seqv1.UpdateSpaceRequest]) (*connect.Response[seqv1.UpdateSpaceResponse], error) {
	name, step := req.Msg.GetName(), req.Msg.GetStep()
	err := checkSpaceName(name)
	if err == nil && (step < 1 || step > seqd.MaxStep) {
		err = fmt.Errorf("%w: step %d must be in [1, 2^40]", seqd.ErrInvalidSpace, step)
	}
	if err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.AdminServiceUpdateSpaceProcedure,
		func(ctx context.Context) (*seqv1.UpdateSpaceResponse, error) {
			if err := s.node.UpdateSpace(ctx, name, step); err != nil {
				return nil, err
			}
			if err := s.followGroups(ctx, req.Header(), name); err != nil {
				return nil, err
			}
			sp, ok := s.node.Space(name)
			if !ok {
				return nil, fmt.Errorf("%w %q", seqd.ErrUnknownSpace, name) // deleted meanwhile
			}
			return &seqv1.UpdateSpaceResponse{Space: spaceMsg(sp)}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.UpdateSpaceRequest]) (*connect.Response[seqv1.UpdateSpaceResponse], error) {
			return p.admin.UpdateSpace(ctx, r)
		})
}

// DeleteSpace implements AdminService.DeleteSpace.
func (s *Server) DeleteSpace(ctx context.Context, req *connect.Request[seqv1.DeleteSpaceRequest]) (*connect.Response[seqv1.DeleteSpaceResponse], error) {
	name := req.Msg.GetName()
	if err := checkSpaceName(name); err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.AdminServiceDeleteSpaceProcedure,
		func(ctx context.Context) (*seqv1.DeleteSpaceResponse, error) {
			if err := s.node.DeleteSpace(ctx, name); err != nil {
				return nil, err
			}
			if err := s.followGroups(ctx, req.Header(), name); err != nil {
				return nil, err
			}
			return &seqv1.DeleteSpaceResponse{}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.DeleteSpaceRequest]) (*connect.Response[seqv1.DeleteSpaceResponse], error) {
			return p.admin.DeleteSpace(ctx, r)
		})
}

// checkSpaceName checks the name of a space to change: required, and
// valid.
func checkSpaceName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: a name is required", errBadSpaceName)
	}
	_, err := spaceName(name)
	return err
}

// SetFloor implements AdminService.SetFloor: a per-key call, on the path of
// Next (keys.go), each group's leader raising its sections' marks.
func (s *Server) SetFloor(ctx context.Context, req *connect.Request[seqv1.SetFloorRequest]) (*connect.Response[seqv1.SetFloorResponse], error) {
	space, err := spaceName(req.Msg.GetSpace())
	if err == nil {
		err = checkKeys(req.Msg.GetKeys())
	}
	keys, floors := req.Msg.GetKeys(), req.Msg.GetFloors()
	if err == nil {
		floors, err = floorsOf(keys, req.Msg.GetFloor(), floors)
	}
	if err != nil {
		return nil, s.toConnect(err)
	}
	a, err := s.serveKeys(ctx, &keysCall{kind: kindFloor, space: space, asked: req.Msg.GetSpace(), keys: keys, floors: floors, hdr: req.Header(), via: viaConnect})
	if err != nil {
		return nil, s.callFailed(seqv1connect.AdminServiceSetFloorProcedure, err)
	}
	return keysResponse(s, &a, &seqv1.SetFloorResponse{}), nil
}

// floorsOf checks a SetFloor request's floors and returns one per key.
func floorsOf(keys []uint64, floor uint64, floors []uint64) ([]uint64, error) {
	if len(floors) == 0 {
		floors = make([]uint64, len(keys))
		for i := range floors {
			floors[i] = floor
		}
	}
	if len(floors) != len(keys) {
		return nil, fmt.Errorf("%w: %d floors for %d keys", seqd.ErrInvalidArgument, len(floors), len(keys))
	}
	for _, f := range floors {
		if f > seqd.MaxValue {
			return nil, fmt.Errorf("%w: floor %d is above 2^63-1, the largest value a sequence reaches", seqd.ErrInvalidArgument, f)
		}
	}
	return floors, nil
}

// DeleteNamespace implements AdminService.DeleteNamespace (group 0's
// serving leader decides; flake state lives in group 0 only).
func (s *Server) DeleteNamespace(ctx context.Context, req *connect.Request[seqv1.DeleteNamespaceRequest]) (*connect.Response[seqv1.DeleteNamespaceResponse], error) {
	name := req.Msg.GetName()
	if name == "" || !seqd.ValidName(name) {
		return nil, s.toConnect(fmt.Errorf("%w: namespace %q", seqd.ErrInvalidNamespace, name))
	}
	return route(s, ctx, req, seqv1connect.AdminServiceDeleteNamespaceProcedure,
		func(ctx context.Context) (*seqv1.DeleteNamespaceResponse, error) {
			if err := s.node.DeleteNamespace(ctx, name); err != nil {
				return nil, err
			}
			s.dropHolder(ctx, name)
			return &seqv1.DeleteNamespaceResponse{}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.DeleteNamespaceRequest]) (*connect.Response[seqv1.DeleteNamespaceResponse], error) {
			return p.admin.DeleteNamespace(ctx, r)
		})
}

// followGroups asks every group other than group 0 to follow group 0's
// record of space name, each on its leader (here, or forwarded once per
// attempt), in parallel, trying a group without a reachable leader again
// until the call's deadline (followWait without one). A group still
// behind then fails the call with errFollowPartial (deadline_exceeded):
// the change is committed, and that group follows by itself.
func (s *Server) followGroups(ctx context.Context, hdr http.Header, name string) error {
	if s.node.Groups() == 1 {
		return nil
	}
	left, first := s.onEveryGroup(ctx, hdr, followWait, func(ctx context.Context, own http.Header, g int) error {
		return s.followGroup(ctx, own, g, name)
	})
	if first == nil {
		return nil
	}
	s.log.Warn("a space change is committed in group 0, and groups that could not follow it in time follow by themselves", "space", name, "groups", left, "err", first)
	return fmt.Errorf("%w: the change of space %q is committed, but group(s) %s have not followed it yet (%v); each does within seconds", errFollowPartial, name, strings.Join(left, ", "), first)
}

// followWait bounds followGroups when the call has no deadline.
const followWait = 15 * time.Second

// followGroup makes group g's leader follow group 0's record of a space:
// here, or forwarded once to the leader this server knows.
func (s *Server) followGroup(ctx context.Context, hdr http.Header, g int, name string) error {
	if s.node.Group(g).IsLeader() {
		return s.node.FollowSpace(ctx, g, name)
	}
	_, err := s.forwardOnce(ctx, hdr, g, forwardTimeout, func(ctx context.Context, p *peer, h http.Header) error {
		r := connect.NewRequest(&peerv1.FollowSpaceRequest{Name: name, Group: uint32(g)})
		copyHeader(r.Header(), h)
		_, err := p.peer.FollowSpace(ctx, r)
		return err
	})
	return err
}

// FollowSpace implements PeerService.FollowSpace (see cluster.Node.FollowSpace).
func (p peerService) FollowSpace(ctx context.Context, req *connect.Request[peerv1.FollowSpaceRequest]) (*connect.Response[peerv1.FollowSpaceResponse], error) {
	g := int(req.Msg.GetGroup())
	err := p.s.node.FollowSpace(ctx, g, req.Msg.GetName())
	if errors.Is(err, seqd.ErrNotLeader) {
		err = &groupError{group: g, err: err}
	}
	err = p.s.toConnect(err)
	p.s.logCall(peerv1connect.PeerServiceFollowSpaceProcedure, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&peerv1.FollowSpaceResponse{}), nil
}
