package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
)

// msgFrom is msg for SequenceService answers: a node that forwarded the
// call to the leader names the leader in the Seqd-Leader header, and if the
// client knows that address (it was given, or learned from an error hint) it
// sends its next calls there directly, saving the extra hop. It also notes
// the answer's routing version, and in a cluster of several groups the
// answer's group and term (routing.go); an answer of a group other than
// group 0 says nothing of the cluster's leader.
func msgFrom[T any](c *Client, n *node, r *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	h := r.Header()
	v, _ := strconv.ParseUint(h.Get(seqd.HeaderRoutingVersion), 10, 64)
	c.noteAnswer(n, v, h.Get(seqd.HeaderGroup), h.Get(seqd.HeaderLeader))
	return r.Msg, nil
}

// noteAnswer learns from what a SequenceService answer of n says (its
// routing version, 0 if none; its Seqd-Group; its Seqd-Leader), as msgFrom
// describes.
func (c *Client) noteAnswer(n *node, version uint64, group, leader string) {
	c.noteRouting(version)
	if leader != "" {
		c.forwarded.Add(1)
	}
	if t := c.groups.Load(); t != nil && c.noteGroup(t, n, group, leader) > 0 {
		return
	}
	if g, _, ok := strings.Cut(group, " "); ok && g != "0" {
		return // another group's leader, even with no table (DisableRouting)
	}
	if leader != "" && leader != n.addr {
		c.mu.Lock()
		if i := indexOf(c.nodes, leader); i >= 0 && c.nodes[c.leader] == n {
			c.leader = i
		}
		c.mu.Unlock()
	}
}

func msg[T any](r *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}

// call runs f against the believed leader, retrying unavailable errors,
// transport failures and attempts that time out on the hinted leader or the
// next node, with backoff, for up to RetryFor.
func call[T any](c *Client, ctx context.Context, f func(context.Context, *node) (*T, error)) (*T, error) {
	return callUntil(c, ctx, nil, noGroup, f)
}

// callUntil is call that also stops retrying once gone (if not nil) reports
// true: a coalesced request whose callers all gave up. A group (not
// noGroup) sends the attempts to that group's leader while the routing
// table knows it.
func callUntil[T any](c *Client, ctx context.Context, gone func() bool, group int, f func(context.Context, *node) (*T, error)) (*T, error) {
	return retry(c, ctx, c.opts.AttemptTimeout, gone, group, f)
}

// attemptFailed moves the client on after an attempt on n failed with an
// error worth retrying: it follows the leader hint, or tries the next node.
// idx is n's index in c.nodes, or -1 when n was group's presumed leader. It
// reports whether the next attempt should go at once (a hint to follow).
func (c *Client) attemptFailed(group, idx int, n *node, err error) bool {
	hinted := false
	var ce *connect.Error
	if idx < 0 {
		// The group's presumed leader failed: the cluster's leader
		// next, at once (hints name group 0's leader, not this
		// group's), and a fresh table.
		c.forgetGroupLeader(group, n)
		c.refreshRouting()
		hinted = true
	} else if errors.As(err, &ce) {
		if h := ce.Meta().Get(seqd.HeaderLeader); h != "" && h != n.addr {
			c.mu.Lock()
			c.leader = c.addNodeLocked(h)
			c.mu.Unlock()
			hinted = true
			c.refreshRouting()
		}
	}
	if !hinted && idx >= 0 {
		c.mu.Lock()
		if c.leader == idx {
			c.leader = (idx + 1) % len(c.nodes)
		}
		c.mu.Unlock()
	}
	return hinted
}

// retry is the one retry loop of the client: callUntil with attempts
// bounded by attemptTimeout (0: only by ctx, for a call whose length
// depends on the data, such as a backup's stream). An attempt goes to the
// leader of group if the routing table knows it, else to the believed
// leader of the cluster. When a group's leader fails an attempt, the table
// forgets it and a refresh starts (routing.go); the next attempt goes to
// the cluster's leader, which forwards the call to the group's leader.
func retry[T any](c *Client, ctx context.Context, attemptTimeout time.Duration, gone func() bool, group int, f func(context.Context, *node) (*T, error)) (*T, error) {
	deadline := time.Now().Add(c.opts.RetryFor)
	backoff := c.opts.MinBackoff
	for attempt := 0; ; attempt++ {
		if c.closed.Load() {
			return nil, errClosed
		}
		idx := -1 // -1: n is group's leader
		n := c.groupLeader(group)
		if n == nil {
			c.mu.Lock()
			idx = c.leader
			n = c.nodes[idx]
			c.mu.Unlock()
		}

		actx, cancel := ctx, context.CancelFunc(func() {})
		if attemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, attemptTimeout)
		}
		resp, err := f(actx, n)
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return resp, nil
		}
		// Retry elsewhere: unavailable answers, attempts that hung, and
		// transport failures (an error that did not come from a server,
		// such as a connection reset by a node that died mid-call).
		retry := timedOut || connect.CodeOf(err) == connect.CodeUnavailable || !connect.IsWireError(err)
		if ctx.Err() != nil || !retry || (gone != nil && gone()) {
			return nil, err
		}
		c.retried.Add(1)
		hinted := c.attemptFailed(group, idx, n, err)
		if time.Now().After(deadline) {
			return nil, err
		}
		// A hint to a different node is worth trying at once; otherwise back off.
		if hinted && attempt == 0 {
			continue
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(backoff*2, c.opts.MaxBackoff)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}
