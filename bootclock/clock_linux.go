//go:build linux

package bootclock

import (
	"fmt"
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
	// CLOCK_BOOTTIME: this is a real system call.
	_, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano()), e
}

// Now reads the boot-time clock. On Linux it reads CLOCK_BOOTTIME (time
// since boot, including time suspended). If the kernel refuses that clock
// when the package is loaded, it reads Go's monotonic clock instead, which
// does not count suspension.
func Now() time.Duration {
	if !hasBoottime {
		return monotonic()
	}
	d, err := boottime()
	if err != 0 {
		// It worked when the package was loaded; a lease timed by another
		// clock from now on would be unsound.
		panic(fmt.Sprintf("bootclock: clock_gettime(CLOCK_BOOTTIME): %v", err))
	}
	return d
}
