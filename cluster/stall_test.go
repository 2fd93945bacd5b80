package cluster

import (
	"context"
	"testing"
	"time"
)

// The stall watch: regular ticks are no stall; a gap longer than
// stallAfter is one that ended at the later tick; a tick overdue by more
// than stallAfter is a stall in progress, ending now; a watch not started
// knows of none.
func TestStallWatch(t *testing.T) {
	w := newStallWatch()
	t0 := w.origin
	if got := w.last(t0.Add(time.Hour)); !got.IsZero() {
		t.Fatalf("a watch not started reports a stall at %v", got)
	}
	w.start(t0)
	for i := 1; i <= 20; i++ {
		if d := w.tick(t0.Add(time.Duration(i) * stallTick)); d != 0 {
			t.Fatalf("regular tick %d reported a stall of %v", i, d)
		}
	}
	at := t0.Add(20 * stallTick)
	if got := w.last(at.Add(stallTick)); !got.IsZero() {
		t.Fatalf("no stall, yet last = %v", got)
	}
	if got, now := w.last(at.Add(stallAfter+time.Millisecond)), at.Add(stallAfter+time.Millisecond); !got.Equal(now) {
		t.Fatalf("an overdue tick: last = %v, want now (%v)", got, now)
	}
	resumed := at.Add(10 * time.Second)
	if d := w.tick(resumed); d != 10*time.Second {
		t.Fatalf("a 10 s gap reported as %v", d)
	}
	if got := w.last(resumed.Add(stallTick)); !got.Equal(resumed) {
		t.Fatalf("last = %v, want the tick that ended the stall (%v)", got, resumed)
	}
	if w.stalls.Load() != 1 {
		t.Fatalf("%d stalls counted, want 1", w.stalls.Load())
	}
}

// WaitListening counts only time after the last stall: a stall in
// progress (the watch's tick overdue) keeps it waiting.
func TestWaitListeningWaitsOutAStall(t *testing.T) {
	n := &Node{stall: &stallWatch{origin: time.Now().Add(-time.Minute)}, gossipStarted: time.Now().Add(-time.Hour)}
	if !n.WaitListening(context.Background(), time.Time{}) {
		t.Fatal("WaitListening after an hour of gossip: false")
	}
	n.stall.start(time.Now().Add(-2 * stallAfter)) // a tick overdue: stalled now
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if n.WaitListening(ctx, time.Time{}) {
		t.Fatal("WaitListening returned while the process is stalled")
	}
	if !n.StalledSince(time.Now().Add(-time.Second)) {
		t.Fatal("StalledSince: false while a tick is overdue")
	}
}
