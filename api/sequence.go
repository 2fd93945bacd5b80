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

// checkCount checks a Reserve's count.
func checkCount(count uint64) error {
	if count == 0 || count > seqd.MaxReserveCount {
		return fmt.Errorf("%w: count %d, want 1 to %d", errBadCount, count, seqd.MaxReserveCount)
	}
	return nil
}

// Next implements SequenceService.Next.
func (s *Server) Next(ctx context.Context, req *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	a, err := s.keysRequest(ctx, kindNext, req.Header(), req.Msg.GetSpace(), req.Msg.GetKeys(), 0)
	if err != nil {
		return nil, s.callFailed(seqv1connect.SequenceServiceNextProcedure, err)
	}
	return keysResponse(s, &a, &seqv1.NextResponse{Values: a.vals}), nil
}

// Current implements SequenceService.Current.
func (s *Server) Current(ctx context.Context, req *connect.Request[seqv1.CurrentRequest]) (*connect.Response[seqv1.CurrentResponse], error) {
	a, err := s.keysRequest(ctx, kindCurrent, req.Header(), req.Msg.GetSpace(), req.Msg.GetKeys(), 0)
	if err != nil {
		return nil, s.callFailed(seqv1connect.SequenceServiceCurrentProcedure, err)
	}
	return keysResponse(s, &a, &seqv1.CurrentResponse{Values: a.vals}), nil
}

// Reserve implements SequenceService.Reserve: a per-key call of one key.
func (s *Server) Reserve(ctx context.Context, req *connect.Request[seqv1.ReserveRequest]) (*connect.Response[seqv1.ReserveResponse], error) {
	count := req.Msg.GetCount()
	a, err := s.keysRequest(ctx, kindReserve, req.Header(), req.Msg.GetSpace(), []uint64{req.Msg.GetKey()}, count)
	if err != nil {
		return nil, s.callFailed(seqv1connect.SequenceServiceReserveProcedure, err)
	}
	return keysResponse(s, &a, &seqv1.ReserveResponse{First: a.vals[0], Count: count}), nil
}

// keysRequest checks a per-key call as a caller sent it and serves it.
func (s *Server) keysRequest(ctx context.Context, kind keysKind, hdr http.Header, asked string, keys []uint64, count uint32) (keysAnswer, error) {
	space, err := spaceName(asked)
	if err == nil {
		err = checkKeys(keys)
	}
	if err == nil && kind == kindReserve {
		err = checkCount(uint64(count))
	}
	if err != nil {
		return keysAnswer{}, err
	}
	if hdr.Get(seqd.HeaderEntry) != "" && hdr.Get(seqd.HeaderForwarded) == "" {
		// Only this server's own front ends mark a call they take
		// (Sequences.header): a caller's mark is not passed on.
		hdr = hdr.Clone()
		hdr.Del(seqd.HeaderEntry)
	}
	return s.serveKeys(ctx, &keysCall{kind: kind, space: space, asked: asked, keys: keys, count: count, hdr: hdr, via: viaConnect})
}

// keysResponse is the answer of a per-key call, with its headers.
func keysResponse[Resp any](s *Server, a *keysAnswer, msg *Resp) *connect.Response[Resp] {
	resp := connect.NewResponse(msg)
	s.setKeysHeaders(resp.Header(), a)
	return resp
}

// callFailed maps err to its Connect error (toConnect) and logs the call.
func (s *Server) callFailed(procedure string, err error) error {
	err = s.toConnect(err)
	s.logCall(procedure, err)
	return err
}
