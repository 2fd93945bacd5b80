package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/testcluster"
)

// Adversarial regression tests, written by a review of the vouching, lease
// and restore rules: each comment describes the hole as it was found, and
// each test fails while that hole is open (each was seen failing with its
// fix disabled).

// advNext returns Next(space, key) through cl, failing the test on error.
func advNext(t *testing.T, cl *client.Client, space string, key uint64) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := cl.Next(ctx, space, key)
	if err != nil {
		t.Fatalf("Next(%s, %d): %v", space, key, err)
	}
	return v[0]
}

// servingAmong returns the first of ms that leads and holds a lease, or nil.
func servingAmong(ms ...*testcluster.Member) *testcluster.Member {
	for _, m := range ms {
		if n := m.Node(); n != nil && n.IsLeader() && n.Allocator().Serving() {
			return m
		}
	}
	return nil
}

// TestStaleSingleVoterCopyFastRestartNeverServes: the restore procedure starts a
// cluster's first node without --join and the others join it; a lone
// voter's old image (its configuration lists only itself) must never serve
// (fix 3). n1's image is taken while it is alone; n2 and n3 join; values
// are handed out and n1's progress recorded. n1 crashes, its disk is
// replaced by the image and it restarts at once with its usual flags (no
// --join). n2 and n3 are up and hold the record that damns the image, but
// nothing makes n1 ask them: their gossip never saw n1 down (n1 answered
// their probes again under the same name and address), so they do not
// rejoin it, and n1's gossip knows nobody. After 3 s n1 vouches for itself
// as the only voter of its (old) configuration, leads it, and serves values
// the cluster already handed out, while the real cluster's leader serves
// too (its raft heartbeats to n1 back off after the failures while n1's
// gate was shut, so n1 does not hear of the newer term for seconds).
func TestStaleSingleVoterCopyFastRestartNeverServes(t *testing.T) {
	staleSingleVoterCopy(t, false)
}

// TestStaleSingleVoterCopyFastRestartNeverServesThirdDown: the same with n3
// down: the real cluster has no leader to reach n1, so n1 serves for as
// long as n3 stays down.
func TestStaleSingleVoterCopyFastRestartNeverServesThirdDown(t *testing.T) {
	staleSingleVoterCopy(t, true)
}

func staleSingleVoterCopy(t *testing.T, thirdDown bool) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	n1 := c.Nodes[0]
	cl := newClient(t, []string{n1.APIAddr}, client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "cp", 10, 1000); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		advNext(t, cl, "cp", 5)
	}
	if err := n1.Shutdown(); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "n1-alone")
	n1.CopyData(img)
	n1.Join = []string{} // the restored/first node runs without --join
	n1.Restart()
	c.WaitServingLeader(failoverWait)
	n2, n3 := c.Join(), c.Join()
	c.WaitVoters(3, failoverWait)
	cl = newClient(t, c.APIAddrs(), client.Options{})
	var last uint64
	for range 50 {
		last = advNext(t, cl, "cp", 5)
	}
	waitFor(t, failoverWait, "n1's progress recorded", func() bool {
		l := c.ServingLeader()
		if l == nil {
			return false
		}
		_, idx := l.Node().ServerSeen(n1.ID)
		return idx > 20
	})
	if thirdDown {
		n3.Kill()
	}
	// n1 crashes; its disk is replaced by the image; it restarts at once.
	n1.Kill()
	n1.RestoreData(img)
	n1.Restart()
	pinned := newClient(t, []string{n1.APIAddr}, client.Options{DisableRouting: true, RetryFor: -1, DisableCoalescing: true})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if n := n1.Node(); n.IsLeader() && n.Allocator().Serving() {
			other := servingAmong(n2, n3)
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			v, err := pinned.Next(cctx, "cp", 5)
			cancel()
			otherID := "none"
			if other != nil {
				otherID = other.ID
			}
			t.Fatalf("n1 (its old single-voter image; n3 down: %v) holds a lease (vouched: %v; the real cluster's serving leader meanwhile: %s) "+
				"and served Next(cp, 5) = %v, %v; the cluster had handed out up to %d", thirdDown, n.Admitted(), otherID, v, err, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestoreMarginCountsLeasesWithinATerm: the README bounds T, the
// leader terms after a backup, by "the increase of seqd_raft_term plus 1",
// and the margin proof charges MaxCallValues + 2·step per term. But a
// leader starts a new lease epoch (dropping its sections and loading them
// again at the committed mark, so a step is spent again) without a new
// raft term: RemoveServer of itself that fails while it still leads
// (resumeLead). Four such failures in one term move a section's mark by
// four steps while handing out four values; a restore with the minimum
// margin for V = 4 and T = 1 then hands out a value below one the old
// cluster handed out (the key goes backwards; continued, values repeat).
func TestRestoreMarginCountsLeasesWithinATerm(t *testing.T) {
	const step = 100_000_000
	c := testcluster.Start(t, 3, testcluster.Options{Heartbeat: time.Second})
	leader := c.WaitServingLeader(failoverWait)
	cl := newClient(t, c.APIAddrs(), client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "big", step, 1000); err != nil {
		t.Fatal(err)
	}
	advNext(t, cl, "big", 1)
	file := backupTo(t, cl)
	sum, err := fsm.InspectBackup(file)
	if err != nil {
		t.Fatal(err)
	}
	n := leader.Node()
	var target *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			target = m
		}
	}
	var last uint64
	const epochs = 4
	for i := range epochs {
		// The transfer cannot complete while the target is isolated: it
		// stays in progress until raft gives up on it. On a slow machine a
		// transfer may end before a probe sees it in progress; then the
		// epoch is tried again.
		var errc chan error
		for attempt, probe := 0, 0; ; attempt++ {
			if attempt == 5 {
				t.Fatalf("epoch %d: no probe saw the transfer in progress in %d attempts", i, attempt)
			}
			if !n.IsLeader() {
				t.Skip("leadership moved; the scenario needs the node to keep leading")
			}
			target.Isolate()
			errc = make(chan error, 1)
			go func() { errc <- n.TransferLeadership(target.ID) }()
			seen, ended := false, false
			for deadline := time.Now().Add(5 * time.Second); !seen && !ended && time.Now().Before(deadline); {
				probe++
				_, err := n.CreateSpace(ctx, seqd.Space{Name: fmt.Sprintf("probe%d-%d", i, probe), Step: 1, SectionSize: 1})
				seen = errors.Is(err, seqd.ErrNotLeader) && n.IsLeader()
				select {
				case err := <-errc:
					if !seen {
						ended = true
						t.Logf("epoch %d: the transfer ended (%v) before a probe saw it in progress; again", i, err)
					} else {
						errc <- err
					}
				default:
				}
				if !seen && !ended {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if seen {
				break
			}
			target.Heal()
			if !ended {
				<-errc
			}
			waitFor(t, 10*time.Second, "the leader serving again", func() bool { return n.Allocator().Serving() || !n.IsLeader() })
		}
		if err := n.RemoveServer(ctx, leader.ID); err == nil {
			t.Fatal("RemoveServer(self) during a transfer succeeded")
		}
		<-errc
		target.Heal()
		waitFor(t, 10*time.Second, "the leader serving again", func() bool { return n.Allocator().Serving() || !n.IsLeader() })
		if !n.IsLeader() {
			t.Skip("leadership moved; the scenario needs the node to keep leading")
		}
		last = advNext(t, newClient(t, []string{leader.APIAddr}, client.Options{DisableRouting: true}), "big", 1)
		t.Logf("lease epoch %d in term %d: Next(big, 1) = %d", i+1, n.Status().Term, last)
	}
	term := n.Status().Term
	terms := term - sum.Info.Term + 1 // the README's rule
	values := uint64(epochs)          // handed out after the backup
	c.Close()
	margin := minMargin(t, values, terms, step)
	t.Logf("backup in term %d, now term %d: T = %d, V = %d, minimum margin %d", sum.Info.Term, term, terms, values, margin)
	restored := testcluster.StartRestored(t, file, margin, testcluster.Options{})
	restored.WaitServingLeader(failoverWait)
	if v := advNext(t, newClient(t, restored.APIAddrs(), client.Options{}), "big", 1); v <= last {
		t.Fatalf("restored with the minimum margin for V=%d, T=%d: Next(big, 1) = %d, but the old cluster handed out %d (backwards; later values repeat)",
			values, terms, v, last)
	}
}

// TestWipedMajorityNeverBootstrapsFreshCluster: the README says that when a
// majority of the voters is gone (dead, wiped) no leader can be elected and
// the cluster must be restored from a backup. But servers without state
// that see --bootstrap-expect servers without state, and none with state,
// bootstrap a new cluster on their own, even when they are members of an
// existing one whose surviving server is merely down. Power loss on a 3-node
// cluster; n1's and n2's disks are replaced and they are started with their
// usual flags; a new server is started to grow the cluster (the README's
// Grow step: --bootstrap-expect 3) while n3, which holds the state, is still
// down. The three bootstrap a fresh cluster and hand out (s, 5) from the
// start again.
func TestWipedMajorityNeverBootstrapsFreshCluster(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	cl := newClient(t, c.APIAddrs(), client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "s", 10, 1000); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 20 {
		last = advNext(t, cl, "s", 5)
	}
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	for _, m := range []*testcluster.Member{n1, n2, n3} {
		m.Kill()
	}
	n1.Wipe()
	n2.Wipe()
	n1.Restart() // --bootstrap-expect 3, as before
	n2.Restart()
	n4 := c.Join() // a server started to grow the cluster: --bootstrap-expect 3
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if l := servingAmong(n1, n2, n4); l != nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = newClient(t, []string{l.APIAddr}, client.Options{DisableRouting: true}).CreateSpace(cctx, "s", 10, 1000)
			cancel()
			v := advNext(t, newClient(t, []string{l.APIAddr}, client.Options{DisableRouting: true}), "s", 5)
			t.Fatalf("with n3 (the only server holding state) down and n1, n2 wiped, %s serves (a new cluster %q): Next(s, 5) = %d; "+
				"the cluster had handed out up to %d", l.ID, l.Node().ClusterID(), v, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = n3
}

// TestRestoreFencesTheOldClustersSurvivor: the restore procedure for "a
// majority of the voters is gone for good". The first node is restored
// with the same ID and addresses as before (--id n1, no --join) while the
// old cluster's surviving minority server n3 still runs and lists n1 as
// its member: the restored node refuses to take part (source-running) and
// says to stop the old cluster's remaining servers. Once n3 is stopped
// (the documented step), the restored node serves, above everything; and
// when n3 comes back with its data, it learns of the restore (a newer
// generation of its lineage that served) and is fenced for good, a
// restart included.
func TestRestoreFencesTheOldClustersSurvivor(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	cl := newClient(t, c.APIAddrs(), client.Options{})
	var last uint64
	for range 5 {
		last = advNext(t, cl, "default", 5)
	}
	waitFor(t, failoverWait, "the cluster on protocol 2", func() bool { return leader.Node().ClusterID() != "" })
	file := backupTo(t, cl)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	n1.Kill()
	n2.Kill() // a majority gone for good; n3 survives
	// The restore happens some time later: n3's gossip has seen n1 go down.
	waitFor(t, failoverWait, "n3 seeing n1 down", func() bool {
		for _, m := range n3.Node().Members() {
			if m.ID == n1.ID {
				return !m.Alive
			}
		}
		return false
	})
	n1.Wipe()
	if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file, ValuesSince: 100, TermsSince: 10,
		ID: n1.ID, DataDir: n1.Dir, RaftAdvertise: n1.RaftAddr}); err != nil {
		t.Fatal(err)
	}
	n1.Join = []string{}
	n1.Restart()
	neverServes(t, n1, 7*time.Second, "default", 5)
	if n1.Node().Admitted() || n1.Node().Admission(0) != admit.SourceRunning {
		t.Fatalf("the restored node was admitted (%q) while the old cluster's survivor runs", n1.Node().Admission(0))
	}
	if n3.Node().Fenced() {
		t.Fatal("the survivor was fenced by a restore that never served")
	}
	n3.Kill() // the documented step: stop the old cluster's remaining servers
	restored := c.WaitServingLeader(failoverWait, n3)
	if restored != n1 {
		t.Fatalf("%s serves, want the restored n1", restored.ID)
	}
	if v := advNext(t, newClient(t, []string{n1.APIAddr}, client.Options{DisableRouting: true}), "default", 5); v <= last {
		t.Fatalf("restored node served %d <= %d", v, last)
	}
	// The old survivor comes back with its data: it keeps joining n1's
	// address (a server of its configuration) and learns of the restore.
	n3.Restart()
	waitFor(t, failoverWait, "n3 fenced by the restored generation", func() bool { return n3.Node().Fenced() })
	if g, old := n1.Node().Generation(), n3.Node().Generation(); !g.Supersedes(old) || g.Number != 1 {
		t.Fatalf("restored generation %v, survivor's %v: want the same lineage, one higher", g, old)
	}
	neverServes(t, n3, 3*time.Second, "default", 5)
	n3.Kill()
	n3.Restart()
	if !n3.Node().Fenced() || n3.Node().GroupAdmitted(0) {
		t.Fatal("the survivor forgot its fence across a restart")
	}
}

// TestRestoreMarginCountsValuesOfFailedCalls: the margin's V must count
// the values taken, not only those handed out: a Next that fails after
// taking values for its first keys skips them (a gap), and they advance the
// key (and H, and the mark) all the same. The README measures V with the
// increase of seqd_values_taken_total (the allocator's ValuesTaken), which
// counts them; the values of successful calls alone would not do. A client whose deadline passes while a Next of a key listed
// 10,000 times waits for a raise loses up to a step of values per call
// (the raise ahead of need is in flight when it runs out); about a hundred
// such calls pass the per-term slack of 1,000,000 + 2·step. A
// restore with the minimum margin for the counted values and one term then
// hands out values below one the old cluster returned. (The calls go to the
// leader's allocator with a context that is already done, which is what a
// request whose deadline passes during the raise wait amounts to.)
func TestRestoreMarginCountsValuesOfFailedCalls(t *testing.T) {
	const step = 5000
	old := testcluster.Start(t, 1, testcluster.Options{})
	leader := old.WaitServingLeader(failoverWait)
	cl := newClient(t, old.APIAddrs(), client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "f", step, 1000); err != nil {
		t.Fatal(err)
	}
	advNext(t, cl, "f", 7)
	file := backupTo(t, cl)
	sum, err := fsm.InspectBackup(file)
	if err != nil {
		t.Fatal(err)
	}
	n := leader.Node()
	a := n.Allocator()
	keys := make([]uint64, seqd.MaxKeys)
	for i := range keys {
		keys[i] = 7
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	takenBefore := a.ValuesTaken()
	var counted uint64 // values of successful calls: what seqd_values_issued_total counts
	deadline := time.Now().Add(60 * time.Second)
	for n.Group(0).FSM().Max("f", 0) < sum.HighestBefore+1_200_000 && time.Now().Before(deadline) {
		before := n.Group(0).FSM().Max("f", 0)
		if vs, err := a.Next(done, "f", keys); err == nil {
			counted += uint64(len(vs))
		}
		// Let the raise the failed call started commit before the next call.
		for i := 0; i < 200 && n.Group(0).FSM().Max("f", 0) == before; i++ {
			time.Sleep(5 * time.Millisecond)
		}
	}
	last := advNext(t, cl, "f", 7)
	counted += 1 + 1 // the two successful Next calls
	taken := a.ValuesTaken() - takenBefore
	term := n.Status().Term
	terms := term - sum.Info.Term + 1
	old.Close()
	if short := minMargin(t, counted, terms, max(step, sum.MaxStep)); sum.HighestBefore+short > last {
		t.Logf("the values of successful calls alone (%d) would have been enough here (margin %d)", counted, short)
	}
	margin := minMargin(t, taken, terms, max(step, sum.MaxStep)) // the default space's step is the largest
	t.Logf("backup mark %d; the old cluster returned up to %d for (f, 7); values taken %d (of successful calls %d), T = %d: minimum margin %d",
		sum.HighestBefore, last, taken, counted, terms, margin)
	restored := testcluster.StartRestored(t, file, margin, testcluster.Options{})
	restored.WaitServingLeader(failoverWait)
	if v := advNext(t, newClient(t, restored.APIAddrs(), client.Options{}), "f", 7); v <= last {
		t.Fatalf("restored with the minimum margin for V=%d (values taken), T=%d: Next(f, 7) = %d, but the old cluster returned %d",
			taken, terms, v, last)
	}
}

// TestJustBootstrappedExceptionNeedsEveryVoter: a server without state is
// let in by unauthoritative answers while the cluster has just
// bootstrapped. A log ending at index 1 says only that its holder received
// nothing, not that the cluster committed nothing: every other voter of the
// configuration must be seen holding nothing beyond it. All three servers
// bootstrap together; n3's raft traffic is cut from its start (a firewall
// on the raft port; gossip and the API work), so its log stays at the
// bootstrap configuration while n1 and n2 serve. n1 goes down and n2's
// disk is replaced; n2 restarts with an empty data directory and sees only
// n3 (index 1): it must not be vouched for (it acknowledged everything the
// cluster committed), or n2 and n3 would elect n3 with an empty log. The
// documented recovery (restart the survivor with --assume-gone naming the
// replaced server, then remove it) brings everything back above.
func TestJustBootstrappedExceptionNeedsEveryVoter(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	for _, m := range c.Nodes {
		m.Kill()
		m.Wipe()
	}
	c.SeedBootstrap(n1, n2, n3)
	n3.Restart()
	n3.Isolate() // before its gate can open: its log stays at index 1
	n1.Restart()
	n2.Restart()
	c.WaitServingLeader(failoverWait, n3)
	cl := newClient(t, []string{n1.APIAddr, n2.APIAddr}, client.Options{})
	var last uint64
	for range 20 {
		last = advNext(t, cl, "default", 5)
	}
	if a, err := n3.Node().Vouch(cluster.VouchRequest{ID: "probe"}); err != nil || a.LastIndex > 1 {
		li := a.LastIndex
		t.Fatalf("n3 received entries although its raft traffic was cut (last index %d, %v)", li, err)
	}
	n1.Kill()
	n2.Kill()
	n2.Wipe()
	n2.Restart()
	n3.Heal()
	neverServes(t, n3, 6*time.Second, "default", 5)
	if n2.Node().Admitted() {
		t.Fatal("the wiped voter n2 was vouched for by n3's answer (n3's log ends at index 1) while n1 was down")
	}
	// Recovery: n1 back with --assume-gone n2 (its disk is gone), then
	// n2 removed; it rejoins as a new server.
	n1.AssumeGone = []string{n2.ID}
	n1.Restart()
	l := c.WaitServingLeader(failoverWait, n2)
	if v := advNext(t, newClient(t, []string{l.APIAddr}, client.Options{DisableRouting: true}), "default", 5); v <= last {
		t.Fatalf("after the recovery %s served %d <= %d", l.ID, v, last)
	}
	if err := l.Node().RemoveServer(context.Background(), n2.ID); err != nil {
		t.Fatal(err)
	}
	c.WaitVoters(3, failoverWait)
}
