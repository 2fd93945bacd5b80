// Package cluster is the host: one seqd server and what all its raft
// groups share. It owns the raft listener (TCP, optional mutual TLS) and
// the gate in front of it, memberlist gossip for discovery and bootstrap,
// membership (promotion, cleanup, seqd node remove), vouching (DESIGN.md
// §6: who may take part in raft, from what knowledge), the disk-full rule
// (disk.go), the routing version, offline restore, and the list of groups
// (a fixed number, chosen at bootstrap: see groups.go and group/).
//
// A group (group/) runs raft, the state machine and the lease loop; it
// reaches the host only through group.Host: the host tells it when this
// server is vouched for, when every server speaks a newer protocol, and
// sees every log write to notice a full disk. The lease itself follows
// DESIGN.md §4 and lives in group/lease.go.
//
// Group 0 is the authority (spaces, namespaces, membership, the cluster ID
// and the group count): the host's code reads it through authority(), and
// the exported methods that act on it are in authority.go, each saying so.
// The host keeps no other handle on group 0. Its periodic work runs on
// the host loop, whose tasks loop.go names in order (with the contact
// records' own timer). A space is found by group.Group.ResolveSpace, the
// one resolver (spaces.go). Config embeds group.Options, the tunables
// every group gets as they are. cluster never imports api/ or
// server/; it asks other servers through one Peers service (progress,
// vouching, spaces, clocks) the assembly (server/) gives it.
package cluster
