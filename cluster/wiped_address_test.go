package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// A voter wiped and started again under its ID on another raft address:
// the leader updates the address it holds (the server is in the
// configuration, so no question is asked), but the server, with no state,
// still takes no part in raft (no vote, no entries) and the leader keeps
// its term.
func TestAWipedVoterOnANewAddressTakesNoPartInRaft(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	deadline := time.Now().Add(failoverWait)
	for _, m := range c.Nodes {
		for seen, _ := leader.Node().ServerSeen(m.ID); !seen; seen, _ = leader.Node().ServerSeen(m.ID) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never recorded as holding state", m.ID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var victim *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			victim = m
			break
		}
	}
	victim.Kill()
	victim.Wipe()
	old := victim.RaftAddr
	victim.RaftAddr = ""
	victim.Restart()
	if victim.RaftAddr == old {
		t.Fatalf("restarted on the same raft address %s", old)
	}
	term := leader.Node().Status().Term
	cl, err := client.New([]string{leader.APIAddr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	for until := time.Now().Add(6 * time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
		st := victim.Node().Status()
		if st.RaftOpen || st.AppliedIndex != 0 || st.InConfiguration {
			t.Fatalf("wiped node took part in raft: %+v", st)
		}
		if lt := leader.Node().Status().Term; lt != term {
			t.Fatalf("leader term changed %d → %d", term, lt)
		}
		if _, err := cl.Next(context.Background(), "default", 3); err != nil {
			t.Fatal(err)
		}
		conf, err := leader.Node().Configuration()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range conf {
			if s.ID == victim.ID && s.RaftAddr == victim.RaftAddr {
				moved = true
			}
		}
	}
	t.Logf("leader moved the wiped voter's address: %v", moved)
}
