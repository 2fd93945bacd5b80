package seqd

import "errors"

// The errors a client can act on. Every layer wraps these (with %w) and
// api/ maps each to one Connect code; their text reaches clients, so it says
// what is wrong without internal detail.
var (
	// ErrUnknownSpace means the space has not been created (NotFound).
	ErrUnknownSpace = errors.New("unknown space")
	// ErrInvalidSpace means a space's name or settings are out of range
	// (InvalidArgument).
	ErrInvalidSpace = errors.New("invalid space settings")
	// ErrSpaceExists means a space was created again with settings that
	// differ from the stored ones (AlreadyExists).
	ErrSpaceExists = errors.New("space exists with different settings")
	// ErrInvalidArgument means the call itself is malformed: no keys, too
	// many keys, a count out of range, a malformed name (InvalidArgument).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrExhausted means the call would need a value above MaxValue
	// (ResourceExhausted).
	ErrExhausted = errors.New("sequence exhausted: values would pass 2^63-1")
	// ErrNotServing means this server does not hold the leader lease: it is
	// not the leader, or a new leader still waiting out the previous
	// leader's lease, or a raise of a high-water mark failed. The caller
	// should retry, possibly on another server (Unavailable).
	ErrNotServing = errors.New("not serving: leader lease not held")
	// ErrNotLeader means the call must go to the leader (Unavailable).
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader means no leader is known right now (Unavailable).
	ErrNoLeader = errors.New("no leader known")
)
