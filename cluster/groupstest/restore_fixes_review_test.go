package groupstest_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/internal/testcluster"
)

// backupOf takes values for keys from c and writes a backup of it to a new
// file, returning the file.
func backupOf(t *testing.T, ctx context.Context, c *testcluster.Cluster, keys []uint64) string {
	t.Helper()
	cl, err := client.New(c.APIAddrs(), client.Options{RetryFor: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := cl.Next(ctx, seqd.DefaultSpaceName, keys...); err != nil {
			t.Fatal(err)
		}
	}
	return backupFile(t, ctx, cl)
}

// backupFile writes a backup taken through cl to a new file and returns
// the file.
func backupFile(t *testing.T, ctx context.Context, cl *client.Client) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Backup(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return file
}

// freeAddr returns a free 127.0.0.1 port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRestoreTwiceAfterRestoredClusterGrew: the documented procedure
// restores one server (r1) and starts the others empty with --join r1.
// While r1 is down (a rolling restart, a replaced machine), the cluster
// keeps serving on n2 and n3, and a second restore of the same backup (b1,
// an operator mistake) gossips with them. A review found that only r1 knew
// where its data came from, so b1 vouched for itself and served the same
// sections from the same marks (a key got the same value from both
// clusters). The restore's generation is in the replicated state, so n2
// and n3 hold it too: b1 sees siblings (the same lineage and number,
// another cluster) and refuses.
func TestRestoreTwiceAfterRestoredClusterGrew(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	keys := []uint64{0, 1, 2, 3}
	old := testcluster.Start(t, 3, testcluster.Options{})
	old.WaitServingLeader(failoverWait)
	file := backupOf(t, ctx, old, keys)
	old.Close()

	// The documented restore: one server, the others join it empty.
	x := testcluster.StartRestored(t, file, 0, testcluster.Options{})
	x.WaitServingLeader(failoverWait)
	x.Join()
	x.Join()
	x.WaitVoters(3, failoverWait)
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
