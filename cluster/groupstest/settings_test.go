package groupstest_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// seedGroups writes into the (stopped, wiped) data directories of ms the
// state every one of them has right after bootstrapping a new cluster of
// the given number of groups together: each group's raft log holding only
// the configuration (every one of ms a voter), and the group count.
func seedGroups(t *testing.T, c *testcluster.Cluster, groups int, ms ...*testcluster.Member) {
	t.Helper()
	c.SeedBootstrap(ms...)
	var conf raft.Configuration
	for _, m := range ms {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Voter})
	}
	for _, m := range ms {
		for g := 1; g < groups; g++ {
			dir := filepath.Join(m.Dir, "groups", strconv.Itoa(g))
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
			if err != nil {
				t.Fatal(err)
			}
			snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			_, trans := raft.NewInmemTransport(raft.ServerAddress(m.RaftAddr))
			rc := raft.DefaultConfig()
			rc.LocalID = raft.ServerID(m.ID)
			if err := raft.BootstrapCluster(rc, ls, ls, snaps, trans, conf); err != nil {
				t.Fatal(err)
			}
			ls.Close()
		}
		if err := os.WriteFile(filepath.Join(m.Dir, "group-count"), []byte(strconv.Itoa(groups)+"\n"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// waitUntil polls cond every 10 ms until it holds, or fails the test
// after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servingLeader waits for group g's serving leader: under load a lease may
// lapse for a moment, and GroupLeaders then names none.
func servingLeader(t *testing.T, c *testcluster.Cluster, g int) *testcluster.Member {
	t.Helper()
	var l *testcluster.Member
	waitUntil(t, failoverWait, fmt.Sprintf("a serving leader of group %d", g), func() bool {
		l = c.GroupLeaders()[g]
		return l != nil
	})
	return l
}

// TestGroupsLeaseChangeOnGroupStillOnProtocol1: a group other than group 0
// moves to the newest protocol on its own (Group.EnsureProtocol, run by its
// leader), only while every server of its configuration is alive in gossip;
// but it serves as soon as group 0 has recorded the group count
// (groupsAgree reads group 0's record). A server that dies after group 0
// recorded the count and before group 1 moved (here: group 1's traffic is
// held back until then) leaves group 1 on protocol 1 for as long as it
// stays down, and there renewals are no-ops that record no lease length.
// `seqd status` shows group 0's protocol (4), so an operator who follows
// DESIGN §4 ("change --lease only after seqd status shows protocol 2")
// changes --lease in a rolling restart: the server that leads group 1
// restarts on a 6 s lease, the others stay on 400 ms. When group 1's
// leader is then cut off, the new leader finds no lease record and waits
// max(own lease, 2 s) + margin from its election, about 2 s, while the old
// leader's 6 s lease still runs: the leases overlap (a paused old leader
// would serve, from memory, values below those the new one hands out).
func TestGroupsLeaseChangeOnGroupStillOnProtocol1(t *testing.T) {
	c := testcluster.Start(t, 5, testcluster.Options{Groups: 2})
	// Every server holds group 1's bootstrap configuration (as when all
	// five bootstrap together), so that group 1 can elect without n5.
	for _, m := range c.Nodes {
		m.Kill()
		m.Wipe()
	}
	seedGroups(t, c, 2, c.Nodes...)
	for _, m := range c.Nodes {
		m.Restart()
		m.Node().CutGroupTraffic(1, true)
	}
	// Group 0 moves to the newest protocol and records the count (every
	// server is alive); group 1 cannot elect a leader yet.
	waitUntil(t, failoverWait, "group 0 recording the group count", func() bool {
		for _, m := range c.Nodes {
			if n := m.Node(); n.Group(0).Allocator().Serving() {
				_, rec := n.Group(0).FSM().Groups()
				return rec
			}
		}
		return false
	})
	dead := c.Nodes[4]
	dead.Kill()
	alive := c.Nodes[:4]
	waitUntil(t, failoverWait, "gossip seeing "+dead.ID+" down", func() bool {
		for _, m := range alive {
			for _, mb := range m.Node().Members() {
				if mb.ID == dead.ID && mb.Alive {
					return false
				}
			}
		}
		return true
	})
	for _, m := range alive {
		m.Node().CutGroupTraffic(1, false)
	}
	// Group 1's preferred leader is n2 (position 1 of n1..n5).
	old := c.Nodes[1]
	waitUntil(t, failoverWait, "n2 serving group 1", func() bool { return c.GroupLeaders()[1] == old })
	if p := old.Node().Group(1).FSM().Protocol(); p != 1 {
		t.Fatalf("scenario not reached: group 1 is on protocol %d", p)
	}
	if p := old.Node().Group(0).FSM().Protocol(); p < 4 {
		t.Fatalf("scenario not reached: group 0 is on protocol %d", p)
	}
	t.Logf("group 0 on protocol %d, group 1 serving on protocol %d", old.Node().Group(0).FSM().Protocol(), old.Node().Group(1).FSM().Protocol())
	// ClusterStatus shows it: the answering node's rows carry each
	// group's protocol (seqd status prints them).
	cl, err := client.New([]string{old.APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.ClusterStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.GetNodes() {
		if n.GetId() != st.GetNodeId() {
			continue
		}
		if gs := n.GetGroups(); len(gs) != 2 || gs[0].GetProtocol() < 4 || gs[1].GetProtocol() != 1 {
			t.Fatalf("ClusterStatus of %s: groups %v, want group 0 on protocol 4 or above and group 1 on 1", n.GetId(), gs)
		}
	}

	// The rolling change of --lease: n2 restarts on 6 s.
	if err := old.Shutdown(); err != nil {
		t.Fatal(err)
	}
	old.Lease = 6 * time.Second
	old.Restart()
	c.WaitAdmitted(old, failoverWait)
	waitUntil(t, 2*failoverWait, "n2 (6 s lease) serving group 1 again", func() bool { return c.GroupLeaders()[1] == old })
	if p := old.Node().Group(1).FSM().Protocol(); p != 1 {
		t.Fatalf("scenario not reached: group 1 moved to protocol %d", p)
	}

	g1 := old.Node().Group(1)
	expiry := time.Now().Add(g1.Allocator().LeaseRemaining())
	old.Node().CutGroupTraffic(1, true)
	var next *testcluster.Member
	waitUntil(t, failoverWait, "a new serving leader of group 1", func() bool {
		next = c.GroupLeaders()[1]
		return next != nil && next != old
	})
	newStart := time.Now()
	w := next.Node().Group(1).Status().LeaseWait
	t.Logf("new leader %s of group 1 waited %v; old leader's lease ran until %v after it served", next.ID, w, expiry.Sub(newStart).Round(time.Millisecond))
	if newStart.Before(expiry) {
		t.Fatalf("the new leader %s of group 1 (400 ms lease, waited %v) served %v before the old leader's 6 s lease ran out: the leases overlap",
			next.ID, w, expiry.Sub(newStart).Round(time.Millisecond))
	}
}

// TestGroupsMixedLeaseHandoffDrainsAndRollingRestart: three servers of 3
// groups, n2 started with --lease-handoff=false and the others with it on,
// under a workload: every server is drained and undrained in turn, then
// restarted gracefully in turn (its groups handed over, some by a server
// that releases its lease to one that does not read releases, some the
// other way). Every key's values must strictly increase and never repeat.
func TestGroupsMixedLeaseHandoffDrainsAndRollingRestart(t *testing.T) {
	c := testcluster.New(t, 3, testcluster.Options{Groups: 3, LeaseHandoff: true, Lease: time.Second},
		func(i int, m *testcluster.Member) { m.NoLeaseHandoff = i == 1 })
	c.WaitBalanced(60 * time.Second)
	w := testcluster.StartWorkload(t, "default", 30, c.APIAddrs(), 2)
	w.WaitOK(t, 200, failoverWait)
	ctx := context.Background()
	for _, m := range c.Nodes {
		if _, err := m.Node().Drain(ctx, true); err != nil {
			t.Fatalf("drain %s: %v", m.ID, err)
		}
		waitUntil(t, failoverWait, m.ID+" leading no group", func() bool { return c.LeadCountsOf(m) == 0 && c.GroupLeaders() != nil })
		if _, err := m.Node().Drain(ctx, false); err != nil {
			t.Fatalf("undrain %s: %v", m.ID, err)
		}
		c.WaitBalanced(60 * time.Second)
	}
	for _, m := range c.Nodes {
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
		m.Restart()
		c.WaitAdmitted(m, failoverWait)
		c.WaitBalanced(60 * time.Second)
	}
	ok := w.OK()
	w.WaitOK(t, ok+200, failoverWait)
	w.Stop()
	w.Check(t)
}
