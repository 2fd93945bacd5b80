package group

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

// TransferLeadership asks raft to hand leadership to server id (any voter
// when id is empty) and waits for the outcome. It must run on the leader.
// An id not in the configuration fails with an error wrapping unknown.
//
// Without LeaseHandoff the lease is not revoked first: a failed transfer
// leaves this server serving, and a successful one steps it down (revoking
// the lease) before the new leader can serve, which waits out this
// server's lease anyway. With LeaseHandoff, this server stops serving
// first (Withhold: nothing renews its lease again, not even a renewal
// committing meanwhile), commits a lease release, and then transfers, so
// that the new leader may serve at once; if the release or the transfer
// fails, it serves again through the whole lease procedure (ResumeLead),
// whose first renewal voids the release for any later leader.
func (g *Group) TransferLeadership(id string, unknown error) error {
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	var target *raft.Server
	if id != "" {
		cf := g.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return err
		}
		for _, s := range cf.Configuration().Servers {
			if string(s.ID) == id {
				target = &s
			}
		}
		if target == nil {
			return fmt.Errorf("%w: %q", unknown, id)
		}
	}
	transfer := func() error {
		if target == nil {
			return g.await(g.raft.LeadershipTransfer())
		}
		return g.await(g.raft.LeadershipTransferToServer(target.ID, target.Address))
	}
	if !g.handoff() {
		return transfer()
	}
	// A move that withholds holds off every other such move (see moveMu).
	g.moveMu.Lock()
	defer g.moveMu.Unlock()
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	epoch := g.Withhold()
	err := g.release(context.Background())
	if err == nil {
		err = transfer()
	}
	if err != nil {
		g.ResumeLead(epoch)
	}
	return err
}

// LockMoves holds off every other planned move of the group until the
// returned function is called: a host that withholds, changes something
// and resumes (removing this server) holds it throughout.
func (g *Group) LockMoves() (unlock func()) {
	g.moveMu.Lock()
	return g.moveMu.Unlock
}

// handoff reports whether a planned move releases the lease: LeaseHandoff
// is set and the group is on a protocol every server of which knows
// KindRelease.
func (g *Group) handoff() bool {
	return g.cfg.LeaseHandoff && g.fsm.Protocol() >= fsm.KindProtocol(fsm.KindRelease)
}

// release commits a lease release; the caller has stopped serving. ctx
// bounds it (at most applyTimeout). A leader that has not renewed in its
// term writes none: it may have been elected while an earlier leader, cut
// off, still holds its lease, and its release would certify a lease it
// never held. Every replica applies that rule to the log itself
// (lease.Handoff), so a release skipped here only spares replicas of an
// earlier build, which trust any release, and the next leader waits.
func (g *Group) release(ctx context.Context) error {
	if term := g.raft.CurrentTerm(); !g.fsm.RenewedIn(term) {
		g.log.Info("not releasing the lease before the transfer: this leader has not renewed in its term, so the next one waits the previous lease out", "term", term)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	if err := g.apply(ctx, fsm.EncodeRelease()); err != nil {
		g.log.Warn("releasing the lease before a leadership transfer failed", "err", err)
		return err
	}
	return nil
}

// Handover is the first step of a graceful stop: a leader drops its lease
// and in-memory state and hands leadership to another voter, if there is
// one. ctx bounds the handover.
func (g *Group) Handover(ctx context.Context) {
	g.moveMu.Lock()
	defer g.moveMu.Unlock()
	if !g.IsLeader() {
		return
	}
	g.alloc.Revoke()
	g.stepDownLead()
	if !g.hasOtherVoters() {
		return
	}
	if g.handoff() {
		_ = g.release(ctx) // on failure the next leader waits the lease out
	}
	errc := make(chan error, 1)
	go func() { errc <- g.await(g.raft.LeadershipTransfer()) }()
	select {
	case err := <-errc:
		if err != nil {
			g.log.Warn("leadership transfer failed", "err", err)
		} else {
			g.log.Info("leadership handed over")
		}
	case <-ctx.Done():
		g.log.Warn("leadership transfer timed out")
	}
}

func (g *Group) hasOtherVoters() bool {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != g.cfg.ID {
			return true
		}
	}
	return false
}
