package sections_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sections"
)

// TestSetFloor: after SetFloor every value of the keys named, and of the
// other keys of their sections, is above the floor, in memory and in the
// committed mark (so after a failover too); one raise per section, all in
// one Store.Raise; a floor below a key's value changes nothing for it; a
// floor above 2^63-1 is refused.
func TestSetFloor(t *testing.T) {
	s := newStore(t, small) // sections of 100 keys
	a := serving(t, s, sections.Options{})
	ctx := context.Background()
	for range 50 {
		next1(t, a, "small", 7) // key 7 reaches 50
	}
	next1(t, a, "small", 8) // key 8 (in memory) at 51
	before := s.raises.Load()
	if err := a.SetFloor(ctx, "small", []uint64{150, 351, 151, 350}, 1_000_000); err != nil {
		t.Fatal(err)
	}
	floors := 0
	for _, m := range s.lastMarks { // a raise ahead of need may share the entry
		if m.Max == 1_000_000 {
			floors++
		}
	}
	// One Store.Raise raised both (besides, maybe, a raise ahead of need
	// of section 0 that key 8's value started).
	if got := s.raises.Load() - before; got > 2 || floors != 2 {
		t.Fatalf("SetFloor over 2 sections made %d Store.Raise calls, the last %v; want one raising both", got, s.lastMarks)
	}
	// Section 0 is in memory, with a raise ahead of need maybe in flight.
	if err := a.SetFloor(ctx, "small", []uint64{7}, 1_000_000); err != nil {
		t.Fatal(err)
	}
	for _, m := range []uint64{0, 1, 3} {
		if got := s.f.Max("small", m); got != 1_000_000 {
			t.Fatalf("section %d's committed mark %d, want the floor", m, got)
		}
	}
	if got := s.f.Max("small", 2); got >= 1_000_000 {
		t.Fatalf("section 2, not named, was raised to %d", got)
	}
	for _, k := range []uint64{7, 8, 9, 150, 199, 350} {
		if v := next1(t, a, "small", k); v <= 1_000_000 {
			t.Fatalf("key %d: %d after a floor of 1000000", k, v)
		}
	}
	// Below the current value: nothing changes.
	v := next1(t, a, "small", 7)
	if err := a.SetFloor(ctx, "small", []uint64{7}, 10); err != nil {
		t.Fatal(err)
	}
	if w := next1(t, a, "small", 7); w != v+1 {
		t.Fatalf("a floor below the value moved key 7 from %d to %d", v, w)
	}
	// A new leader (a fresh allocator on the same state) continues above.
	b := serving(t, s, sections.Options{})
	if w := next1(t, b, "small", 199); w <= 1_000_000 {
		t.Fatalf("after a failover key 199 got %d", w)
	}
	mark := s.f.Max("small", 0)
	for name, call := range map[string]func() error{
		"a floor above 2^63-1": func() error { return a.SetFloor(ctx, "small", []uint64{1}, seqd.MaxValue+1) },
		"no keys":              func() error { return a.SetFloor(ctx, "small", nil, 5) },
		"a floor more than MaxFloorRise above the mark": func() error {
			return a.SetFloor(ctx, "small", []uint64{1}, mark+seqd.MaxFloorRise+1)
		},
	} {
		if err := call(); !errors.Is(err, seqd.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if got := s.f.Max("small", 0); got != mark {
		t.Fatalf("refused floors moved the mark from %d to %d", mark, got)
	}
	if err := a.SetFloor(ctx, "small", []uint64{1}, mark+seqd.MaxFloorRise); err != nil {
		t.Fatalf("a floor MaxFloorRise above the mark: %v", err)
	}
	if err := a.SetFloor(ctx, "nope", []uint64{1}, 5); !errors.Is(err, seqd.ErrUnknownSpace) {
		t.Fatalf("an unknown space: %v", err)
	}
	c := sections.New(s, sections.Options{}) // no lease
	defer c.Close()
	if err := c.SetFloor(ctx, "small", []uint64{1}, 5); !errors.Is(err, seqd.ErrLeaseNotHeld) {
		t.Fatalf("without the lease: %v", err)
	}
}

// TestSetFloorUnderLoad: values handed out while a floor is set are either
// below it (taken before) or above it, never repeated, and every value
// taken after SetFloor returned is above it.
func TestSetFloorUnderLoad(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[uint64]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, err := a.Next(ctx, "small", []uint64{uint64(g)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[v[0]*8+uint64(g)] {
					t.Errorf("key %d: %d twice", g, v[0])
				}
				seen[v[0]*8+uint64(g)] = true
				mu.Unlock()
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	if err := a.SetFloor(ctx, "small", []uint64{0}, 500_000); err != nil {
		t.Fatal(err)
	}
	for k := range uint64(4) {
		if v := next1(t, a, "small", k); v <= 500_000 {
			t.Fatalf("key %d: %d after SetFloor returned", k, v)
		}
	}
	close(stop)
	wg.Wait()
}

// TestSpaceChanged: a new step applies to the next raises; a deleted space
// is dropped (calls fail as unknown, the keys it held are no longer
// counted), and created again it continues above every value it handed
// out.
func TestSpaceChanged(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	s.f.SetSpaceHook(a.SpaceChanged)
	ctx := context.Background()
	next1(t, a, "small", 1)
	if got := s.f.Max("small", 0); got != 11 {
		t.Fatalf("mark %d after the first value, want 1 + step 10", got)
	}
	if err := s.apply(fsm.EncodeUpdateSpace("small", 1000)); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 11 {
		last = next1(t, a, "small", 1)
	}
	if got := s.f.Max("small", 0); got < 1000 {
		t.Fatalf("mark %d after the step became 1000", got)
	}
	next1(t, a, "small", 2)
	if a.KeysHeld() != 2 {
		t.Fatalf("%d keys held", a.KeysHeld())
	}
	if err := s.apply(fsm.EncodeDeleteSpace("small")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Next(ctx, "small", []uint64{1}); !errors.Is(err, seqd.ErrUnknownSpace) {
		t.Fatalf("Next on a deleted space: %v", err)
	}
	if a.KeysHeld() != 0 || a.KeysInSections() != 0 {
		t.Fatalf("%d keys held (%d in sections) after the space was dropped", a.KeysHeld(), a.KeysInSections())
	}
	if err := s.apply(fsm.EncodeCreateSpace(small)); err != nil {
		t.Fatal(err)
	}
	if v := next1(t, a, "small", 1); v <= last {
		t.Fatalf("created again, key 1 got %d, after %d", v, last)
	}
}

// TestSetFloors: with a floor per key, each section is raised once, to the
// largest floor of its keys.
func TestSetFloors(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	ctx := context.Background()
	if err := a.SetFloors(ctx, "small", []uint64{5, 120, 6, 130}, []uint64{500, 7000, 900, 3000}); err != nil {
		t.Fatal(err)
	}
	if m0, m1 := s.f.Max("small", 0), s.f.Max("small", 1); m0 != 900 || m1 != 7000 {
		t.Fatalf("marks %d and %d, want 900 and 7000 (the largest floor of each section)", m0, m1)
	}
	if v := next1(t, a, "small", 5); v != 901 {
		t.Fatalf("key 5 after floors 500 and 900 in its section: %d, want 901", v)
	}
	for name, call := range map[string]func() error{
		"fewer floors than keys": func() error { return a.SetFloors(ctx, "small", []uint64{1, 2}, []uint64{3}) },
		"a floor above 2^63-1":   func() error { return a.SetFloors(ctx, "small", []uint64{1}, []uint64{seqd.MaxValue + 1}) },
	} {
		if err := call(); !errors.Is(err, seqd.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}
