package cluster

import (
	"context"

	"github.com/seqd/seqd/fsm"
)

// Peers is how this server asks the other servers, over their API: one
// service (server/ builds it from api's peer client). Without it (nil, in
// tests of single servers) a server asks nobody: it trusts itself at once
// (vouch.go), promotes no joiner, balances no leaders, samples no clocks
// (so a leader with peers refuses flake grants), and a space its copy of
// group 0 lacks is unknown until the copy catches up.
type Peers interface {
	// Progress reports the server's raft term and applied index in a
	// group, as its own raft has them (membership.go, placement.go).
	Progress(ctx context.Context, apiAddr string, group int) (term, applied uint64, err error)
	// ReadIndex asks the server, which this one takes for a group's
	// leader, for its read index of the group (Node.ReadIndex): an index
	// at or above every entry committed before it was asked. A server
	// that does not lead the group, or cannot commit in its term, fails
	// (unavailable), as does one that does not answer. A build that does
	// not know the question answers its applied index, as Progress.
	ReadIndex(ctx context.Context, apiAddr string, group int) (uint64, error)
	// Vouch asks the server about this one in a group (admission.go,
	// vouch.go).
	Vouch(ctx context.Context, apiAddr string, req VouchRequest) (VouchAnswer, error)
	// Space asks the server, which this one takes for group 0's leader,
	// for its committed record of a space, with the record's version: the
	// zero record when there is none, a deletion with its section size
	// (builds before versions answer a deletion as none, at version 0). A
	// server that does not lead group 0 and serve fails (an error wrapping
	// seqd.ErrNotLeader or a wire error); see spaces.go.
	Space(ctx context.Context, apiAddr, name string) (rec fsm.SpaceRecord, err error)
	// Clock reads the server's wall clock (Unix ms; clock.go).
	Clock(ctx context.Context, apiAddr string) (int64, error)
	// Speaks asks the server which replicated-command protocol its running
	// build speaks (protocol.go): 0 from builds that do not say. With
	// moveTo, the server first makes its data unreadable to builds that do
	// not speak moveTo (Node.PromiseProtocol).
	Speaks(ctx context.Context, apiAddr string, moveTo uint64) (uint64, error)
}
