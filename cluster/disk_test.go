package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// mountTmpfs moves m's (stopped) data directory onto a tmpfs of the given
// size. It needs root; the test is skipped otherwise.
func mountTmpfs(t *testing.T, m *testcluster.Member, size string) {
	t.Helper()
	aside := m.Dir + ".aside"
	if err := os.Rename(m.Dir, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(m.Dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", m.Dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", m.Dir).Run() })
	if err := os.CopyFS(m.Dir, os.DirFS(aside)); err != nil {
		t.Fatal(err)
	}
}

// fill writes a filler file into dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			return path
		}
	}
}

// TestDiskFullLeaderStandsDown: the leader's data directory fills up. It
// steps down, reports the full disk, and stands for no election while the
// disk stays full (the other two serve); once space returns it writes again
// and catches up.
func TestDiskFullLeaderStandsDown(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Heartbeat: time.Second})
	victim := c.WaitServingLeader(failoverWait)
	victim.Kill()
	mountTmpfs(t, victim, "48m")
	// The victim's raft timers are much shorter than the others': after
	// stepping down it is always the first to campaign, and would win every
	// election if it stood.
	victim.Heartbeat = 150 * time.Millisecond
	victim.Restart()
	c.WaitVoters(3, failoverWait)
	waitFor(t, failoverWait, victim.ID+" leading", func() bool {
		l := c.ServingLeader()
		if l == victim {
			return true
		}
		if l != nil {
			_ = l.Node().TransferLeadership(victim.ID)
		}
		return false
	})
	cl := newClient(t, c.APIAddrs(), client.Options{})
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "fill", 1, 1); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, victim.Dir)
	// Write until the leader finds its disk full (big raise entries).
	keys := make([]uint64, 2000)
	next := uint64(0)
	waitFor(t, failoverWait, "the leader finding its disk full", func() bool {
		for i := range keys {
			keys[i] = next
			next++
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = cl.Next(cctx, "fill", keys...)
		cancel()
		return victim.Node().Status().DiskFull
	})
	// The others take over and serve; the full node never wins an election
	// again while its disk is full (its leadership changes are counted: a
	// leadership it gains is lost within milliseconds, at its first write).
	// The others take over and serve; the full node never wins an election
	// again while its disk is full (its leadership changes are counted: a
	// leadership it wins is lost within milliseconds, at its first write).
	c.WaitServingLeader(failoverWait, victim)
	changes := victim.Node().Status().LeaderChanges
	until := time.Now().Add(8 * time.Second)
	for time.Now().Before(until) {
		if now := victim.Node().Status().LeaderChanges; now != changes {
			t.Fatalf("%s won an election again with a full disk (%d leadership changes)", victim.ID, now-changes)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cl.Next(cctx, "default", 1)
		cancel()
		if err != nil {
			t.Fatalf("the cluster does not serve while %s's disk is full: %v", victim.ID, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !victim.Node().Status().DiskFull {
		t.Fatal("the full node no longer reports its full disk while it is still full")
	}
	// Space returns: it writes again and catches up.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, failoverWait, victim.ID+" writing again", func() bool { return !victim.Node().Status().DiskFull })
	leader := c.WaitServingLeader(failoverWait)
	waitFor(t, failoverWait, victim.ID+" catching up", func() bool {
		return victim.Node().Status().AppliedIndex+64 >= leader.Node().Status().AppliedIndex
	})
}
