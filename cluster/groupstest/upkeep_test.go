package groupstest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestGroupsUpkeepUnderStepChurnAndMoves attacks the leader's upkeep
// (group/lease.go upkeepBeside): for about 5 s, group 0's serving leader
// changes space "churn"'s step every 50 ms while every group's leadership
// is moved every 400 ms (so that step-downs land while an upkeep is
// between its question to group 0 and its apply), and 12 callers take
// values of the space's keys in every group. Then a last step is set and
// every group's record must reach it within 10 s (an old leader's upkeep
// neither blocks the next one nor lands after it), and the whole history
// has no repeat and no value below one taken by a call that ended before
// the call began.
func TestGroupsUpkeepUnderStepChurnAndMoves(t *testing.T) {
	const groups = 3
	c, cl, ctx := balancedCluster(t, groups, 2*time.Minute)
	if _, err := cl.CreateSpace(ctx, "churn", 10, 10); err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for _, k := range keysOfGroups("churn", 10, groups) {
		keys = append(keys, k, k+1)
	}
	l := startSpaceLoad(t, cl, "churn", keys, 12)

	var changes, moves int
	end := time.Now().Add(5 * time.Second)
	nextMove := time.Now()
	for step := uint64(11); time.Now().Before(end); step++ {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if m := c.ServingLeader(); m != nil && m.Node().UpdateSpace(sctx, "churn", step) == nil {
			changes++
		}
		cancel()
		if time.Now().After(nextMove) {
			for g, m := range c.GroupLeaders() {
				if m != nil && m.Node().Group(g).TransferLeadership("", nil) == nil {
					moves++
				}
			}
			nextMove = time.Now().Add(400 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d step changes, %d leadership moves, %d calls so far", changes, moves, l.OK())

	const final = 5000
	waitUntil(t, 30*time.Second, "the last step set in group 0", func() bool {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m := c.ServingLeader()
		return m != nil && m.Node().UpdateSpace(sctx, "churn", final) == nil
	})
	set := time.Now()
	waitUntil(t, 10*time.Second, "every group's leader's record of the last step", func() bool {
		for g, m := range c.GroupLeaders() {
			if m == nil {
				return false
			}
			if sp, ok := m.Node().Group(g).FSM().Space("churn"); !ok || sp.Step != final {
				return false
			}
		}
		return true
	})
	t.Logf("every group on the last step %v after it was set", time.Since(set).Round(time.Millisecond))
	// The records stay there: no late apply of an old upkeep takes one back.
	time.Sleep(time.Second)
	for _, m := range c.Nodes {
		for g := range groups {
			if sp, ok := m.Node().Group(g).FSM().Space("churn"); !ok || sp.Step != final {
				t.Errorf("%s group %d: record %+v (found %v), want step %d", m.ID, g, sp, ok, final)
			}
		}
	}
	l.Check(t, 500, connect.CodeUnavailable, connect.CodeDeadlineExceeded)
}

// startSpaceLoad is callers taking one value at a time of a key of keys
// in a space through cl, into one history.
func startSpaceLoad(t *testing.T, cl *client.Client, space string, keys []uint64, callers int) *testcluster.NextLoad {
	return testcluster.StartNextLoad(t, keys, callers, 1, 5*time.Second, func(ctx context.Context, _ int, k uint64) (uint64, error) {
		vals, err := cl.Next(ctx, space, k)
		if err != nil {
			return 0, err
		}
		return vals[0], nil
	})
}

// TestGroupsUpkeepDeleteCreateAgainUnderMoves attacks the upkeep with a
// space deleted and created again in quick succession (group 0's serving
// leader, 20 times, 100 ms apart) while every group's leadership moves
// every 400 ms and 12 callers take values of the space's keys in every
// group: the space is not found while deleted, and each time it is
// created again its values continue above every value handed out before
// (no repeat, no reordering in the whole history); at the end every
// group's record has the space live.
func TestGroupsUpkeepDeleteCreateAgainUnderMoves(t *testing.T) {
	if os.Getenv("SEQD_LONG_TESTS") == "" {
		t.Skip("one of the longer fault mixes: SEQD_LONG_TESTS=1 runs it (docs/chaos-testing.md)")
	}
	const groups = 3
	c, cl, ctx := balancedCluster(t, groups, 2*time.Minute)
	sp := seqd.Space{Name: "again", Step: 10, SectionSize: 10}
	if _, err := cl.CreateSpace(ctx, sp.Name, sp.Step, sp.SectionSize); err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for _, k := range keysOfGroups(sp.Name, sp.SectionSize, groups) {
		keys = append(keys, k, k+1)
	}
	l := startSpaceLoad(t, cl, sp.Name, keys, 12)
	onLeader := func(what string, f func(context.Context, *testcluster.Member) error) {
		waitUntil(t, 20*time.Second, what, func() bool {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			m := c.ServingLeader()
			return m != nil && f(sctx, m) == nil
		})
	}
	nextMove := time.Now()
	for range 20 {
		onLeader("the space deleted", func(ctx context.Context, m *testcluster.Member) error { return m.Node().DeleteSpace(ctx, sp.Name) })
		time.Sleep(100 * time.Millisecond)
		onLeader("the space created again", func(ctx context.Context, m *testcluster.Member) error {
			_, err := m.Node().CreateSpace(ctx, sp)
			return err
		})
		time.Sleep(100 * time.Millisecond)
		if time.Now().After(nextMove) {
			for g, m := range c.GroupLeaders() {
				if m != nil {
					_ = m.Node().Group(g).TransferLeadership("", nil)
				}
			}
			nextMove = time.Now().Add(400 * time.Millisecond)
		}
	}
	waitUntil(t, 10*time.Second, "every group's leader's record of the space live", func() bool {
		for g, m := range c.GroupLeaders() {
			if m == nil {
				return false
			}
			if _, ok := m.Node().Group(g).FSM().Space(sp.Name); !ok {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second)
	l.Check(t, 500, connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeNotFound)
}
