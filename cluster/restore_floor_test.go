package cluster_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/internal/testcluster"
)

// A restore's floor rests on nothing an operator must count. The cluster
// takes values that no metric scrape could have seen (three Reserve calls
// of a million values right after the backup, then a power loss); the
// restore is prepared as the documented procedure says, with the backup
// file alone, and the restored cluster still starts above every value the
// old one handed out. (The procedure before the raise budget needed
// --values-since and --terms-since; taken from the last scrape, V=1 and
// T=1, it handed out 1,030,003..3,030,002 again.)
func TestRestoreFloorNeedsNothingCounted(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(failoverWait)
	waitFor(t, failoverWait, "the cluster on protocol 5", func() bool { return leader.Node().Status().Protocol >= 5 })
	cl := newClient(t, c.APIAddrs(), client.Options{})
	ctx := context.Background()
	for range 3 {
		advNext(t, cl, "default", 7)
	}
	file := backupTo(t, cl)
	var last uint64
	for range 3 {
		first, err := cl.Reserve(ctx, "default", 7, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		last = first + 1_000_000 - 1
	}
	for _, m := range c.Nodes {
		m.Kill() // the site is lost
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := filepath.Join(t.TempDir(), "r1")
	res, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file, ID: "r1", DataDir: dir, RaftAdvertise: addr})
	if err != nil {
		t.Fatalf("the documented restore, with the backup file alone: %v", err)
	}
	t.Logf("margin %d for a backup %v old; the old cluster reached %d", res.Margin, time.Since(res.Earliest()).Round(time.Millisecond), last)
	restored := testcluster.StartRestoredDir(t, "r1", dir, addr, testcluster.Options{})
	l := restored.WaitServingLeader(failoverWait)
	if v := advNext(t, newClient(t, []string{l.APIAddr}, client.Options{}), "default", 7); v <= last {
		t.Fatalf("the restored cluster handed out %d, at or below %d, which the old cluster handed out after the backup", v, last)
	}
}
