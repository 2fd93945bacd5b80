package groupstest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// moveUnderLoad moves the leadership of a 3-node cluster to another
// server while callers take values, checks every key's values strictly
// increase, and returns how long the group served nothing: from the
// transfer's start to the new leader serving.
func moveUnderLoad(t *testing.T, c *testcluster.Cluster) (gap time.Duration, newLeader *testcluster.Member) {
	t.Helper()
	old := c.WaitServingLeader(failoverWait)
	cl, err := client.New(c.APIAddrs(), client.Options{RetryFor: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() {
			var last uint64
			for ctx.Err() == nil {
				v, err := cl.Next(ctx, seqd.DefaultSpaceName, uint64(w))
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				if v[0] <= last {
					errs <- fmt.Errorf("key %d: %d after %d", w, v[0], last)
					return
				}
				last = v[0]
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // load before the move
	start := time.Now()
	if err := old.Node().TransferLeadership(""); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	newLeader = c.WaitServingLeader(failoverWait, old)
	gap = time.Since(start)
	time.Sleep(300 * time.Millisecond) // load after the move
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return gap, newLeader
}

// With --lease-handoff, a planned move releases the lease: the new leader
// serves without waiting one out (well under the 2s lease here), values
// keep increasing across the move, and the new leader reports no wait.
// Without it, the same move waits the lease out.
func TestLeaseHandoffPlannedMove(t *testing.T) {
	const lease = 2 * time.Second
	for _, handoff := range []bool{true, false} {
		c := testcluster.Start(t, 3, testcluster.Options{Lease: lease, LeaseHandoff: handoff})
		gap, next := moveUnderLoad(t, c)
		st := next.Node().Group(0).Status()
		t.Logf("handoff %v: new leader served %v after the transfer began (lease wait %v)", handoff, gap.Round(time.Millisecond), st.LeaseWait)
		if handoff && (gap >= lease || st.LeaseWait != 0) {
			t.Fatalf("with handoff the move took %v (lease wait %v), want under the %v lease and no wait", gap, st.LeaseWait, lease)
		}
		if !handoff && st.LeaseWait < lease {
			t.Fatalf("without handoff the new leader's lease wait was %v, want at least %v", st.LeaseWait, lease)
		}
		c.Close()
	}
}

// A transfer that fails after the release (its target is cut off) leaves
// the old leader serving again, through a renewal that voids the release:
// a leader elected after a crash then waits the lease out in full.
func TestLeaseHandoffFailedTransferVoidsRelease(t *testing.T) {
	const lease = 2 * time.Second
	c := testcluster.Start(t, 3, testcluster.Options{Lease: lease, LeaseHandoff: true})
	leader := c.WaitServingLeader(failoverWait)
	var target *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			target = m
			break
		}
	}
	target.Isolate()
	if err := leader.Node().TransferLeadership(target.ID); err == nil {
		t.Fatal("a transfer to a cut-off server succeeded")
	}
	target.Heal()
	deadline := time.Now().Add(failoverWait)
	for !leader.Node().Group(0).Allocator().Serving() {
		if time.Now().After(deadline) {
			t.Fatal("the old leader did not serve again after the failed transfer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if leader.Node().Group(0).FSM().LeaseReleased() {
		t.Fatal("the old leader serves again but its release still stands")
	}
	leader.Kill()
	next := c.WaitServingLeader(failoverWait, leader)
	if w := next.Node().Group(0).Status().LeaseWait; w < lease {
		t.Fatalf("after a crash following a voided release, the new leader waited %v, want at least the %v lease", w, lease)
	}
}

// A release certifies only the lease of the leader that wrote it. Here the
// serving leader n1 is cut off from the others while its raft notices late
// (slower raft timers on n1, as the raft flags allow), so it goes on
// serving from its lease; a new leader is elected and, before it has
// served, hands its leadership on (as on a graceful stop or a rebalance).
// Its hand-over must not let the next leader serve while n1's lease runs:
// the two must never serve at the same instant.
func TestReleaseCertifiesOnlyItsOwnLease(t *testing.T) {
	const lease = 3 * time.Second
	c := testcluster.New(t, 3, testcluster.Options{Lease: lease, LeaseHandoff: true}, func(i int, m *testcluster.Member) {
		if i == 0 {
			m.Heartbeat = 4 * time.Second // n1's raft steps down 2s after losing its followers
		}
	})
	defer c.Close()
	n1 := c.Nodes[0]
	serving := func(m *testcluster.Member) bool { return m.Node().Group(0).Allocator().Serving() }
	if l := c.WaitServingLeader(failoverWait); l != n1 {
		if err := l.Node().TransferLeadership(n1.ID); err != nil {
			t.Fatalf("moving the leadership to n1: %v", err)
		}
	}
	waitUntil(t, failoverWait, "n1 serving", func() bool { return serving(n1) })

	n1.Isolate()
	cut := time.Now()
	var elected *testcluster.Member
	waitUntil(t, failoverWait, "a new raft leader", func() bool {
		for _, m := range c.Nodes[1:] {
			if m.Node().Group(0).IsLeader() {
				elected = m
				return true
			}
		}
		return false
	})
	if serving(elected) {
		t.Fatalf("%s served %v after the cut, while n1's %v lease may still run", elected.ID, time.Since(cut), lease)
	}
	next := c.Nodes[1]
	if next == elected {
		next = c.Nodes[2]
	}
	if err := elected.Node().TransferLeadership(next.ID); err != nil {
		t.Fatalf("%s handing its leadership to %s: %v", elected.ID, next.ID, err)
	}
	// Until n1's lease is surely over, never n1 and another at once (the
	// transfer's target, or, should the transfer lose to an election on a
	// loaded machine, whichever server leads).
	for time.Since(cut) < lease+time.Second {
		for _, m := range c.Nodes[1:] {
			if serving(m) && serving(n1) {
				t.Fatalf("%s serves %v after the cut while n1 still holds its lease (the release of %s, which never served in its term, was taken as certifying n1's lease)",
					m.ID, time.Since(cut).Round(time.Millisecond), elected.ID)
			}
		}
		time.Sleep(time.Millisecond)
	}
	waitUntil(t, failoverWait, "n2 or n3 serving", func() bool {
		if serving(c.Nodes[2]) {
			next = c.Nodes[2]
		}
		return serving(c.Nodes[1]) || serving(c.Nodes[2])
	})
	if !serving(next) {
		next = c.Nodes[1]
	}
	t.Logf("%s served %v after the cut (n1's lease %v)", next.ID, time.Since(cut).Round(time.Millisecond), lease)
}
