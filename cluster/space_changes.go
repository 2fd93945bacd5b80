package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/group"
)

// Space and namespace changes: a space's step, a deleted space, a deleted
// flake namespace. Group 0 decides them on its serving leader; every other
// group's leader follows (see group's spaces.go), told at once by the call
// (FollowSpace on each group's leader) and checking by itself every few
// renewals.
//
// The commands are ignorable kinds: a build that does not know them skips
// them, which keeps every mark and worker as it was (no value or id is
// handed out twice) but leaves its replica listing what the others
// deleted. So a leader writes them only while every server of the group's
// configuration publishes, in gossip, that it applies them (KindsApplied).

// ErrNotUpgraded means a server runs a build that would skip a space or
// namespace change (see group.ErrNotUpgraded).
var ErrNotUpgraded = group.ErrNotUpgraded

// kindsApplied is the set of ignorable kinds a member applies (see
// fsm.KindsApplied).
func (m Member) kindsApplied() uint64 {
	if m.Kinds == 0 {
		return fsm.KindsAppliedBefore
	}
	return m.Kinds
}

// KindsApplied implements group.Host: every server of conf other than this
// one is alive in gossip and applies every kind of the bit set kinds.
func (n *Node) KindsApplied(conf raft.Configuration, kinds uint64) error {
	member := func(string) (Member, bool) { return Member{}, false }
	if n.gossip != nil {
		member = n.gossip.member
	}
	return kindsApplied(conf, n.cfg.ID, member, kinds)
}

// kindsApplied decides KindsApplied from the configuration and gossip.
func kindsApplied(conf raft.Configuration, self string, member func(id string) (Member, bool), kinds uint64) error {
	for _, s := range conf.Servers {
		if string(s.ID) == self {
			continue
		}
		m, ok := member(string(s.ID))
		switch {
		case !ok || !m.Alive:
			return fmt.Errorf("server %s is not alive in gossip (it might run a build that skips the change)", s.ID)
		case m.kindsApplied()&kinds != kinds:
			return fmt.Errorf("server %s runs a build that skips the change", s.ID)
		}
	}
	return nil
}

// askSpace answers group 0's record of a space, with its version, as
// group 0's serving leader has it: this server's own state when it is
// that leader, else the leader's answer (askLeader, shared among
// concurrent callers): live, a deletion, or none (the zero record).
func (n *Node) askSpace(ctx context.Context, name string) (fsm.SpaceRecord, error) {
	if n.servesAuthority() {
		rec, _ := n.authority().FSM().Record(name)
		return rec, nil
	}
	return n.askLeader(ctx, name)
}

// FollowSpace makes group g, which this server leads, hold what group 0's
// serving leader holds of a space (see group.Group.FollowSpace). A
// server that does not lead g answers seqd.ErrNotLeader; a leader that
// does not serve g yet (it waits out its predecessor's lease)
// seqd.ErrLeaseNotHeld: that predecessor may still serve its older record
// until then, and a change answers only once every group that may serve
// follows it.
func (n *Node) FollowSpace(ctx context.Context, g int, name string) error {
	if g <= 0 || g >= len(n.groups) {
		return fmt.Errorf("%w: group %d of %d", ErrNoSuchGroup, g, len(n.groups))
	}
	grp := n.groups[g]
	if !grp.IsLeader() {
		return seqd.ErrNotLeader
	}
	if !grp.Allocator().Serving() {
		return seqd.ErrLeaseNotHeld
	}
	rec, err := n.askSpace(ctx, name)
	if err != nil {
		return err
	}
	return grp.FollowSpace(ctx, name, rec)
}

// DeleteNamespace deletes a flake namespace on group 0's serving leader,
// keeping its floor and its workers' marks (see fsm's namespace deletion);
// deleting a deleted one succeeds.
func (n *Node) DeleteNamespace(ctx context.Context, name string) error {
	return n.authority().DeleteNamespace(ctx, name)
}

// flakeClusterValues lists the cluster values of this cluster's namespaces
// whose layouts have a cluster field, for gossip: a namespace created with
// a value another cluster in gossip uses is refused (ClusterValueInUse).
func (n *Node) flakeClusterValues() []uint64 {
	var out []uint64
	for _, ns := range n.authority().FSM().Namespaces() {
		if ns.Layout.ClusterBits > 0 && !slices.Contains(out, ns.Layout.Cluster) {
			out = append(out, ns.Layout.Cluster)
		}
	}
	slices.Sort(out)
	if len(out) > maxGossipClusterValues {
		out = out[:maxGossipClusterValues]
	}
	return out
}

// maxGossipClusterValues bounds the values one server publishes (gossip
// metadata holds at most 512 bytes).
const maxGossipClusterValues = 32

// ErrClusterValueInUse means a flake namespace's cluster value is one a
// server of another cluster, seen in gossip, publishes: ids of the two
// clusters could collide.
var ErrClusterValueInUse = fmt.Errorf("%w: the cluster value is used by another cluster", seqd.ErrInvalidNamespace)

// ClusterValueInUse returns an error wrapping ErrClusterValueInUse when a
// live server of another cluster in gossip publishes cluster value v.
func (n *Node) ClusterValueInUse(v uint64) error {
	if n.gossip == nil {
		return nil
	}
	return clusterValueInUse(n.Members(), n.authority().FSM().ClusterID(), v)
}

// clusterValueInUse decides ClusterValueInUse from the members seen.
func clusterValueInUse(members []Member, own string, v uint64) error {
	for _, m := range members {
		if m.Alive && m.Cluster != "" && m.Cluster != own && slices.Contains(m.FlakeClusters, v) {
			return fmt.Errorf("%w: server %s of cluster %s issues flake ids with cluster value %d", ErrClusterValueInUse, m.ID, m.Cluster, v)
		}
	}
	return nil
}

// PublishFlakeClusters publishes this server's flake cluster values in
// gossip now (after a namespace with a cluster field was created), rather
// than at the next metadata change.
func (n *Node) PublishFlakeClusters() {
	if n.gossip != nil && n.ml != nil {
		n.gossip.refreshMeta()
	}
}
