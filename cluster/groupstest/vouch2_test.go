package groupstest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestGroupsWipedGroupDoesNotVouchForOlderCopy: per-group vouching asks
// the servers that gossip says hold state, and gossip's "holds state"
// describes group 0. So a voter whose directory of one group was wiped
// (its group 0 intact) is asked about that group after a full-cluster
// restart, answers from nothing, and its answer counts towards the
// N - majority + 1 answers that must include every committed record.
//
// Three servers, three groups. While B is cut off group g's raft traffic,
// group g commits on A and W alone (A's progress recorded by them, values
// handed out). Then, with every server stopped, A's groups/<g>/ is put
// back from an older copy and W's groups/<g>/ is wiped (W refuses to start
// once, naming the missing directory, and starts on the next try). A asks
// B (which lags) and W (which holds nothing of group g): neither has the
// record of A's log, so A was let in on its older copy, A and B formed
// group g's majority without the entries A and W committed, and values
// already returned were returned again (found by an adversarial review).
// Now an answer from a log of index 0 does not count: A waits for W.
// (W's group directory is replaced by an empty raft log, as a wiped
// directory restored empty: a missing directory is refused at start.)
func TestGroupsWipedGroupDoesNotVouchForOlderCopy(t *testing.T) {
	const groups, g = 3, 2
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	waitBalanced(t, c, 60*time.Second)
	A, B, W := c.Nodes[0], c.Nodes[1], c.Nodes[2]

	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.CreateSpace(ctx, "wg", 2, 1); err != nil {
		t.Fatal(err)
	}
	key := keysOfGroup("wg", g, groups, 1)[0]
	var highest uint64
	take := func(n int, deadline time.Time) {
		t.Helper()
		for i := 0; i < n; {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			v, err := cl.Next(cctx, "wg", key)
			cancel()
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatalf("next: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			highest = max(highest, v[0])
			i++
		}
	}
	take(20, time.Now().Add(30*time.Second))

	// B stops receiving group g's entries; A and W carry the group.
	B.Node().CutGroupTraffic(g, true)
	take(10, time.Now().Add(30*time.Second))

	// An older copy of A's group g directory.
	A.Kill()
	groupDirA := filepath.Join(A.Dir, "groups", "2")
	copyDir := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(copyDir, os.DirFS(groupDirA)); err != nil {
		t.Fatal(err)
	}
	copyEnd := W.Node().Group(g).Raft().LastIndex()
	A.Restart()
	deadline := time.Now().Add(60 * time.Second)
	for {
		take(10, deadline)
		if _, rec := W.Node().Group(g).FSM().ServerSeen(A.ID); rec > copyEnd+10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d never recorded %s's progress beyond %d", g, A.ID, copyEnd)
		}
	}
	if _, rec := B.Node().Group(g).FSM().ServerSeen(A.ID); rec > copyEnd {
		t.Fatalf("B (cut off group %d) recorded %s at %d, beyond the copy's %d: setup failed", g, A.ID, rec, copyEnd)
	}
	t.Logf("highest value returned for key %d (group %d): %d", key, g, highest)

	// Full-cluster stop; A's group g from the older copy, W's group g wiped.
	for _, m := range c.Nodes {
		m.Kill()
	}
	if err := os.RemoveAll(groupDirA); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(groupDirA, os.DirFS(copyDir)); err != nil {
		t.Fatal(err)
	}
	wg := filepath.Join(W.Dir, "groups", "2")
	if err := os.RemoveAll(wg); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(wg, 0o750); err != nil {
		t.Fatal(err)
	}
	empty, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(wg, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	empty.Close()
	A.Restart()
	B.Restart()
	W.Restart()

	cl2, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(30 * time.Second)
	for time.Now().Before(until) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := cl2.Next(cctx, "wg", key)
		cancel()
		if err == nil && v[0] <= highest {
			t.Fatalf("key %d of group %d returned %d after the restart, but %d was returned before it (repeat); %s vouched in group %d on an older copy: %v",
				key, g, v[0], highest, A.ID, g, A.Node().GroupAdmitted(g))
		}
		if err == nil {
			highest = v[0]
		}
		if A.Node().GroupAdmitted(g) {
			t.Errorf("%s was vouched for in group %d on an older copy of its group directory (B lags, W's group %d is wiped)", A.ID, g, g)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	waitBalanced(t, c, 60*time.Second)
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
