//go:build linux

package bootclock_test

import (
	"sync"
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
// never reads less than CLOCK_MONOTONIC: a reading never exceeds the system
// call's made after it, lies within a millisecond of the one made before
// it, and readings never decrease, also across goroutines.
func TestNowIsCLOCK_BOOTTIME(t *testing.T) {
	const clockMonotonic, clockBoottime = 1, 7
	for i := range 2000 {
		before := clockGettime(t, clockBoottime)
		b := bootclock.Now()
		after := clockGettime(t, clockBoottime)
		if b > after || b < before-time.Millisecond {
			t.Fatalf("reading %d: Now() = %v, CLOCK_BOOTTIME %v before it and %v after it", i, b, before, after)
		}
		mono := clockGettime(t, clockMonotonic)
		if b := bootclock.Now(); b < mono-time.Millisecond {
			t.Fatalf("Now() = %v, below CLOCK_MONOTONIC read before it (%v)", b, mono)
		}
		if i%100 == 0 {
			time.Sleep(11 * time.Millisecond) // past Resync: the next reading makes the system call
		}
	}
}

func TestNowNeverDecreases(t *testing.T) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Long enough for many system calls (one every Resync).
			prev := bootclock.Now()
			for start := prev; prev-start < 20*bootclock.Resync; {
				if now := bootclock.Now(); now < prev {
					t.Errorf("Now() = %v after %v", now, prev)
					return
				} else {
					prev = now
				}
			}
		}()
	}
	wg.Wait()
}
