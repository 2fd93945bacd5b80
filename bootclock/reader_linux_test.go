//go:build linux

package bootclock

import (
	"syscall"
	"testing"
	"time"
)

// fakeClocks are a host's clocks under the test's control: mono is
// CLOCK_MONOTONIC, boot − mono what suspensions added, wall − mono what
// suspensions and steps added.
type fakeClocks struct {
	mono, suspended, stepped time.Duration
	boots                    int // system calls made
}

func (f *fakeClocks) reader() *reader {
	return &reader{
		now: func() (time.Duration, int64) {
			return f.mono, int64(f.mono + f.suspended + f.stepped + 1_700_000_000*time.Second)
		},
		boot: func() (time.Duration, syscall.Errno) {
			f.boots++
			return f.mono + f.suspended + 3*time.Hour, 0
		},
	}
}

// Between system calls Now is the monotonic clock plus the last offset; it
// makes the call again after Resync, or at once when the wall clock moved
// against the monotonic one (a resume from suspension moves both the wall
// clock and CLOCK_BOOTTIME), so a suspension is counted from the first
// reading after it.
func TestReaderCountsSuspension(t *testing.T) {
	f := &fakeClocks{mono: time.Minute}
	r := f.reader()
	want := func(step string, got, want time.Duration, boots int) {
		t.Helper()
		if got != want || f.boots != boots {
			t.Fatalf("%s: read %v after %d system calls, want %v after %d", step, got, f.boots, want, boots)
		}
	}
	want("first reading", r.read(), time.Minute+3*time.Hour, 1)
	f.mono += Resync / 2
	want("within Resync", r.read(), time.Minute+3*time.Hour+Resync/2, 1)
	f.mono += Resync
	want("after Resync", r.read(), time.Minute+3*time.Hour+3*Resync/2, 2)

	// Suspended for 5 s: the monotonic clock stood still, CLOCK_BOOTTIME
	// and the wall clock moved on.
	f.mono += time.Millisecond
	f.suspended += 5 * time.Second
	want("after a suspension", r.read(), f.mono+f.suspended+3*time.Hour, 3)
	f.mono += time.Millisecond
	want("after the suspension, within Resync", r.read(), f.mono+f.suspended+3*time.Hour, 3)

	// A step of the wall clock, back or forward, costs one system call and
	// changes nothing else.
	for _, step := range []time.Duration{-time.Hour, 2 * Tolerance} {
		f.stepped += step
		f.mono += time.Millisecond
		boots := f.boots + 1
		want("after a wall-clock step", r.read(), f.mono+f.suspended+3*time.Hour, boots)
	}
}

// The stored offset never falls: a system call whose reading comes out low
// against the monotonic clock read after it (a slow call) keeps the
// offset before it, so readings never decrease.
func TestReaderOffsetNeverFalls(t *testing.T) {
	f := &fakeClocks{mono: time.Minute}
	r := f.reader()
	first := r.read()
	// The next call is slow: the monotonic clock moves 3 ms between the
	// system call's reading and the reading after it.
	slow := &reader{now: r.now, boot: func() (time.Duration, syscall.Errno) {
		b, e := f.boot()
		f.mono += 3 * time.Millisecond
		return b, e
	}}
	slow.last.Store(r.last.Load())
	f.mono += Resync
	got := slow.read()
	if got < first+Resync {
		t.Fatalf("read %v after a slow system call, want at least %v", got, first+Resync)
	}
	if off := slow.last.Load().offset; off != r.last.Load().offset {
		t.Fatalf("offset %v after a slow call, want the earlier %v", off, r.last.Load().offset)
	}
}

func (f *fakeClocks) boot() (time.Duration, syscall.Errno) {
	f.boots++
	return f.mono + f.suspended + 3*time.Hour, 0
}

func BenchmarkNow(b *testing.B) {
	for range b.N {
		Now()
	}
}

func BenchmarkBoottimeSyscall(b *testing.B) {
	for range b.N {
		boottime()
	}
}
