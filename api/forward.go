package api

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
)

// route runs a call locally on the leader, or forwards it to the leader.
func route[Req, Resp any](
	s *Server, ctx context.Context, req *connect.Request[Req], procedure string,
	local func(context.Context) (*Resp, error),
	remote func(context.Context, *peer, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	resp, err := routeInner(s, ctx, req, local, remote)
	err = s.toConnect(err)
	s.logCall(procedure, err)
	return resp, err
}

func routeInner[Req, Resp any](
	s *Server, ctx context.Context, req *connect.Request[Req],
	local func(context.Context) (*Resp, error),
	remote func(context.Context, *peer, *connect.Request[Req]) (*connect.Response[Resp], error),
) (*connect.Response[Resp], error) {
	if s.node.IsLeader() {
		msg, err := local(ctx)
		if err != nil {
			return nil, err
		}
		resp := connect.NewResponse(msg)
		s.setAnswerHeaders(resp.Header())
		return resp, nil
	}
	id, addr := s.node.Leader()
	if req.Header().Get(seqd.HeaderForwarded) != "" || id == "" || addr == "" || id == s.node.ID() {
		if id == "" {
			return nil, seqd.ErrNoLeader
		}
		return nil, seqd.ErrNotLeader
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, forwardTimeout)
		defer cancel()
	}
	freq := connect.NewRequest(req.Msg)
	freq.Header().Set(seqd.HeaderForwarded, s.node.ID())
	if a := req.Header().Get("Authorization"); a != "" {
		freq.Header().Set("Authorization", a) // the caller's token, already checked here
	}
	resp, err := remote(fctx, s.peer(addr), freq)
	if err != nil {
		if connect.IsWireError(err) {
			return nil, err // the leader's own answer
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.log.Warn("forwarding to the leader failed", "leader", id, "addr", addr, "err", err)
		return nil, fmt.Errorf("%w: leader %s unreachable", seqd.ErrNotLeader, id)
	}
	out := connect.NewResponse(resp.Msg)
	if v := resp.Header().Get(seqd.HeaderRoutingVersion); v != "" {
		out.Header().Set(seqd.HeaderRoutingVersion, v)
	}
	// Tell the caller where the leader is, so that a smart client stops
	// paying for this extra hop.
	out.Header().Set(seqd.HeaderLeader, addr)
	return out, nil
}
