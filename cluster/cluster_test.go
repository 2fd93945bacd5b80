package cluster_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// failoverWait bounds every wait for a condition; generous, as the machine may be loaded.
const failoverWait = 45 * time.Second

// TestFaultsKeepUniquenessAndOrder runs clients against a 3-node cluster
// while the leader is killed and restarted, shut down gracefully, and cut off
// the network, again and again; then checks every recorded value for C1
// (no repeats), C2 (real-time order per key) and C3 (Current bounds).
func TestFaultsKeepUniquenessAndOrder(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	first := c.WaitServingLeader(failoverWait)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A small section size spreads keys over several sections; a small step
	// makes raises frequent.
	if _, err := cl.CreateSpace(context.Background(), "chaos", 20, 4); err != nil {
		t.Fatal(err)
	}
	w := testcluster.StartWorkload(t, "chaos", 12, c.APIAddrs(), 3)
	w.WaitOK(t, 200, failoverWait)

	leader := first
	for round := range 2 {
		// Kill the leader, let a new one take over, restart the old one.
		leader.Kill()
		next := c.WaitServingLeader(failoverWait, leader)
		w.WaitOK(t, 100, failoverWait)
		leader.Restart()
		c.WaitAdmitted(leader, failoverWait)
		w.WaitOK(t, 100, failoverWait)
		leader = next

		// Cut the leader off; a new leader serves; heal.
		leader.Isolate()
		next = c.WaitServingLeader(failoverWait, leader)
		w.WaitOK(t, 100, failoverWait)
		leader.Heal()
		w.WaitOK(t, 100, failoverWait)
		leader = next

		// Graceful shutdown hands leadership over.
		if err := leader.Shutdown(); err != nil {
			t.Fatalf("round %d: shutdown: %v", round, err)
		}
		c.WaitServingLeader(failoverWait, leader)
		w.WaitOK(t, 100, failoverWait)
		leader.Restart()
		c.WaitAdmitted(leader, failoverWait)
		w.WaitOK(t, 100, failoverWait)
		leader = c.WaitServingLeader(failoverWait)
	}
	w.Stop()
	w.Check(t)
}

// TestFullClusterRestartContinuesAbove stops every node and starts them again:
// every key continues above every value issued before.
func TestFullClusterRestartContinuesAbove(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	issued := map[uint64]uint64{}
	for i := range 300 {
		k := uint64(i % 7 * 50000) // keys in several sections of the default space
		v, err := cl.Next(ctx, "default", k)
		if err != nil {
			t.Fatal(err)
		}
		issued[k] = v[0]
	}
	for round := range 2 {
		for _, m := range c.Nodes {
			m.Kill()
		}
		for _, m := range c.Nodes {
			m.Restart()
		}
		c.WaitServingLeader(failoverWait)
		for k, last := range issued {
			cur, err := cl.Current(ctx, "default", k)
			if err != nil {
				t.Fatal(err)
			}
			if cur[0] < last {
				t.Fatalf("round %d key %d: Current %d below issued %d", round, k, cur[0], last)
			}
			v, err := cl.Next(ctx, "default", k)
			if err != nil {
				t.Fatal(err)
			}
			if v[0] <= last || v[0] <= cur[0] {
				t.Fatalf("round %d key %d: got %d after restart, issued %d before, current %d", round, k, v[0], last, cur[0])
			}
			issued[k] = v[0]
		}
	}
}

// TestLeaseOldLeaderStopsBeforeNewLeaderServes cuts the leader off while
// in-process callers read from the old leader's allocator, and checks that the last
// value the old leader returned was returned before the new leader served its
// first: the new leader waits out the old lease.
func TestLeaseOldLeaderStopsBeforeNewLeaderServes(t *testing.T) {
	const lease = 600 * time.Millisecond
	c := testcluster.Start(t, 3, testcluster.Options{Lease: lease})
	old := c.WaitServingLeader(failoverWait)
	oldNode := old.Node()

	var lastOldEnd atomic.Int64 // unix nanos
	origin := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Current never needs a raft entry, so the old leader answers from
			// memory for as long as it believes it may: only the lease (or
			// raft noticing the lost quorum) stops it.
			if _, err := oldNode.Allocator().Current(context.Background(), "default", []uint64{1}); err == nil {
				lastOldEnd.Store(int64(time.Since(origin)))
			}
		}
	}()
	// Let the old leader serve, then cut it off.
	deadline := time.Now().Add(failoverWait)
	for lastOldEnd.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cutAt := time.Since(origin)
	old.Isolate()

	// Poll the other nodes until one serves; note when that call began.
	var firstNewStart time.Duration
	var newLeader *testcluster.Member
	for firstNewStart == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no new leader served")
		}
		for _, m := range c.Nodes {
			if m == old {
				continue
			}
			start := time.Since(origin)
			if _, err := m.Node().Allocator().Next(context.Background(), "default", []uint64{1}); err == nil {
				firstNewStart, newLeader = start, m
				break
			} else if !errors.Is(err, seqd.ErrNotServing) {
				t.Fatalf("%s: %v", m.ID, err)
			}
		}
	}
	close(stop)
	wg.Wait()
	last := time.Duration(lastOldEnd.Load())
	t.Logf("cut at %v; old leader's last value at %v; new leader %s served from %v", cutAt, last, newLeader.ID, firstNewStart)
	if last >= firstNewStart {
		t.Fatalf("old leader returned a value at %v, after the new leader began serving at %v", last, firstNewStart)
	}
	old.Heal()
}

// TestLeaseWaitCountsFromLastRenewal cuts the leader off and checks that the
// new leader serves only after the old leader's lease has run out (read
// from the old leader's allocator at the cut), and that it counted its wait
// from the last renewal it applied, before its election: it served less
// than the lease after it was elected.
func TestLeaseWaitCountsFromLastRenewal(t *testing.T) {
	const lease = 3 * time.Second
	c := testcluster.Start(t, 3, testcluster.Options{Lease: lease, Heartbeat: 300 * time.Millisecond})
	old := c.WaitServingLeader(failoverWait)
	// Wait for a renewal committed by the serving leader, so that the
	// followers have applied one in this term.
	renewals := old.Node().Status().Renewals
	for deadline := time.Now().Add(failoverWait); old.Node().Status().Renewals < renewals+2; {
		if time.Now().After(deadline) {
			t.Fatal("no lease renewal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	remaining := old.Node().Allocator().LeaseRemaining()
	cut := time.Now()
	old.Isolate()
	defer old.Heal()
	oldEnd := cut.Add(remaining)

	var served time.Time
	var leader *testcluster.Member
	for deadline := time.Now().Add(failoverWait); leader == nil; {
		if time.Now().After(deadline) {
			t.Fatal("no new leader served")
		}
		for _, m := range c.Nodes {
			if m != old && m.Node().Allocator().Serving() {
				served, leader = time.Now(), m
			}
		}
		time.Sleep(time.Millisecond)
	}
	st := leader.Node().Status()
	t.Logf("old lease ran %v past the cut; %s served %v after the cut, %v after its election (lease wait %v)",
		remaining, leader.ID, served.Sub(cut), st.LastFailover, st.LeaseWait)
	if !served.After(oldEnd) {
		t.Fatalf("%s served at cut+%v, before the old lease ended at cut+%v", leader.ID, served.Sub(cut), remaining)
	}
	if st.LeaseWait < lease {
		t.Fatalf("lease wait %v, below the lease %v", st.LeaseWait, lease)
	}
	if st.LastFailover >= st.LeaseWait {
		t.Fatalf("%s served %v after its election: it counted the wait %v from its election, not from the last renewal it applied",
			leader.ID, st.LastFailover, st.LeaseWait)
	}
}

// TestLaterJoinerIsAdded starts a single node, then a second that joins it
// through gossip: the leader adds it to the raft configuration as a voter.
func TestLaterJoinerIsAdded(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	c.Join()
	c.WaitVoters(2, failoverWait)
	c.Join()
	c.WaitVoters(3, failoverWait)
	// The leader's configuration lists 3 voters once the promotion is
	// appended; the joined nodes must have it too (committed and
	// applied), or the two of them are 2 of a configuration that lists
	// only one of them as a voter, and can elect nobody without the first.
	deadline := time.Now().Add(failoverWait)
	for _, m := range c.Nodes[1:] {
		for {
			conf, err := m.Node().Configuration()
			voters := 0
			for _, s := range conf {
				if s.Voter {
					voters++
				}
			}
			if err == nil && voters == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's configuration has %d voters, want 3", m.ID, voters)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The joined nodes have state now: kill the first node and the other two
	// elect a leader among themselves.
	first := c.Nodes[0]
	first.Kill()
	c.WaitServingLeader(failoverWait, first)
}

// TestLaggingFollowerCatchesUpFromSnapshot takes snapshots often and keeps
// few log entries, so a follower that was down catches up through raft's
// InstallSnapshot (the FSM's Restore); then it leads and continues above
// every value issued.
func TestLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{SnapshotThreshold: 16, TrailingLogs: 4})
	leader := c.WaitServingLeader(failoverWait)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "snap", 5, 10); err != nil {
		t.Fatal(err)
	}
	var lagger *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			lagger = m
			break
		}
	}
	lagger.Kill()
	// Step 5 over 10 sections: hundreds of raise entries, many snapshots.
	issued := map[uint64]uint64{}
	for i := range 600 {
		k := uint64(i%10) * 10
		v, err := cl.Next(ctx, "snap", k)
		if err != nil {
			t.Fatal(err)
		}
		issued[k] = v[0]
	}
	lagger.Restart()
	// The lagger's FSM reaches the leader's marks.
	deadline := time.Now().Add(failoverWait)
	for {
		caught := true
		for k := range issued {
			if lagger.Node().Group(0).FSM().Max("snap", k/10) < leader.Node().Group(0).FSM().Max("snap", k/10) {
				caught = false
			}
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lagging follower did not catch up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// It caught up from a snapshot: the log it missed was compacted away.
	if snaps, _ := filepath.Glob(filepath.Join(lagger.Dir, "snapshots", "*", "state.bin")); len(snaps) == 0 {
		t.Fatal("the restarted follower holds no snapshot")
	}
	// Make the lagger lead: stop the others one at a time until it does
	// (each back and vouched for before the next stops).
	for _, m := range c.Nodes {
		if m != lagger && m.Node() != nil && c.ServingLeader() != lagger {
			m.Kill()
			c.WaitServingLeader(failoverWait, m)
			m.Restart()
			c.WaitAdmitted(m, failoverWait)
		}
	}
	if l := c.WaitServingLeader(failoverWait); l != lagger {
		t.Logf("%s leads, not the restored %s; checking values anyway", l.ID, lagger.ID)
	}
	for k, last := range issued {
		v, err := cl.Next(ctx, "snap", k)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] <= last {
			t.Fatalf("key %d: got %d, issued %d before", k, v[0], last)
		}
	}
}
