package sections_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sections"
)

// findingStore is a Store whose spaces lag: elsewhere holds spaces it
// does not have yet, which FindSpace copies in (as a raft group other than
// group 0 does), or fails with err.
type findingStore struct {
	*fsmStore
	elsewhere map[string]seqd.Space
	finds     atomic.Int64
	err       error
}

func (s *findingStore) FindSpace(_ context.Context, name string) error {
	s.finds.Add(1)
	if s.err != nil {
		return s.err
	}
	if _, ok := s.fsmStore.Space(name); ok {
		return nil
	}
	if sp, ok := s.elsewhere[name]; ok {
		return s.apply(fsm.EncodeCreateSpace(sp))
	}
	return nil
}

// TestSpaceFinderFirstCall: a call for a space the Store lags serves on its
// first call (every kind of call finds it before loading); a loaded space
// is not looked for again; a space found nowhere is unknown; a failure to
// find out is the call's error.
func TestSpaceFinderFirstCall(t *testing.T) {
	ctx := context.Background()
	s := &findingStore{fsmStore: newStore(t), elsewhere: map[string]seqd.Space{
		"a": {Name: "a", Step: 10, SectionSize: 100}, "b": {Name: "b", Step: 10, SectionSize: 100},
		"c": {Name: "c", Step: 10, SectionSize: 100}, "d": {Name: "d", Step: 10, SectionSize: 100},
	}}
	a := serving(t, s, sections.Options{})
	if v, err := a.Next(ctx, "a", []uint64{1}); err != nil || v[0] != 1 {
		t.Fatalf("Next on a lagging space: %v %v", v, err)
	}
	if v, err := a.Current(ctx, "b", []uint64{1}); err != nil || v[0] != 0 {
		t.Fatalf("Current on a lagging space: %v %v", v, err)
	}
	if v, err := a.Reserve(ctx, "c", 1, 5); err != nil || v != 1 {
		t.Fatalf("Reserve on a lagging space: %v %v", v, err)
	}
	if err := a.SetFloor(ctx, "d", []uint64{1}, 50); err != nil {
		t.Fatalf("SetFloor on a lagging space: %v", err)
	}
	before := s.finds.Load()
	if _, err := a.Next(ctx, "a", []uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if got := s.finds.Load(); got != before {
		t.Fatalf("a loaded space was looked for again (%d finds, then %d)", before, got)
	}
	if _, err := a.Next(ctx, "nowhere", []uint64{1}); !errors.Is(err, seqd.ErrUnknownSpace) {
		t.Fatalf("Next on a space found nowhere: %v, want unknown space", err)
	}
	s.err = seqd.ErrNoLeader
	if _, err := a.Next(ctx, "nowhere", []uint64{1}); !errors.Is(err, seqd.ErrNoLeader) {
		t.Fatalf("Next when finding out failed: %v, want that failure", err)
	}
}

// TestSpaceFinderNotAskedWithoutLease: an allocator that does not hold the
// lease asks its Store nothing: the call fails on the lease.
func TestSpaceFinderNotAskedWithoutLease(t *testing.T) {
	s := &findingStore{fsmStore: newStore(t), elsewhere: map[string]seqd.Space{"a": {Name: "a", Step: 10, SectionSize: 100}}}
	a := sections.New(s, sections.Options{})
	t.Cleanup(a.Close)
	if _, err := a.Next(context.Background(), "a", []uint64{1}); !errors.Is(err, seqd.ErrLeaseNotHeld) {
		t.Fatalf("Next without the lease: %v, want lease not held", err)
	}
	if n := s.finds.Load(); n != 0 {
		t.Fatalf("the Store was asked %d times without the lease", n)
	}
}
