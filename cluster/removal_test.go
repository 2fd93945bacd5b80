package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestRemovingTheLastVoterIsRefusedWithoutStoppingService: removing the
// only voter is refused (ErrLastVoter), and the refusal costs nothing: the
// leader, which would stop serving for its own removal, keeps serving
// throughout (a withheld leader serves again only after a lease).
func TestRemovingTheLastVoterIsRefusedWithoutStoppingService(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{Lease: 3 * time.Second})
	l := c.WaitServingLeader(failoverWait)
	if err := l.Node().RemoveServer(context.Background(), l.ID); !errors.Is(err, cluster.ErrLastVoter) {
		t.Fatalf("removing the last voter: %v, want ErrLastVoter", err)
	}
	if !l.Node().Allocator().Serving() {
		t.Fatal("the leader stopped serving for a removal that was refused")
	}
}
