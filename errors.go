package seqd

import (
	"errors"
	"fmt"
)

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
	// ErrRateLimited means a call would raise a section's high-water mark
	// faster than every replica allows (about 4·10⁹ values a second per
	// section: see fsm's raise budget); retry a moment later
	// (ResourceExhausted).
	ErrRateLimited = errors.New("rate limited")
	// ErrNotServing means this server cannot answer the call now; errors
	// wrapping it say why (ErrLeaseNotHeld, a failed raise, a leader whose
	// clock is too far from its peers', a flake worker's lease lapsed). The
	// caller should retry, possibly on another server (Unavailable).
	ErrNotServing = errors.New("not serving")
	// ErrLeaseNotHeld means this server does not hold the leader lease: it
	// is not the leader, or a new leader still waiting out the previous
	// leader's lease (Unavailable).
	ErrLeaseNotHeld = fmt.Errorf("%w: leader lease not held", ErrNotServing)
	// ErrNotOwner means a key's section belongs to another raft group than
	// the one asked to serve it (see SlotOf): a server or a client routing
	// with another group count (FailedPrecondition).
	ErrNotOwner = errors.New("the key's section belongs to another group")
	// ErrNotLeader means the call must go to the leader (Unavailable).
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader means no leader is known right now (Unavailable).
	ErrNoLeader = errors.New("no leader known")
)

// The errors of the flake id family (namespaces and workers), each mapped
// to one Connect code in api/ as the errors above are.
var (
	// ErrUnknownNamespace means the flake namespace has not been created
	// (NotFound).
	ErrUnknownNamespace = errors.New("unknown namespace")
	// ErrInvalidNamespace means a namespace's name, layout or obfuscation
	// setting is out of range (InvalidArgument).
	ErrInvalidNamespace = errors.New("invalid namespace settings")
	// ErrNamespaceExists means a namespace was created again with settings
	// that differ from the stored ones (AlreadyExists).
	ErrNamespaceExists = errors.New("namespace exists with different settings")
	// ErrNoWorker means every worker of the namespace's layout is held
	// (ResourceExhausted).
	ErrNoWorker = errors.New("no free worker in the namespace")
	// ErrIDsAhead means a call asks for more flake ids than its holder may
	// issue before its deadline without running more than its lead ahead of
	// the clock (ResourceExhausted).
	ErrIDsAhead = errors.New("flake ids would run too far ahead of the clock")
	// ErrLifetimeOver means the namespace's layout cannot express the
	// current time any more: its lifetime is over (ResourceExhausted).
	ErrLifetimeOver = errors.New("namespace's id layout has run out of time")
	// ErrFenced means a worker's grant was taken back (reclaimed after its
	// lease lapsed, or released): its holder must stop issuing ids and
	// acquire again (FailedPrecondition).
	ErrFenced = errors.New("worker grant fenced: acquire a new one")
)
