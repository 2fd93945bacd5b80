// Package group is one Raft group: its raft instance, log and snapshot
// stores, the state machine (fsm/), the allocator (sections/) it serves from,
// and the lease loop that lets the allocator serve only while no earlier
// leader can (see lease.go). It also answers the group's status and backup.
//
// Spaces are decided in group 0. Every path finds a space in one order
// (ResolveSpace, store.go): the group's own record, this server's copy of
// group 0 (Config.Authority), group 0's serving leader (Config.AskSpace,
// one peer call). The allocator asks the group's store to find a space
// before it first loads it (sections.SpaceFinder), and the store copies
// the space into the group then, so the allocator serves only from the
// group's own record and never answers "unknown space" for a space that
// exists. Options are the group's tunables, which the host's
// configuration embeds.
//
// A group does not know how it is reached or who its peers are: the host
// (cluster/) builds its raft transport (listener, TLS, the gate that keeps
// an unvouched server out of raft), decides membership and vouching, and
// tells the group through the Host interface. A group never imports
// cluster/ or api/; cluster/ owns the groups.
package group
