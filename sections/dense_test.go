package sections_test

import (
	"context"
	"testing"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sections"
)

// A section of an unbounded allocator moves its keys from a map to an
// array once a quarter of its keys are held: every key keeps its value
// across the move and after it, keys not held continue from the section's
// floor, KeysHeld counts each key once (and none once the space is
// deleted), and a floor raises held and unheld keys alike.
func TestKeysKeepTheirValuesWhenTheirSectionTurnsDense(t *testing.T) {
	const size = 64 // a map up to 16 keys, then an array
	s := newStore(t, seqd.Space{Name: "d", Step: 1000, SectionSize: size})
	a := serving(t, s, sections.Options{})
	s.f.SetSpaceHook(a.SpaceChanged)
	ctx := context.Background()
	want := map[uint64]uint64{}
	next := func(keys ...uint64) {
		t.Helper()
		vals, err := a.Next(ctx, "d", keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			want[k]++
			if vals[i] != want[k] {
				t.Fatalf("key %d: value %d, want %d (held keys %d)", k, vals[i], want[k], a.KeysHeld())
			}
		}
	}
	// Keys of section 1 (64..127) in an order that crosses the move
	// mid-call, each taken once or more, some twice in one call.
	for round := range uint64(3) {
		var keys []uint64
		for i := range uint64(40) {
			k := size + (i*37)%size
			keys = append(keys, k)
			if i%7 == round {
				keys = append(keys, k)
			}
		}
		next(keys...)
	}
	if got := a.KeysHeld(); got != int64(len(want)) {
		t.Fatalf("KeysHeld %d, want %d", got, len(want))
	}
	all := make([]uint64, size)
	for i := range all {
		all[i] = size + uint64(i)
	}
	cur, err := a.Current(ctx, "d", all)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range all {
		if cur[i] != want[k] {
			t.Fatalf("Current of key %d: %d, want %d", k, cur[i], want[k])
		}
	}
	next(all...) // held and unheld keys after the move
	if got := a.KeysHeld(); got != size {
		t.Fatalf("KeysHeld %d, want %d", got, size)
	}
	// A floor above every key raises them all.
	const floor = 500
	if err := a.SetFloors(ctx, "d", []uint64{size + 5}, []uint64{floor}); err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		want[k] = floor
	}
	next(all...)
	// Deleted, the space's keys are no longer counted.
	if err := s.apply(fsm.EncodeDeleteSpace("d")); err != nil {
		t.Fatal(err)
	}
	if got := a.KeysHeld(); got != 0 {
		t.Fatalf("KeysHeld %d after the space was deleted, want 0", got)
	}
}
