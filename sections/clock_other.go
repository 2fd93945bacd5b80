//go:build !linux

package sections

import "time"

// BootClock is the default Clock. Outside Linux it reads Go's monotonic
// clock, which on some systems stands still while the host is suspended: there
// the lease does not account for suspension, and a suspended leader may resume
// believing its lease still runs.
func BootClock() time.Duration { return monotonic() }
