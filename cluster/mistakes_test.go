package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/testcluster"
	"github.com/seqd/seqd/sections"
)

// Regression tests for operator mistakes and double faults (the guarantee
// holds whatever an operator does: see vouch.go and the lease rule in
// leader.go).

func newClient(t *testing.T, addrs []string, opts client.Options) *client.Client {
	t.Helper()
	cl, err := client.New(addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func backupTo(t *testing.T, cl *client.Client) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Backup(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return file
}

// waitFor polls cond every 10ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// neverServes watches m for d (a bounded observation of a property that
// must hold throughout, not a wait for a condition): it must never hold a
// lease, and a client pinned to it must never get a value.
func neverServes(t *testing.T, m *testcluster.Member, d time.Duration, space string, key uint64) {
	t.Helper()
	pinned := newClient(t, []string{m.APIAddr}, client.Options{DisableRouting: true, RetryFor: -1, DisableCoalescing: true})
	until := time.Now().Add(d)
	for time.Now().Before(until) {
		if n := m.Node(); n != nil && n.Allocator().Serving() {
			t.Fatalf("%s holds a lease", m.ID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		v, err := pinned.Next(ctx, space, key)
		cancel()
		if err == nil && m.Node() != nil && m.Node().IsLeader() {
			t.Fatalf("%s served Next(%s, %d) = %v", m.ID, space, key, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestoreCoversSpacesCreatedAfterBackup: a space created after the
// backup, and values taken from it, are not in the backup; the application
// creates the space again in the restored cluster (created = true) and its
// keys must continue above every value the old cluster handed out.
func TestRestoreCoversSpacesCreatedAfterBackup(t *testing.T) {
	old := testcluster.Start(t, 1, testcluster.Options{})
	old.WaitServingLeader(failoverWait)
	cl := newClient(t, old.APIAddrs(), client.Options{})
	ctx := context.Background()
	file := backupTo(t, cl)
	if _, err := cl.CreateSpace(ctx, "late", 0, 0); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 5 {
		v, err := cl.Next(ctx, "late", 7)
		if err != nil {
			t.Fatal(err)
		}
		last = v[0]
	}
	old.Close()

	// 5 values, 1 term since the backup, steps up to the default 10000.
	restored := testcluster.StartRestored(t, file, minMargin(t, 5, 1, 10000), testcluster.Options{})
	restored.WaitServingLeader(failoverWait)
	rc := newClient(t, restored.APIAddrs(), client.Options{})
	created, err := rc.CreateSpace(ctx, "late", 0, 0)
	if err != nil || !created.GetCreated() {
		t.Fatalf("CreateSpace(late) in the restored cluster: %v, %v", created, err)
	}
	v, err := rc.Next(ctx, "late", 7)
	if err != nil {
		t.Fatal(err)
	}
	if v[0] <= last {
		t.Fatalf("Next(late, 7) = %d after the restore; the old cluster handed out up to %d", v[0], last)
	}
}

func minMargin(t *testing.T, values, terms, step uint64) uint64 {
	t.Helper()
	m, err := fsm.MinMargin(values, terms, step)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRestoreMarginCoversRestarts: every restart (a new term) moves a
// section's mark up by about a step while handing out one value. A margin
// chosen by the old rule (values since the backup, at least a step) is
// refused; the minimum for the bounds keeps values from repeating.
func TestRestoreMarginCoversRestarts(t *testing.T) {
	old := testcluster.Start(t, 1, testcluster.Options{})
	old.WaitServingLeader(failoverWait)
	cl := newClient(t, old.APIAddrs(), client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "r", 1000, 100000); err != nil {
		t.Fatal(err)
	}
	next := func(c *client.Client) uint64 {
		t.Helper()
		v, err := c.Next(ctx, "r", 5)
		if err != nil {
			t.Fatal(err)
		}
		return v[0]
	}
	if v := next(cl); v != 1 {
		t.Fatalf("first value %d", v)
	}
	file := backupTo(t, cl) // mark 1001
	var last uint64
	for range 4 {
		old.Nodes[0].Kill()
		old.Nodes[0].Restart()
		old.WaitServingLeader(failoverWait)
		last = next(cl)
	}
	if last < 4000 {
		t.Fatalf("after 4 restarts the value is %d; the test expects each restart to skip a step", last)
	}
	old.Close()

	// The old rule: "above the values handed out since, at least a step".
	dir := filepath.Join(t.TempDir(), "r")
	_, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file, ValuesSince: 4, TermsSince: 5, Margin: 2000,
		ID: "r1", DataDir: dir, RaftAdvertise: "127.0.0.1:1"})
	if !errors.Is(err, cluster.ErrMarginBelowMinimum) {
		t.Fatalf("margin 2000 for 4 values and 5 terms: %v, want ErrMarginBelowMinimum", err)
	}
	if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
		t.Fatalf("a refused restore wrote %s", dir)
	}
	restored := testcluster.StartRestored(t, file, minMargin(t, 4, 5, 1000), testcluster.Options{})
	restored.WaitServingLeader(failoverWait)
	if v := next(newClient(t, restored.APIAddrs(), client.Options{})); v <= last {
		t.Fatalf("restored cluster: %d, old cluster handed out %d", v, last)
	}
}

// TestStaleSingleVoterCopyNeverServes: n1 runs alone and its data directory
// is copied; the cluster grows to 3 voters and hands out values; n1's
// directory is replaced by the old copy (whose configuration lists only
// n1) and n1 restarts with its usual flags. Raft elects n1 by its own vote
// in that copy, but n1 is not vouched for: it must never hold a lease or
// serve, while the real cluster keeps serving.
func TestStaleSingleVoterCopyNeverServes(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	n1 := c.Nodes[0]
	cl := newClient(t, []string{n1.APIAddr}, client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "cp", 10, 4); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := cl.Next(ctx, "cp", 5); err != nil {
			t.Fatal(err)
		}
	}
	// The copy's log ends about here (a lone leader renews its lease often).
	copyIndex := n1.Node().Status().AppliedIndex
	if err := n1.Shutdown(); err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(t.TempDir(), "copy")
	n1.CopyData(copyDir)
	n1.Restart()
	c.WaitServingLeader(failoverWait)
	c.Join()
	c.Join()
	c.WaitVoters(3, failoverWait)
	cl = newClient(t, c.APIAddrs(), client.Options{})
	var last uint64
	for range 100 {
		v, err := cl.Next(ctx, "cp", 5)
		if err != nil {
			t.Fatal(err)
		}
		last = v[0]
	}
	// Let the leader record n1's log reaching well past the copy's end:
	// only then can the cluster tell the copy is old (a copy at or beyond
	// everything recorded is indistinguishable from a restart).
	waitFor(t, failoverWait, "n1's progress recorded", func() bool {
		l := c.ServingLeader()
		if l == nil {
			return false
		}
		_, idx := l.Node().ServerSeen("n1")
		return idx > copyIndex+10
	})
	n1.Kill()
	n1.RestoreData(copyDir)
	n1.Restart()
	leader := c.WaitServingLeader(failoverWait, n1)
	neverServes(t, n1, 4*time.Second, "cp", 5)
	if n1.Node().Admitted() {
		t.Fatal("the old copy was vouched for")
	}
	// The real cluster serves on, above everything.
	v, err := newClient(t, []string{leader.APIAddr}, client.Options{}).Next(ctx, "cp", 5)
	if err != nil || v[0] <= last {
		t.Fatalf("the cluster after the stale copy came back: %v %v (last %d)", v, err, last)
	}
}

// TestRestoreIntoMemberNeverServes: `seqd restore` run into a member of a
// running cluster (its data directory wiped first) and the member started
// with its usual flags: the restored node is a new cluster (a new ID) that
// the running cluster lists as a member, so it refuses to serve.
func TestRestoreIntoMemberNeverServes(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	cl := newClient(t, c.APIAddrs(), client.Options{})
	ctx := context.Background()
	if _, err := cl.Next(ctx, "default", 5); err != nil {
		t.Fatal(err)
	}
	waitFor(t, failoverWait, "the cluster on protocol 2", func() bool { return leader.Node().ClusterID() != "" })
	file := backupTo(t, cl)
	var victim *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			victim = m
		}
	}
	victim.Kill()
	victim.Wipe()
	if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file, ValuesSince: 1 << 30, TermsSince: 1000,
		ID: victim.ID, DataDir: victim.Dir, RaftAdvertise: victim.RaftAddr}); err != nil {
		t.Fatal(err)
	}
	victim.Restart()
	neverServes(t, victim, 5*time.Second, "default", 5)
	if victim.Node().Admitted() {
		t.Fatal("the restored member was vouched for")
	}
	if id := victim.Node().ClusterID(); id == "" || id == leader.Node().ClusterID() {
		t.Fatalf("restored cluster ID %q, running cluster %q", id, leader.Node().ClusterID())
	}
	if _, err := cl.Next(ctx, "default", 5); err != nil {
		t.Fatalf("the running cluster: %v", err)
	}
}

// TestWipedVoterAfterFullRestartWithRolledBackPeer: n1 takes a snapshot; n3
// is replaced by n4 (promoted and recorded after n1's snapshot); n1 is cut
// off while n2 and n4 hand out (w, 100) = 1..20; every node loses power;
// n4's disk is replaced. n1 restarts with its state machine rolled back to
// its snapshot (no record of n4) and knows no leader: it must not vouch for
// the empty n4, and n1 with n4 must not elect a leader that serves from
// n1's log. Once n2 is back, the cluster serves (w, 100) above 20 and the
// wiped n4 stays out until it is removed.
func TestWipedVoterAfterFullRestartWithRolledBackPeer(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	cl := newClient(t, c.APIAddrs(), client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "w", 1, 1000); err != nil {
		t.Fatal(err)
	}
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	if err := n1.Node().Group(0).Snapshot(); err != nil {
		t.Fatal(err)
	}
	// Replace n3 by n4.
	n4 := c.Join()
	c.WaitVoters(4, failoverWait)
	waitFor(t, failoverWait, "n4 recorded", func() bool {
		l := c.ServingLeader()
		if l == nil {
			return false
		}
		seen, _ := l.Node().ServerSeen(n4.ID)
		return seen
	})
	if err := cl.RemoveNode(ctx, n3.ID); err != nil {
		t.Fatal(err)
	}
	n3.Kill()
	c.WaitVoters(3, failoverWait)
	// n1 off; n2 and n4 hand out (w, 100).
	if l := c.ServingLeader(); l == n1 {
		if err := n1.Node().TransferLeadership(""); err != nil {
			t.Fatal(err)
		}
	}
	n1.Isolate()
	var last uint64
	for range 20 {
		v, err := cl.Next(ctx, "w", 100)
		if err != nil {
			t.Fatal(err)
		}
		last = v[0]
	}
	// Power loss; n4's disk replaced; n1 and n4 come back.
	for _, m := range []*testcluster.Member{n1, n2, n4} {
		m.Kill()
	}
	n4.Wipe()
	n1.Restart()
	n4.Restart()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range []*testcluster.Member{n1, n4} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(6 * time.Second)
			for time.Now().Before(deadline) {
				select {
				case <-done:
					return
				default:
				}
				if n := m.Node(); n != nil && n.Allocator().Serving() {
					t.Errorf("%s serves with n2 down and n4 wiped", m.ID)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(done)
	if n4.Node().Admitted() {
		t.Fatal("the wiped n4 was vouched for")
	}
	// n2 is back too: n1 and n2 are a majority of the voters on their own
	// data, let in on each other's answers as raft's election would be
	// (n2's log holds every committed record: n1 was cut off while they
	// were written), without an operator's --assume-gone.
	n2.Restart()
	c.WaitServingLeader(failoverWait, n4)
	v, err := newClient(t, []string{n1.APIAddr, n2.APIAddr}, client.Options{}).Next(ctx, "w", 100)
	if err != nil || v[0] <= last {
		t.Fatalf("after n2 came back: Next(w, 100) = %v, %v; before the power loss: %d", v, err, last)
	}
	neverServes(t, n4, time.Second, "w", 100)
	if n4.Node().Admitted() {
		t.Fatal("the wiped n4 was vouched for once a leader served")
	}
}

// TestLeaseChangeRollingNeverOverlaps: the cluster runs on a 4 s lease; the
// followers restart on 100 ms; the old leader (still on 4 s) is cut off. The
// new leader must wait out the old leader's 4 s lease (recorded by its
// renewals), so the old leader stops serving before the new one starts.
func TestLeaseChangeRollingNeverOverlaps(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Lease: 4 * time.Second})
	old := c.WaitServingLeader(failoverWait)
	for _, m := range c.Nodes {
		if m == old {
			continue
		}
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
		m.Lease = 100 * time.Millisecond
		m.Restart()
		c.WaitVoters(3, failoverWait)
	}
	if l := c.WaitServingLeader(failoverWait); l != old {
		t.Skipf("leadership moved to %s during the rolling restart; the scenario needs %s leading", l.ID, old.ID)
	}
	// The old leader's lease runs at least until expiry. (It also notices
	// the cut and steps down, dropping its lease early; a paused leader would
	// not: the jepsen lease-change fault pauses it.)
	expiry := time.Now().Add(old.Node().Allocator().LeaseRemaining())
	old.Isolate()
	next := c.WaitServingLeader(failoverWait, old)
	if newStart := time.Now(); newStart.Before(expiry) {
		t.Fatalf("the new leader (100 ms lease) served at %v, before the old leader's 4 s lease ran out at %v",
			newStart.Format(time.StampMilli), expiry.Format(time.StampMilli))
	}
	// Its own wait counts from its election or the last renewal it stored,
	// so an election that took most of the lease (a loaded machine) leaves
	// less than 4 s to wait: the check is the one above, on the clock.
	t.Logf("the new leader waited %v after its election", next.Node().Status().LeaseWait)
}

// TestRemoveSelfFailureResumesServing: RemoveServer(self) drops the lease
// before the change; when the change fails while the node still leads (here:
// a leadership transfer is in progress), the node must serve again.
func TestRemoveSelfFailureResumesServing(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Heartbeat: time.Second})
	leader := c.WaitServingLeader(failoverWait)
	var target *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			target = m
		}
	}
	// The transfer cannot complete while the target lags behind the log:
	// raft waits for it to catch up, for an election timeout. (A target
	// already caught up fails the transfer at once, when TimeoutNow cannot
	// reach it, and leaves no transfer in progress to observe.)
	target.Isolate()
	if _, err := leader.Node().CreateSpace(context.Background(), seqd.Space{Name: "behind", Step: 1, SectionSize: 1}); err != nil {
		t.Fatalf("an entry the cut-off target misses: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- leader.Node().TransferLeadership(target.ID) }()
	n := leader.Node()
	probe := 0
	waitFor(t, 5*time.Second, "the transfer in progress", func() bool {
		probe++
		_, err := n.CreateSpace(context.Background(), seqd.Space{Name: fmt.Sprintf("probe%d", probe), Step: 1, SectionSize: 1})
		return errors.Is(err, seqd.ErrNotLeader) && n.IsLeader()
	})
	err := n.RemoveServer(context.Background(), leader.ID)
	if err == nil || !strings.Contains(err.Error(), "leadership transfer") {
		t.Fatalf("RemoveServer(self) during a transfer: %v, want a failure", err)
	}
	<-errc
	target.Heal()
	if !n.IsLeader() {
		t.Skip("leadership moved meanwhile; the scenario needs the node to stay leader")
	}
	waitFor(t, 10*time.Second, "the leader serving again", func() bool { return n.Allocator().Serving() || !n.IsLeader() })
	if !n.Allocator().Serving() {
		t.Fatal("leadership moved before the node served again")
	}
}

// TestLoneNodeJoiningItselfGrowsAfterRestart: a first node started with a
// --join list that names only itself restarts, serves, and lets new servers
// join (nobody else can vouch for it: it is the only voter).
func TestLoneNodeJoiningItselfGrowsAfterRestart(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	n1 := c.Nodes[0]
	if err := n1.Shutdown(); err != nil {
		t.Fatal(err)
	}
	n1.Join = []string{n1.GossipAddr}
	n1.Restart()
	c.WaitServingLeader(failoverWait)
	c.Join()
	c.WaitVoters(2, failoverWait)
	if _, err := newClient(t, c.APIAddrs(), client.Options{}).Next(context.Background(), "default", 1); err != nil {
		t.Fatal(err)
	}
}

// TestSuspendedLeaderStopsServing: the lease is timed by the lease clock,
// which counts time the host spends suspended (CLOCK_BOOTTIME by default).
// A jump of that clock, as a suspension would cause while the monotonic
// clock stood still, ends the lease at once.
func TestSuspendedLeaderStopsServing(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(failoverWait)
	n1 := c.Nodes[0]
	if err := n1.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var suspended atomic.Int64
	n1.LeaseClock = func() time.Duration { return sections.BootClock() + time.Duration(suspended.Load()) }
	n1.Restart()
	c.WaitServingLeader(failoverWait)
	a := n1.Node().Allocator()
	if _, err := a.Next(context.Background(), "default", []uint64{1}); err != nil {
		t.Fatal(err)
	}
	suspended.Add(int64(10 * time.Second)) // the host slept 10 s
	if a.Serving() {
		t.Fatal("the leader still holds its lease after a 10 s suspension")
	}
	if _, err := a.Next(context.Background(), "default", []uint64{1}); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Next after the suspension: %v, want ErrNotServing", err)
	}
	// Renewals taken after the resume grant a new lease.
	waitFor(t, failoverWait, "a renewed lease", a.Serving)
}

// TestColdSectionsRaisedInOneEntry: after a failover every section is cold;
// a 200-key call over 200 cold sections raises them all in one raft entry.
func TestColdSectionsRaisedInOneEntry(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	cl := newClient(t, c.APIAddrs(), client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "cold", 100, 1); err != nil {
		t.Fatal(err)
	}
	keys := make([]uint64, 200)
	for i := range keys {
		keys[i] = uint64(i) * 7
	}
	if _, err := cl.Next(ctx, "cold", keys...); err != nil {
		t.Fatal(err)
	}
	// Fail over: the new leader holds no section.
	leader.Kill()
	leader = c.WaitServingLeader(failoverWait, leader)
	a := leader.Node().Allocator()
	before := a.Raises()
	start := time.Now()
	vals, err := a.Next(ctx, "cold", keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Raises() - before; got != 1 {
		t.Fatalf("a 200-key call over 200 cold sections made %d raft entries (took %v), want 1", got, time.Since(start))
	}
	for i, v := range vals {
		if v <= 100 {
			t.Fatalf("key %d: %d after the failover", keys[i], v)
		}
	}
}
