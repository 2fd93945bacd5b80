package groupstest_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
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
	waitBalanced(t, c, 30*time.Second)
	leader := c.GroupLeaders()[g]
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
	copyEnd := c.GroupLeaders()[g].Node().Group(g).Raft().LastIndex()
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
		for i != g && !victim.Node().GroupVouched(i) {
			if time.Now().After(deadline) {
				t.Fatalf("group %d of %s was not vouched for", i, victim.ID)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		n := victim.Node()
		if n.GroupVouched(g) {
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
	c.WaitVouched(victim, 30*time.Second)
	c.WaitVoters(3, 30*time.Second)
	take(20)
}
