package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/group"
)

// Groups other than group 0 follow group 0's membership, and their leaders
// are spread over the servers.
//
// Membership: group 0's leader decides who joins, votes and leaves (see
// membership.go). Each other group's leader makes its group's configuration
// follow the configuration of group 0 as this server has it, one change per
// pass: a server of group 0 missing here is added as a non-voter; one that
// votes in group 0 is promoted here once it has caught up with this group;
// an address change is copied; a server gone from group 0 for
// mirrorRemoveAfter is removed here (a leader that is itself gone from
// group 0 hands its leadership to another voter first, and the new leader
// removes it). Group 0's configuration as this server has it may lag, or
// hold a change not yet committed that is later dropped; waiting before a
// removal keeps such a passing view from shrinking the group.
//
// Leaders: each group has a preferred leader. It is, when the group's Next
// values mostly enter the cluster at one server's front ends that cannot
// route, that server (follow.go, cluster/traffic); otherwise the voter at
// position (group mod voters) of its voters sorted by ID, so that with as
// many groups as servers (or a multiple) each server prefers the same
// number of groups (with one group, only traffic prefers). A server that
// leads a group it is not preferred for, and serves it, hands it to the
// preferred server once that server has been alive in gossip for
// balanceStable and has caught up with the group, at most one transfer at
// a time per server and at most one every balanceGap. Moves go only
// towards the preferred server, which never moves a group it is preferred
// for (except when it stops, or the traffic changes), so leaders do not
// oscillate while the voters and the traffic stay the same (a leader keeps
// a group for its traffic at a lower share than it takes one with).

const (
	mirrorRemoveAfter = 5 * time.Second
	balanceStable     = 3 * time.Second
	balanceGap        = 500 * time.Millisecond
	balanceRetry      = 15 * time.Second
)

// preferredLeader returns the preferred leader of group i among conf's
// voters that are not drained ("" if none).
func preferredLeader(i int, conf raft.Configuration, drained func(id string) bool) string {
	var voters []string
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter && !drained(string(s.ID)) {
			voters = append(voters, string(s.ID))
		}
	}
	if len(voters) == 0 {
		return ""
	}
	slices.Sort(voters)
	return voters[i%len(voters)]
}

// preferred returns group i's preferred leader (see above) with why, as
// this server knows it: the traffic's is decided by the group's leader
// (leads), which counts it; another server knows it from the leader's
// gossip (Meta.Holds). "" in a cluster of one group without such traffic
// (it is not balanced) unless this server is drained.
func (n *Node) preferred(i int, conf raft.Configuration, leads bool, now time.Time) (pref, why string) {
	const traffic = "its traffic enters there"
	if leads {
		if pref = n.trafficLeader(i, conf, now); pref != "" {
			return pref, traffic
		}
	} else if pref = n.heldBy(i); pref != "" {
		return pref, traffic
	}
	if len(n.groups) == 1 && !n.drained.Load() {
		return "", ""
	}
	return preferredLeader(i, conf, n.isDrained), "leaders are spread"
}

// mirrorMembership makes group i's configuration follow group 0's; it runs
// on group i's leader (see above).
func (n *Node) mirrorMembership(i int, conf0 raft.Configuration) {
	g := n.groups[i]
	r := g.Raft()
	cf := r.GetConfiguration()
	if cf.Error() != nil || len(conf0.Servers) == 0 {
		return
	}
	want := make(map[raft.ServerID]raft.Server, len(conf0.Servers))
	for _, s := range conf0.Servers {
		want[s.ID] = s
	}
	have := cf.Configuration()
	in := make(map[raft.ServerID]raft.Server, len(have.Servers))
	for _, s := range have.Servers {
		in[s.ID] = s
	}
	for _, s := range conf0.Servers {
		cur, ok := in[s.ID]
		switch {
		case !ok:
			added, err := g.AddNonvoter(s.ID, s.Address, 0, applyTimeout, func(p uint64) bool {
				// The server's answer first: a server that is down or
				// speaks an older protocol costs group 0 no barrier.
				return n.mayAdd(i, string(s.ID), p) && n.group0Current(i, string(s.ID))
			})
			switch {
			case !added && err == nil:
				continue // not confirmed (mayAdd warned)
			case errors.Is(err, group.ErrNotReady):
				return // a leader of a moment ago: the next pass
			}
			n.log.Info("adding server to a group as a non-voter", "group", i, "id", s.ID)
			n.logChange(i, "adding non-voter", s.ID, err)
			return
		case cur.Address != s.Address:
			to := cur
			to.Address = s.Address
			n.logChange(i, "updating address", s.ID, g.ChangeServer(cur, to, applyTimeout))
			return
		case s.Suffrage == raft.Voter && cur.Suffrage != raft.Voter:
			// Recorded holding the group's state first (recordGroupProgress),
			// so that a voter wiped later is always recognised as one.
			if seen, _ := g.FSM().ServerSeen(string(s.ID)); !seen {
				continue
			}
			if n.groupCaughtUp(i, string(s.ID)) {
				n.log.Info("promoting caught-up non-voter in a group", "group", i, "id", s.ID)
				to := cur
				to.Suffrage = raft.Voter
				n.logChange(i, "promotion", s.ID, g.ChangeServer(cur, to, applyTimeout))
				return
			}
		case s.Suffrage != raft.Voter && cur.Suffrage == raft.Voter:
			to := cur
			to.Suffrage = raft.Nonvoter
			n.logChange(i, "demotion", s.ID, g.ChangeServer(cur, to, applyTimeout))
			return
		}
	}
	now := time.Now()
	for _, s := range have.Servers {
		key := fmt.Sprintf("%d/%s", i, s.ID)
		if _, ok := want[s.ID]; ok {
			n.memMu.Lock()
			delete(n.missingSince, key)
			n.memMu.Unlock()
			continue
		}
		n.memMu.Lock()
		since, seen := n.missingSince[key]
		if !seen {
			n.missingSince[key] = now
		}
		n.memMu.Unlock()
		if !seen || now.Sub(since) < mirrorRemoveAfter {
			continue
		}
		if string(s.ID) == n.cfg.ID {
			// Hand the group over; its next leader removes this server.
			n.memMu.Lock()
			retryOK := now.After(n.balanceRetry[i])
			n.memMu.Unlock()
			if !retryOK {
				return
			}
			n.log.Info("this server left group 0's configuration: handing over a group it leads", "group", i)
			if err := g.TransferLeadership("", ErrUnknownServer); err != nil {
				n.logChange(i, "leadership transfer", s.ID, err)
				n.memMu.Lock()
				n.balanceRetry[i] = time.Now().Add(balanceRetry)
				n.memMu.Unlock()
			}
			return
		}
		n.log.Info("removing server from a group: it left group 0's configuration", "group", i, "id", s.ID)
		n.logChange(i, "removal", s.ID, g.RemoveServer(s, applyTimeout))
		return
	}
}

var errNoGroup0Leader = errors.New("no leader of group 0 known")

// group0Current reports whether this server's copy of group 0 holds, now,
// every entry of group 0 committed before it asked: group i adds a server
// only then (see mirrorMembership). The copy may lag behind group 0's
// removal of the server, which an operator's removal made before it
// removed the server from group i (on another leader of the group, whose
// copy had it): a lagging copy would add it back. The index the copy must
// reach is group 0's read index (Node.ReadIndex), from a leader that
// committed in its term after the question, so a deposed leader that is
// cut off and still takes itself for the leader (this server or another)
// cannot vouch for a copy as stale as its own. Without a known leader of
// group 0, or its answer, the copy is not known to be current.
func (n *Node) group0Current(i int, id string) bool {
	g0 := n.authority()
	if n.cfg.Peers == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	var index uint64
	var err error
	if g0.IsLeader() {
		index, err = n.ReadIndex(ctx, 0)
	} else if _, addr := n.GroupLeader(0); addr != "" {
		index, err = n.cfg.Peers.ReadIndex(ctx, addr, 0)
	} else {
		err = errNoGroup0Leader
	}
	for err == nil && g0.Raft().AppliedIndex() < index && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	var why string
	switch {
	case errors.Is(err, errNoGroup0Leader):
		why = err.Error()
	case err != nil:
		why = "group 0's leader did not answer a read index: " + err.Error()
	case g0.Raft().AppliedIndex() < index:
		why = fmt.Sprintf("this server's copy of group 0 has applied %d, its leader's read index is %d", g0.Raft().AppliedIndex(), index)
	default:
		return true
	}
	n.warnOnce(fmt.Sprintf("group0-current:%d/%s", i, id), fmt.Sprintf("not adding server %s to group %d yet: this server's copy of group 0, which the group follows, is not known to be current (%s)", id, i, why), "id", id)
	return false
}

// ReadIndex returns, on group i's leader, its read index (see
// group.Group.ReadIndex): an index at or above every entry of the group
// committed before it was asked. A server that does not lead the group,
// or a leader that cannot commit in its term, answers an error wrapping
// seqd.ErrNotLeader; a leader before its own barrier, seqd.ErrNotServing.
func (n *Node) ReadIndex(ctx context.Context, i int) (uint64, error) {
	if i < 0 || i >= len(n.groups) {
		return 0, fmt.Errorf("%w: %d (this server runs %d)", ErrNoSuchGroup, i, len(n.groups))
	}
	return n.groups[i].ReadIndex(ctx)
}

func (n *Node) logChange(i int, what string, id raft.ServerID, err error) {
	if err != nil {
		n.log.Warn("group membership change failed", "group", i, "change", what, "id", id, "err", err)
	}
}

// groupCaughtUp reports whether server id has applied group i's log to
// within promoteLag of this leader's commit index, in this term.
func (n *Node) groupCaughtUp(i int, id string) bool {
	m, ok := n.gossip.member(id)
	if !ok || !m.Alive || m.APIAddr == "" || n.cfg.Peers == nil {
		return false
	}
	// A server whose API failed to answer is not asked again for
	// progressBackoff: the reconcile pass calls this synchronously, per
	// group, and must not stall a second per group on a hung peer.
	n.memMu.Lock()
	until := n.progressFailed[m.APIAddr]
	n.memMu.Unlock()
	if time.Now().Before(until) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r := n.groups[i].Raft()
	term, applied, err := n.cfg.Peers.Progress(ctx, m.APIAddr, i)
	if err != nil {
		n.memMu.Lock()
		n.progressFailed[m.APIAddr] = time.Now().Add(progressBackoff)
		n.memMu.Unlock()
		return false
	}
	return term == r.CurrentTerm() && applied+promoteLag >= r.CommitIndex()
}

// progressBackoff is how long a server whose progress could not be read is
// not asked again by the balancer and the mirror.
const progressBackoff = 5 * time.Second

// isDrained reports whether server id is drained, as gossip (or, for this
// server, its own flag) says.
func (n *Node) isDrained(id string) bool {
	if id == n.cfg.ID {
		return n.drained.Load()
	}
	if n.gossip == nil {
		return false
	}
	m, ok := n.gossip.member(id)
	return ok && m.Drained
}

// ErrDrainIncomplete means a drain ended with groups still led here.
var ErrDrainIncomplete = errors.New("drain incomplete: groups are still led by this server")

// Drain makes this server hand every group it leads to another voter and
// stop being preferred for any (on), or preferred again (off). A drained
// server that becomes a group's leader again (after failures) hands it on
// once it serves. Drain lasts until it is turned off or the process
// restarts. With on, it waits until no group is led here or ctx ends
// (ErrDrainIncomplete), and returns how many groups were still led here.
func (n *Node) Drain(ctx context.Context, on bool) (int, error) {
	if n.drained.Swap(on) != on && n.gossip != nil {
		n.gossip.refreshMeta()
	}
	if !on {
		n.log.Info("drain ended: this server may lead groups again")
		return n.ledHere(), nil
	}
	n.log.Info("draining: handing over every group this server leads")
	for {
		led := n.ledHere()
		if led == 0 {
			return 0, nil
		}
		n.balance()
		select {
		case <-ctx.Done():
			return led, fmt.Errorf("%w (%d)", ErrDrainIncomplete, led)
		case <-n.closing:
			return led, errClosing
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// BalanceMoves counts the leadership transfers this server's balancer (and
// drain) started.
func (n *Node) BalanceMoves() int64 { return n.balanceMoves.Load() }

// ledHere counts the groups this server leads.
func (n *Node) ledHere() int {
	led := 0
	for _, g := range n.groups {
		if g.IsLeader() {
			led++
		}
	}
	return led
}

// balance moves at most one group this server leads to its preferred
// leader (see above); a drained server moves any group it leads and
// serves, without waiting for the target to be alive for balanceStable.
func (n *Node) balance() {
	if n.stopping.Load() {
		return
	}
	now := time.Now()
	n.memMu.Lock()
	for _, m := range n.Members() {
		if !m.Alive {
			delete(n.aliveSince, m.ID)
		} else if _, ok := n.aliveSince[m.ID]; !ok {
			n.aliveSince[m.ID] = now
		}
	}
	drained := n.drained.Load()
	busy := n.balancing || (!drained && now.Sub(n.lastBalance) < balanceGap)
	n.memMu.Unlock()
	if busy {
		return
	}
	for i, g := range n.groups {
		if !n.GroupAdmitted(i) || !g.IsLeader() || !g.Allocator().Serving() {
			continue
		}
		cf := g.Raft().GetConfiguration()
		if cf.Error() != nil {
			continue
		}
		pref, why := n.preferred(i, cf.Configuration(), true, now)
		if pref == "" || pref == n.cfg.ID {
			continue
		}
		n.memMu.Lock()
		since, alive := n.aliveSince[pref]
		retryOK := now.After(n.balanceRetry[i])
		n.memMu.Unlock()
		stable := alive && (drained || now.Sub(since) >= balanceStable)
		if !stable || !retryOK || !n.groupCaughtUp(i, pref) {
			continue
		}
		n.memMu.Lock()
		n.balancing = true
		n.memMu.Unlock()
		n.balanceMoves.Add(1)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.log.Info("moving a group's leadership to its preferred server", "group", i, "to", pref, "because", why)
			err := g.TransferLeadership(pref, ErrUnknownServer)
			n.memMu.Lock()
			defer n.memMu.Unlock()
			n.balancing = false
			n.lastBalance = time.Now()
			if err != nil {
				n.balanceRetry[i] = time.Now().Add(balanceRetry)
				n.log.Warn("moving a group's leadership failed; retrying later", "group", i, "to", pref, "err", err)
			}
		}()
		return
	}
}
