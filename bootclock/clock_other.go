//go:build !linux

package bootclock

import "time"

// Now reads the boot-time clock. Outside Linux it reads Go's monotonic
// clock, which on some systems stands still while the host is suspended: there
// leases timed by it do not account for suspension.
func Now() time.Duration { return monotonic() }
