package group_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/group"
)

// A floor is a budgeted raise of its section's mark: one floor may raise a
// section by at most seqd.MaxFloorRise, and such a floor leaves the section
// the budget its calls need next (Next serves at once above it); a larger
// jump is refused with a clear error and changes nothing.
func TestAFloorKeepsItsSectionServing(t *testing.T) {
	g := bootstrapServing(t, t.TempDir())
	ctx := context.Background()
	if _, err := g.CreateSpace(ctx, seqd.Space{Name: "m", Step: 1000, SectionSize: 10}); err != nil {
		t.Fatal(err)
	}
	a := g.Allocator()
	for round := range uint64(3) { // a section each round: 0, 10, 20
		k := 10 * round
		if round == 2 {
			if _, err := a.Next(ctx, "m", []uint64{k}); err != nil { // a section with a mark
				t.Fatal(err)
			}
		}
		floor := g.FSM().Max("m", round) + seqd.MaxFloorRise
		if err := a.SetFloor(ctx, "m", []uint64{k}, floor); err != nil {
			t.Fatalf("round %d: a floor %d above the mark: %v", round, uint64(seqd.MaxFloorRise), err)
		}
		// The section's own raises go on at once.
		for i := range 3 {
			v, err := a.Next(ctx, "m", []uint64{k + uint64(i)})
			if err != nil {
				t.Fatalf("round %d: Next after a floor: %v", round, err)
			}
			if v[0] <= floor {
				t.Fatalf("round %d: Next = %d, not above the floor %d", round, v[0], floor)
			}
		}
		mark := g.FSM().Max("m", round)
		err := a.SetFloor(ctx, "m", []uint64{k + 5}, mark+seqd.MaxFloorRise+1)
		if !errors.Is(err, seqd.ErrInvalidArgument) {
			t.Fatalf("round %d: a floor more than MaxFloorRise above the mark: %v", round, err)
		}
		if got := g.FSM().Max("m", round); got != mark {
			t.Fatalf("round %d: a refused floor moved the mark from %d to %d", round, mark, got)
		}
	}
}

// Current never shows a floor whose raise did not commit (C3: Current is
// below every value of a Next that begins after it completes).
//
// The sequence: floors of seqd.MaxFloorRise each, back to back, on one
// section, until the raise budget refuses one (every floor passes the
// allocator's own MaxFloorRise check; the budget allows about three in a
// row). The refused floor's call fails, but the allocator already set the
// section's in-memory floor to it, and Current reads it. The group then
// restarts (a full-cluster restart, or any failover) and its new leader
// loads the section at the committed mark, below that floor: the first
// Next returns less than the Current that completed before it.
func TestCurrentNeverShowsAFloorThatDidNotCommit(t *testing.T) {
	dir := t.TempDir()
	g := bootstrapServing(t, dir)
	ctx := context.Background()
	if _, err := g.CreateSpace(ctx, seqd.Space{Name: "m", Step: 1000, SectionSize: 10}); err != nil {
		t.Fatal(err)
	}
	a := g.Allocator()
	const key = 3
	if _, err := a.Next(ctx, "m", []uint64{key}); err != nil {
		t.Fatal(err)
	}
	var refused uint64
	for i := 0; i < 10 && refused == 0; i++ {
		floor := g.FSM().Max("m", 0) + seqd.MaxFloorRise
		err := a.SetFloor(ctx, "m", []uint64{key}, floor)
		switch {
		case err == nil:
		case errors.Is(err, seqd.ErrInvalidArgument):
			t.Fatalf("floor %d of %d: refused as bad input: %v", i, floor, err)
		default:
			t.Logf("floor %d to %d refused: %v", i, floor, err)
			refused = floor
		}
	}
	if refused == 0 {
		t.Fatal("ten floors of MaxFloorRise back to back all passed the raise budget")
	}
	mark := g.FSM().Max("m", 0)
	cur, err := a.Current(ctx, "m", []uint64{key})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("committed mark %d, Current %d after the refused floor %d", mark, cur[0], refused)
	g2 := restartServing(t, g, dir)
	// The section's budget is spent for some seconds: Next is refused until
	// time catches up (a client retries).
	var v []uint64
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if v, err = g2.Allocator().Next(ctx, "m", []uint64{key}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Next after a restart: %v", err)
		}
	}
	if v[0] <= cur[0] {
		t.Fatalf("Next after a restart = %d, not above Current = %d that completed before it (the refused floor %d; committed mark %d)", v[0], cur[0], refused, mark)
	}
}

// bootstrapServing opens a group of one server in dir, vouched for,
// bootstraps it and waits until it serves.
func bootstrapServing(t *testing.T, dir string) *group.Group {
	t.Helper()
	return bootstrapServingWith(t, dir, nil)
}

// bootstrapServingWith is bootstrapServing with the config changed by
// change.
func bootstrapServingWith(t *testing.T, dir string, change func(*group.Config)) *group.Group {
	t.Helper()
	h := &host{}
	h.vouched.Store(true)
	g, addr := openWith(t, dir, h, change)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "serving", g.Allocator().Serving)
	return g
}

// A section whose raise budget is spent refuses calls that need a raise
// as unavailable (seqd.ErrNotServing, which clients retry within their
// deadline; DESIGN.md §5), for a floor and for a Reserve alike, and serves
// them again once time has caught up with the budget: a budget refusal is
// a wait, never bad input and never a final answer.
func TestASectionOutOfBudgetIsRetriedUntilTimeCatchesUp(t *testing.T) {
	g := bootstrapServing(t, t.TempDir())
	ctx := context.Background()
	if _, err := g.CreateSpace(ctx, seqd.Space{Name: "m", Step: 1000, SectionSize: 10}); err != nil {
		t.Fatal(err)
	}
	a := g.Allocator()
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		err = a.SetFloor(ctx, "m", []uint64{1}, g.FSM().Max("m", 0)+seqd.MaxFloorRise)
	}
	if !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("a floor beyond the section's budget: %v, want seqd.ErrNotServing (retried)", err)
	}
	mark := g.FSM().Max("m", 0)
	_, err = a.Reserve(ctx, "m", 2, 1_000_000) // past the committed mark: needs a raise
	if !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("a Reserve on a section out of budget: %v, want seqd.ErrNotServing (retried)", err)
	}
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v, err := a.Reserve(ctx, "m", 2, 1_000_000)
		if err == nil {
			if v <= mark {
				t.Fatalf("Reserve once the budget caught up = %d, not above the mark %d", v, mark)
			}
			return
		}
		if !errors.Is(err, seqd.ErrNotServing) || time.Now().After(deadline) {
			t.Fatalf("Reserve while the budget catches up: %v", err)
		}
	}
}

// A space at the largest step a space may have (seqd.MaxStep, which
// UpdateSpace accepts) serves again within seconds of a failover, as any
// space does (DESIGN.md §4: the unavailability window after a failover is
// about a lease).
//
// The sequence: a space of step 2^40; one Next (its section's mark rises by
// 2^40, which costs the raise budget about 268 s, far more than the 20 s
// of window the budget lends); a restart (a full-cluster restart, or any
// failover). The new leader loads the section at its mark and must raise
// it by a step before it hands out anything, and the budget refuses that
// raise for about four minutes.
func TestTheLargestStepServesSoonAfterAFailover(t *testing.T) {
	dir := t.TempDir()
	g := bootstrapServing(t, dir)
	ctx := context.Background()
	if _, err := g.CreateSpace(ctx, seqd.Space{Name: "big", Step: seqd.MaxStep, SectionSize: 10}); err != nil {
		t.Fatal(err)
	}
	v, err := g.Allocator().Next(ctx, "big", []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	g2 := restartServing(t, g, dir)
	start := time.Now()
	for {
		w, err := g2.Allocator().Next(ctx, "big", []uint64{1})
		if err == nil {
			if w[0] <= v[0] {
				t.Fatalf("Next after the restart = %d, not above %d", w[0], v[0])
			}
			return
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the space of step 2^40 still refuses Next %v after the new leader began serving: %v", time.Since(start).Round(time.Second), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restartServing closes g, opens its data directory dir again, and waits
// until the group serves: a full restart, the new leader loading every
// section at its committed mark.
func restartServing(t *testing.T, g *group.Group, dir string) *group.Group {
	t.Helper()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	h := &host{}
	h.vouched.Store(true)
	g2, _ := open(t, dir, h)
	waitFor(t, "serving after reopen", g2.Allocator().Serving)
	return g2
}
