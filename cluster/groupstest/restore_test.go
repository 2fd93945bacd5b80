package groupstest_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestRestoreFloorCoversHandoffTerms: with the lease handoff (on by
// default) a planned move starts a term without a lease wait, and each new
// term reloads a section a step above its mark. A review found that the
// earlier restore rule without metrics (T = 1 + the seconds since the
// backup divided by the lease) undercounted such terms, and a restore with
// its margin handed out values again. The restore's floor now follows from
// the time since the backup alone (every replica holds a section's mark to
// the raise budget, however many terms raise it): leadership of group 1
// moves many times after the backup, each new leader taking a value of a
// space with a large step, and a restore of the backup, prepared with
// nothing counted, still starts above everything.
func TestRestoreFloorCoversHandoffTerms(t *testing.T) {
	const (
		groups = 2
		lease  = 2 * time.Second
		step   = uint64(1) << 30 // a large step: each reload raises the mark by a billion
	)
	old, cl, ctx := servingCluster(t, testcluster.Options{Groups: groups, Lease: lease, LeaseHandoff: true})
	if _, err := cl.CreateSpace(ctx, "h", step, 1); err != nil {
		t.Fatal(err)
	}
	// A key of group 1.
	var key uint64
	for seqd.GroupOfKey("h", 1, key, groups) != 1 {
		key++
	}
	var last uint64
	next := func() {
		t.Helper()
		v, err := cl.Next(ctx, "h", key)
		for err != nil && connect.CodeOf(err) == connect.CodeNotFound {
			time.Sleep(5 * time.Millisecond) // a group's copy of the new space lags
			v, err = cl.Next(ctx, "h", key)
		}
		if err != nil {
			t.Fatal(err)
		}
		if v[0] <= last {
			t.Fatalf("key %d: %d after %d", key, v[0], last)
		}
		last = v[0]
	}
	for range 3 {
		next()
	}
	file := backupFile(t, ctx, cl)
	sum, err := fsm.InspectBackup(file)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Budgeted() {
		t.Fatalf("a backup of a cluster on protocol %d is not held to the raise budget", sum.Protocol)
	}
	// Move group 1's leadership around (as a drain, or the balancer,
	// does), taking one value after each move: each move reloads the
	// section a step higher.
	moves := 0
	for moves < 12 {
		l := old.GroupLeaders()[1]
		if l == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err := l.Node().Group(1).TransferLeadership("", nil); err != nil {
			t.Logf("transfer from %s: %v", l.ID, err)
			continue
		}
		moves++
		next()
	}
	old.Close()
	t.Logf("%d moves of group 1 after the backup; highest value %d (the backup's highest mark %d)", moves, last, sum.HighestBefore)
	if last < sum.HighestBefore+uint64(moves-2)*step {
		t.Fatalf("the moves reloaded the section less than expected: %d", last)
	}
	restored := testcluster.StartRestored(t, file, 0, testcluster.Options{Lease: lease})
	waitAllServing(t, restored, failoverWait)
	rc, err := client.New(restored.APIAddrs(), client.Options{RetryFor: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v, err := rc.Next(ctx, "h", key)
	if err != nil {
		t.Fatal(err)
	}
	if v[0] <= last {
		t.Fatalf("after a restore with nothing counted: key %d got %d, but %d was handed out before", key, v[0], last)
	}
}

// servingCluster starts 3 servers with opts, waits until every group
// serves, and returns the cluster, a client of it and a context that ends
// with the test (3 minutes at most).
func servingCluster(t *testing.T, opts testcluster.Options) (*testcluster.Cluster, *client.Client, context.Context) {
	t.Helper()
	c := testcluster.Start(t, 3, opts)
	waitAllServing(t, c, failoverWait)
	cl, err := client.New(c.APIAddrs(), client.Options{RetryFor: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c, cl, ctx
}

// TestRestoreOnEveryServerServesOnce (found by an adversarial review): an
// operator used to etcd's procedure restores the same backup on every
// server of a 3-server cluster of 2 groups during a full restart (each with
// its own --id and raft address, as `seqd restore` allows) and starts them
// with their usual flags (--join each other, --bootstrap-expect 3). Each
// data directory is a new single-voter cluster of its own, so each server
// vouches for itself after soloWait and serves every group from the same
// marks: the same key gets the same value from two servers. The promise
// ("even under operator mistakes") needs at most one of them to serve.
func TestRestoreOnEveryServerServesOnce(t *testing.T) {
	const groups = 2
	old, cl, ctx := servingCluster(t, testcluster.Options{Groups: groups})
	keys := []uint64{0, 1, 2, 3, 4, 5, 6, 7}
	issued := map[uint64]uint64{}
	for range 5 {
		vals, err := cl.Next(ctx, seqd.DefaultSpaceName, keys...)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			issued[k] = vals[i]
		}
	}
	file := backupFile(t, ctx, cl)
	old.Close()

	// Every server restored from the backup into its (new, empty) data
	// directory, then all started as before.
	restored := testcluster.New(t, 3, testcluster.Options{}, func(i int, m *testcluster.Member) {
		m.RaftAddr = freeAddr(t)
		if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file,
			ID: m.ID, DataDir: m.Dir, RaftAdvertise: m.RaftAddr}); err != nil {
			t.Fatalf("restore on %s: %v", m.ID, err)
		}
	})
	// Watch for 10 s (twice soloWait, after which a lone server vouches
	// for itself): at most one server may serve.
	servingAll := func(m *testcluster.Member) bool {
		for g := range groups {
			if gr := m.Node().Group(g); !gr.IsLeader() || !gr.Allocator().Serving() {
				return false
			}
		}
		return true
	}
	serving := func() (n int) {
		for _, m := range restored.Nodes {
			if servingAll(m) {
				n++
			}
		}
		return n
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := serving(); n > 1 {
			t.Fatalf("%d servers restored from one backup serve every group", n)
		}
	}
	seen := map[uint64]map[uint64]string{} // key -> value -> server
	for _, m := range restored.Nodes {
		c, err := client.New([]string{m.APIAddr}, client.Options{DisableRouting: true, RetryFor: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		vals, err := c.Next(ctx, seqd.DefaultSpaceName, keys...)
		if err != nil {
			t.Logf("%s: %v", m.ID, err)
			continue
		}
		for i, k := range keys {
			if seen[k] == nil {
				seen[k] = map[uint64]string{}
			}
			if by, dup := seen[k][vals[i]]; dup {
				t.Fatalf("key %d: value %d handed out by %s and again by %s (each server restored the backup into its own one-server cluster; serving all groups: %v %v %v)",
					k, vals[i], by, m.ID, servingAll(restored.Nodes[0]), servingAll(restored.Nodes[1]), servingAll(restored.Nodes[2]))
			}
			seen[k][vals[i]] = m.ID
		}
	}

	// The remedy the refusal names: keep one restored server, start the
	// others empty with the same --join. They join it, and it serves above
	// every value the old cluster handed out.
	keep := restored.Nodes[0]
	for _, m := range restored.Nodes[1:] {
		m.Kill()
		m.Wipe()
	}
	restored.SetGroups(groups) // as `seqd serve` with the cluster's count (or adopting it)
	for _, m := range restored.Nodes[1:] {
		m.Restart()
	}
	deadline := time.Now().Add(2 * failoverWait)
	for !servingAll(keep) {
		if time.Now().After(deadline) {
			t.Fatalf("the kept restored server %s does not serve after the others were wiped", keep.ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rc, err := client.New(restored.APIAddrs(), client.Options{RetryFor: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	vals, err := rc.Next(ctx, seqd.DefaultSpaceName, keys...)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if vals[i] <= issued[k] {
			t.Fatalf("key %d: %d after the restore, not above %d handed out before the backup", k, vals[i], issued[k])
		}
	}
	restored.WaitVoters(3, 2*failoverWait)
}

// TestRestoreWhileSourceClusterRuns: a backup restored onto a new server
// (a new ID) that gossips with the cluster the backup was taken from, which
// still runs, refuses to serve: both clusters would hand out the same
// values. Once that cluster is stopped, the restored server serves.
func TestRestoreWhileSourceClusterRuns(t *testing.T) {
	old, cl, ctx := servingCluster(t, testcluster.Options{Groups: 2})
	file := backupFile(t, ctx, cl)
	var join []string
	for _, m := range old.Nodes {
		join = append(join, m.GossipAddr)
	}
	restored := testcluster.New(t, 1, testcluster.Options{}, func(_ int, m *testcluster.Member) {
		m.ID = "r1"
		m.Join = join
		m.RaftAddr = freeAddr(t)
		if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file,
			ID: m.ID, DataDir: m.Dir, RaftAdvertise: m.RaftAddr}); err != nil {
			t.Fatal(err)
		}
	})
	r := restored.Nodes[0]
	// Twice soloWait: a lone server would have vouched for itself.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for g := range 2 {
			if r.Node().GroupAdmitted(g) || r.Node().Group(g).Allocator().Serving() {
				t.Fatalf("group %d of the restored server opened while the cluster it was restored from runs", g)
			}
		}
	}
	old.Close()
	restored.WaitAdmitted(r, 2*failoverWait)
	deadline := time.Now().Add(2 * failoverWait)
	for g := 0; g < 2; {
		if gr := r.Node().Group(g); gr.IsLeader() && gr.Allocator().Serving() {
			g++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d of the restored server does not serve after the old cluster stopped", g)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRestoreIntoMemberOfGroupsNeverServes: `seqd restore` run into a
// member of a running cluster of 2 groups (its data directory wiped first;
// the member led group 1) and the member started again with its usual
// flags: it is a new cluster that the running one lists in every group, so
// no group of it serves, and the running cluster keeps serving every group.
func TestRestoreIntoMemberOfGroupsNeverServes(t *testing.T) {
	const groups = 2
	c, cl, ctx := servingCluster(t, testcluster.Options{Groups: groups})
	keys := []uint64{0, 1, 2, 3, 4, 5, 6, 7}
	if _, err := cl.Next(ctx, seqd.DefaultSpaceName, keys...); err != nil {
		t.Fatal(err)
	}
	file := backupFile(t, ctx, cl)
	victim := servingLeader(t, c, 1)
	victim.Kill()
	victim.Wipe()
	if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file, ValuesSince: 1 << 20, TermsSince: 100,
		ID: victim.ID, DataDir: victim.Dir, RaftAdvertise: victim.RaftAddr}); err != nil {
		t.Fatal(err)
	}
	victim.Restart()
	pinned, err := client.New([]string{victim.APIAddr}, client.Options{DisableRouting: true, RetryFor: -1, DisableCoalescing: true})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(9 * time.Second) // well past soloWait
	for time.Now().Before(until) {
		for g := range groups {
			if gr := victim.Node().Group(g); gr.Allocator().Serving() {
				t.Fatalf("the restored member serves group %d", g)
			}
		}
		cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, _ = pinned.Next(cctx, seqd.DefaultSpaceName, keys...)
		ccancel()
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := cl.Next(ctx, seqd.DefaultSpaceName, keys...); err != nil {
		t.Fatalf("the running cluster: %v", err)
	}
	// The restore never served, so its generation fences nothing: not
	// through gossip, nor through a client that met its errors.
	for _, m := range c.Nodes {
		if n := m.Node(); n != nil && m != victim && n.Fenced() {
			t.Fatalf("%s of the running cluster was fenced by %s", m.ID, n.FencedBy())
		}
	}
	if g := cl.Generation(); g.Number != 0 {
		t.Fatalf("the client met generation %v, which never served", g)
	}
}

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
	siblingRestoreNeverServesBeside(t, ctx, x, file, keys)
}

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
	siblingRestoreNeverServesBeside(t, ctx, x, file, keys)
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

// siblingRestoreNeverServesBeside hands out values from the restored
// cluster x, kills the server the restore ran on (x.Nodes[0]) while the
// others serve on, restores the same backup again on a new server b1 that
// gossips with x, and fails if b1 serves while x does, for twice soloWait.
func siblingRestoreNeverServesBeside(t *testing.T, ctx context.Context, x *testcluster.Cluster, file string, keys []uint64) {
	t.Helper()
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
