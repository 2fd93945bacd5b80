package sections_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/sections"
)

// fakeClock is a Clock the test moves by hand.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() time.Duration      { return time.Duration(c.t.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.t.Add(int64(d)) }

// A jump of the lease clock, as a suspension of the host causes (the clock
// counts the time suspended while the monotonic clock stood still), ends the
// lease at once.
func TestClockJumpEndsLease(t *testing.T) {
	clk := &fakeClock{}
	clk.advance(time.Hour) // an arbitrary origin
	a := sections.New(newStore(t, small), sections.Options{Clock: clk.now})
	t.Cleanup(a.Close)
	ctx := context.Background()
	start := time.Now()
	a.Grant(a.Epoch(), a.Now()+10*time.Second)
	if _, err := a.Next(ctx, "small", []uint64{1}); err != nil {
		t.Fatalf("Next under lease: %v", err)
	}
	if !a.Serving() {
		t.Fatal("not serving under a fresh lease")
	}

	clk.advance(time.Minute) // the host was suspended for a minute
	if a.Serving() {
		t.Fatal("Serving after the lease clock passed the lease")
	}
	if r := a.LeaseRemaining(); r != 0 {
		t.Fatalf("LeaseRemaining %v after the lease clock passed the lease", r)
	}
	if _, err := a.Next(ctx, "small", []uint64{1}); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Next after the jump: %v, want ErrNotServing", err)
	}
	if _, err := a.Reserve(ctx, "small", 1, 5); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Reserve after the jump: %v, want ErrNotServing", err)
	}
	if _, err := a.Current(ctx, "small", []uint64{1}); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Current after the jump: %v, want ErrNotServing", err)
	}
	// The monotonic clock barely moved: the lease ended only by the jump.
	if d := time.Since(start); d >= 10*time.Second {
		t.Fatalf("test took %v, as long as the lease: the jump proved nothing", d)
	}

	// A new grant read from the same clock serves again.
	a.Grant(a.Epoch(), a.Now()+10*time.Second)
	if _, err := a.Next(ctx, "small", []uint64{1}); err != nil {
		t.Fatalf("Next under a new grant: %v", err)
	}
}

// The default Clock is BootClock.
func TestDefaultClockIsBootClock(t *testing.T) {
	a := sections.New(newStore(t, small), sections.Options{})
	t.Cleanup(a.Close)
	before := sections.BootClock()
	now := a.Now()
	after := sections.BootClock()
	if now < before || now > after {
		t.Fatalf("Now() = %v, not within BootClock readings [%v, %v]", now, before, after)
	}
}

// BenchmarkBootClock and BenchmarkTimeNow compare the cost of one reading of
// the lease clock with time.Now (vDSO, no system call).
func BenchmarkBootClock(b *testing.B) {
	var d time.Duration
	for b.Loop() {
		d += sections.BootClock()
	}
	_ = d
}

func BenchmarkTimeNow(b *testing.B) {
	var t time.Time
	for b.Loop() {
		t = time.Now()
	}
	_ = t
}
