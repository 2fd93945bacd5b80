package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

// leadership follows raft's leadership notifications. On gaining
// leadership it starts lead; on losing it, it revokes the lease first (so the
// allocator stops serving at once and drops its state) and then stops lead.
func (n *Node) leadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case isLeader := <-n.notify:
			n.stats.leaderChanges.Add(1)
			if n.gossip != nil {
				n.gossip.nudge() // refresh the routing version and membership now
			}
			if isLeader {
				n.log.Info("became raft leader; waiting out the previous lease before serving", "term", n.raft.CurrentTerm())
				epoch := n.alloc.Revoke()
				n.startLead(epoch)
			} else {
				n.alloc.Revoke()
				n.stepDownLead()
				n.log.Info("lost raft leadership; lease revoked")
			}
		}
	}
}

func (n *Node) startLead(epoch uint64) {
	n.leadMu.Lock()
	defer n.leadMu.Unlock()
	if n.leadCancel != nil {
		n.leadCancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.leadCancel = cancel
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.lead(ctx, epoch)
	}()
}

func (n *Node) stepDownLead() {
	n.leadMu.Lock()
	defer n.leadMu.Unlock()
	if n.leadCancel != nil {
		n.leadCancel()
		n.leadCancel = nil
	}
}

// lead runs while this node is the raft leader: wait until this server is
// vouched for (see vouch.go; an unvouched server writes nothing, not even a
// barrier), Barrier, wait out any earlier leader's lease, make sure the
// default space exists and the cluster is on the newest protocol every
// server speaks, then renew the lease every Lease/3 from committed entries.
//
// The wait (the lease rule): an earlier leader's lease ends at most its
// lease length L' after a time t' it took before submitting an entry that a
// quorum then stored, and this node was elected by a quorum after that (a
// voter that stored the entry did so before voting here, or it would have
// refused the entry), so this node waits L' + margin from its election. L'
// is the lease the last applied renewal entry carries (protocol 2; see
// fsm.LeaseRecord): it was written by the last leader whose lease any
// renewal rests on, and that leader itself waited out every earlier lease
// before its first renewal, so every earlier lease ended before it. The
// barrier makes the FSM hold every committed renewal. Leases of differing
// lengths across the cluster (a rolling change of --lease in either
// direction) are therefore waited out in full: the wait is the longer of
// this node's lease and the recorded one, plus the larger margin. On
// protocol 1 (a cluster not yet upgraded) renewals carry no length, and a
// new leader waits its own.
func (n *Node) lead(ctx context.Context, epoch uint64) {
	gained := time.Now()
	if !n.waitVouched(ctx) {
		return
	}
	// 1. Barrier: the FSM holds every entry committed before this term.
	for {
		err := n.raft.Barrier(applyTimeout).Error()
		if err == nil {
			break
		}
		n.log.Warn("barrier failed", "err", err)
		if !sleepCtx(ctx, 100*time.Millisecond) || !n.IsLeader() {
			return
		}
	}
	if n.cfg.UnsafeDisableLease {
		// Testing only: serve at once and until raft reports the loss of
		// leadership, with no wait and no expiry. This breaks C2 and C3
		// when an old leader is cut off or paused.
		n.ensureDefaultSpace(ctx)
		n.alloc.Grant(epoch, n.alloc.Now()+100*365*24*time.Hour)
		n.markServing(gained)
		<-ctx.Done()
		return
	}
	// 2. Wait out the lease of any earlier leader.
	wait := n.leaseWait()
	if !sleepCtx(ctx, time.Until(gained.Add(wait))) {
		return
	}
	// 3. The default space, and the protocol.
	n.ensureDefaultSpace(ctx)
	n.ensureProtocol(ctx)
	// 4. Renew the lease from committed entries.
	first := true
	for {
		t := n.alloc.Now()
		start := time.Now()
		renewal := fsm.EncodeNoop()
		if n.fsm.Protocol() >= 2 {
			renewal = fsm.EncodeLease(n.cfg.Lease, n.cfg.LeaseMargin)
		}
		err := n.apply(ctx, renewal)
		if err == nil {
			n.alloc.Grant(epoch, t+n.cfg.Lease)
			n.stats.renewals.Add(1)
			if first {
				first = false
				n.markServing(gained)
			}
		} else if ctx.Err() == nil {
			n.stats.renewalErrors.Add(1)
			n.log.Warn("lease renewal failed", "err", err)
		}
		if !sleepCtx(ctx, time.Until(start.Add(n.cfg.Lease/3))) {
			return
		}
	}
}

// leaseWait is how long a new leader waits from its election before it
// serves: the longer of its own lease and the one the last renewal
// recorded, plus the larger margin (see lead).
func (n *Node) leaseWait() time.Duration {
	wait, margin := n.cfg.Lease, n.cfg.LeaseMargin
	if rec, ok := n.fsm.LeaseRecord(); ok {
		wait, margin = max(wait, rec.Lease), max(margin, rec.Margin)
	}
	n.stats.lastLeaseWait.Store(int64(wait + margin))
	return wait + margin
}

// sleepCtx sleeps for d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (n *Node) ensureDefaultSpace(ctx context.Context) {
	if _, ok := n.fsm.Space(seqd.DefaultSpace.Name); ok {
		return
	}
	if err := n.apply(ctx, fsm.EncodeCreateSpace(seqd.DefaultSpace)); err != nil && !errors.Is(err, context.Canceled) {
		n.log.Warn("creating the default space failed", "err", err)
	}
}

func (n *Node) markServing(gained time.Time) {
	now := time.Now()
	n.stats.servingSince.Store(now.UnixNano())
	n.stats.lastFailoverNs.Store(int64(now.Sub(gained)))
	n.log.Info("serving as leader", "term", n.raft.CurrentTerm(), "after", now.Sub(gained).Round(time.Millisecond))
}
