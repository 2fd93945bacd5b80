package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/group"
)

// Membership follows DESIGN.md §6 (Consul's pattern). Gossip finds servers;
// raft alone decides who votes:
//
//   - a server that joins through gossip with no raft state is added by the
//     leader as a non-voter, and promoted to voter once it has caught up
//     (its applied index within promoteLag of the leader's commit index, in
//     the leader's term, for at least promoteStable) while the configuration
//     has fewer than MaxVoters voters;
//   - a server leaves the configuration only through RemoveServer (an
//     operator's call), or through dead-server cleanup: a server that gossip
//     has seen down for DeadServerGrace is removed, one at a time, never
//     taking the voters below MinVoters;
//   - a server that has raft state but is not in the configuration (it was
//     removed, or it belongs to another cluster) is never added back: it
//     must be wiped first. raft itself rejects its vote requests, so it
//     cannot disturb the leader (hashicorp/raft#524), and it is not vouched
//     for (see vouch.go);
//   - servers of another cluster (another cluster ID in gossip) are left
//     alone, and a server that speaks an older protocol than the cluster's
//     is not added (see protocol.go);
//   - a non-voter is promoted only once the cluster has recorded it holding
//     state, so that a voter wiped later is always recognised as one.

const (
	promoteLag    = 64
	promoteStable = 2 * time.Second
)

// Errors of membership changes.
var (
	// ErrUnknownServer means the server is not in the raft configuration.
	ErrUnknownServer = errors.New("no such server in the raft configuration")
	// ErrLastVoter means the change would leave the cluster without voters.
	ErrLastVoter = errors.New("refusing to remove the last voter")
)

// membership runs on the leader each reconcile pass.
//
// Changes pass prevIndex 0: hashicorp/raft does not expose the index of the
// configuration it returns. Instead every change goes through the group
// (group's members.go), which makes it only while the latest configuration
// still holds the server as this pass read it: the pass asks servers
// questions between its read and its changes, and a server removed
// meanwhile must not be promoted or moved back in.
func (n *Node) membership(conf raft.Configuration) {
	const confIndex = 0
	in := make(map[string]raft.Server, len(conf.Servers))
	voters := 0
	for _, s := range conf.Servers {
		in[string(s.ID)] = s
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	n.authority().EnsureProtocol(context.Background())
	mine, proto := n.authority().FSM().ClusterID(), n.authority().FSM().Protocol()
	var members []Member
	for _, m := range n.Members() {
		if m.Cluster != "" && mine != "" && m.Cluster != mine {
			n.warnOnce("foreign:"+m.ID, "a server of another cluster is in gossip (check --join); leaving it alone",
				"id", m.ID, "cluster", m.Cluster, "this_cluster", mine)
			continue
		}
		members = append(members, m)
	}
	n.recordProgress(in, members)
	for _, m := range members {
		if !m.Alive || m.ID == n.cfg.ID {
			continue
		}
		s, ok := in[m.ID]
		switch {
		case !ok && !m.HasState && m.protocol() < proto:
			n.warnOnce("old:"+m.ID, fmt.Sprintf("not adding server %s: it runs an older seqd (protocol %d) than the cluster (protocol %d); upgrade it", m.ID, m.protocol(), proto),
				"id", m.ID)
		case !ok && m.groups() != len(n.groups):
			n.warnOnce("groups:"+m.ID, fmt.Sprintf("not adding server %s: it runs %d groups, the cluster %d; start it with --groups %d", m.ID, m.groups(), len(n.groups), len(n.groups)),
				"id", m.ID)
		case !ok && m.HasState:
			n.warnOnce("refuse:"+m.ID, "server has raft state but is not in the configuration (removed, or from another cluster); not adding it. To add it back: stop it, delete its data directory, start it again with the same flags",
				"id", m.ID, "raft", m.RaftAddr)
		case !ok:
			added, err := n.authority().AddNonvoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), confIndex, applyTimeout,
				func(p uint64) bool { return n.mayAdd(0, m.ID, p) })
			switch {
			case !added && err == nil:
				continue // not confirmed (mayAdd warned)
			case errors.Is(err, group.ErrNotReady):
				return // a leader of a moment ago: the next pass
			}
			n.log.Info("adding server as a non-voter", "id", m.ID, "raft", m.RaftAddr)
			if err != nil {
				n.log.Warn("adding non-voter failed", "id", m.ID, "err", err)
			}
			n.markNonvoter(m.ID)
			return // one change per pass: the configuration index moved
		case string(s.Address) != m.RaftAddr:
			n.log.Info("server moved; updating its raft address", "id", m.ID, "from", s.Address, "to", m.RaftAddr)
			to := s
			to.Address = raft.ServerAddress(m.RaftAddr)
			if err := n.authority().ChangeServer(s, to, applyTimeout); err != nil {
				n.log.Warn("updating address failed", "id", m.ID, "err", err)
			}
			return
		case s.Suffrage != raft.Voter && voters < n.cfg.MaxVoters:
			if seen, _ := n.authority().FSM().ServerSeen(m.ID); !seen {
				continue // recorded first (recordProgress), promoted on a later pass
			}
			if n.caughtUp(m) {
				n.log.Info("promoting caught-up non-voter to voter", "id", m.ID)
				to := s
				to.Suffrage = raft.Voter
				if err := n.authority().ChangeServer(s, to, applyTimeout); err != nil {
					n.log.Warn("promotion failed", "id", m.ID, "err", err)
				}
				return
			}
		}
	}
	n.cleanupDead(conf, confIndex, voters)
}

// recordInterval is how often a group's leader records each server's raft
// index in the group.
const recordInterval = 5 * time.Second

// recordProgress records in group 0, at most every recordInterval per
// server, that a server holds raft state and how far its log reaches (its
// applied index, a lower bound of its last log index). A server that later
// shows up without state was wiped; one whose log ends below the record
// runs on an older copy of its data.
func (n *Node) recordProgress(in map[string]raft.Server, members []Member) {
	var due []Member
	for _, m := range members {
		if _, ok := in[m.ID]; !ok || !m.Alive || !m.HasState {
			continue
		}
		if m.ID != n.cfg.ID && m.Cluster == "" && n.authority().FSM().Protocol() >= 2 {
			continue // not sure yet that it holds this cluster's state
		}
		due = append(due, m)
	}
	n.recordIn(0, due, false)
}

// recordGroupProgress is recordProgress for group i >= 1, run on its
// leader: the servers of the group's configuration alive in gossip, each
// recorded once it has applied an entry of the group (gossip says whether
// a server holds group 0's state, not this group's).
func (n *Node) recordGroupProgress(i int) {
	cf := n.groups[i].Raft().GetConfiguration()
	if cf.Error() != nil {
		return
	}
	mine := n.authority().FSM().ClusterID()
	var due []Member
	for _, s := range cf.Configuration().Servers {
		m, ok := n.gossip.member(string(s.ID))
		if !ok || !m.Alive || (m.Cluster != "" && mine != "" && m.Cluster != mine) {
			continue
		}
		if m.ID != n.cfg.ID && m.Cluster == "" {
			continue // not sure yet that it holds this cluster's state
		}
		due = append(due, m)
	}
	n.recordIn(i, due, true)
}

// recordIn records in group i the progress of those of members that are
// due (last recorded recordInterval ago). Their progress is asked for, and
// their entries submitted, concurrently, so that raft writes the entries in
// one batch and a hung server stalls the pass for one question at most (a
// server that failed to answer is not asked again for progressBackoff).
// With needApplied, a server is recorded only once it has applied an entry
// of the group.
func (n *Node) recordIn(i int, members []Member, needApplied bool) {
	g := n.groups[i]
	r, f := g.Raft(), g.FSM()
	var due []Member
	now := time.Now()
	n.memMu.Lock()
	for _, m := range members {
		key := fmt.Sprintf("%d/%s", i, m.ID)
		if now.Sub(n.recordedAt[key]) >= recordInterval {
			n.recordedAt[key] = now
			due = append(due, m)
		}
	}
	n.memMu.Unlock()
	cmds := make([][]byte, len(due))
	var wg sync.WaitGroup
	for k, m := range due {
		wg.Go(func() {
			var applied uint64
			if m.ID == n.cfg.ID {
				applied = r.AppliedIndex()
			} else if a, err := n.peerProgress(m, i); err == nil {
				applied = a
			}
			seen, rec := f.ServerSeen(m.ID)
			if (seen && applied <= rec) || (needApplied && !seen && applied == 0) {
				return
			}
			cmds[k] = fsm.EncodeServerSeen(m.ID, max(applied, rec))
		})
	}
	wg.Wait()
	for k, c := range cmds {
		if c == nil {
			continue
		}
		wg.Go(func() {
			if err := g.Apply(context.Background(), c); err != nil {
				n.log.Warn("recording server progress failed", "group", i, "id", due[k].ID, "err", err)
			}
		})
	}
	wg.Wait()
}

// peerProgress asks server m for its applied index of group i, unless it
// failed to answer within the last progressBackoff.
func (n *Node) peerProgress(m Member, i int) (uint64, error) {
	if n.cfg.Peers == nil || m.APIAddr == "" {
		return 0, errors.New("no way to ask")
	}
	n.memMu.Lock()
	until := n.progressFailed[m.APIAddr]
	n.memMu.Unlock()
	if time.Now().Before(until) {
		return 0, errors.New("did not answer recently")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, a, err := n.cfg.Peers.Progress(ctx, m.APIAddr, i)
	if err != nil {
		n.memMu.Lock()
		n.progressFailed[m.APIAddr] = time.Now().Add(progressBackoff)
		n.memMu.Unlock()
	}
	return a, err
}

// caughtUp reports whether a non-voter has kept up with the leader for
// promoteStable.
func (n *Node) caughtUp(m Member) bool {
	if n.cfg.Peers == nil || m.APIAddr == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	term, applied, err := n.cfg.Peers.Progress(ctx, m.APIAddr, 0)
	lead := n.authority().Raft().CommitIndex()
	ok := err == nil && term == n.authority().Raft().CurrentTerm() && applied+promoteLag >= lead
	n.memMu.Lock()
	defer n.memMu.Unlock()
	if !ok {
		delete(n.caughtSince, m.ID)
		return false
	}
	since, seen := n.caughtSince[m.ID]
	if !seen {
		n.caughtSince[m.ID] = time.Now()
		return false
	}
	return time.Since(since) >= promoteStable
}

func (n *Node) markNonvoter(id string) {
	n.memMu.Lock()
	delete(n.caughtSince, id)
	n.memMu.Unlock()
}

// cleanupDead removes at most one server that gossip has seen down for
// DeadServerGrace, never taking the voters below MinVoters.
func (n *Node) cleanupDead(conf raft.Configuration, confIndex uint64, voters int) {
	if n.cfg.DeadServerGrace <= 0 {
		return
	}
	for _, s := range conf.Servers {
		id := string(s.ID)
		if id == n.cfg.ID {
			continue
		}
		m, ok := n.gossip.member(id)
		if !ok || m.Alive || m.DownSince.IsZero() || time.Since(m.DownSince) < n.cfg.DeadServerGrace {
			continue
		}
		if s.Suffrage == raft.Voter && voters-1 < n.cfg.MinVoters {
			n.warnOnce("minquorum:"+id, "dead server kept: removing it would leave fewer voters than --min-voters",
				"id", id, "voters", voters, "min_voters", n.cfg.MinVoters, "down_for", time.Since(m.DownSince).Round(time.Second))
			continue
		}
		n.log.Warn("removing dead server", "id", id, "down_for", time.Since(m.DownSince).Round(time.Second))
		if err := n.authority().RemoveServer(s, applyTimeout); err != nil {
			n.log.Warn("removing dead server failed", "id", id, "err", err)
		}
		return // never more than one at a time
	}
}

// RemoveServer removes a server from group 0's raft configuration; see
// RemoveServerFrom.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	return n.RemoveServerFrom(ctx, 0, id)
}

// RemoveServerFrom removes a server from group i's raft configuration. It
// must run on the group's leader. Removing the leader itself is allowed: it
// steps down once the change commits. Removing the last voter is refused.
// The other groups follow group 0's configuration (see mirrorMembership);
// an operator's removal removes the server from every group at once (the
// API does it group by group, group 0 first), so that no group keeps
// counting a removed server, which its operator then stops, towards its
// quorum. The removal is not held back by this server's copy of group 0:
// a wiped server removed from group 0 may be there again at once, as a
// new server under the same ID, while every group must drop the old one.
// What keeps a removed server out of a group is its adds (group's
// members.go, and group0Current).
func (n *Node) RemoveServerFrom(ctx context.Context, i int, id string) error {
	if i < 0 || i >= len(n.groups) {
		return fmt.Errorf("%w: %d (this server runs %d)", ErrNoSuchGroup, i, len(n.groups))
	}
	g := n.groups[i]
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	self := id == n.cfg.ID
	var epoch uint64
	if self {
		// Refuse what will be refused (the last voter) before this server
		// stops serving: a withheld leader serves again only after a
		// lease. The decision that counts is made under the lock below.
		cf := g.Raft().GetConfiguration()
		if err := cf.Error(); err != nil {
			return err
		}
		if _, err := removal(cf.Configuration(), id); err != nil {
			return err
		}
		defer g.LockMoves()()
		// Stop serving first, as on any step-down, but keep the epoch and
		// the sections: if the change fails while this node still leads
		// the same term, it serves on from where it stopped (reloading
		// would skip up to a step per section without a new term, which a
		// restore's margin does not count).
		epoch = g.Withhold()
	}
	errc := make(chan error, 1)
	go func() {
		errc <- g.RemoveDecided(ctx, func(conf raft.Configuration) (raft.Server, error) { return removal(conf, id) }, applyTimeout)
	}()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		if self {
			// The change failed (or its outcome is unknown) while this node
			// may still lead: serve again, through the whole lease
			// procedure, unless leadership has moved.
			g.ResumeLead(epoch)
		}
		return fmt.Errorf("removing %s: %w", id, err)
	}
	n.log.Info("removed server from the raft configuration", "id", id, "group", i)
	return nil
}

// removal decides whether server id may be removed from a group whose
// latest configuration is conf (group.RemoveDecided decides under the
// group's configuration lock), and returns it as conf holds it.
func removal(conf raft.Configuration, id string) (raft.Server, error) {
	var target *raft.Server
	voters := 0
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if string(s.ID) == id {
			target = &s
		}
	}
	if target == nil {
		return raft.Server{}, fmt.Errorf("%w: %q", ErrUnknownServer, id)
	}
	if target.Suffrage == raft.Voter && voters == 1 {
		return raft.Server{}, ErrLastVoter
	}
	return *target, nil
}

// InGroup reports whether server id is in group i's latest raft
// configuration as this server knows it.
func (n *Node) InGroup(i int, id string) bool {
	cf := n.groups[i].Raft().GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// warnOnce logs a warning once per key per minute.
func (n *Node) warnOnce(key, msg string, args ...any) {
	n.memMu.Lock()
	last, ok := n.warned[key]
	if ok && time.Since(last) < time.Minute {
		n.memMu.Unlock()
		return
	}
	n.warned[key] = time.Now()
	n.memMu.Unlock()
	n.log.Warn(msg, args...)
}

// errClosing answers a raft future still pending when the node closes.
var errClosing = errors.New("node closing")
