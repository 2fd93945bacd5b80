package groupstest_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/testcluster"
)

// keysOfGroup returns n keys of space (section size 1) owned by group g of
// groups.
func keysOfGroup(space string, g, groups, n int) []uint64 {
	var keys []uint64
	for k := uint64(1); len(keys) < n; k++ {
		if seqd.GroupOfKey(space, 1, k, groups) == g {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestGroupsOlderCopyOfOneGroupRefused: a server's directory of one group
// (groups/<g>/) is put back from an older copy while group 0's and the
// other groups' stay current. The group's leader recorded how far the
// server's log of the group reached, so the server refuses that group's
// raft traffic (it may have acknowledged entries the copy lacks) while its
// other groups take part; the documented way back (remove, wipe, start)
// brings it back in every group.
func TestGroupsOlderCopyOfOneGroupRefused(t *testing.T) {
	const groups, g = 3, 1
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(30 * time.Second)
	leader := servingLeader(t, c, g)
	var victim *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			victim = m
			break
		}
	}
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "old", 2, 1); err != nil {
		t.Fatal(err)
	}
	// One key per section, step 2: every other value is a raft entry of
	// group g.
	keys := keysOfGroup("old", g, groups, 20)
	take := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := cl.Next(ctx, "old", keys[i%len(keys)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	take(100)
	victim.Kill()
	groupDir := filepath.Join(victim.Dir, "groups", strconv.Itoa(g))
	copyDir := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(copyDir, os.DirFS(groupDir)); err != nil {
		t.Fatal(err)
	}
	copyEnd := servingLeader(t, c, g).Node().Group(g).Raft().LastIndex()
	victim.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for {
		take(50)
		l := c.GroupLeaders()[g]
		if l != nil {
			if _, rec := l.Node().Group(g).FSM().ServerSeen(victim.ID); rec > copyEnd+10 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d's leader never recorded %s's progress beyond %d", g, victim.ID, copyEnd)
		}
	}
	victim.Kill()
	if err := os.RemoveAll(groupDir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(groupDir, os.DirFS(copyDir)); err != nil {
		t.Fatal(err)
	}
	victim.Restart()
	// Its other groups are vouched for; group g never is.
	deadline = time.Now().Add(15 * time.Second)
	for i := range groups {
		for i != g && !victim.Node().GroupAdmitted(i) {
			if time.Now().After(deadline) {
				t.Fatalf("group %d of %s was not vouched for", i, victim.ID)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		n := victim.Node()
		if n.GroupAdmitted(g) {
			t.Fatalf("%s took part in group %d on an older copy of the group's directory", victim.ID, g)
		}
		st := n.Status()
		if st.RaftOpen || st.Groups[g].RaftOpen {
			t.Fatalf("status says raft open: node %v, group %d %v", st.RaftOpen, g, st.Groups[g].RaftOpen)
		}
		take(5)
		time.Sleep(50 * time.Millisecond)
	}
	// The documented way back: remove, wipe, start.
	if err := cl.RemoveNode(ctx, victim.ID); err != nil {
		t.Fatal(err)
	}
	victim.Kill()
	victim.Wipe()
	victim.Restart()
	c.WaitAdmitted(victim, 30*time.Second)
	c.WaitVoters(3, 30*time.Second)
	take(20)
}

// TestGroupsSwappedOrForeignGroupDirectoryRefused: a server's group
// directories swapped (groups/1/ holds group 2's state and the other way
// round), or one replaced by another server's copy, or the data directory
// started under another --id: the server refuses to start, naming the
// mix-up, and starts again once the directories are put back. (Vouching
// alone compares indexes and terms, which two groups' logs often share: a
// swapped directory could be let in and hand out values of the other
// group's keys again.)
func TestGroupsSwappedOrForeignGroupDirectoryRefused(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	victim, other := c.Nodes[0], c.Nodes[1]
	g1 := filepath.Join(victim.Dir, "groups", "1")
	g2 := filepath.Join(victim.Dir, "groups", "2")
	swap := func() {
		t.Helper()
		tmp := filepath.Join(victim.Dir, "groups", "swap")
		for _, mv := range [][2]string{{g1, tmp}, {g2, g1}, {tmp, g2}} {
			if err := os.Rename(mv[0], mv[1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	victim.Kill()
	swap()
	err := victim.TryRestart()
	if err == nil || !strings.Contains(err.Error(), "holds group 2 of server "+victim.ID) {
		t.Fatalf("restart with groups/1 and groups/2 swapped: %v, want a refusal naming the swap", err)
	}
	swap()
	victim.Restart()
	c.WaitBalanced(60 * time.Second)

	// Another server's copy of group 1.
	victim.Kill()
	other.Kill()
	saved := filepath.Join(t.TempDir(), "own")
	if err := os.Rename(g1, saved); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(g1, os.DirFS(filepath.Join(other.Dir, "groups", "1"))); err != nil {
		t.Fatal(err)
	}
	other.Restart()
	err = victim.TryRestart()
	if err == nil || !strings.Contains(err.Error(), "holds group 1 of server "+other.ID) {
		t.Fatalf("restart with another server's copy of group 1: %v, want a refusal", err)
	}
	if err := os.RemoveAll(g1); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(saved, g1); err != nil {
		t.Fatal(err)
	}
	victim.Restart()
	c.WaitBalanced(60 * time.Second)
}

// TestGroupsProtocolMoveWaitsForEqualCounts: a leader moves the cluster to
// a newer protocol (whose entry records the group count) only while every
// server of the configuration runs its count: a server of another count
// (given another --groups, and added by a leader of an earlier build that
// did not check) must not get its count recorded as the cluster's.
func TestGroupsProtocolMoveWaitsForEqualCounts(t *testing.T) {
	c := testcluster.Start(t, 2, testcluster.Options{Groups: 2})
	c.WaitBalanced(60 * time.Second)
	n := c.Nodes[0].Node()
	conf := raft.Configuration{Servers: []raft.Server{
		{ID: raft.ServerID(c.Nodes[0].ID), Suffrage: raft.Voter},
		{ID: raft.ServerID(c.Nodes[1].ID), Suffrage: raft.Voter},
	}}
	if got := n.ProtocolTarget(conf); got != fsm.ProtocolVersion {
		t.Fatalf("servers of equal counts: protocol target %d, want %d", got, fsm.ProtocolVersion)
	}
	c.SetGroups(3)
	odd := c.Join() // runs 3 groups; the leader does not add it
	deadline := time.Now().Add(10 * time.Second)
	for {
		seen := false
		for _, m := range n.Members() {
			seen = seen || (m.ID == odd.ID && m.Alive && m.Groups == 3)
		}
		if seen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server of 3 groups never showed up in gossip")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(odd.ID), Suffrage: raft.Voter})
	if got := n.ProtocolTarget(conf); got != 0 {
		t.Fatalf("protocol target %d with a server of another count in the configuration: its count would be recorded", got)
	}
}

// TestGroupsLostLogWithSnapshotsRefused: a group's raft.db (its log, term
// and vote) deleted while its snapshots stay: the snapshots would pass for
// raft state, but the vote is lost, so the server refuses to start.
func TestGroupsLostLogWithSnapshotsRefused(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Groups: 2})
	c.WaitBalanced(60 * time.Second)
	victim := c.Nodes[0]
	for i := range 2 {
		if err := victim.Node().Group(i).Snapshot(); err != nil {
			t.Fatalf("group %d snapshot: %v", i, err)
		}
	}
	victim.Kill()
	for _, dir := range []string{filepath.Join(victim.Dir, "groups", "1"), victim.Dir} {
		saved := filepath.Join(t.TempDir(), "raft.db")
		if err := os.Rename(filepath.Join(dir, "raft.db"), saved); err != nil {
			t.Fatal(err)
		}
		if err := victim.TryRestart(); err == nil || !strings.Contains(err.Error(), "vote") {
			t.Fatalf("restart without %s/raft.db, snapshots kept: %v, want a refusal", dir, err)
		}
		if err := os.Rename(saved, filepath.Join(dir, "raft.db")); err != nil {
			t.Fatal(err)
		}
	}
	victim.Restart()
	c.WaitBalanced(60 * time.Second)
}

// TestGroupsMissingGroupDirectoryRefusalHolds: a server whose group 0
// holds state while groups/<g>/ is missing refuses to start (that group
// forgot its votes and acknowledged entries; README: "is refused at
// start"). The refusal must hold on the next start too: the operator
// trying again, or a supervisor restarting the service, changes nothing
// on disk that should make the directory acceptable. The refused start
// opens every group before it checks, so it creates groups/<g>/ with an
// empty raft.db, and the next start took the directory for one of a group
// the server had not been added to yet. Now the check runs before anything
// is opened.
func TestGroupsMissingGroupDirectoryRefusalHolds(t *testing.T) { // found by an adversarial review
	const groups, g = 3, 2
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	victim := c.Nodes[0]
	victim.Kill()
	if err := os.RemoveAll(filepath.Join(victim.Dir, "groups", "2")); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		err := victim.TryRestart()
		if err == nil {
			t.Fatalf("start %d without groups/%d (group 0 holds state) was accepted", attempt, g)
		}
		if !strings.Contains(err.Error(), "group 2's directory is missing") {
			t.Fatalf("start %d: %v, want the refusal naming group %d", attempt, err, g)
		}
	}
}
