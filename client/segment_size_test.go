package client

import (
	"testing"
	"time"
)

// TestSegmentNextSize: Leaf's dynamic step. A range that lasted less than
// the target doubles the next one, one that lasted twice the target or
// more halves it, anything between keeps it; always within Min and Max.
func TestSegmentNextSize(t *testing.T) {
	o := SegmentOptions{Min: 100, Max: 1000, Target: time.Minute}.withDefaults()
	for _, c := range []struct {
		size uint32
		d    time.Duration
		want uint32
	}{
		{200, 30 * time.Second, 400},
		{200, time.Minute - 1, 400},
		{200, time.Minute, 200},
		{200, 2*time.Minute - 1, 200},
		{200, 2 * time.Minute, 100},
		{200, time.Hour, 100},
		{150, time.Hour, 100}, // not below Min
		{600, time.Second, 1000},
		{1000, time.Second, 1000}, // not above Max
	} {
		if got := nextSize(c.size, c.d, o); got != c.want {
			t.Errorf("nextSize(%d, %v) = %d, want %d", c.size, c.d, got, c.want)
		}
	}
	d := SegmentOptions{}.withDefaults()
	if d.Initial != 1000 || d.Min != 1 || d.Max != 1_000_000 || d.Target != 15*time.Minute || d.Prefetch != 0.1 {
		t.Fatalf("defaults %+v, want Leaf's: 1000 first, 15 minutes, 10%%", d)
	}
	if o := (SegmentOptions{Initial: 5, Min: 10, Max: 20}).withDefaults(); o.Initial != 10 {
		t.Fatalf("Initial below Min: %+v", o)
	}
}
