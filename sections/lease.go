package sections

import (
	"math"
	"time"

	"github.com/seqd/seqd"
)

// lease is immutable once published.
type lease struct {
	epoch  uint64
	expiry time.Duration // a reading of Allocator.clock; noLease = no lease
	// withheld: Withhold ended the lease and no Grant of the epoch may
	// renew it until Unwithhold.
	withheld bool
}

// noLease is the expiry of a lease not (or no longer) granted: every reading
// of the clock is at or past it.
const noLease = time.Duration(math.MinInt64)

// Now returns a reading of the allocator's clock (Options.Clock, BootClock by
// default), the clock that Grant's until is read from. The caller of Grant
// takes it before submitting the consensus entry whose commit renews the
// lease.
func (a *Allocator) Now() time.Duration { return a.clock() }

// callNow reads the clock for the lease checks of one call. Next, Reserve
// and Current read it once, after the call has begun, and use that reading
// for every lease check the call makes (take reads it again after waiting for
// a raise) instead of reading it for each value: on Linux a reading of
// CLOCK_BOOTTIME is a system call (Go reads CLOCK_MONOTONIC through the vDSO,
// but has no such path for CLOCK_BOOTTIME), too costly to make for every key
// of a call.
//
// A reading taken after the call began and before it returns is as good as
// one taken at the moment each value is taken. A new leader serves only once
// the old leader's lease has run out (it waits the lease out first), so a
// call that begins after a new leader started serving reads a time past the
// old lease, and the old leader refuses it. Every call an old leader does
// serve therefore began before the new leader served anything, and every
// value the old leader hands out is at or below a committed max, which the
// new leader (it starts every section at the committed max) starts above. So
// such a call can be ordered before every call of the new leader: no value is
// repeated and no key's values go backwards, however late within the call
// its values are taken.
func (a *Allocator) callNow() time.Duration { return a.clock() }

// Epoch returns the current lease epoch. Revoke starts a new one.
func (a *Allocator) Epoch() uint64 { return a.lease.Load().epoch }

// Grant extends the lease of the given epoch to until, a reading of the
// allocator's clock (see Now). It has no effect if epoch is not the current
// epoch (the grant comes from a leadership term that has since ended) or if
// the lease already runs longer.
//
// The caller guarantees the lease is safe: until = t + L where t = Now() was
// taken before submitting a consensus entry that then committed, and any
// leader elected later waits L (plus a margin for clock-rate drift) before
// serving. Because the clock counts time suspended, a lease whose holder was
// suspended past until has ended when the holder resumes.
func (a *Allocator) Grant(epoch uint64, until time.Duration) {
	for {
		cur := a.lease.Load()
		if cur.epoch != epoch || cur.withheld || cur.expiry >= until {
			return
		}
		if a.lease.CompareAndSwap(cur, &lease{epoch: epoch, expiry: until}) {
			return
		}
	}
}

// Revoke ends the lease at once, starts a new epoch and drops every section
// held in memory, so nothing loaded under an earlier lease is used again. It
// returns the new epoch, for the next Grant.
func (a *Allocator) Revoke() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var next uint64
	for {
		cur := a.lease.Load()
		next = cur.epoch + 1
		if a.lease.CompareAndSwap(cur, &lease{epoch: next, expiry: noLease}) {
			break
		}
	}
	a.spaces = make(map[string]*spaceState)
	a.keys.Store(new(keyCount))
	return next
}

// Withhold ends the lease at once but keeps the epoch and the sections held
// in memory, and returns the epoch. Until Unwithhold, every Grant is a
// no-op, even one of a renewal that was committing as Withhold ran, so that
// nothing serves again behind the caller's back (a planned handoff counts
// on it: the next leader may serve at once). After Unwithhold, a Grant of
// the same epoch serves again from where the allocator stopped, without
// reloading any section (so without the jump of up to a step that a reload
// costs). Use it to pause serving while this node stays the leader of the
// same term (a change that may or may not end its leadership); any
// leadership change must still go through Revoke, which makes a later
// Grant of the old epoch a no-op.
func (a *Allocator) Withhold() uint64 {
	for {
		cur := a.lease.Load()
		if a.lease.CompareAndSwap(cur, &lease{epoch: cur.epoch, expiry: noLease, withheld: true}) {
			return cur.epoch
		}
	}
}

// Unwithhold lets Grants of epoch renew the lease again after Withhold; it
// reports whether epoch is still the current epoch (a Revoke since makes it
// a no-op and false).
func (a *Allocator) Unwithhold(epoch uint64) bool {
	for {
		cur := a.lease.Load()
		if cur.epoch != epoch {
			return false
		}
		if !cur.withheld || a.lease.CompareAndSwap(cur, &lease{epoch: epoch, expiry: cur.expiry}) {
			return true
		}
	}
}

// Serving reports whether the allocator holds an unexpired lease.
func (a *Allocator) Serving() bool {
	l := a.lease.Load()
	return a.clock() < l.expiry
}

// LeaseRemaining returns how long the current lease still runs (0 if none).
func (a *Allocator) LeaseRemaining() time.Duration {
	l := a.lease.Load()
	if l.expiry == noLease {
		return 0
	}
	if d := l.expiry - a.clock(); d > 0 {
		return d
	}
	return 0
}

// checkLocked reports whether sec may serve at now, the call's reading of
// the clock (see callNow). Call with sec.mu held.
func (a *Allocator) checkLocked(sec *section, now time.Duration) error {
	l := a.lease.Load()
	if l.epoch != sec.epoch || now >= l.expiry || sec.dropped {
		return seqd.ErrLeaseNotHeld
	}
	return nil
}
