//go:build linux

package bootclock

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// clockBoottime is CLOCK_BOOTTIME from <linux/time.h> (the syscall package
// does not name it): like CLOCK_MONOTONIC, but it also counts the time the
// system was suspended.
const clockBoottime = 7

// hasBoottime reports whether the kernel serves CLOCK_BOOTTIME. Every kernel
// Go supports does (it came with Linux 2.6.39; Go needs 3.2), so this is false
// only where something between the program and the kernel refuses it.
var hasBoottime = func() bool {
	_, err := boottime()
	return err == 0
}()

func boottime() (time.Duration, syscall.Errno) {
	var ts syscall.Timespec
	// clock_gettime does not block, so RawSyscall (which skips the
	// scheduler's bookkeeping of a blocking system call) is safe. Go reads
	// CLOCK_MONOTONIC through the vDSO but has no vDSO path for
	// CLOCK_BOOTTIME: this is a real system call (about 1.5 µs on a
	// virtual machine, against 60 ns for time.Now).
	_, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano()), e
}

// Now reads the boot-time clock. On Linux it reads CLOCK_BOOTTIME (time
// since boot, including time suspended). If the kernel refuses that clock
// when the package is loaded, it reads Go's monotonic clock instead, which
// does not count suspension.
//
// Most readings cost one time.Now: CLOCK_BOOTTIME is CLOCK_MONOTONIC plus an
// offset that changes only when the system resumes from a suspension, and on
// resume the kernel moves the wall clock forward by the same amount. So Now
// adds the offset of its last system call to Go's monotonic clock, and makes
// the system call again whenever the wall clock has moved against the
// monotonic one by more than [Tolerance] (a resume, or a step of the wall
// clock) or [Resync] has passed since the last one. A suspension can go
// unseen only if it is shorter than Tolerance or if the wall clock is
// stepped back by about its length at the same moment, and then only until
// the next system call, at most Resync later: Now can read low by at most
// Tolerance, or by the suspension for at most Resync. Readings never
// decrease and never exceed CLOCK_BOOTTIME read after them.
func Now() time.Duration {
	if !hasBoottime {
		return monotonic()
	}
	return system.read()
}

// system reads the process's clocks.
var system = &reader{
	now: func() (time.Duration, int64) {
		t := time.Now()
		return t.Sub(monoOrigin), t.UnixNano()
	},
	boot: boottime,
}

// reader is Now over a pair of clocks: now reads Go's monotonic clock (since
// monoOrigin) and the wall clock (Unix ns) together, boot reads
// CLOCK_BOOTTIME.
type reader struct {
	now  func() (mono time.Duration, wall int64)
	boot func() (time.Duration, syscall.Errno)
	last atomic.Pointer[sample]
}

func (r *reader) read() time.Duration {
	mono, wall := r.now()
	if s := r.last.Load(); s != nil {
		if d := mono - s.mono; d >= 0 && d < Resync {
			if skew := time.Duration(wall-int64(mono)) - s.wallMinusMono; skew > -Tolerance && skew < Tolerance {
				return mono + s.offset
			}
		}
	}
	return r.resync(mono, wall)
}

const (
	// Tolerance is how far the wall clock may move against the monotonic
	// clock before Now reads CLOCK_BOOTTIME again.
	Tolerance = time.Millisecond
	// Resync is how long Now goes at most between readings of
	// CLOCK_BOOTTIME.
	Resync = 10 * time.Millisecond
)

// sample is the offset of CLOCK_BOOTTIME over Go's monotonic clock, as
// measured at monotonic time mono, when the wall clock stood wallMinusMono
// above the monotonic clock.
type sample struct {
	mono, offset, wallMinusMono time.Duration
}

// resync reads CLOCK_BOOTTIME between two readings of the monotonic clock
// (the first taken by the caller at mono, with the wall clock at wall) and
// returns it. The offset it stores is a lower bound of the true one (the
// system call's reading minus the later monotonic reading), and never below
// the previous offset, which the true offset never falls below either: so
// readings only grow and never exceed CLOCK_BOOTTIME.
func (r *reader) resync(mono time.Duration, wall int64) time.Duration {
	b, err := r.boot()
	if err != 0 {
		// It worked when the package was loaded; a lease timed by another
		// clock from now on would be unsound.
		panic(fmt.Sprintf("bootclock: clock_gettime(CLOCK_BOOTTIME): %v", err))
	}
	after, _ := r.now()
	s := &sample{mono: after, offset: b - after, wallMinusMono: time.Duration(wall - int64(mono))}
	for {
		old := r.last.Load()
		if old != nil && old.offset > s.offset {
			s.offset = old.offset
		}
		if r.last.CompareAndSwap(old, s) {
			break
		}
	}
	return after + s.offset
}
