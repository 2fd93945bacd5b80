package api

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

func spaceName(name string) (string, error) {
	if name == "" {
		return seqd.DefaultSpaceName, nil
	}
	if !seqd.ValidName(name) {
		return "", fmt.Errorf("%w %q: use 1-64 characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit", errBadSpaceName, name)
	}
	return name, nil
}

func checkKeys(keys []uint64) error {
	if len(keys) == 0 {
		return errNoKeys
	}
	if len(keys) > seqd.MaxKeys {
		return fmt.Errorf("%w: %d keys, at most %d", errTooManyKeys, len(keys), seqd.MaxKeys)
	}
	return nil
}

// Next implements SequenceService.Next.
func (s *Server) Next(ctx context.Context, req *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	space, err := spaceName(req.Msg.GetSpace())
	if err == nil {
		err = checkKeys(req.Msg.GetKeys())
	}
	if err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.SequenceServiceNextProcedure,
		func(ctx context.Context) (*seqv1.NextResponse, error) {
			vals, err := s.node.Allocator().Next(ctx, space, req.Msg.GetKeys())
			if err != nil {
				return nil, err
			}
			return &seqv1.NextResponse{Values: vals}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
			return p.seq.Next(ctx, r)
		})
}

// Reserve implements SequenceService.Reserve.
func (s *Server) Reserve(ctx context.Context, req *connect.Request[seqv1.ReserveRequest]) (*connect.Response[seqv1.ReserveResponse], error) {
	space, err := spaceName(req.Msg.GetSpace())
	count := req.Msg.GetCount()
	if err == nil && (count == 0 || count > seqd.MaxReserveCount) {
		err = fmt.Errorf("%w: count %d, want 1 to %d", errBadCount, count, seqd.MaxReserveCount)
	}
	if err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.SequenceServiceReserveProcedure,
		func(ctx context.Context) (*seqv1.ReserveResponse, error) {
			first, err := s.node.Allocator().Reserve(ctx, space, req.Msg.GetKey(), uint64(count))
			if err != nil {
				return nil, err
			}
			return &seqv1.ReserveResponse{First: first, Count: count}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.ReserveRequest]) (*connect.Response[seqv1.ReserveResponse], error) {
			return p.seq.Reserve(ctx, r)
		})
}

// Current implements SequenceService.Current.
func (s *Server) Current(ctx context.Context, req *connect.Request[seqv1.CurrentRequest]) (*connect.Response[seqv1.CurrentResponse], error) {
	space, err := spaceName(req.Msg.GetSpace())
	if err == nil {
		err = checkKeys(req.Msg.GetKeys())
	}
	if err != nil {
		return nil, s.toConnect(err)
	}
	return route(s, ctx, req, seqv1connect.SequenceServiceCurrentProcedure,
		func(ctx context.Context) (*seqv1.CurrentResponse, error) {
			vals, err := s.node.Allocator().Current(ctx, space, req.Msg.GetKeys())
			if err != nil {
				return nil, err
			}
			return &seqv1.CurrentResponse{Values: vals}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.CurrentRequest]) (*connect.Response[seqv1.CurrentResponse], error) {
			return p.seq.Current(ctx, r)
		})
}
