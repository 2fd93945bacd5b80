// Package group is one Raft group: its raft instance, log and snapshot
// stores, the state machine (fsm/), the allocator (sections/) it serves from,
// and the lease loop that lets the allocator serve only while no earlier
// leader can (see lease.go). It also answers the group's status and backup.
//
// A group does not know how it is reached or who its peers are: the host
// (cluster/) builds its raft transport (listener, TLS, the gate that keeps
// an unvouched server out of raft), decides membership and vouching, and
// tells the group through the Host interface. A group never imports
// cluster/ or api/; cluster/ owns the groups.
package group
