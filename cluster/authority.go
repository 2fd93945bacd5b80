package cluster

import (
	"context"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/group"
	"github.com/seqd/seqd/sections"
)

// Group 0, the authority. It decides spaces, flake namespaces, the
// cluster's membership and ID and the group count; the host's own code
// reads it through authority(), visibly. The exported methods below are
// the host's API over group 0 (the admin service's spaces and listings,
// the health check, leadership moves): each says so, and any other use of
// a group goes through Group(i).

// authority returns group 0, which decides spaces, namespaces, membership
// and the group count: the host's membership, vouching and space code read
// it through here, visibly.
func (n *Node) authority() *group.Group { return n.groups[0] }

// Allocator returns group 0's allocator (it serves only on group 0's
// leader, while it holds the lease).
func (n *Node) Allocator() *sections.Allocator { return n.authority().Allocator() }

// IsLeader reports whether this server leads group 0 in raft. Serving
// also needs the lease: see Allocator().Serving().
func (n *Node) IsLeader() bool { return n.authority().IsLeader() }

// Leader returns the ID and API address of group 0's leader as this
// server knows it; empty strings when unknown (see GroupLeader).
func (n *Node) Leader() (id, apiAddr string) {
	_, lid := n.authority().Raft().LeaderWithID()
	return n.leaderAddr(string(lid))
}

// TransferLeadership asks raft to hand group 0's leadership to server id
// (any voter when id is empty) and waits for the outcome; see
// group.Group.TransferLeadership.
func (n *Node) TransferLeadership(id string) error {
	return n.authority().TransferLeadership(id, ErrUnknownServer)
}

// ClusterID returns the cluster's ID as group 0 records it ("" until the
// cluster has one).
func (n *Node) ClusterID() string { return n.authority().FSM().ClusterID() }

// Space returns a committed space from this server's copy of group 0
// (which may lag: see LookupSpace).
func (n *Node) Space(name string) (seqd.Space, bool) { return n.authority().FSM().Space(name) }

// ServerSeen reports whether group 0 recorded server id holding raft
// state, and the highest raft index recorded for its log.
func (n *Node) ServerSeen(id string) (bool, uint64) { return n.authority().FSM().ServerSeen(id) }

// Spaces returns every committed space in this server's copy of group 0.
func (n *Node) Spaces() []seqd.Space { return n.authority().FSM().Spaces() }

// CreateSpace creates a space through group 0 (on its serving leader);
// see group.Group.CreateSpace.
func (n *Node) CreateSpace(ctx context.Context, s seqd.Space) (created bool, err error) {
	return n.authority().CreateSpace(ctx, s)
}

// UpdateSpace changes a space's step on group 0's serving leader (see
// group.Group.UpdateSpace).
func (n *Node) UpdateSpace(ctx context.Context, name string, step uint64) error {
	return n.authority().UpdateSpace(ctx, name, step)
}

// DeleteSpace deletes a space on group 0's serving leader (see
// group.Group.DeleteSpace).
func (n *Node) DeleteSpace(ctx context.Context, name string) error {
	return n.authority().DeleteSpace(ctx, name)
}

// SpaceDeleted reports whether this server's copy of group 0 holds the
// space as deleted.
func (n *Node) SpaceDeleted(name string) bool {
	_, deleted := n.authority().FSM().Deleted(name)
	return deleted
}
