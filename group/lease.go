package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/lease"
)

// leadership follows raft's leadership notifications. On gaining
// leadership it starts lead; on losing it, it revokes the lease first (so the
// allocator stops serving at once and drops its state) and then stops lead.
func (g *Group) leadership() {
	defer g.wg.Done()
	for {
		select {
		case <-g.stop:
			return
		case isLeader := <-g.notify:
			g.stats.leaderChanges.Add(1)
			g.host.LeadershipChanged(isLeader)
			if isLeader && g.fenced.Load() {
				g.alloc.Revoke()
				g.log.Info("became raft leader, but this server is fenced: it never serves", "term", g.raft.CurrentTerm())
			} else if isLeader {
				g.log.Info("became raft leader; waiting out the previous lease before serving", "term", g.raft.CurrentTerm())
				epoch := g.alloc.Revoke()
				g.startLead(epoch)
			} else {
				g.alloc.Revoke()
				g.stepDownLead()
				g.log.Info("lost raft leadership; lease revoked")
			}
		}
	}
}

func (g *Group) startLead(epoch uint64) {
	g.leadMu.Lock()
	defer g.leadMu.Unlock()
	if g.leadCancel != nil {
		g.leadCancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.leadCancel = cancel
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.lead(ctx, epoch)
	}()
}

func (g *Group) stepDownLead() {
	g.leadMu.Lock()
	defer g.leadMu.Unlock()
	if g.leadCancel != nil {
		g.leadCancel()
		g.leadCancel = nil
	}
}

// lead runs while this server is the raft leader: wait until this server is
// admitted (see Host.WaitAdmitted; an unadmitted server writes nothing, not even a
// barrier), Barrier, wait out any earlier leader's lease, make sure the
// default space exists and the cluster is on the newest protocol every
// server speaks, then renew the lease every Lease/3 from committed entries.
//
// The wait (the lease rule): an earlier leader's lease ends at most its
// lease length L' after a time t' it took before submitting an entry that a
// quorum then stored, and this server was elected by a quorum after that (a
// voter that stored the entry did so before voting here, or it would have
// refused the entry), so this server may serve L' + margin after its
// election. L' is the lease the last applied renewal entry carries
// (protocol 2; see fsm.LeaseRecord): it was written by the last leader
// whose lease any renewal rests on, and that leader itself waited out every
// earlier lease before its first renewal, so every earlier lease ended
// before it. The barrier makes the FSM hold every committed renewal. Leases
// of differing lengths across the cluster (a rolling change of --lease in
// either direction) are therefore waited out in full: the wait is the
// longer of this server's lease and the recorded one, plus the larger
// margin. On protocol 1 (a cluster not yet upgraded) renewals carry no
// length: a new leader waits its own lease, at least the first release's
// (lease.FirstReleaseLease) if it has a past, counted from its election only
// (see lease.Deadline).
//
// The wait may also be counted from when this server last stored a renewal
// (fsm.IsRenewal: also the no-op renewals of protocol 1 and of the first
// release, which may lead in a cluster of mixed builds) in its log, if that
// was earlier. The renewal a lease rests on committed,
// so it is in this server's log (raft elects only a server holding every
// committed entry), and its t' was taken before the entry was sent, so
// before this server stored it: the lease ends at most L' after that. The
// last store of any renewal is no earlier than the store of that one. A
// renewal can also reach this server inside a snapshot, so installing one
// counts as storing a renewal then; and one stored before this process
// started is older than anything stored since, so until this server has
// stored one it counts from its election. Followers store each renewal as
// it is sent, so after a crash of the leader most of the wait runs while
// the followers notice the crash and elect, instead of after it. Both
// instants are read from Go's monotonic clock, which never runs ahead of
// real time (it stands still while the host is suspended), so the wait is
// never cut short by this server's clock; the old leader times its lease by
// a clock that counts suspension (bootclock), and the margin covers
// differing clock rates, as before.
//
// The handoff (LeaseHandoff): a leader that moves its leadership on purpose
// first stops serving (Withhold, after which no Grant renews its lease),
// then commits a release, then transfers (see TransferLeadership). If the
// last lease entry this server applied after its barrier is a release
// (fsm.LeaseReleased: no renewal follows it), the leader that wrote it had
// stopped serving before, and no leader served after it (serving needs a
// committed renewal, which the barrier would have applied), so no lease is
// running and this server serves without a wait. Anything else (a crash, a
// failed transfer, whose resumed leader renews first) leaves a renewal as
// the last lease entry and the full wait.
func (g *Group) lead(ctx context.Context, epoch uint64) {
	gained := time.Now()
	if !g.host.WaitAdmitted(ctx, g.cfg.Index) {
		return
	}
	// 1. Barrier: the FSM holds every entry committed before this term.
	for {
		term := g.raft.CurrentTerm()
		err := g.raft.Barrier(applyTimeout).Error()
		if err == nil {
			g.readyTerm.Store(term)
			break
		}
		g.log.Warn("barrier failed", "err", err)
		if !sleepCtx(ctx, 100*time.Millisecond) || !g.IsLeader() {
			return
		}
	}
	if g.cfg.UnsafeDisableLease {
		// Testing only: serve at once and until raft reports the loss of
		// leadership, with no wait and no expiry. This breaks C2 and C3
		// when an old leader is cut off or paused.
		g.ensureDefaultSpace(ctx)
		g.alloc.Grant(epoch, g.alloc.Now()+100*365*24*time.Hour)
		g.markServing(gained)
		<-ctx.Done()
		return
	}
	// 2. Wait out the lease of any earlier leader, unless the last lease
	// entry is a release (see TransferLeadership): its leader had stopped
	// serving before it submitted the release, and every later leader
	// that served renewed after it.
	if g.cfg.LeaseHandoff && g.fsm.LeaseReleased() {
		g.stats.lastLeaseWait.Store(0)
		g.stats.handoffs.Add(1)
		g.log.Info("the previous leader released its lease: serving without a lease wait", "term", g.raft.CurrentTerm())
	} else if !sleepCtx(ctx, time.Until(g.leaseEnd(gained))) {
		return
	}
	// 3. The default space (group 0 only: the others copy it), group 0's
	// spaces, the protocol, and an agreed group count.
	if g.cfg.Authority == nil {
		g.ensureDefaultSpace(ctx)
	}
	g.copySpaces(ctx)
	for {
		g.EnsureProtocol(ctx)
		err := g.groupsAgree()
		if err == nil {
			break
		}
		g.log.Error("not serving: "+err.Error()+"; handing leadership to another server", "term", g.raft.CurrentTerm())
		if errors.Is(err, ErrGroupCount) && g.hasOtherVoters() {
			// Let a server that agrees with the cluster lead instead.
			_ = g.await(g.raft.LeadershipTransfer())
		}
		if !sleepCtx(ctx, g.cfg.Lease) {
			return
		}
	}
	// 4. Renew the lease from committed entries.
	first, stalled := true, false
	var until time.Duration // the end of the last lease granted (alloc clock)
	for round := 1; ; round++ {
		// Serve only once this server has listened long enough to hear of
		// a restore that replaced its cluster (cluster's fence): before
		// its first grant (it may have just started), again after its
		// lease lapsed (its process was paused, or its followers were out
		// of reach, while a restore may have served elsewhere), and after
		// a stall of its process interrupted a renewal (the host's
		// listening counts only time the process ran).
		if first || stalled || g.alloc.Now() >= until {
			since := time.Time{}
			switch {
			case stalled:
				since = time.Now()
				g.log.Info("this process stalled while renewing the lease: listening for news of the cluster before serving again", "term", g.raft.CurrentTerm())
			case !first:
				since = time.Now()
				g.log.Info("the lease lapsed: listening for news of the cluster before serving again", "term", g.raft.CurrentTerm())
			}
			if !g.host.WaitListening(ctx, since) {
				return
			}
		}
		stalled = false
		heard := time.Now()
		t := g.alloc.Now()
		start := time.Now()
		renewal := fsm.EncodeNoop()
		// A group other than group 0 exists only on builds with groups
		// (protocol 4), which all apply lease records; its own protocol
		// may still read 1 (it moves only while every server of its
		// configuration is alive), and a renewal without its length
		// would let a new leader wait less than this lease.
		if g.fsm.Protocol() >= 2 || g.cfg.Authority != nil {
			renewal = fsm.EncodeLease(g.cfg.Lease, g.cfg.LeaseMargin)
		}
		err := g.apply(ctx, renewal)
		if g.fenced.Load() {
			return
		}
		if err == nil && g.host.StalledSince(heard) {
			// Paused between listening and this grant: what it did not
			// hear may have started serving meanwhile.
			stalled = true
			continue
		}
		if err == nil {
			g.alloc.Grant(epoch, t+g.cfg.Lease)
			until = t + g.cfg.Lease
			g.stats.renewals.Add(1)
			if first {
				first = false
				g.markServing(gained)
			}
		} else if ctx.Err() == nil {
			g.stats.renewalErrors.Add(1)
			g.log.Warn("lease renewal failed", "err", err)
		}
		if round%copyEvery == 0 {
			g.upkeepBeside(ctx)
		}
		if !sleepCtx(ctx, time.Until(start.Add(g.cfg.Lease/3))) {
			return
		}
	}
}

// copyEvery is how many renewals apart a serving leader runs its upkeep
// (upkeepBeside): a group other than group 0 copies group 0's new spaces,
// and any group moves to a newer protocol.
const copyEvery = 6

// noteLease notes that a lease renewal was stored in the log or a snapshot
// was installed, now (see lead). The noted time never goes back.
func (g *Group) noteLease() {
	now := int64(time.Since(g.origin)) + 1
	for {
		old := g.leaseSeen.Load()
		if old >= now || g.leaseSeen.CompareAndSwap(old, now) {
			return
		}
	}
}

// leaseEnd is when a leader elected at gained may serve (see lead).
func (g *Group) leaseEnd(gained time.Time) time.Time {
	rec, recorded := g.fsm.LeaseRecord()
	var seen time.Time
	if s := g.leaseSeen.Load(); s > 0 {
		seen = g.origin.Add(time.Duration(s - 1))
	}
	// Without a lease record, a first-release leader may have led only if
	// this server has a past: raft state when it started, a renewal or
	// snapshot stored since, or an applied command. The first leader of a
	// new cluster has none, and moves it to this build's protocol before it
	// renews.
	past := g.hadState || !seen.IsZero() || g.fsm.AppliedIndex() > 0
	end, wait := lease.Deadline(gained, seen, g.cfg.Lease, g.cfg.LeaseMargin, rec, recorded, past)
	g.stats.lastLeaseWait.Store(int64(wait))
	return end
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

func (g *Group) ensureDefaultSpace(ctx context.Context) {
	if _, ok := g.fsm.Space(seqd.DefaultSpace.Name); ok {
		return
	}
	if err := g.apply(ctx, fsm.EncodeCreateSpace(seqd.DefaultSpace)); err != nil && !errors.Is(err, context.Canceled) {
		g.log.Warn("creating the default space failed", "err", err)
	}
}

func (g *Group) markServing(gained time.Time) {
	now := time.Now()
	g.stats.servingSince.Store(now.UnixNano())
	g.stats.lastFailoverNs.Store(int64(now.Sub(gained)))
	g.log.Info("serving as leader", "term", g.raft.CurrentTerm(), "after", now.Sub(gained).Round(time.Millisecond))
}

// ResumeLead restarts the lease loop, in the withheld epoch, after it was
// stopped for a change that failed (see Withhold), if this server is still
// the raft leader and no leadership change was processed since (that
// revokes the epoch, and the leadership loop takes over). A leadership
// change still queued is processed long before the resumed loop renews (it
// waits a lease first), and its Revoke makes that renewal's Grant a no-op.
func (g *Group) ResumeLead(epoch uint64) {
	g.leadMu.Lock()
	running := g.leadCancel != nil
	g.leadMu.Unlock()
	if running || !g.IsLeader() || !g.alloc.Unwithhold(epoch) {
		return
	}
	g.log.Info("the change failed while this server still leads: resuming the lease")
	// The resumed wait counts a full lease from now, as the comment above
	// needs: a leadership change still queued is processed before it ends.
	g.noteLease()
	g.startLead(epoch)
}

// Withhold stops serving before a change that may remove this server (as
// on any step-down) but keeps the allocator's epoch and sections, so that
// ResumeLead can serve on from where it stopped if the change fails; it
// returns the epoch to pass to ResumeLead.
func (g *Group) Withhold() uint64 {
	epoch := g.alloc.Withhold()
	g.stepDownLead()
	return epoch
}

// EnsureProtocol moves the group to the highest protocol every server in
// the configuration speaks (Host.ProtocolTarget), and gives it a cluster ID
// with the first move: this build's protocol once every server runs it. It
// runs on the leader.
func (g *Group) EnsureProtocol(ctx context.Context) {
	if g.fsm.Protocol() >= fsm.ProtocolVersion && g.fsm.ClusterID() != "" {
		return
	}
	// No server is added between the configuration read here and the
	// move's commit (see members.go).
	g.confMu.Lock()
	defer g.confMu.Unlock()
	// Decided in this term, on its barrier's state, or not at all (as an
	// add, members.go).
	term := g.raft.CurrentTerm()
	if g.readyTerm.Load() != term {
		return
	}
	cf := g.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	target := g.host.ProtocolTarget(cf.Configuration())
	if target < fsm.ClusterProtocol || target <= g.fsm.Protocol() {
		return
	}
	// Bounded: a leader about to serve waits on it (lead's step 3; once
	// serving, the move runs beside the lease loop, upkeepBeside).
	pctx, cancel := context.WithTimeout(ctx, max(g.cfg.Lease/3, 250*time.Millisecond))
	confirmed := g.host.ProtocolConfirmed(pctx, cf.Configuration(), target)
	cancel()
	// confMu orders this server's adds only: while it asked, it may have
	// lost leadership to one that added a server, asked about the older
	// protocol, and led again. The answers cover the configuration of the
	// term they were asked in.
	if !confirmed || g.raft.CurrentTerm() != term || !g.IsLeader() {
		return
	}
	id := g.fsm.ClusterID()
	if id == "" && g.cfg.Authority != nil {
		// Every group carries group 0's cluster ID: wait for it.
		if id = g.cfg.Authority.ClusterID(); id == "" {
			return
		}
	}
	if id == "" {
		id = NewClusterID()
	}
	if err := g.apply(ctx, fsm.EncodeClusterGroups(id, target, max(g.cfg.Groups, 1))); err != nil {
		if !errors.Is(err, context.Canceled) {
			g.log.Warn("moving the cluster to the new protocol failed", "err", err)
		}
		return
	}
	g.log.Info("cluster on protocol", "protocol", g.fsm.Protocol(), "cluster_id", g.fsm.ClusterID())
	g.host.ProtocolMoved()
}

// upkeepBeside runs a serving leader's upkeep beside the lease loop, one at
// a time: copying group 0's spaces (copySpaces), then a protocol move
// (EnsureProtocol). The serving loop waits on nothing but its renewals:
// both may wait on other servers (a space's settings asked of group 0's
// leader, bounded at 2 s; a move's question to every server of the
// configuration), and a wait longer than the rest of the period lapsed the
// lease, so that a server whose API hung while its gossip was up stopped
// every group that asked it from serving.
func (g *Group) upkeepBeside(ctx context.Context) {
	if !g.upkeep.CompareAndSwap(false, true) {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.upkeep.Store(false)
		g.copySpaces(ctx)
		g.EnsureProtocol(ctx)
	}()
}

// ErrGroupCount means this server runs another number of raft groups than
// the cluster records: it would map keys to other groups than the ones
// holding their marks, so it serves nothing.
var ErrGroupCount = errors.New("this server's raft group count differs from the cluster's")

// groupsAgree reports whether this server may serve: the cluster's group
// count as group 0 records it (one when unrecorded: a cluster of one group,
// or of a build before groups) is this server's. A server of several
// groups also needs the count recorded (protocol 4), so that a server with
// another count, or a previous build (which refuses protocol 4 state),
// cannot serve from the same cluster.
func (g *Group) groupsAgree() error {
	var rec int
	var recorded bool
	if g.cfg.Authority != nil {
		rec, recorded = g.cfg.Authority.Groups()
	} else {
		rec, recorded = g.fsm.Groups()
	}
	mine := max(g.cfg.Groups, 1)
	switch {
	case rec != mine:
		return fmt.Errorf("%w: it runs %d, the cluster %d (start it with --groups %d)", ErrGroupCount, mine, rec, rec)
	case mine > 1 && !recorded:
		return fmt.Errorf("%w: the cluster has not recorded its group count yet (every server must run a build with groups)", ErrGroupCount)
	}
	return nil
}

// NewClusterID returns a new random cluster ID (32 hex digits).
func NewClusterID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
