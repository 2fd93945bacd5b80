package sections_test

import (
	"context"
	"sync"
	"testing"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sections"
)

// One Next over many cold sections raises them all in one Store.Raise (one
// raft entry), not one raise per section in turn.
func TestNextRaisesColdSectionsInOneEntry(t *testing.T) {
	s := newStore(t, seqd.Space{Name: "one", Step: 10, SectionSize: 1})
	a := serving(t, s, sections.Options{})
	keys := make([]uint64, 200)
	for i := range keys {
		keys[i] = uint64(i) * 3 // section = key: 200 distinct sections
	}
	vals, err := a.Next(context.Background(), "one", keys)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.raises.Load(); r != 1 {
		t.Fatalf("%d Store.Raise calls for one Next over 200 cold sections, want 1", r)
	}
	if m := s.marks.Load(); m != 200 {
		t.Fatalf("%d marks, want 200", m)
	}
	for i, k := range keys {
		if vals[i] != 1 {
			t.Fatalf("key %d: got %d, want 1", k, vals[i])
		}
		if m := s.Max("one", k); m < vals[i] {
			t.Fatalf("key %d: value %d above committed max %d", k, vals[i], m)
		}
	}
}

// A key listed several times needs as many values as it is listed; sections
// loaded at their committed max get one raise covering all of them.
func TestNextRaisesColdSectionsOnceForRepeatedKeys(t *testing.T) {
	s := newStore(t, seqd.Space{Name: "one", Step: 1, SectionSize: 2})
	// Sections 0..49 start at a committed max of 1000.
	marks := make([]seqd.Mark, 50)
	for i := range marks {
		marks[i] = seqd.Mark{Space: "one", Section: uint64(i), Max: 1000}
	}
	if err := s.apply(fsm.EncodeRaise(marks)); err != nil {
		t.Fatal(err)
	}
	a := serving(t, s, sections.Options{})
	// Keys 0..99 (two per section); the even ones three times, the odd once.
	var keys []uint64
	for rep := range 3 {
		for k := uint64(0); k < 100; k++ {
			if k%2 == 0 || rep == 0 {
				keys = append(keys, k)
			}
		}
	}
	vals, err := a.Next(context.Background(), "one", keys)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.raises.Load(); r != 1 {
		t.Fatalf("%d Store.Raise calls, want 1", r)
	}
	want := map[uint64]uint64{}
	for i, k := range keys {
		want[k]++
		if vals[i] != 1000+want[k] {
			t.Fatalf("value %d (key %d): got %d, want %d", i, k, vals[i], 1000+want[k])
		}
		if m := s.Max("one", k/2); m < vals[i] {
			t.Fatalf("key %d: value %d above committed max %d", k, vals[i], m)
		}
	}
}

// A call whose keys span sections with a raise already in flight (too small
// for this call) and cold sections returns correct values: the cold ones are
// raised together, the short ones fall back to a raise of their own.
func TestNextOverRaisingAndColdSections(t *testing.T) {
	const step = 4
	s := newStore(t, seqd.Space{Name: "mix", Step: step, SectionSize: 10})
	a := serving(t, s, sections.Options{})
	gate := make(chan struct{})
	s.gateMu.Lock()
	s.gate = gate
	s.gateMu.Unlock()

	// First call: one key in each of sections 0..9; its raise waits at the gate.
	var first []uint64
	for sec := uint64(0); sec < 10; sec++ {
		first = append(first, sec*10)
	}
	// Second call: the same keys (section 0's key 2*step times, more than the
	// in-flight raise covers) plus a key in each of sections 10..19.
	var second []uint64
	for range 2 * step {
		second = append(second, 0)
	}
	for sec := uint64(0); sec < 20; sec++ {
		second = append(second, sec*10, sec*10+1)
	}

	var wg sync.WaitGroup
	var v1, v2 []uint64
	var e1, e2 error
	wg.Add(1)
	go func() {
		defer wg.Done()
		v1, e1 = a.Next(context.Background(), "mix", first)
	}()
	waitFor(t, func() bool { return s.entered.Load() == 1 })
	wg.Add(1)
	go func() {
		defer wg.Done()
		v2, e2 = a.Next(context.Background(), "mix", second)
	}()
	// Sections 10..19 are raised together, queued behind the gated raise.
	waitFor(t, func() bool { return a.RaisesQueued() == 10 })
	close(gate)
	wg.Wait()
	if e1 != nil || e2 != nil {
		t.Fatalf("errors: %v, %v", e1, e2)
	}

	// Per key, the values of both calls are distinct and each call's values
	// increase in call order; every value is committed.
	seen := map[uint64]map[uint64]bool{}
	check := func(keys, vals []uint64) {
		last := map[uint64]uint64{}
		for i, k := range keys {
			v := vals[i]
			if v <= last[k] {
				t.Fatalf("key %d: %d after %d in one call", k, v, last[k])
			}
			last[k] = v
			if seen[k] == nil {
				seen[k] = map[uint64]bool{}
			}
			if seen[k][v] {
				t.Fatalf("key %d: value %d twice", k, v)
			}
			seen[k][v] = true
			if m := s.Max("mix", k/10); v > m {
				t.Fatalf("key %d: value %d above committed max %d", k, v, m)
			}
		}
	}
	check(first, v1)
	check(second, v2)
	// Key 0 is listed once in the first call and 2*step+1 times in the
	// second: whichever took first, it holds the values 1..2*step+2 (no gaps
	// without an eviction or a failover).
	if n := len(seen[0]); n != 2*step+2 {
		t.Fatalf("key 0: %d values, want %d", n, 2*step+2)
	}
	for v := uint64(1); v <= 2*step+2; v++ {
		if !seen[0][v] {
			t.Fatalf("key 0: value %d missing from %v", v, seen[0])
		}
	}
}
