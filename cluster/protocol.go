package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/seqd/seqd/fsm"
)

// Rolling upgrades. Every server publishes in gossip the highest
// replicated-command protocol it speaks (fsm.ProtocolVersion; servers of
// the first release publish none, which counts as 1). A leader writes
// commands of a newer protocol only after moving the cluster to it with a
// KindCluster entry, and it does that only once every server in the raft
// configuration is alive in gossip and speaks it: a server of an older
// build stops on a command kind it does not know. The same entry gives the
// cluster its ID (a cluster created by this build gets both with its first
// leader). Once a cluster is on a protocol, its leader adds no server that
// speaks an older one. Going back to an older build after that is not
// supported: its servers would stop on the newer entries.

// NewClusterID returns a new random cluster ID (32 hex digits).
func NewClusterID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// ensureProtocol moves the cluster to this build's protocol once every
// server in the configuration speaks it. It runs on the leader.
func (n *Node) ensureProtocol(ctx context.Context) {
	if n.fsm.Protocol() >= fsm.ProtocolVersion && n.fsm.ClusterID() != "" {
		return
	}
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		m, ok := n.gossip.member(string(s.ID))
		if !ok || !m.Alive || m.protocol() < fsm.ProtocolVersion {
			if n.fsm.Protocol() < fsm.ProtocolVersion {
				n.warnOnce("protocol-wait:"+string(s.ID), "the cluster stays on protocol 1 until every server runs this build (or a later one)",
					"waiting_for", s.ID, "alive", ok && m.Alive, "protocol", m.protocol())
			}
			return
		}
	}
	id := n.fsm.ClusterID()
	if id == "" {
		id = NewClusterID()
	}
	if err := n.apply(ctx, fsm.EncodeCluster(id, fsm.ProtocolVersion)); err != nil {
		if !errors.Is(err, context.Canceled) {
			n.log.Warn("moving the cluster to the new protocol failed", "err", err)
		}
		return
	}
	n.log.Info("cluster on protocol", "protocol", n.fsm.Protocol(), "cluster_id", n.fsm.ClusterID())
	if n.gossip != nil {
		n.gossip.refreshMeta()
	}
}

// protocol is the protocol a member speaks (1 for servers that do not say).
func (m Member) protocol() uint64 { return max(m.Proto, 1) }
