package group_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
)

// A floor is a budgeted raise of its section's mark: one floor may raise a
// section by at most seqd.MaxFloorRise, and such a floor leaves the section
// the budget its calls need next (Next serves at once above it); a larger
// jump is refused with a clear error and changes nothing.
func TestAFloorKeepsItsSectionServing(t *testing.T) {
	h := &host{}
	h.vouched.Store(true)
	g, addr := open(t, t.TempDir(), h)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "serving", g.Allocator().Serving)
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
