package groupstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestRestoreJoinersCarryTheGeneration (from a review): as
// TestRestoreTwiceAfterRestoredClusterGrew, but the joiners start right
// after the restored server, before it serves: they are let in as joiners
// of a cluster that has just bootstrapped (the restored state is a snapshot
// at index 1). They hold the restore's generation through raft, as every
// server of the cluster does (it is in the replicated state), so a second
// restore of the same backup, a sibling, never serves next to them while
// the restored server is down.
func TestRestoreJoinersCarryTheGeneration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	keys := []uint64{0, 1, 2, 3}
	old := testcluster.Start(t, 3, testcluster.Options{})
	old.WaitServingLeader(failoverWait)
	file := backupOf(t, ctx, old, keys)
	old.Close()

	// The documented restore: one server, the others join it empty.
	x := testcluster.StartRestored(t, file, 0, testcluster.Options{})
	// The others are started right away, as an operator starting the
	// whole cluster at once would (r1 is within its soloWait).
	x.Join()
	x.Join()
	x.WaitServingLeader(failoverWait)
	x.WaitVoters(3, failoverWait)
	gen := x.Nodes[0].Node().Generation()
	if gen.Number != 1 {
		t.Fatalf("restored generation %v, want number 1", gen)
	}
	for _, m := range x.Nodes[1:] {
		waitUntil(t, failoverWait, m.ID+" holding the restore's generation", func() bool { return m.Node().Generation() == gen })
	}
	xc, err := client.New(x.APIAddrs(), client.Options{RetryFor: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	handedX := map[uint64]map[uint64]bool{}
	take := func() {
		vals, err := xc.Next(ctx, seqd.DefaultSpaceName, keys...)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if handedX[k] == nil {
				handedX[k] = map[uint64]bool{}
			}
			handedX[k][vals[i]] = true
		}
	}
	take()

	// r1, the server the restore ran on, goes down; n2 and n3 serve.
	r1 := x.Nodes[0]
	r1.Kill()
	x.WaitServingLeader(failoverWait, r1)
	take()

	// The mistake: the same backup restored again on another server that
	// gossips with the running restored cluster.
	b := testcluster.New(t, 1, testcluster.Options{}, func(_ int, m *testcluster.Member) {
		m.ID = "b1"
		m.Join = []string{x.Nodes[1].GossipAddr, x.Nodes[2].GossipAddr}
		m.RaftAddr = freeAddr(t)
		if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file,
			ID: m.ID, DataDir: m.Dir, RaftAdvertise: m.RaftAddr}); err != nil {
			t.Fatal(err)
		}
	})
	b1 := b.Nodes[0]
	// Twice soloWait.
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := b1.Node(); n.IsLeader() && n.Allocator().Serving() {
			if x.ServingLeader() == nil {
				continue
			}
			bc, err := client.New([]string{b1.APIAddr}, client.Options{DisableRouting: true, RetryFor: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			vals, err := bc.Next(ctx, seqd.DefaultSpaceName, keys...)
			if err != nil {
				t.Fatalf("b1 serves but Next failed: %v", err)
			}
			for i, k := range keys {
				if handedX[k][vals[i]] {
					t.Fatalf("key %d: b1 (a second restore of the backup) handed out %d, which the first restored cluster (still serving on n2, n3 while r1 was down) handed out too", k, vals[i])
				}
			}
			t.Fatalf("b1 (a second restore of the backup) serves while the first restored cluster serves (values %v)", vals)
		}
	}
}

// TestRestoreLeftoverSecondRestoreDoesNotStopRestarts (from a review): x
// (restored, grown the documented way, serving) keeps serving while a
// second restore b1 of the same backup refuses. A plain restart of x's voter
// n2 must come back: only a lone voter is checked against other restores
// (n2 is let in by x's own voters), so a refusing leftover restore does not
// take a healthy cluster down one restart at a time.
func TestRestoreLeftoverSecondRestoreDoesNotStopRestarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	keys := []uint64{0, 1, 2, 3}
	old := testcluster.Start(t, 3, testcluster.Options{})
	old.WaitServingLeader(failoverWait)
	file := backupOf(t, ctx, old, keys)
	old.Close()
	x := testcluster.StartRestored(t, file, 0, testcluster.Options{})
	x.WaitServingLeader(failoverWait)
	x.Join()
	x.Join()
	x.WaitVoters(3, failoverWait)
	b := testcluster.New(t, 1, testcluster.Options{}, func(_ int, m *testcluster.Member) {
		m.ID = "b1"
		m.Join = []string{x.Nodes[0].GossipAddr, x.Nodes[1].GossipAddr, x.Nodes[2].GossipAddr}
		m.RaftAddr = freeAddr(t)
		if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file,
			ID: m.ID, DataDir: m.Dir, RaftAdvertise: m.RaftAddr}); err != nil {
			t.Fatal(err)
		}
	})
	// Watched over more than soloWait (5 s): b1 never lets itself in.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if b.Nodes[0].Node().Admitted() {
			t.Fatal("b1, a second restore of the backup, vouched for itself next to the restored cluster")
		}
	}
	n2 := x.Nodes[1]
	if err := n2.Shutdown(); err != nil {
		t.Fatal(err)
	}
	n2.Restart()
	x.WaitAdmitted(n2, 2*failoverWait)
	if b.Nodes[0].Node().Admitted() {
		t.Fatal("b1 vouched for itself")
	}
}
