package flake

// Grant is a worker granted to a holder, as the state machine decides it
// (fsm, applying an acquire or a renewal on every replica) and as the
// holder uses it: worker Worker of Namespace with fencing token Token, the
// time units (Lo, Hi] of Layout it may issue ids in, the leader's time
// LeaderMs when the grant was decided, and the lease LeaseMs within which
// the holder must renew.
type Grant struct {
	Namespace string
	Layout    Layout
	Worker    uint64
	Token     uint64
	Lo, Hi    uint64
	LeaderMs  int64
	LeaseMs   uint32
	// Reclaimed says an acquire took the worker from a holder whose lease
	// had lapsed, ReclaimedOld that holder's label: for the leader's
	// records, never sent to the holder.
	Reclaimed    bool
	ReclaimedOld string
}
