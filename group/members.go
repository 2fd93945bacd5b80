package group

import (
	"errors"
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
	return true, g.await(g.raft.AddNonvoter(id, addr, prevIndex, timeout))
}
