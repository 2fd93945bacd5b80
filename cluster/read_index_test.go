package cluster_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestAReadIndexIsNeverBehindTheCommit: a group's read index (what a
// server's copy of group 0 must reach before its groups add a server) is
// at or above every entry committed before it was asked, from whoever
// answers. A leader cut off from the others, which a new leader replaced
// and which still takes itself for the leader (its raft timers are slow,
// so it has not stepped down yet), must not answer its own stale index,
// directly or over the API; the new leader answers one at or above what
// it committed.
func TestAReadIndexIsNeverBehindTheCommit(t *testing.T) {
	c := testcluster.New(t, 3, testcluster.Options{}, func(i int, m *testcluster.Member) {
		if i == 0 {
			m.Heartbeat = 20 * time.Second // steps down 10 s after it is cut off
		}
	})
	slow := c.Nodes[0]
	// Until it serves, its heartbeats (every 2 to 4 s) may not keep the
	// others from electing: move the leadership to it until it serves
	// (then its lease renewals keep them quiet).
	deadline := time.Now().Add(failoverWait)
	for l := c.WaitServingLeader(failoverWait); l != slow; l = c.WaitServingLeader(failoverWait) {
		if time.Now().After(deadline) {
			t.Fatalf("group 0's leader is %s, want %s", l.ID, slow.ID)
		}
		if err := l.Node().TransferLeadership(slow.ID); err != nil {
			t.Logf("moving group 0's leadership to %s: %v", slow.ID, err)
		}
	}
	slow.Isolate()
	// Its slow timers would hold up a graceful stop at the end: crash it.
	defer slow.Kill()
	next := c.WaitServingLeader(failoverWait, slow)
	if _, err := next.Node().CreateSpace(context.Background(), seqd.Space{Name: "after", Step: 1, SectionSize: 1}); err != nil {
		t.Fatal(err)
	}
	committed := next.Node().Group(0).Raft().AppliedIndex()
	if stale := slow.Node().Group(0).Raft().AppliedIndex(); stale >= committed || !slow.Node().IsLeader() {
		t.Fatalf("the cut-off leader has applied %d (the commit is at %d), leads: %v: the test shows nothing", stale, committed, slow.Node().IsLeader())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if index, err := slow.Node().ReadIndex(ctx, 0); err == nil {
		t.Fatalf("the cut-off leader answered read index %d (the commit is at %d)", index, committed)
	} else if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, seqd.ErrNotLeader) {
		t.Fatalf("the cut-off leader's refusal: %v, want deadline exceeded or not the leader", err)
	}
	if index, err := apiReadIndex(t, slow); err == nil {
		t.Fatalf("the cut-off leader answered read index %d over the API (the commit is at %d)", index, committed)
	} else if code := connect.CodeOf(err); code != connect.CodeDeadlineExceeded && code != connect.CodeUnavailable {
		t.Fatalf("the cut-off leader's refusal over the API: %v, want deadline_exceeded or unavailable", err)
	}
	if !slow.Node().IsLeader() {
		t.Fatal("the cut-off leader stepped down while it was asked: the test shows nothing")
	}
	index, err := apiReadIndex(t, next)
	if err != nil || index < committed {
		t.Fatalf("the new leader's read index over the API: %d, %v; want at least %d", index, err, committed)
	}
}

// apiReadIndex asks m for its read index of group 0 as a peer does.
func apiReadIndex(t *testing.T, m *testcluster.Member) (uint64, error) {
	t.Helper()
	ac := seqv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+m.APIAddr)
	r := connect.NewRequest(&seqv1.ClusterStatusRequest{})
	r.Header().Set(seqd.HeaderLocalOnly, "1")
	r.Header().Set(seqd.HeaderReadIndex, "0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := ac.ClusterStatus(ctx, r)
	if err != nil {
		return 0, err
	}
	h := resp.Header().Get(seqd.HeaderReadIndex)
	index, err := strconv.ParseUint(h, 10, 64)
	if err != nil {
		t.Fatalf("%s answered %s %q", m.ID, seqd.HeaderReadIndex, h)
	}
	return index, nil
}
