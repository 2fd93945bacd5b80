package cluster_test

import (
	"context"
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
