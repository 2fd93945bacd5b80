package cluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestAPassOnAnOlderConfigurationNeverAddsBackARemovedServer: a leader's
// membership pass decides on the configuration it read when it began, and
// asks servers questions (up to a second each) before it changes it. A
// server an operator removed meanwhile must stay removed: the pass's
// promotion (or address update) of it, decided on the older read, must not
// add it back, as a voter, without the question every added server is
// asked and although it was removed.
func TestAPassOnAnOlderConfigurationNeverAddsBackARemovedServer(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	d := c.Join()
	g0 := leader.Node().Group(0)
	var read raft.Configuration
	deadline := time.Now().Add(failoverWait)
	for {
		cf := g0.Raft().GetConfiguration()
		if cf.Error() == nil {
			found := false
			for _, s := range cf.Configuration().Servers {
				if string(s.ID) == d.ID && s.Suffrage == raft.Nonvoter {
					found = true
				}
			}
			if found {
				read = cf.Configuration()
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not added as a non-voter", d.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Once its gossip says it holds state, the leader's own passes refuse
	// to add it back after its removal (TestRemovedNodeComingBackIsRefused).
	for !hasState(leader, d.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never said it holds state", d.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cl, err := client.New([]string{leader.APIAddr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveNode(context.Background(), d.ID); err != nil {
		t.Fatal(err)
	}
	// The pass goes on with what it read, for longer than a non-voter
	// must keep up before its promotion (promoteStable).
	until := time.Now().Add(6 * time.Second)
	for time.Now().Before(until) {
		if !g0.IsLeader() {
			t.Fatal("the leader lost leadership")
		}
		leader.Node().MembershipOn(read)
		if _, in := config(t, c)[d.ID]; in {
			t.Fatalf("the removed server %s was added back (voter: %v) by a pass on the configuration read before its removal", d.ID, config(t, c)[d.ID])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hasState reports whether m sees server id alive in gossip, holding state.
func hasState(m *testcluster.Member, id string) bool {
	for _, x := range m.Node().Members() {
		if x.ID == id {
			return x.Alive && x.HasState
		}
	}
	return false
}

// ids lists the servers of r's latest configuration as r holds it.
func ids(r *raft.Raft) map[string]raft.ServerSuffrage {
	out := map[string]raft.ServerSuffrage{}
	if cf := r.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			out[string(s.ID)] = s.Suffrage
		}
	}
	return out
}

// TestAGroupPassOnAnOlderReadOfGroup0NeverAddsBackARemovedServer: a group
// other than group 0 follows group 0's configuration as the reconcile pass
// read it when it began, and the pass asks servers questions (up to a
// second each) before it gets to the group. A server its operator removed
// from every group meanwhile must stay removed: the group's pass, on the
// read that still lists it, must not add it back.
func TestAGroupPassOnAnOlderReadOfGroup0NeverAddsBackARemovedServer(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Groups: 2})
	c.WaitServingLeader(failoverWait)
	d := c.Join()
	var l1 *testcluster.Member
	deadline := time.Now().Add(failoverWait)
	for {
		// d is a voter in both groups on every copy (no promotion pending)
		// and group 1's leader is not d.
		all := true
		for _, m := range c.Nodes {
			for g := range 2 {
				all = all && ids(m.Node().Group(g).Raft())[d.ID] == raft.Voter
			}
		}
		// Led by its preferred leader (voters sorted, index 1), which the
		// balancer leaves in place.
		l1 = nil
		for _, m := range c.Nodes {
			g := m.Node().Group(1)
			var voters []string
			for id, s := range ids(g.Raft()) {
				if s == raft.Voter {
					voters = append(voters, id)
				}
			}
			slices.Sort(voters)
			if m != d && g.IsLeader() && g.Allocator().Serving() && len(voters) == 4 && voters[1] == m.ID {
				l1 = m
			}
		}
		if all && l1 != nil && hasState(l1, d.ID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not a voter of both groups, on every copy, with a serving leader of group 1 other than it", d.ID)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cf := l1.Node().Group(0).Raft().GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	read := cf.Configuration()
	cl, err := client.New([]string{c.WaitServingLeader(failoverWait).APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveNode(context.Background(), d.ID); err != nil {
		t.Fatal(err)
	}
	g1 := l1.Node().Group(1)
	if _, in := ids(g1.Raft())[d.ID]; in {
		t.Fatalf("RemoveNode(%s) returned while group 1 still lists it", d.ID)
	}
	// Group 1's passes go on with what they read.
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		if !g1.IsLeader() {
			t.Fatalf("%s lost group 1's leadership", l1.ID)
		}
		l1.Node().MirrorOn(1, read)
		if s, in := ids(g1.Raft())[d.ID]; in {
			t.Fatalf("the removed server %s was added back to group 1 (%v) by a pass on group 0's configuration read before its removal", d.ID, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
