// Package bootclock reads a clock that counts the time the host spends
// suspended, for leases: CLOCK_BOOTTIME on Linux, Go's monotonic clock
// elsewhere. A lease timed by Go's monotonic clock (CLOCK_MONOTONIC on
// Linux), which stands still while a virtual machine or laptop is
// suspended, would let its holder resume believing the lease still runs
// while another holder already serves. The seqd leader lease (sections/)
// and the flake worker lease (flake/) are both timed by Now.
//
// It imports only the standard library.
package bootclock

import "time"

// monoOrigin is the origin of monotonic.
var monoOrigin = time.Now()

// monotonic reads Go's monotonic clock, which may stand still while the host
// is suspended: the fallback of Now where no clock counts suspension.
func monotonic() time.Duration { return time.Since(monoOrigin) }
