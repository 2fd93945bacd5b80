package api

import (
	"context"
	"fmt"
	"net/http"

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
	if s.node.Groups() > 1 {
		local, remote := s.nextShare(space, req.Msg.GetSpace(), viaConnect)
		return grouped(s, ctx, req, seqv1connect.SequenceServiceNextProcedure, space, req.Msg.GetKeys(), local, remote,
			func(vals []uint64) *seqv1.NextResponse { return &seqv1.NextResponse{Values: vals} })
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
	if s.node.Groups() > 1 {
		local, remote := s.reserveShare(space, req.Msg.GetSpace(), uint64(count), viaConnect)
		return grouped(s, ctx, req, seqv1connect.SequenceServiceReserveProcedure, space, []uint64{req.Msg.GetKey()}, local, remote,
			func(vals []uint64) *seqv1.ReserveResponse {
				return &seqv1.ReserveResponse{First: vals[0], Count: count}
			})
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
	if s.node.Groups() > 1 {
		local, remote := s.currentShare(space, req.Msg.GetSpace(), viaConnect)
		return grouped(s, ctx, req, seqv1connect.SequenceServiceCurrentProcedure, space, req.Msg.GetKeys(), local, remote,
			func(vals []uint64) *seqv1.CurrentResponse { return &seqv1.CurrentResponse{Values: vals} })
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

// The shares of the per-key calls in a cluster of several groups: local
// serves a group's keys on this server, its leader; remote forwards them to
// the group's leader with the given header, through the client via picks.
// space is the resolved name; asked is the name the caller gave (forwarded
// as given).

func (s *Server) nextShare(space, asked string, via via) (shareLocal, shareRemote) {
	return func(ctx context.Context, g int, keys []uint64) ([]uint64, error) {
			return s.node.Group(g).Allocator().Next(ctx, space, keys)
		}, func(ctx context.Context, p *peer, h http.Header, keys []uint64) ([]uint64, http.Header, error) {
			r := connect.NewRequest(&seqv1.NextRequest{Space: asked, Keys: keys})
			copyHeader(r.Header(), h)
			resp, err := via(p).Next(ctx, r)
			if err != nil {
				return nil, nil, err
			}
			return resp.Msg.GetValues(), resp.Header(), nil
		}
}

func (s *Server) currentShare(space, asked string, via via) (shareLocal, shareRemote) {
	return func(ctx context.Context, g int, keys []uint64) ([]uint64, error) {
			return s.node.Group(g).Allocator().Current(ctx, space, keys)
		}, func(ctx context.Context, p *peer, h http.Header, keys []uint64) ([]uint64, http.Header, error) {
			r := connect.NewRequest(&seqv1.CurrentRequest{Space: asked, Keys: keys})
			copyHeader(r.Header(), h)
			resp, err := via(p).Current(ctx, r)
			if err != nil {
				return nil, nil, err
			}
			return resp.Msg.GetValues(), resp.Header(), nil
		}
}

// reserveShare's shares have one key, and answer the range's first value.
func (s *Server) reserveShare(space, asked string, count uint64, via via) (shareLocal, shareRemote) {
	return func(ctx context.Context, g int, keys []uint64) ([]uint64, error) {
			first, err := s.node.Group(g).Allocator().Reserve(ctx, space, keys[0], count)
			return []uint64{first}, err
		}, func(ctx context.Context, p *peer, h http.Header, keys []uint64) ([]uint64, http.Header, error) {
			r := connect.NewRequest(&seqv1.ReserveRequest{Space: asked, Key: keys[0], Count: uint32(count)})
			copyHeader(r.Header(), h)
			resp, err := via(p).Reserve(ctx, r)
			if err != nil {
				return nil, nil, err
			}
			return []uint64{resp.Msg.GetFirst()}, resp.Header(), nil
		}
}

// grouped answers a per-key call in a cluster of several groups (see
// groups.go).
func grouped[Req, Resp any](s *Server, ctx context.Context, req *connect.Request[Req], procedure, space string, keys []uint64,
	local shareLocal, remote shareRemote,
	msg func([]uint64) *Resp,
) (*connect.Response[Resp], error) {
	vals, hdr, err := keysCall(s, ctx, req.Header(), space, keys, local, remote)
	if err = s.toConnect(err); err != nil {
		s.logCall(procedure, err)
		return nil, err
	}
	resp := connect.NewResponse(msg(vals))
	copyHeader(resp.Header(), hdr)
	return resp, nil
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}
