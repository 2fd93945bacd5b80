package cluster_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// A client carries generations between clusters that never gossip: a
// backup of cluster S is restored as R elsewhere (its gossip never meets
// S's) while S still runs, and a client that had answers from R calls S. S
// learns from the client's Seqd-Generation that a newer generation of its
// lineage has served, and stops for good before it answers; the client
// never returns a value from S.
func TestAClientCarriesTheGenerationToTheClusterItReplaced(t *testing.T) {
	s := testcluster.Start(t, 1, testcluster.Options{})
	s.WaitServingLeader(failoverWait)
	cl := newClient(t, s.APIAddrs(), client.Options{})
	advNext(t, cl, "default", 7)
	file := backupTo(t, cl)
	r := testcluster.StartRestored(t, file, 0, testcluster.Options{})
	r.WaitServingLeader(failoverWait)

	both := newClient(t, []string{r.Nodes[0].APIAddr, s.Nodes[0].APIAddr}, client.Options{DisableRouting: true, RetryFor: 2 * time.Second})
	v := advNext(t, both, "default", 7)
	if g := both.Generation(); g.Number != 1 || !g.Supersedes(s.Nodes[0].Node().Generation()) {
		t.Fatalf("the client met %v, want the restore's generation (number 1)", g)
	}
	r.Nodes[0].Kill() // the client's next call goes to S
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got, err := both.Next(ctx, "default", 7); err == nil {
		t.Fatalf("the client returned %v from S (it had %d from R)", got, v)
	}
	if !s.Nodes[0].Node().Fenced() {
		t.Fatal("S was not fenced by the client's generation")
	}
	// S answers nobody now, a client that never met R included.
	plain := seqv1connect.NewSequenceServiceClient(http.DefaultClient, "http://"+s.Nodes[0].APIAddr)
	_, err := plain.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: "default", Keys: []uint64{7}}))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("a fenced server's answer: %v, want unavailable", err)
	}
	// A malformed generation is refused as bad input.
	req := connect.NewRequest(&seqv1.NextRequest{Space: "default", Keys: []uint64{7}})
	req.Header().Set(seqd.HeaderGeneration, "not a generation")
	if _, err := plain.Next(ctx, req); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a malformed Seqd-Generation: %v, want invalid_argument", err)
	}
	if !errors.Is(seqd.ErrSuperseded, seqd.ErrNotServing) {
		t.Fatal("ErrSuperseded must read as not serving (unavailable)")
	}
}
