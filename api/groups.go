package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
)

// A cluster of several raft groups serves each key on the leader of the
// group owning the key's section (seqd.SlotOf). A call reaching any server
// is split by group; each group's share runs here if this server leads the
// group, or is forwarded once to the group's leader as this server knows
// it (a forwarded share that does not find its leader fails unavailable,
// with the leader hint, and is never forwarded again). The shares run in
// parallel, and the call succeeds or fails as a whole: values already
// taken in groups that answered become gaps, which the contract allows. The
// group's leader checks ownership against its own state (the allocator's
// Owns), never against this server's view.

// groupError is an error of one group's share; toConnect hints that
// group's leader.
type groupError struct {
	group int
	err   error
}

func (e *groupError) Error() string { return e.err.Error() }
func (e *groupError) Unwrap() error { return e.err }

// share is one group's part of a per-key call: the positions of its keys
// in the call.
type share struct {
	group int
	pos   []int
	keys  []uint64
}

// splitKeys groups keys by the group owning them, in first-seen order.
func (s *Server) splitKeys(ctx context.Context, space string, keys []uint64) ([]share, error) {
	locate, err := s.node.Locator(ctx, space)
	if err != nil {
		return nil, err
	}
	var out []share
	idx := map[int]int{}
	for p, k := range keys {
		g, _ := locate(k)
		i, ok := idx[g]
		if !ok {
			i = len(out)
			idx[g] = i
			out = append(out, share{group: g})
		}
		out[i].pos = append(out[i].pos, p)
		out[i].keys = append(out[i].keys, k)
	}
	return out, nil
}

// keysCall runs a per-key call (Next, Current) over every group it spans
// (see above). local serves one group's keys on this server; remote sends
// them to another server with the given header. It returns the values in
// the keys' order and the headers to answer with.
func keysCall(s *Server, ctx context.Context, hdr http.Header, space string, keys []uint64,
	local func(ctx context.Context, group int, keys []uint64) ([]uint64, error),
	remote func(ctx context.Context, p *peer, h http.Header, keys []uint64) ([]uint64, http.Header, error),
) ([]uint64, http.Header, error) {
	shares, err := s.splitKeys(ctx, space, keys)
	if err != nil {
		return nil, nil, err
	}
	vals := make([]uint64, len(keys))
	out := http.Header{}
	run := func(ctx context.Context, sh share) error {
		got, leader, fwd, term, err := s.onGroup(ctx, hdr, sh.group,
			func(ctx context.Context) ([]uint64, error) {
				vals, err := local(ctx, sh.group, sh.keys)
				if errors.Is(err, seqd.ErrUnknownSpace) {
					// This server's copies of the group and of group 0
					// may lag a space created a heartbeat ago: ask group
					// 0's leader, copy it into the group, and try again
					// (an unknown space took no value).
					if err = s.node.EnsureGroupSpace(ctx, sh.group, space); err == nil {
						vals, err = local(ctx, sh.group, sh.keys)
					}
				}
				return vals, err
			},
			func(ctx context.Context, p *peer, h http.Header) ([]uint64, http.Header, error) {
				return remote(ctx, p, h, sh.keys)
			})
		if err != nil {
			return &groupError{group: sh.group, err: err}
		}
		if len(got) != len(sh.keys) {
			return fmt.Errorf("group %d answered %d values for %d keys", sh.group, len(got), len(sh.keys))
		}
		for i, p := range sh.pos {
			vals[p] = got[i]
		}
		if len(shares) == 1 {
			if leader != "" {
				// The leader's own answer headers, and where it is.
				out.Set(seqd.HeaderLeader, leader)
				for _, h := range []string{seqd.HeaderGroup, seqd.HeaderRoutingVersion} {
					if v := fwd.Get(h); v != "" {
						out.Set(h, v)
					}
				}
			} else {
				s.setAnswerHeaders(out)
				s.setGroupHeader(out, sh.group, term)
			}
		}
		return nil
	}
	if len(shares) == 1 {
		err = run(ctx, shares[0])
	} else {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errs := make([]error, len(shares))
		var wg sync.WaitGroup
		for i, sh := range shares {
			wg.Go(func() {
				if errs[i] = run(ctx, sh); errs[i] != nil {
					cancel() // the call fails as a whole: stop the others
				}
			})
		}
		wg.Wait()
		err = firstError(errs)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(shares) > 1 {
		s.setAnswerHeaders(out)
	}
	return vals, out, nil
}

// setGroupHeader sets HeaderGroup for an answer this server served as
// group g's leader in term.
func (s *Server) setGroupHeader(h http.Header, g int, term uint64) {
	h.Set(seqd.HeaderGroup, strconv.Itoa(g)+" "+strconv.FormatUint(term, 10))
}

// firstError returns the first error that is not a cancellation caused by
// another share's failure, else the first error.
func firstError(errs []error) error {
	var first error
	for _, e := range errs {
		if e == nil {
			continue
		}
		if first == nil {
			first = e
		}
		if !errors.Is(e, context.Canceled) {
			return e
		}
	}
	return first
}

// onGroup runs one group's share here if this server leads the group, or
// forwards it once to the group's leader. It returns, when it forwarded,
// the leader's address and answer headers, and when it served, the term it
// served in.
func (s *Server) onGroup(ctx context.Context, hdr http.Header, group int,
	local func(context.Context) ([]uint64, error),
	remote func(context.Context, *peer, http.Header) ([]uint64, http.Header, error),
) (vals []uint64, leader string, fwd http.Header, term uint64, err error) {
	if g := s.node.Group(group); g.IsLeader() {
		// The term read before serving: if leadership changed since, the
		// answer claims an older term, which a client never prefers.
		term = g.Raft().CurrentTerm()
		vals, err = local(ctx)
		return vals, "", nil, term, err
	}
	var rh http.Header
	addr, err := s.toGroupLeader(ctx, hdr, group, forwardTimeout, func(ctx context.Context, p *peer, h http.Header) error {
		var err error
		vals, rh, err = remote(ctx, p, h)
		return err
	})
	if err != nil {
		return nil, "", nil, 0, err
	}
	return vals, addr, rh, 0, nil
}

// toGroupLeader forwards one call once to group's leader as this server
// knows it, with the caller's token and the forwarded header, bounded by
// timeout when ctx has no deadline, and returns the leader's address. A
// forwarded call (hdr), or one whose leader is unknown or this server, is
// not forwarded: it fails unavailable.
func (s *Server) toGroupLeader(ctx context.Context, hdr http.Header, group int, timeout time.Duration,
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
	h := http.Header{}
	h.Set(seqd.HeaderForwarded, s.node.ID())
	if a := hdr.Get("Authorization"); a != "" {
		h.Set("Authorization", a) // the caller's token, already checked here
	}
	if err := call(fctx, s.peer(addr), h); err != nil {
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

// onEveryGroup runs fn for every group other than group 0, in parallel,
// trying a group again, with backoff, while it fails for want of a leader
// (or of a reachable one, which an election mends), until the call's
// deadline (wait without one; a little before it, so that the caller reads
// the answer rather than its own timeout). It returns the groups that still
// fail, and the first of their errors.
func (s *Server) onEveryGroup(ctx context.Context, wait time.Duration, fn func(ctx context.Context, g int) error) (left []string, first error) {
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
				if errs[g] = fn(ctx, g); errs[g] == nil || !retryRemove(errs[g]) {
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
