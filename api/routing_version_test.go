package api_test

import (
	"context"
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

// TestRoutingVersionHeaderMatchesClusterStatus: the Seqd-Routing-Version
// header on a Next answer and ClusterStatusResponse.version (full and
// local-only) come from one source, the node's routing version, also right
// after a membership change (when a version computed afresh would run ahead
// of the one answers carry, and every answer would send a client to refresh
// again). Samples where the node's version changed in between, or that this
// node did not answer as leader, are skipped.
func TestRoutingVersionHeaderMatchesClusterStatus(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	node := leader.Node()
	base := "http://" + leader.APIAddr
	seq := seqv1connect.NewSequenceServiceClient(http.DefaultClient, base)
	admin := seqv1connect.NewAdminServiceClient(http.DefaultClient, base)
	ctx := context.Background()

	compared := 0
	sample := func() {
		t.Helper()
		before := node.RoutingVersion()
		ans, err := seq.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1}}))
		if err != nil || ans.Header().Get(seqd.HeaderServedBy) != leader.ID {
			return // not answered by this node (it lost leadership, say)
		}
		hdr, err := strconv.ParseUint(ans.Header().Get(seqd.HeaderRoutingVersion), 10, 64)
		if err != nil {
			t.Fatalf("Next answer's %s: %v", seqd.HeaderRoutingVersion, err)
		}
		full, err := admin.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
		if err != nil {
			return
		}
		lreq := connect.NewRequest(&seqv1.ClusterStatusRequest{})
		lreq.Header().Set(seqd.HeaderLocalOnly, "1")
		local, err := admin.ClusterStatus(ctx, lreq)
		if err != nil {
			return
		}
		if node.RoutingVersion() != before {
			return // the version moved during the sample
		}
		compared++
		if hdr != before || full.Msg.GetVersion() != hdr || local.Msg.GetVersion() != hdr {
			t.Fatalf("routing versions differ: node %d, Next header %d, ClusterStatus %d, local-only ClusterStatus %d",
				before, hdr, full.Msg.GetVersion(), local.Msg.GetVersion())
		}
	}

	for range 3 {
		sample()
	}
	// A membership change: the configuration (hence the version) changes at
	// once, the node's version at its next reconcile pass.
	var follower *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			follower = m
			break
		}
	}
	if _, err := admin.RemoveNode(ctx, connect.NewRequest(&seqv1.RemoveNodeRequest{Id: follower.ID})); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		sample()
	}
	if compared < 3 {
		t.Fatalf("only %d samples compared", compared)
	}
}
