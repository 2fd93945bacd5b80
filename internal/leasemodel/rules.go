package leasemodel

import (
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/lease"
)

// Rules are the decisions the model takes from the code: the servers call
// the same functions (group/ calls lease.Deadline and, through fsm/,
// lease.Handoff; cluster/ calls admit.Decide and admit.Fence). Real is
// what runs; a test replaces one decision at a time to show that the
// checker sees a change of it.
type Rules interface {
	// Deadline is lease.Deadline.
	Deadline(gained, seen time.Time, lease, margin time.Duration, rec lease.Record, recorded, past bool) (time.Time, time.Duration)
	// NewHandoff returns the lease entries' follower a state machine
	// starts with (lease.Handoff's zero value).
	NewHandoff() Handoff
	// Decide is admit.Decide.
	Decide(admit.Facts) admit.Verdict
	// Fence is admit.Fence.
	Fence(mine seqd.Generation, served bool, l admit.Learned) admit.Verdict
	// ListenWindow is lease.ListenWindow: how long a leader listens to
	// gossip before it serves, after its server started and after its
	// lease lapsed (the listen rule).
	ListenWindow() time.Duration
}

// Handoff is the method set of *lease.Handoff.
type Handoff interface {
	Renewal(term uint64)
	Release(term uint64)
	Released() bool
	RenewedIn(term uint64) bool
}

// Real is the code's own rules.
type Real struct{}

func (Real) Deadline(gained, seen time.Time, l, margin time.Duration, rec lease.Record, recorded, past bool) (time.Time, time.Duration) {
	return lease.Deadline(gained, seen, l, margin, rec, recorded, past)
}

func (Real) NewHandoff() Handoff { return &lease.Handoff{} }

func (Real) Decide(f admit.Facts) admit.Verdict { return admit.Decide(f) }

func (Real) Fence(mine seqd.Generation, served bool, l admit.Learned) admit.Verdict {
	return admit.Fence(mine, served, l)
}

func (Real) ListenWindow() time.Duration { return lease.ListenWindow }
