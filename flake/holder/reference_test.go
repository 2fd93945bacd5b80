package holder

import (
	"testing"
	"time"
)

func TestReference(t *testing.T) {
	var now time.Duration
	r := NewReference(func() time.Duration { return now })
	if _, ok := r.NowMs(); ok {
		t.Fatal("an estimate before any grant")
	}
	r.Observe(5000, 0)
	now = 250 * time.Millisecond
	if ms, _ := r.NowMs(); ms != 5250 {
		t.Fatalf("NowMs = %d, want 5250", ms)
	}
	r.Observe(4000, now) // an older leader time: ignored
	if ms, _ := r.NowMs(); ms != 5250 {
		t.Fatalf("after an older grant NowMs = %d, want 5250", ms)
	}
	r.Observe(9000, now) // a leader ahead: taken
	now += time.Second
	if ms, _ := r.NowMs(); ms != 10000 {
		t.Fatalf("after a newer grant NowMs = %d, want 10000", ms)
	}
}
