package groupstest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/testcluster"
)

// spreadKeys returns n keys of a space of the given section size, one per
// section, and checks that they cover every one of groups groups.
func spreadKeys(t *testing.T, space string, sectionSize uint64, n, groups int) []uint64 {
	t.Helper()
	var keys []uint64
	covered := map[int]bool{}
	for sec := range uint64(n) {
		k := sec*sectionSize + 1
		keys = append(keys, k)
		covered[seqd.GroupOfKey(space, sectionSize, k, groups)] = true
	}
	if len(covered) != groups {
		t.Fatalf("keys of %d sections cover groups %v of %d", n, covered, groups)
	}
	return keys
}

// TestGroupsBackupRestoreNeverRepeats: a cluster of 3 nodes and 3 groups,
// its leaders spread, hands out values on keys of every group; a backup
// taken through one node gathers every group's part from its leader (two of
// them forwarded) into one file recording the 3 groups, the slot count and
// each part's term. More values follow, the cluster is lost, and a cluster
// restored from the backup, with the margin the documented procedure gives
// (the largest increase of any group's term since its part, plus 1), runs
// 3 groups, and every key continues above every value handed out before
// the backup plus the margin, and above every value ever handed out. Two
// servers join; every group serves on them after the restored server is
// killed, so each group's state reached them through raft. A restore asked
// for another group count is refused, writing nothing.
func TestGroupsBackupRestoreNeverRepeats(t *testing.T) {
	const groups = 3
	old := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	old.WaitBalanced(failoverWait)
	cl, err := client.New(old.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const step = 20
	if _, err := cl.CreateSpace(ctx, "bk", step, 4); err != nil {
		t.Fatal(err)
	}
	keys := spreadKeys(t, "bk", 4, 12, groups)
	issued := map[uint64]uint64{}
	take := func(c *client.Client, rounds int) {
		t.Helper()
		for range rounds {
			vals, err := c.Next(ctx, "bk", keys...)
			for err != nil && connect.CodeOf(err) == connect.CodeNotFound {
				// A group leader's copy of the new space may lag its
				// create by a heartbeat.
				time.Sleep(5 * time.Millisecond)
				vals, err = c.Next(ctx, "bk", keys...)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				if vals[i] <= issued[k] {
					t.Fatalf("key %d: %d after %d", k, vals[i], issued[k])
				}
				issued[k] = vals[i]
			}
		}
	}
	take(cl, 30)
	beforeBackup := map[uint64]uint64{}
	for k, v := range issued {
		beforeBackup[k] = v
	}

	// Back up through a node that leads one group only: the other two
	// parts come from the other leaders.
	via := servingLeader(t, old, 1)
	bc, err := client.New([]string{via.APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bc.Backup(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sum, err := fsm.InspectBackup(file)
	if err != nil {
		t.Fatal(err)
	}
	info := sum.Info
	if info.Groups != groups || info.Slots != seqd.SlotCount || len(info.Parts) != groups || info.ClusterID != old.Nodes[0].Node().ClusterID() || info.Term != info.Parts[0].Term {
		t.Fatalf("backup info %+v", info)
	}
	for g, p := range info.Parts {
		if p.Term == 0 || p.Index == 0 {
			t.Fatalf("group %d's part taken at term %d, index %d", g, p.Term, p.Index)
		}
	}
	if sum.Sections != len(keys) {
		t.Fatalf("the backup holds %d sections, want the %d raised in every group", sum.Sections, len(keys))
	}

	// A part is answered only by its group's serving leader, never
	// forwarded: another server names the leader.
	admin := seqv1connect.NewAdminServiceClient(api.NewH2CClient(), "http://"+via.APIAddr)
	part := func(g uint32) error {
		stream, err := admin.Backup(ctx, connect.NewRequest(&seqv1.BackupRequest{Group: &g}))
		if err != nil {
			return err
		}
		defer stream.Close()
		for stream.Receive() {
		}
		return stream.Err()
	}
	if err := part(1); err != nil {
		t.Fatalf("group 1's part from its leader: %v", err)
	}
	for attempt := 0; ; attempt++ {
		leader0 := servingLeader(t, old, 0)
		if leader0 == via {
			t.Fatalf("%s leads groups 0 and 1", via.ID)
		}
		var ce *connect.Error
		err := part(0)
		if errors.As(err, &ce) && ce.Code() == connect.CodeUnavailable && ce.Meta().Get(seqd.HeaderLeader) == leader0.APIAddr {
			break
		}
		if attempt < 3 && old.GroupLeaders()[0] != leader0 {
			continue // group 0's leadership moved meanwhile
		}
		t.Fatalf("group 0's part from another server: %v, want unavailable naming %s", err, leader0.APIAddr)
	}
	if err := part(groups); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("the part of a group the cluster does not have: %v", err)
	}

	take(cl, 20) // not in the backup
	// The documented bound on the terms since the backup: the largest
	// increase of any group's term since its part (the highest term any
	// server reports, as seqd_group_raft_term does), plus 1.
	var terms uint64 = 1
	for g := range groups {
		var now uint64
		for _, m := range old.Nodes {
			now = max(now, m.Node().Group(g).Status().Term)
		}
		terms = max(terms, now-info.Parts[g].Term+1)
	}
	old.Close()

	// Another group count is refused, writing nothing.
	refused := filepath.Join(t.TempDir(), "refused")
	if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: file, TermsSince: 1, Groups: 2, ID: "x", DataDir: refused, RaftAdvertise: "127.0.0.1:1"}); !errors.Is(err, fsm.ErrGroupCount) {
		t.Fatalf("restore into 2 groups: %v", err)
	}
	if _, err := os.Stat(refused); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore created %s (%v)", refused, err)
	}

	// 20 rounds of one value per key since the backup.
	margin, err := fsm.MinMargin(20, terms, sum.MaxStep) // the default space has the largest step
	if err != nil {
		t.Fatal(err)
	}
	// The restored node runs the backup's count without being told (the
	// joiners below must be started with it, as any joining server).
	restored := testcluster.StartRestored(t, file, 0, testcluster.Options{})
	first := restored.Nodes[0]
	if n := first.Node().Groups(); n != groups {
		t.Fatalf("the restored node runs %d groups, want %d", n, groups)
	}
	if b, err := os.ReadFile(filepath.Join(first.Dir, "group-count")); err != nil || strings.TrimSpace(string(b)) != "3" {
		t.Fatalf("group-count: %q %v", b, err)
	}
	restored.WaitBalanced(failoverWait)
	for g := range groups {
		if n, rec := first.Node().Group(g).FSM().Groups(); n != groups || !rec {
			t.Fatalf("group %d records %d groups (%v)", g, n, rec)
		}
	}
	rc, err := client.New(restored.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vals, err := rc.Next(ctx, "bk", keys...)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if vals[i] <= beforeBackup[k]+margin || vals[i] <= issued[k] {
			t.Fatalf("key %d (group %d) after restore: %d; before the backup %d (+ margin %d), ever %d",
				k, seqd.GroupOfKey("bk", 4, k, groups), vals[i], beforeBackup[k], margin, issued[k])
		}
		issued[k] = vals[i]
	}

	// Grow to three servers; with the restored one gone, every group
	// serves on the joiners.
	restored.SetGroups(groups)
	restored.Join()
	restored.Join()
	restored.WaitVoters(3, failoverWait)
	waitGroupVoters(t, restored, groups, 3, failoverWait)
	first.Kill()
	waitAllServing(t, restored, failoverWait)
	rc2, err := client.New(restored.APIAddrs()[1:], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	take(rc2, 5)
}

// waitGroupVoters waits until every group's configuration, as its serving
// leader holds it, has voters voters.
func waitGroupVoters(t *testing.T, c *testcluster.Cluster, groups, voters int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok := 0
		for g, m := range c.GroupLeaders() {
			if m == nil {
				continue
			}
			st := m.Node().Group(g).Status()
			if st.Configuration == nil {
				continue
			}
			v := 0
			for _, s := range st.Configuration.Servers {
				if s.Suffrage == raft.Voter {
					v++
				}
			}
			if v == voters {
				ok++
			}
		}
		if ok == groups {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every group reached %d voters within %v", voters, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAllServing waits until every group has a serving leader.
func waitAllServing(t *testing.T, c *testcluster.Cluster, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, all := c.LeadCounts(); all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every group serves within %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
