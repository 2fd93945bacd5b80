package cluster_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// config returns the leader's configuration as id → voter.
func config(t *testing.T, c *testcluster.Cluster) map[string]bool {
	t.Helper()
	l := c.WaitServingLeader(failoverWait)
	conf, err := l.Node().Configuration()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range conf {
		out[s.ID] = s.Voter
	}
	return out
}

// TestGrowThreeToFiveAndShrinkUnderLoad adds two servers to a 3-node cluster
// under load (they join as non-voters and are promoted once caught up), then
// removes two, and checks every value for C1-C3.
func TestGrowThreeToFiveAndShrinkUnderLoad(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSpace(context.Background(), "grow", 20, 4); err != nil {
		t.Fatal(err)
	}
	w := testcluster.StartWorkload(t, "grow", 12, c.APIAddrs(), 3)
	w.WaitOK(t, 200, failoverWait)

	c.Join()
	c.Join()
	c.WaitVoters(5, failoverWait)
	w.WaitOK(t, 200, failoverWait)

	// Shrink: remove the two newest (through any node's API), one of which
	// may be the leader by now.
	for _, m := range c.Nodes[3:] {
		if err := cl.RemoveNode(context.Background(), m.ID); err != nil {
			t.Fatalf("removing %s: %v", m.ID, err)
		}
		m.Kill()
		w.WaitOK(t, 100, failoverWait)
	}
	c.WaitVoters(3, failoverWait)
	conf := config(t, c)
	if len(conf) != 3 || !conf["n1"] || !conf["n2"] || !conf["n3"] {
		t.Fatalf("configuration after shrink: %v", conf)
	}
	w.WaitOK(t, 100, failoverWait)
	w.Stop()
	w.Check(t)
}

// TestRemovedNodeComingBackIsRefused removes a server while it is down; when
// it comes back with its old data it is not added again, and it does not
// disturb the leader (no new term, the leader keeps serving).
func TestRemovedNodeComingBackIsRefused(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	var gone *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			gone = m
			break
		}
	}
	gone.Kill()
	cl, err := client.New([]string{leader.APIAddr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.RemoveNode(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveNode(ctx, gone.ID); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("removing it twice: %v, want not_found", err)
	}
	term := leader.Node().Status().Term
	gone.Restart()
	// Watch for a while: a bounded observation of a property that must hold
	// throughout, not a wait for a condition. (The lease may lapse for a
	// moment on a loaded machine; leadership and term must not change.)
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		if st := leader.Node().Status(); st.Term != term || st.State != "Leader" {
			t.Fatalf("the removed node disturbed the leader: term %d → %d, state %s", term, st.Term, st.State)
		}
		if _, in := config(t, c)[gone.ID]; in {
			t.Fatalf("the removed node %s was added back", gone.ID)
		}
		if _, err := cl.Next(ctx, "default", 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDeadServerCleanupRespectsMinVoters runs five servers with a short
// dead-server grace and min voters 3: killing two servers removes both (one at
// a time); killing a third removes nothing, as that would leave two voters.
func TestDeadServerCleanupRespectsMinVoters(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{MinVoters: 3, DeadServerGrace: time.Second})
	c.WaitServingLeader(failoverWait)
	c.Join()
	c.Join()
	c.WaitVoters(5, failoverWait)

	leader := c.WaitServingLeader(failoverWait)
	var victims []*testcluster.Member
	for _, m := range c.Nodes {
		if m != leader && len(victims) < 3 {
			victims = append(victims, m)
		}
	}
	victims[0].Kill()
	victims[1].Kill()
	c.WaitVoters(3, failoverWait)

	victims[2].Kill()
	// The cleanup would now take voters below 3: it must keep the dead
	// server. Observe for several grace periods.
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		if conf := config(t, c); len(conf) != 3 {
			t.Fatalf("configuration dropped below min voters: %v", conf)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The two survivors still form a quorum and serve.
	cl, _ := client.New(c.APIAddrs(), client.Options{})
	if _, err := cl.Next(context.Background(), "default", 1); err != nil {
		t.Fatal(err)
	}
}

// TestRollingRestartWithoutClientFailures restarts every node of a 3-node
// cluster gracefully, one after another, under load: clients using package
// client see no failed call (their retries cover the handovers), and every
// value is checked for C1-C3.
func TestRollingRestartWithoutClientFailures(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	w := testcluster.StartSmartWorkload(t, "default", 8, c.APIAddrs(), 4)
	w.WaitOK(t, 200, failoverWait)
	for _, m := range c.Nodes {
		if err := m.Shutdown(); err != nil {
			t.Fatalf("shutdown %s: %v", m.ID, err)
		}
		w.WaitOK(t, 100, failoverWait)
		m.Restart()
		c.WaitAdmitted(m, failoverWait)
		c.WaitVoters(3, failoverWait)
		w.WaitOK(t, 100, failoverWait)
	}
	w.Stop()
	if f := w.Failed(); f != 0 {
		t.Errorf("%d client calls failed during the rolling restart", f)
	}
	w.Check(t)
}

// TestWipedNodeRefusesUntilRemovedAndReadded wipes a voter's data directory
// and restarts it with the same ID: it refuses raft traffic (no vote, no
// entries) and does not disturb the leader; once an operator removes it, it
// joins as a new server and is promoted to voter again.
func TestWipedNodeRefusesUntilRemovedAndReadded(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	// Wait until the leader has recorded every server holding state.
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
	victim.Restart()
	term := leader.Node().Status().Term
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		st := victim.Node().Status()
		if st.RaftOpen || st.AppliedIndex != 0 || st.InConfiguration {
			t.Fatalf("wiped node took part in raft: %+v", st)
		}
		if lt := leader.Node().Status().Term; lt != term {
			t.Fatalf("leader term changed %d → %d", term, lt)
		}
		if _, err := cl.Next(ctx, "default", 3); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cl.RemoveNode(ctx, victim.ID); err != nil {
		t.Fatal(err)
	}
	c.WaitVoters(3, failoverWait)
	// The victim learns of its promotion through replication.
	deadline = time.Now().Add(failoverWait)
	for !victim.Node().Status().Voter {
		if time.Now().After(deadline) {
			t.Fatalf("%s not a voter again", victim.ID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplaceDeadNodeWithNewIDOnSameAddress: a dead server's machine is
// replaced by one with a new ID on the same addresses. After the operator
// removes the old ID, the new server joins and becomes a voter.
func TestReplaceDeadNodeWithNewIDOnSameAddress(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	var dead *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			dead = m
			break
		}
	}
	dead.Kill()
	cl, err := client.New([]string{leader.APIAddr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := cl.Next(ctx, "default", 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveNode(ctx, dead.ID); err != nil {
		t.Fatal(err)
	}
	c.Replace(dead, "n9")
	c.WaitVoters(3, failoverWait)
	if conf := config(t, c); !conf["n9"] || len(conf) != 3 {
		t.Fatalf("configuration after replacement: %v", conf)
	}
	after, err := cl.Next(ctx, "default", 9)
	if err != nil {
		t.Fatal(err)
	}
	if after[0] <= before[0] {
		t.Fatalf("%d after %d", after[0], before[0])
	}
}

// TestOlderCopyOfDataRefused restarts a server on an older copy of its own
// data directory: its log ends below what the cluster recorded for it, so it
// refuses raft traffic (it may have voted or acknowledged entries it no
// longer has) until it is removed, wiped and started again.
func TestOlderCopyOfDataRefused(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	var victim *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			victim = m
			break
		}
	}
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "old", 2, 1); err != nil {
		t.Fatal(err)
	}
	take := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := cl.Next(ctx, "old", uint64(i%50)); err != nil {
				t.Fatal(err)
			}
		}
	}
	take(100)
	victim.Kill()
	copyDir := filepath.Join(t.TempDir(), "copy")
	victim.CopyData(copyDir)
	victim.Restart()
	// Step 2, one key per section: every few values is a raft entry, so the
	// victim's log grows well past the copy; wait until the cluster has
	// recorded it beyond the copy's end.
	copyEnd := leader.Node().Status().AppliedIndex
	deadline := time.Now().Add(3 * failoverWait)
	for {
		take(50)
		if _, rec := c.WaitServingLeader(failoverWait).Node().ServerSeen(victim.ID); rec > copyEnd+10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cluster never recorded the victim's progress")
		}
	}
	victim.Kill()
	victim.RestoreData(copyDir)
	victim.Restart()
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		if st := victim.Node().Status(); st.RaftOpen {
			t.Fatalf("a server on an older copy of its data took part in raft: %+v", st)
		}
		take(5)
		time.Sleep(50 * time.Millisecond)
	}
	// Stopped gracefully while refused.
	if err := victim.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// The documented way back: remove, wipe, start.
	if err := cl.RemoveNode(ctx, victim.ID); err != nil {
		t.Fatal(err)
	}
	victim.Restart()
	victim.Kill()
	victim.Wipe()
	victim.Restart()
	c.WaitVoters(3, failoverWait)
	take(20)
}
