package group_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/group"
)

// A group's record of a space never goes back to a step or a space group 0
// changed since, whichever path's entry commits last. Group 0 and group 1
// run as real raft groups on this server (group 1 reads group 0's state as
// its copy). The sequence, in one term of group 1: its upkeep sees its
// record of s differ from group 0's (a step changed to 100, or s deleted)
// and asks group 0, which answers that; before the answer is applied, the
// operator changes s again in group 0 (step 200, or s created again),
// whose call makes group 1 follow at once (asked and applied). Then the
// upkeep applies what it was answered. Group 1 must still hold the newer
// record: the upkeep's answer is older than the one it followed.
func TestAnUpkeepsOlderAnswerNeverTakesARecordBack(t *testing.T) {
	ctx := context.Background()
	t.Run("a step", func(t *testing.T) {
		olderAnswerLast(t,
			func(g0 *group.Group) error { return g0.UpdateSpace(ctx, "s", 100) },
			func(g0 *group.Group) error { return g0.UpdateSpace(ctx, "s", 200) },
			seqd.Space{Name: "s", Step: 200, SectionSize: 1})
	})
	t.Run("a space created again", func(t *testing.T) {
		olderAnswerLast(t,
			func(g0 *group.Group) error { return g0.DeleteSpace(ctx, "s") },
			func(g0 *group.Group) error {
				_, err := g0.CreateSpace(ctx, seqd.Space{Name: "s", Step: 70, SectionSize: 1})
				return err
			},
			seqd.Space{Name: "s", Step: 70, SectionSize: 1})
	})
}

// olderAnswerLast plays the sequence above: older makes group 0's record
// of s differ from group 1's, so that group 1's upkeep asks about it (its
// answer held until newer was made and followed), and group 1 must hold
// want when the upkeep's next question shows the held answer applied.
func olderAnswerLast(t *testing.T, older, newer func(g0 *group.Group) error, want seqd.Space) {
	ctx := context.Background()
	g0 := bootstrapServingWith(t, t.TempDir(), func(c *group.Config) { c.Groups = 2 })
	for _, sp := range []seqd.Space{{Name: "s", Step: 50, SectionSize: 1}, {Name: "t", Step: 50, SectionSize: 1}} {
		if err := whileNotServing(func() error { _, err := g0.CreateSpace(ctx, sp); return err }); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(name string) (fsm.SpaceRecord, error) {
		rec, _ := g0.FSM().Record(name)
		return rec, nil
	}

	var trap, askedAfter atomic.Bool
	var g1p atomic.Pointer[group.Group]
	var then atomic.Pointer[fsm.SpaceRecord] // group 1's record of s at the first question after the release
	trapped, release := make(chan struct{}), make(chan struct{})
	ask := func(ctx context.Context, name string) (fsm.SpaceRecord, error) {
		if name == "s" && trap.CompareAndSwap(true, false) {
			rec, err := answer(name) // group 0's answer now ...
			close(trapped)
			select { // ... applied only once the test lets it go
			case <-release:
			case <-ctx.Done():
				return fsm.SpaceRecord{}, ctx.Err()
			}
			return rec, err
		}
		select {
		case <-release:
			if askedAfter.CompareAndSwap(false, true) {
				rec, _ := g1p.Load().FSM().Record("s")
				then.Store(&rec)
			}
		default:
		}
		return answer(name)
	}
	g1 := bootstrapServingWith(t, t.TempDir(), func(c *group.Config) {
		c.Index, c.Groups, c.Authority, c.AskSpace = 1, 2, g0.FSM(), ask
	})
	g1p.Store(g1)
	space := func(name string) seqd.Space { rec, _ := g1.FSM().Record(name); return rec.Space }
	waitFor(t, "group 1's copies of s and t", func() bool { return space("s").Step == 50 && space("t").Step == 50 })

	trap.Store(true)
	if err := whileNotServing(func() error { return older(g0) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-trapped: // the upkeep holds group 0's older answer
	case <-time.After(10 * time.Second):
		t.Fatal("group 1's upkeep never asked group 0 about s")
	}
	if err := whileNotServing(func() error { return newer(g0) }); err != nil {
		t.Fatal(err)
	}
	// The call's follow: asked now, applied at once.
	rec, _ := answer("s")
	if err := whileNotServing(func() error { return g1.FollowSpace(ctx, "s", rec) }); err != nil {
		t.Fatal(err)
	}
	if got := space("s"); got != want {
		t.Fatalf("group 1 followed to %+v, want %+v", got, want)
	}
	close(release)
	// The upkeep runs one at a time: its next question (t now differs) is
	// asked only after the held answer was applied; the record is read
	// then, before a later upkeep could mend it.
	if err := whileNotServing(func() error { return g0.UpdateSpace(ctx, "t", 60) }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the next upkeep's question", askedAfter.Load)
	waitFor(t, "group 1 following t", func() bool { return space("t").Step == 60 })
	got := then.Load()
	if got.Space != want {
		t.Fatalf("group 1's record of s went back to %+v after it followed group 0 to %+v", got.Space, want)
	}
	if got.Version == 0 {
		t.Fatalf("group 1's record %+v carries no version: the groups are not on protocol 6", got)
	}
}

// lagging is this server's copy of group 0 as it lags: it lists no space
// (so the upkeep copies nothing), and its record of a space, read by the
// resolver, is what onRecord returns.
type lagging struct {
	group.Authority
	onRecord func(name string) (fsm.SpaceRecord, bool)
}

func (l lagging) Spaces() []seqd.Space { return nil }
func (l lagging) Record(name string) (fsm.SpaceRecord, bool) {
	return l.onRecord(name)
}

// The resolver never creates a group's record from a copy of group 0 that
// lags a deletion the group followed meanwhile: group 1's allocator loads
// space s, which group 1 has no record of, and its resolver reads this
// server's copy of group 0 (s live); before its create commits, group 0
// deletes s and group 1 follows the deletion. The create then changes
// nothing: s stays deleted in group 1, and the call finds no space.
func TestTheResolverNeverCopiesARecordOlderThanOneFollowed(t *testing.T) {
	ctx := context.Background()
	g0 := bootstrapServingWith(t, t.TempDir(), func(c *group.Config) { c.Groups = 2 })
	if _, err := g0.CreateSpace(ctx, seqd.Space{Name: "s", Step: 50, SectionSize: 1}); err != nil {
		t.Fatal(err)
	}
	var g1p atomic.Pointer[group.Group]
	var trap atomic.Bool
	trap.Store(true)
	copyOf := lagging{Authority: g0.FSM(), onRecord: func(name string) (fsm.SpaceRecord, bool) {
		rec, ok := g0.FSM().Record(name)
		if name != "s" || !trap.CompareAndSwap(true, false) {
			return rec, ok
		}
		// The copy read, group 0 deletes s and group 1 follows at once.
		if err := g0.DeleteSpace(ctx, "s"); err != nil {
			t.Error(err)
		}
		deleted, _ := g0.FSM().Record(name)
		if err := g1p.Load().FollowSpace(ctx, name, deleted); err != nil {
			t.Error(err)
		}
		return rec, ok
	}}
	ask := func(_ context.Context, name string) (fsm.SpaceRecord, error) {
		rec, _ := g0.FSM().Record(name)
		return rec, nil
	}
	g1 := bootstrapServingWith(t, t.TempDir(), func(c *group.Config) {
		c.Index, c.Groups, c.Authority, c.AskSpace = 1, 2, copyOf, ask
	})
	g1p.Store(g1)
	waitFor(t, "group 1 on protocol 6", func() bool { return g1.FSM().Protocol() >= fsm.ProtocolVersion })
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := g1.Allocator().Next(cctx, "s", []uint64{1})
	if trap.Load() {
		t.Fatal("the resolver never read the copy")
	}
	rec, _ := g1.FSM().Record("s")
	if rec.Live() || rec.Version == 0 {
		t.Fatalf("group 1 holds %+v after following s's deletion (the call answered %v, %v)", rec, v, err)
	}
	if err == nil {
		t.Fatalf("a call on a space group 1 followed the deletion of answered %v", v)
	}
}

// whileNotServing runs f again while it fails with seqd.ErrNotServing, for
// up to 10 s, as a client retries unavailable: on a loaded machine a
// single server's lease renewal can run late, and the group then refuses
// changes until it holds its lease again (CI saw "leader lease not held").
func whileNotServing(f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if !errors.Is(err, seqd.ErrNotServing) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
