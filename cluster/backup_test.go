package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestBackupRestoreNeverRepeats issues values, backs up, issues more (not in
// the backup), loses the whole cluster, restores a new one from the backup
// with a margin, grows it to three nodes, and checks that every key
// continues above every value ever issued.
func TestBackupRestoreNeverRepeats(t *testing.T) {
	old := testcluster.Start(t, 3, testcluster.Options{})
	old.WaitServingLeader(failoverWait)
	cl, err := client.New(old.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "bk", 20, 4); err != nil {
		t.Fatal(err)
	}
	issued := map[uint64]uint64{}
	take := func(c *client.Client, n int) {
		t.Helper()
		for i := range n {
			k := uint64(i % 10)
			v, err := c.Next(ctx, "bk", k)
			if err != nil {
				t.Fatal(err)
			}
			if v[0] <= issued[k] {
				t.Fatalf("key %d: %d after %d", k, v[0], issued[k])
			}
			issued[k] = v[0]
		}
	}
	take(cl, 200)
	file := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Backup(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	take(cl, 300) // not in the backup
	old.Close()

	// 300 values, and the one term, since the backup.
	restored := testcluster.StartRestored(t, file, minMargin(t, 300, 1, 10000), testcluster.Options{}) // the default space has step 10000
	restored.WaitServingLeader(failoverWait)
	restored.Join()
	restored.Join()
	restored.WaitVoters(3, failoverWait)
	// A restore into a directory with state is refused.
	if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file, TermsSince: 1, ID: "x", DataDir: restored.Nodes[0].Dir, RaftAdvertise: "127.0.0.1:1"}); !errors.Is(err, cluster.ErrHasState) {
		t.Fatalf("restore over existing state: %v", err)
	}
	rc, err := client.New(restored.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spaces, err := rc.ListSpaces(ctx)
	if err != nil || len(spaces) != 2 {
		t.Fatalf("spaces after restore: %v %v", spaces, err)
	}
	take(rc, 100)
	// The state reached the joined nodes through raft: kill the restored
	// node and the other two continue above everything.
	first := restored.Nodes[0]
	first.Kill()
	restored.WaitServingLeader(failoverWait, first)
	take(rc, 100)
}
