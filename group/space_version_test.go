package group_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/group"
)

// A group's record of a space never goes back to a step group 0 changed
// since, whichever path's entry commits last. Group 0 and group 1 run as
// real raft groups on this server (group 1 reads group 0's state as its
// copy). The sequence, in one term of group 1: its upkeep sees its record
// of s (step 50) differ from group 0's (100) and asks group 0, which
// answers 100; before that answer is applied, the operator sets s's step
// to 200 in group 0, whose call makes group 1 follow at once (asked: 200,
// applied: 200). Then the upkeep applies what it was answered. Group 1
// must still hold 200: the upkeep's answer is older than the one it
// followed.
func TestAnUpkeepsOlderAnswerNeverTakesARecordBack(t *testing.T) {
	ctx := context.Background()
	g0 := bootstrapServingWith(t, t.TempDir(), func(c *group.Config) { c.Groups = 2 })
	for _, sp := range []seqd.Space{{Name: "s", Step: 50, SectionSize: 1}, {Name: "t", Step: 50, SectionSize: 1}} {
		if _, err := g0.CreateSpace(ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(name string) (fsm.SpaceRecord, error) {
		rec, _ := g0.FSM().Record(name)
		return rec, nil
	}

	var trap, askedAfter atomic.Bool
	var g1p atomic.Pointer[group.Group]
	var stepThen atomic.Uint64 // group 1's step of s at the first question after the release
	trapped, release := make(chan struct{}), make(chan struct{})
	ask := func(ctx context.Context, name string) (fsm.SpaceRecord, error) {
		if name == "s" && trap.CompareAndSwap(true, false) {
			rec, err := answer(name) // group 0's answer now
			close(trapped)
			select { // ... applied only once the test let it go
			case <-release:
			case <-ctx.Done():
				return fsm.SpaceRecord{}, ctx.Err()
			}
			return rec, err
		}
		select {
		case <-release:
			if askedAfter.CompareAndSwap(false, true) {
				sp, _ := g1p.Load().FSM().Space("s")
				stepThen.Store(sp.Step)
			}
		default:
		}
		return answer(name)
	}
	g1 := bootstrapServingWith(t, t.TempDir(), func(c *group.Config) {
		c.Index, c.Groups, c.Authority, c.AskSpace = 1, 2, g0.FSM(), ask
	})
	g1p.Store(g1)
	step := func(name string) uint64 { sp, _ := g1.FSM().Space(name); return sp.Step }
	waitFor(t, "group 1's copies of s and t", func() bool { return step("s") == 50 && step("t") == 50 })

	trap.Store(true)
	if err := g0.UpdateSpace(ctx, "s", 100); err != nil {
		t.Fatal(err)
	}
	select {
	case <-trapped: // the upkeep holds group 0's answer: step 100
	case <-time.After(10 * time.Second):
		t.Fatal("group 1's upkeep never asked group 0 about s")
	}
	if err := g0.UpdateSpace(ctx, "s", 200); err != nil {
		t.Fatal(err)
	}
	// The call's follow: asked now, applied at once.
	rec, _ := answer("s")
	if err := g1.FollowSpace(ctx, "s", rec); err != nil {
		t.Fatal(err)
	}
	if got := step("s"); got != 200 {
		t.Fatalf("group 1 followed to step %d, want 200", got)
	}
	close(release)
	// The upkeep runs one at a time: its next question (t now differs) is
	// asked only after the held answer was applied; the record is read
	// then, before a later upkeep could mend it.
	if err := g0.UpdateSpace(ctx, "t", 60); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the next upkeep's question", askedAfter.Load)
	waitFor(t, "group 1 following t", func() bool { return step("t") == 60 })
	if got := stepThen.Load(); got != 200 {
		t.Fatalf("group 1's record of s went back to step %d after it followed group 0 to 200", got)
	}
	if rec, _ := g1.FSM().Record("s"); rec.Version == 0 {
		t.Fatalf("group 1's record %+v carries no version: the groups are not on protocol 6", rec)
	}
}
