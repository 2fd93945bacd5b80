package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

// Spaces in a cluster of several groups.
//
// Group 0 decides spaces. A server splits a call by group, and a group's
// leader serves its share, from the settings of the space in its own copy
// of group 0 (or the group's own record, made by the group's first raise of
// the space). A space's section size never changes, so routing never goes
// wrong; its step may change and it may be deleted (space_changes.go), and
// each group keeps its own record of those, which its leader makes follow
// group 0's (group's spaces.go). A copy may also lag a create: a space
// created a heartbeat ago through group 0's leader may be missing here. So
// a server that does not find a space asks group 0's serving leader
// (Peers.Space) before it answers not_found: CreateSpace returns only once
// group 0's leader has applied the space, and a later leader has applied it
// before it serves, so a call that starts after CreateSpace returned finds
// the space, whichever server it reaches. Every path finds a space in that
// one order (group.Group.ResolveSpace): the group's own record, this
// server's copy of group 0, group 0's serving leader. A group's leader
// copies a space into its group (a raft entry of the group) before its
// allocator first loads it (group's store.FindSpace), so that it never
// depends on the lookup again.
//
// Concurrent lookups of one space share questions, each answered by one
// that began after it was asked (lookups.go). A server that leads
// group 0 and serves answers from its own state; so does a cluster of one
// group (whose leader serves every key, and holds every committed space).

// SpaceRecord is group 0's record of a space with its version, as
// Peers.Space answers it (see fsm's space_version.go).
type SpaceRecord = fsm.SpaceRecord

// LookupSpace returns a space's committed settings as routing needs them:
// from this server's copy of group 0, or, when the copy does not hold it
// and the cluster runs several groups, from group 0's serving leader (see
// above and group.Group.ResolveSpace, the one resolver). An unknown space
// is an error wrapping seqd.ErrUnknownSpace; a question that could not be
// answered (no leader known, the leader unreachable) is an error wrapping
// seqd.ErrNoLeader or seqd.ErrNotLeader, which callers retry.
func (n *Node) LookupSpace(ctx context.Context, name string) (seqd.Space, error) {
	sp, found, err := n.authority().ResolveSpace(ctx, name)
	switch {
	case err != nil:
		return seqd.Space{}, err
	case !found:
		return seqd.Space{}, fmt.Errorf("%w %q", seqd.ErrUnknownSpace, name)
	}
	return sp, nil
}

// askLeader asks group 0's leader for its record of a space (Peers.Space),
// sharing questions among concurrent callers (lookups.go).
func (n *Node) askLeader(ctx context.Context, name string) (fsm.SpaceRecord, error) {
	return n.spaceLookups.ask(ctx, name, n.lookupRemote)
}

// lookupTimeout bounds one question to group 0's leader.
const lookupTimeout = 2 * time.Second

// lookupRemote asks group 0's leader about a space.
func (n *Node) lookupRemote(name string) (fsm.SpaceRecord, error) {
	id, addr := n.GroupLeader(0)
	if id == "" || addr == "" || n.cfg.Peers == nil {
		return fsm.SpaceRecord{}, fmt.Errorf("%w: space %q is not in this server's copy of group 0, and group 0's leader is unknown", seqd.ErrNoLeader, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	rec, err := n.cfg.Peers.Space(ctx, addr, name)
	if err != nil {
		n.log.Debug("asking group 0's leader for a space failed", "space", name, "leader", id, "err", err)
		return fsm.SpaceRecord{}, fmt.Errorf("%w: space %q: group 0's leader %s did not answer", seqd.ErrNotLeader, name, id)
	}
	if !wellFormed(name, rec) {
		n.log.Warn("group 0's leader answered a malformed space", "space", name, "leader", id, "answer", rec)
		return fsm.SpaceRecord{}, fmt.Errorf("%w: space %q: malformed answer from group 0's leader", seqd.ErrNotLeader, name)
	}
	return rec, nil
}

// wellFormed checks an answer about space name: none (the zero record),
// or a record of that name, live or a deletion, of valid settings.
func wellFormed(name string, rec fsm.SpaceRecord) bool {
	if rec == (fsm.SpaceRecord{}) {
		return true
	}
	sp := rec.Space
	if !rec.Live() {
		sp.Step = 1 // a deletion keeps a valid name and section size
	}
	return sp.Name == name && seqd.ValidateSpace(sp) == nil
}

// servesAuthority reports whether this server leads group 0 and serves it:
// its copy of group 0 then holds every committed space.
func (n *Node) servesAuthority() bool {
	return n.authority().IsLeader() && n.authority().Allocator().Serving()
}

// AnswerSpace answers another server's Peers.Space question: group 0's
// record of a space (live, a deletion, or none: the zero record) with its
// version, from this server's state, which is authoritative only while it
// leads group 0 and serves it; otherwise an error wrapping
// seqd.ErrNotLeader.
func (n *Node) AnswerSpace(name string) (fsm.SpaceRecord, error) {
	if !n.servesAuthority() {
		return fsm.SpaceRecord{}, fmt.Errorf("%w: asked about a space of group 0", seqd.ErrNotLeader)
	}
	rec, _ := n.authority().FSM().Record(name)
	return rec, nil
}
