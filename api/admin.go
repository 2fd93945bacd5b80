package api

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
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
