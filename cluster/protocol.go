package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/group"
)

// Rolling upgrades. Every server publishes in gossip the highest
// replicated-command protocol it speaks (fsm.ProtocolVersion; servers of
// the first release publish none, which counts as 1). A leader writes
// commands of a newer protocol only after moving the cluster to it with a
// KindCluster entry, and it does that only once every server in the raft
// configuration is alive in gossip and speaks it, and answers when asked
// that it does (ProtocolConfirmed): a server of an older build stops on a
// command kind it does not know. It moves the cluster to
// the highest protocol every server speaks (ProtocolTarget), which may be
// older than its own. The same entry gives the
// cluster its ID (a cluster created by this build gets both with its first
// leader). Once a cluster is on a protocol, its leader adds no server that
// speaks an older one. Going back to an older build after that is not
// supported: its servers would stop on the newer entries.

// ProtocolVersion is the highest replicated-command protocol this build
// speaks (fsm.ProtocolVersion), as a server answers it (Peers.Speaks).
const ProtocolVersion = fsm.ProtocolVersion

// unsaidProtocol is the highest protocol a move may take a server to when
// its build does not say which it speaks (Peers.Speaks answers 0): builds
// answer since protocol 5, so one that does not may speak only 4.
const unsaidProtocol = 4

// NewClusterID returns a new random cluster ID (32 hex digits).
func NewClusterID() string { return group.NewClusterID() }

// ProtocolTarget implements group.Host: the highest protocol every server
// in conf speaks (this one speaks fsm.ProtocolVersion), or 0 while one of
// them is not alive in gossip or runs another number of raft groups than
// this server. A cluster formed from servers of this build and of an older
// one moves to the older one's protocol (its flake ids, its lease records),
// and on to this build's once every server runs it. The group count
// matters for the move to protocol 4, which records the leader's count as
// the cluster's: a server of another count in the configuration (one given
// another --groups, added by a leader of a build that did not check
// counts) must not get its count recorded for a cluster whose state the
// others hold in theirs.
func (n *Node) ProtocolTarget(conf raft.Configuration) uint64 {
	target := uint64(fsm.ProtocolVersion)
	for _, s := range conf.Servers {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		var m Member
		ok := false
		if n.gossip != nil {
			m, ok = n.gossip.member(string(s.ID))
		}
		if !ok || !m.Alive {
			n.warnOnce("protocol-down:"+string(s.ID), fmt.Sprintf("the cluster does not move to a newer protocol while server %s of the raft configuration is not alive in gossip (down, or not seen yet): start it, or remove it (seqd node remove)",
				s.ID), "id", s.ID, "known", ok)
			return 0
		}
		if m.groups() != len(n.groups) {
			n.warnOnce("protocol-groups:"+string(s.ID), fmt.Sprintf("the cluster does not move to a newer protocol while server %s runs %d raft groups and this one %d: every server of a cluster runs the same count; "+
				"remove the server that runs another count (seqd node remove), delete its data directory and start it again without --groups",
				s.ID, m.groups(), len(n.groups)), "id", s.ID)
			return 0
		}
		if p := m.protocol(); p < target {
			target = p
			n.warnOnce("protocol-wait:"+string(s.ID), fmt.Sprintf("server %s speaks protocol %d: the cluster moves to protocol %d only once every server runs this build (or a later one)", s.ID, p, fsm.ProtocolVersion),
				"id", s.ID, "protocol", p)
		}
	}
	return target
}

// ProtocolConfirmed implements group.Host: this server marks its own data
// for p (PromiseProtocol), and every other server in conf answers now
// (Peers.Speaks) that its build speaks p, or does not say and p is at most
// unsaidProtocol. Gossip (ProtocolTarget) says what a server's process
// spoke when it last told: a server killed with kill -9 stays alive there,
// with its last protocol, for as long as memberlist takes to suspect it,
// and an operator may start it again on an older build that a move would
// leave behind the group's entries. Only the process running now can
// answer, and it marks its data before it does, so that it cannot run an
// older build on that data even if the move's entry reaches it only later.
// Without Peers (tests of single servers) there is nobody to ask.
func (n *Node) ProtocolConfirmed(ctx context.Context, conf raft.Configuration, p uint64) bool {
	if err := n.PromiseProtocol(p); err != nil {
		n.warnOnce("protocol-promise", fmt.Sprintf("the cluster does not move to protocol %d: this server could not mark its data as unreadable to older builds: %v", p, err))
		return false
	}
	if n.cfg.Peers == nil {
		return true
	}
	var (
		wg sync.WaitGroup
		ok atomic.Bool
	)
	ok.Store(true)
	for _, s := range conf.Servers {
		id := string(s.ID)
		if id == n.cfg.ID {
			continue
		}
		m, known := n.gossipMember(id)
		if !known || !m.Alive || m.APIAddr == "" {
			return false
		}
		wg.Go(func() {
			why := n.speaksNow(ctx, m, p)
			if why == "" {
				return
			}
			ok.Store(false)
			n.warnOnce("protocol-confirm:"+id, fmt.Sprintf("the cluster does not move to protocol %d yet: server %s, alive in gossip, was asked which protocol it speaks, and %s", p, id, why), "id", id)
		})
	}
	wg.Wait()
	return ok.Load()
}

// speaksNow asks server m which protocol its running build speaks, after
// it marked its data for p (Peers.Speaks with moveTo): "" when it speaks
// p (or does not say, and p is at most unsaidProtocol), else why not.
func (n *Node) speaksNow(ctx context.Context, m Member, p uint64) string {
	said, err := n.cfg.Peers.Speaks(ctx, m.APIAddr, p)
	switch {
	case err != nil:
		return "it did not answer: " + err.Error()
	case said >= p || said == 0 && p <= unsaidProtocol:
		return ""
	}
	return fmt.Sprintf("its build speaks protocol %d", said)
}

// joinTimeout bounds the question a leader asks a server before it adds
// it to a group (mayAdd).
const joinTimeout = time.Second

// mayAdd reports whether server id may be added to group i, which is on
// protocol p: asked now, it answers that its running build speaks p,
// having marked its data for p first, as every server of a configuration
// does before a move (ProtocolConfirmed). Gossip says only what the
// server's process spoke when it last told, and once added it receives
// the group's entries: an older build started on its data right after
// would follow them by its own rules (8ee10ee applies a move to 5 as a
// refused command and carries on), and a group of a newer protocol than
// group 0's (groups move one by one) would otherwise take in a server
// group 0 let in. Without Peers there is nobody to ask.
func (n *Node) mayAdd(i int, id string, p uint64) bool {
	if n.cfg.Peers == nil {
		return true
	}
	why := "it is not alive in gossip"
	if m, ok := n.gossipMember(id); ok && m.Alive && m.APIAddr != "" {
		ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
		why = n.speaksNow(ctx, m, p)
		cancel()
	}
	if why == "" {
		return true
	}
	n.warnOnce(fmt.Sprintf("join-protocol:%d/%s", i, id), fmt.Sprintf("not adding server %s to group %d, on protocol %d, yet: asked which protocol it speaks, %s", id, i, p, why), "id", id)
	return false
}

// PromiseProtocol makes every group's data on this server unreadable to
// builds that do not speak protocol p (fsm.FSM.PromiseProtocol): this
// server says it speaks p for a move, and must not come back on an older
// build once the move commits.
func (n *Node) PromiseProtocol(p uint64) error {
	for i, g := range n.groups {
		if err := g.FSM().PromiseProtocol(p); err != nil {
			return fmt.Errorf("group %d: %w", i, err)
		}
	}
	return nil
}

// ProtocolMoved implements group.Host: gossip publishes the new cluster ID
// and protocol.
func (n *Node) ProtocolMoved() {
	if n.gossip != nil {
		n.gossip.refreshMeta()
	}
}

// LeadershipChanged implements group.Host: the routing version and
// membership are refreshed at once.
func (n *Node) LeadershipChanged(bool) {
	if n.gossip != nil {
		n.gossip.nudge()
	}
}

// protocol is the protocol a member speaks (1 for servers that do not say).
func (m Member) protocol() uint64 { return max(m.Proto, 1) }
