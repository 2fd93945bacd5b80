//go:build linux

package bootclock_test

import (
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/seqd/seqd/bootclock"
)

func clockGettime(t *testing.T, clock uintptr) time.Duration {
	t.Helper()
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		t.Fatalf("clock_gettime(%d): %v", clock, e)
	}
	return time.Duration(ts.Nano())
}

// On Linux Now reads CLOCK_BOOTTIME, which counts time suspended and so
// never reads less than CLOCK_MONOTONIC.
func TestNowIsCLOCK_BOOTTIME(t *testing.T) {
	const clockMonotonic, clockBoottime = 1, 7
	for range 100 {
		b1 := bootclock.Now()
		direct := clockGettime(t, clockBoottime)
		b2 := bootclock.Now()
		if direct < b1 || direct > b2 {
			t.Fatalf("clock_gettime(CLOCK_BOOTTIME) = %v, not within Now readings [%v, %v]", direct, b1, b2)
		}
		mono := clockGettime(t, clockMonotonic)
		if b := bootclock.Now(); b < mono {
			t.Fatalf("Now() = %v, below CLOCK_MONOTONIC read before it (%v)", b, mono)
		}
	}
}
