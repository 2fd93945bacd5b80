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
// DESIGN.md §4 and lives in group/lease.go. cluster never imports api/ or
// server/; it asks other servers through the PeerProgress and PeerVouch
// functions the assembly (server/) gives it.
package cluster
