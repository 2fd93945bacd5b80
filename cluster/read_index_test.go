package cluster_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestAReadIndexIsNeverBehindTheCommit: a group's read index (what a
// server's copy of group 0 must reach before its groups add a server) is
// at or above every entry committed before it was answered, from whoever
// answers. A leader cut off from the others, which a new leader replaced
// and which may still take itself for the leader, must not answer its own
// stale index, directly or over the API; the new leader answers one at or
// above what it committed.
func TestAReadIndexIsNeverBehindTheCommit(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	old := c.WaitServingLeader(failoverWait)
	old.Isolate()
	defer old.Heal()
	next := c.WaitServingLeader(failoverWait, old)
	if _, err := next.Node().CreateSpace(context.Background(), seqd.Space{Name: "after", Step: 1, SectionSize: 1}); err != nil {
		t.Fatal(err)
	}
	committed := next.Node().Group(0).Raft().AppliedIndex()
	if stale := old.Node().Group(0).Raft().AppliedIndex(); stale >= committed {
		t.Fatalf("the cut-off leader has applied %d, not behind the commit at %d: the test shows nothing", stale, committed)
	}

	if index, err := old.Node().ReadIndex(0); err == nil && index < committed {
		t.Fatalf("the cut-off leader answered read index %d, behind the commit at %d", index, committed)
	}
	if index, err := apiReadIndex(t, old); err == nil && index < committed {
		t.Fatalf("the cut-off leader answered read index %d over the API, behind the commit at %d", index, committed)
	} else if err != nil && connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("the cut-off leader's refusal: %v, want unavailable", err)
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
	resp, err := ac.ClusterStatus(context.Background(), r)
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
