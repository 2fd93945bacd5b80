package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
)

// Adding a server against a protocol move.
//
// A group moves to protocol p only once every server of its configuration
// confirmed, asked at that moment, that its running build speaks p
// (EnsureProtocol, Host.ProtocolConfirmed), and a server is added only
// once it confirmed the group's protocol (AddNonvoter). Both must read the
// same protocol and configuration, or a server asked about the older
// protocol joins a group that moves to the newer one without having been
// asked about it: an add between a move's reading of the configuration and
// its commit, or an add by a new leader before it applied a move its
// predecessor left in the log. So a move and an add never overlap (confMu,
// held by a move from its reading of the configuration to its commit, and
// by an add from its question to its commit), an add waits until this
// leader's barrier applied every entry of earlier terms (readyTerm), and
// an add whose question outlived the term it was asked in is not made.

// ErrNotReady means this leader has not yet applied the entries of earlier
// terms (its barrier): it adds no server before, since a move among them
// would change the protocol the server must be asked about.
var ErrNotReady = errors.New("the leader has not applied its barrier yet")

// ErrConfigurationChanged means a membership change was decided on a read
// of the configuration that is no longer its latest: the server was
// removed, added, or changed since. Nothing was changed.
var ErrConfigurationChanged = errors.New("the raft configuration changed since the change was decided")

// Every change of the configuration goes through this file, under confMu,
// against the latest configuration: a change decided on an older read
// (a membership pass asks servers questions, of up to a second each,
// between its read and its changes) changes nothing. Otherwise a
// promotion or an address update of a server removed meanwhile would add
// it back, without the question an added server is asked, and although
// its operator removed it.

// ErrNotFollowed means a change of a group other than group 0 is not what
// group 0's configuration on this server holds: an add, a promotion or an
// address of a server it does not hold so. Nothing was changed.
var ErrNotFollowed = errors.New("group 0's configuration on this server does not hold the change")

// Such a group's configuration follows group 0's (the host's mirror), as
// this server's copy of group 0 holds it when the change is made, under
// confMu, not as an earlier read did: the copy may lag behind group 0's
// commit, and a pass asks servers questions between its read and its
// change. Otherwise a server its operator removed from group 0, and then
// from the group, is added back to the group by a leader whose copy (or
// read) still lists it. So a server is added, promoted or moved only as
// the latest copy holds it, and the host adds one only once its copy is as
// current as group 0's leader (cluster's group0Current). A removal is
// never held back: a wiped server removed from group 0 may be there again
// at once, a new server under the same ID, and every group must drop the
// old one (its adds then bring the new one in).

// follows reports, for a group that follows group 0, whether this server's
// latest copy of group 0's configuration holds server id as to.
func (g *Group) follows(id raft.ServerID, to *raft.Server) error {
	if g.cfg.Follows == nil {
		return nil
	}
	conf, err := g.cfg.Follows()
	if err != nil {
		return errors.Join(ErrNotFollowed, err)
	}
	var x *raft.Server
	for _, s := range conf.Servers {
		if s.ID == id {
			x = &s
		}
	}
	switch {
	case x == nil:
		return fmt.Errorf("%w: group 0 does not hold %s", ErrNotFollowed, id)
	case x.Address != to.Address || (to.Suffrage == raft.Voter && x.Suffrage != raft.Voter):
		return fmt.Errorf("%w: group 0 holds %s as %v at %s", ErrNotFollowed, id, x.Suffrage, x.Address)
	}
	return nil
}

// server returns server id of the latest configuration (ok: it has it).
func (g *Group) server(id raft.ServerID) (s raft.Server, ok bool, err error) {
	cf := g.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return s, false, err
	}
	for _, x := range cf.Configuration().Servers {
		if x.ID == id {
			return x, true, nil
		}
	}
	return s, false, nil
}

// holds reports whether the latest configuration has server s as it is.
func (g *Group) holds(s raft.Server) (bool, error) {
	x, ok, err := g.server(s.ID)
	return ok && x == s, err
}

// ChangeServer makes server was, as read in the configuration, to (the
// same ID): a promotion, a demotion or a new address. It adds no server:
// unless the latest configuration still holds was, it answers
// ErrConfigurationChanged.
func (g *Group) ChangeServer(was, to raft.Server, timeout time.Duration) error {
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	g.confMu.Lock()
	defer g.confMu.Unlock()
	if ok, err := g.holds(was); err != nil {
		return err
	} else if !ok || to.ID != was.ID {
		return ErrConfigurationChanged
	}
	if to.Suffrage == raft.Voter || to.Address != was.Address {
		if err := g.follows(to.ID, &to); err != nil {
			return err
		}
	}
	var f raft.IndexFuture
	switch {
	case to.Suffrage == raft.Voter:
		f = g.raft.AddVoter(to.ID, to.Address, 0, timeout)
	case was.Suffrage == raft.Voter && to.Address == was.Address:
		f = g.raft.DemoteVoter(to.ID, 0, timeout)
	case was.Suffrage == raft.Voter:
		return errors.New("a demotion keeps the server's address")
	default:
		f = g.raft.AddNonvoter(to.ID, to.Address, 0, timeout)
	}
	return g.await(f)
}

// RemoveServer removes server was, as read in the configuration, unless
// the latest configuration no longer holds it so (ErrConfigurationChanged).
func (g *Group) RemoveServer(was raft.Server, timeout time.Duration) error {
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	g.confMu.Lock()
	defer g.confMu.Unlock()
	if ok, err := g.holds(was); err != nil {
		return err
	} else if !ok {
		return ErrConfigurationChanged
	}
	return g.await(g.raft.RemoveServer(was.ID, 0, timeout))
}

// RemoveDecided removes the server decide picks from the latest
// configuration, deciding under confMu: an add, a promotion or a move in
// progress (which holds confMu while it asks the server its questions)
// finishes first, and the removal decides on what it left. So an
// operator's removal racing a membership pass removes what the pass added,
// rather than finding the server absent while its add is under way and
// answering that it is not in the group. A removal that has not begun
// when ctx is done is not made (one already committing may still commit).
// Not leading, or being refused by raft before the change was appended, is
// seqd.ErrNotLeader (nothing was changed); any other error leaves the
// outcome unknown.
func (g *Group) RemoveDecided(ctx context.Context, decide func(raft.Configuration) (raft.Server, error), timeout time.Duration) error {
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	g.confMu.Lock()
	defer g.confMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if !g.IsLeader() { // while it waited for the lock
		return seqd.ErrNotLeader
	}
	cf := g.raft.GetConfiguration()
	if err := cf.Error(); errors.Is(err, raft.ErrRaftShutdown) {
		return fmt.Errorf("%w: %v", seqd.ErrNotServing, err) // nothing was asked
	} else if err != nil {
		return err
	}
	s, err := decide(cf.Configuration())
	if err != nil {
		return err
	}
	err = g.await(g.raft.RemoveServer(s.ID, 0, timeout))
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		// Refused before it was appended: nothing was changed, and the
		// caller may ask the leader. Leadership lost (or the group
		// stopped) after it was appended leaves the removal's outcome
		// unknown, and must not read as "try elsewhere": a retry could
		// remove a server that rejoined under the same ID.
		return fmt.Errorf("%w: %v", seqd.ErrNotLeader, err)
	}
	return err
}

// ReadIndex returns, on the group's leader, an index at or above every
// entry of the group committed before it was asked (raft's read index):
// the applied index once a barrier of this leader's term, appended after
// the question, has committed. A leader that was deposed (a newer term may
// have committed more) cannot commit the barrier, so it answers no index;
// nor does a server that does not lead (seqd.ErrNotLeader), or a leader
// that has not applied its own barrier yet (it writes nothing before,
// seqd.ErrNotServing). Unlike a confirmation of leadership by heartbeats,
// the barrier counts no answer sent before the question. The wait, the
// barrier's enqueueing included, ends with ctx.
func (g *Group) ReadIndex(ctx context.Context) (uint64, error) {
	if !g.IsLeader() {
		return 0, seqd.ErrNotLeader
	}
	if g.readyTerm.Load() != g.raft.CurrentTerm() {
		return 0, fmt.Errorf("%w: %w", seqd.ErrNotServing, ErrNotReady)
	}
	errc := make(chan error, 1)
	go func() { errc <- g.raft.Barrier(0).Error() }()
	select {
	case err := <-errc:
		if err != nil {
			return 0, fmt.Errorf("%w: %v", seqd.ErrNotLeader, err)
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-g.stop:
		return 0, ErrStopped
	}
	return g.raft.AppliedIndex(), nil
}

// AddNonvoter adds server id at addr to the group as a non-voter, on the
// leader, once confirm, asked with the group's protocol, answers that the
// server's running build speaks it (Host's ProtocolConfirmed asks the
// same for a move). It reports whether the server was added: false with a
// nil error when confirm said no. prevIndex is raft's.
func (g *Group) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, prevIndex uint64, timeout time.Duration, confirm func(protocol uint64) bool) (bool, error) {
	if !g.IsLeader() {
		return false, seqd.ErrNotLeader
	}
	g.confMu.Lock()
	defer g.confMu.Unlock()
	term := g.raft.CurrentTerm()
	if g.readyTerm.Load() != term {
		return false, ErrNotReady
	}
	if _, ok, err := g.server(id); err != nil {
		return false, err
	} else if ok {
		return false, ErrConfigurationChanged
	}
	add := raft.Server{ID: id, Address: addr, Suffrage: raft.Nonvoter}
	if err := g.follows(id, &add); err != nil {
		return false, err
	}
	p := g.fsm.Protocol()
	if !confirm(p) {
		return false, nil
	}
	// confMu orders this server's moves only: while the server was asked,
	// this one may have lost leadership to one that moved the group, and
	// led again (the move then committed before this term's first entry,
	// which raft's change waits for). The answer holds only for the term,
	// and so the protocol, it was asked in.
	if g.raft.CurrentTerm() != term || !g.IsLeader() || g.fsm.Protocol() != p {
		return false, ErrNotReady
	}
	if err := g.follows(id, &add); err != nil {
		return false, err // group 0 dropped it while it was asked
	}
	return true, g.await(g.raft.AddNonvoter(id, addr, prevIndex, timeout))
}
