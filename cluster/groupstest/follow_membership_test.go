package groupstest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// A group other than group 0 follows group 0's configuration as its
// leader's copy of group 0 has it, and that copy may lag behind group 0's
// commit. An operator's removal must not be undone by that lag: the leader
// of group 1, whose copy of group 0 still lists a server RemoveNode removed
// from group 0, must not add it back to group 1 after RemoveNode took it
// out (at once: a removal is never held back by the copy); its adds wait
// until its copy is as current as group 0's leader.
func TestAGroupNeverAddsBackAServerRemovedFromGroup0(t *testing.T) {
	c, n4 := joinedFourth(t, 2)
	l0, l1 := leadersApart(t, c, n4)
	// Group 1's leader stops hearing group 0: its copy keeps n4.
	l1.Node().CutGroupTraffic(0, true)
	healed := false
	defer func() {
		if !healed {
			l1.Node().CutGroupTraffic(0, false)
		}
	}()
	cl, err := client.New([]string{l0.APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.RemoveNode(ctx, n4.ID); err != nil {
		t.Fatalf("remove %s: %v", n4.ID, err)
	}
	g1 := l1.Node().Group(1).Raft()
	if !slices.Contains(raftServers(l1.Node().Group(0).Raft()), n4.ID) {
		t.Fatalf("%s's copy of group 0 lost %s although its traffic is cut", l1.ID, n4.ID)
	}
	// Once group 1 no longer lists n4, it never lists it again: watched
	// over three of the leader's membership passes (one a second).
	watch := func(d time.Duration) {
		t.Helper()
		gone := false
		for until := time.Now().Add(d); time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
			in := slices.Contains(raftServers(g1), n4.ID)
			if gone && in {
				t.Fatalf("group 1's leader %s added back %s, removed by its operator (group 1: %v)", l1.ID, n4.ID, raftServers(g1))
			}
			gone = gone || !in
		}
	}
	watch(3 * time.Second)
	l1.Node().CutGroupTraffic(0, false)
	healed = true
	waitUntil(t, 60*time.Second, "group 1 drops "+n4.ID+" once its leader's copy of group 0 caught up", func() bool {
		return !slices.Contains(raftServers(g1), n4.ID)
	})
	watch(2 * time.Second)
}

// The group's next leader, whose copy of group 0 lags behind the removal,
// must not add the removed server back either.
func TestAGroupsNextLeaderNeverAddsBackAServerRemovedFromGroup0(t *testing.T) {
	c, n4 := joinedFourth(t, 2)
	l0, l1 := leadersApart(t, c, n4)
	var x *testcluster.Member
	for _, m := range c.Nodes {
		if m != l0 && m != l1 && m != n4 {
			x = m
		}
	}
	// x stops hearing group 0: its copy keeps n4.
	x.Node().CutGroupTraffic(0, true)
	defer x.Node().CutGroupTraffic(0, false)
	cl, err := client.New([]string{l0.APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.RemoveNode(ctx, n4.ID); err != nil {
		t.Fatalf("remove %s: %v", n4.ID, err)
	}
	waitUntil(t, 10*time.Second, x.ID+"'s copy of group 1 drops "+n4.ID, func() bool {
		return !slices.Contains(raftServers(x.Node().Group(1).Raft()), n4.ID)
	})
	if err := l1.Node().Group(1).TransferLeadership(x.ID, errors.New("unknown")); err != nil {
		t.Fatalf("handing group 1 to %s: %v", x.ID, err)
	}
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
		for _, m := range c.Nodes {
			if m != n4 && slices.Contains(raftServers(m.Node().Group(1).Raft()), n4.ID) {
				t.Fatalf("group 1 lists %s again on %s (leader %s, whose copy of group 0 lags)", n4.ID, m.ID, x.ID)
			}
		}
	}
}

// leadersApart waits until groups 0 and 1 have serving leaders that differ,
// neither of them n4, and returns them.
func leadersApart(t *testing.T, c *testcluster.Cluster, n4 *testcluster.Member) (l0, l1 *testcluster.Member) {
	t.Helper()
	waitUntil(t, 60*time.Second, "group 1 led by neither group 0's leader nor "+n4.ID, func() bool {
		l0, l1 = servingLeader(t, c, 0), servingLeader(t, c, 1)
		return l0 != l1 && l1 != n4 && l0 != n4
	})
	return l0, l1
}
