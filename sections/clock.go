package sections

import (
	"time"

	"github.com/seqd/seqd/bootclock"
)

// Clock is a reading of a clock that counts time spent suspended, from an
// arbitrary fixed origin. The allocator times its lease with it: Grant takes
// the end of the lease as a reading of the same clock, and a value is handed
// out only while a reading taken during the call is below it.
//
// The clock must count suspension because the lease is a promise about real
// time: the lease's holder has stopped serving by the time any later leader,
// which waits out a lease on its own clock, starts to serve. A clock that
// stands still while the host is suspended (Go's monotonic clock, which is
// CLOCK_MONOTONIC on Linux) lets a leader whose virtual machine was paused
// resume believing its lease still runs, while another leader already
// serves. What the lease still assumes is that clocks run at nearly the same
// rate: the drift between this clock and the clock another node waits out the
// lease on, over one lease period, must stay within the margin that the
// cluster adds to the lease (cluster.Config.LeaseMargin). Readings must never
// decrease.
type Clock func() time.Duration

// BootClock is the default Clock: bootclock.Now, which reads CLOCK_BOOTTIME
// on Linux (time since boot, including time suspended) and falls back to
// Go's monotonic clock where that clock is refused or missing.
func BootClock() time.Duration { return bootclock.Now() }
