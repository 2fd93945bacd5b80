package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
)

// Routing: every call is served by the leader of one raft group (group 0
// for the calls that are not per key; the group owning a key's section for
// Next, Current and Reserve, keys.go). A server that leads the group serves
// the call; any other forwards it once to the leader as it knows it
// (forwardOnce), and the leader's answer, error included, is the answer. A
// forwarded call that does not find its leader there fails unavailable with
// a leader hint; it is never forwarded again, so a call makes at most one
// hop whatever the servers believe.

// forwardOnce sends call once to group's leader as this server knows it,
// with the caller's token and Seqd-Forwarded, bounded by timeout when ctx
// has no deadline, and returns the leader's API address. A call that was
// itself forwarded (hdr), or whose leader is unknown or this server, is not
// sent: it fails with seqd.ErrNotLeader or seqd.ErrNoLeader (unavailable,
// with the hint). An error the leader answered is returned as it is; a
// leader that cannot be reached is ErrNotLeader.
func (s *Server) forwardOnce(ctx context.Context, hdr http.Header, group int, timeout time.Duration,
	call func(context.Context, *peer, http.Header) error,
) (string, error) {
	id, addr := s.node.GroupLeader(group)
	if hdr.Get(seqd.HeaderForwarded) != "" || id == "" || addr == "" || id == s.node.ID() {
		if id == "" {
			return "", seqd.ErrNoLeader
		}
		return "", seqd.ErrNotLeader
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := call(fctx, s.peer(addr), forwardHeader(s.node.ID(), hdr)); err != nil {
		if connect.IsWireError(err) {
			return "", err // the leader's own answer
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		s.log.Warn("forwarding to a group's leader failed", "group", group, "leader", id, "addr", addr, "err", err)
		return "", fmt.Errorf("%w: group %d's leader %s unreachable", seqd.ErrNotLeader, group, id)
	}
	return addr, nil
}

// forwardHeader is the header of a call this server (id) forwards: Seqd-
// Forwarded, the caller's token (already checked here), and Seqd-Entry when
// the call entered here through a front end that cannot route (noteValues).
func forwardHeader(id string, hdr http.Header) http.Header {
	h := make(http.Header, 3)
	h.Set(seqd.HeaderForwarded, id)
	if a := hdr.Get("Authorization"); a != "" {
		h.Set("Authorization", a)
	}
	if hdr.Get(seqd.HeaderEntry) == id {
		h.Set(seqd.HeaderEntry, id)
	}
	return h
}

// route serves a call that is not per key on group 0's leader: local runs
// it here when this server leads group 0, remote sends it to the leader
// (forwardOnce). The answer carries the routing headers, and Seqd-Leader
// when it was forwarded.
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
	if s.node.Group(0).IsLeader() {
		msg, err := local(ctx)
		if err != nil {
			return nil, err
		}
		resp := connect.NewResponse(msg)
		s.setAnswerHeaders(resp.Header())
		return resp, nil
	}
	var fresp *connect.Response[Resp]
	addr, err := s.forwardOnce(ctx, req.Header(), 0, forwardTimeout, func(ctx context.Context, p *peer, h http.Header) error {
		freq := connect.NewRequest(req.Msg)
		copyHeader(freq.Header(), h)
		var err error
		fresp, err = remote(ctx, p, freq)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := connect.NewResponse(fresp.Msg)
	if v := fresp.Header().Get(seqd.HeaderRoutingVersion); v != "" {
		out.Header().Set(seqd.HeaderRoutingVersion, v)
	}
	// Tell the caller where the leader is, so that a smart client stops
	// paying for this extra hop.
	out.Header().Set(seqd.HeaderLeader, addr)
	return out, nil
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

// onEveryGroup runs fn for every group other than group 0, in parallel,
// trying a group again, with backoff, while it fails for want of a leader
// (or of a reachable one, which an election mends), until the call's
// deadline (wait without one; a little before it, so that the caller reads
// the answer rather than its own timeout). It returns the groups that still
// fail, and the first of their errors.
//
// Each group's share is this server's own call, made with the header fn is
// given: the caller's token and nothing else. The call itself may have come
// forwarded (to group 0's leader, from a server that took it), and a
// forwarded header would stop the forward to each group's leader.
func (s *Server) onEveryGroup(ctx context.Context, hdr http.Header, wait time.Duration, fn func(ctx context.Context, own http.Header, g int) error) (left []string, first error) {
	own := http.Header{}
	if a := hdr.Get("Authorization"); a != "" {
		own.Set("Authorization", a)
	}
	if d, ok := ctx.Deadline(); ok {
		l := time.Until(d)
		wait = l - min(time.Second, l/10)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	errs := make([]error, s.node.Groups())
	var wg sync.WaitGroup
	for g := 1; g < s.node.Groups(); g++ {
		wg.Go(func() {
			for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
				if errs[g] = fn(ctx, own, g); errs[g] == nil || !retryOnGroup(errs[g]) {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
			}
		})
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			left = append(left, strconv.Itoa(g))
			if first == nil {
				first = err
			}
		}
	}
	return left, first
}
