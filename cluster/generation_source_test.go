package cluster_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// A server learns a newer generation from a caller only on a call that asks
// for values and passed the token that guards them: the header means "I
// took values from this generation". A caller without the token names a
// made-up newer generation (built from what every answer carries) on a
// health check, the one call that stays open with --token and
// --token-sequence, and on a Next it is refused: no server is fenced, and
// the cluster keeps serving.
func TestOnlyACallForValuesTeachesAGeneration(t *testing.T) {
	const token = "s3cret"
	c := testcluster.Start(t, 3, testcluster.Options{Token: token, TokenSequence: true})
	c.WaitServingLeader(failoverWait)
	cl := newClient(t, c.APIAddrs(), client.Options{Token: token})
	advNext(t, cl, "default", 42)

	addr := c.Nodes[1].APIAddr
	g, err := seqd.ParseGeneration(healthCheck(t, addr, ""))
	if err != nil || !g.Known() {
		// Health answers carry no generation: build one from a value answer.
		g = c.Nodes[1].Node().Generation()
	}
	if !g.Known() {
		t.Fatal("the server has no generation")
	}
	forged := g.Lineage + "/" + strconv.FormatUint(g.Number+1, 10) + "/forged"
	healthCheck(t, addr, forged)
	plain := seqv1connect.NewSequenceServiceClient(http.DefaultClient, "http://"+addr)
	req := connect.NewRequest(&seqv1.NextRequest{Space: "default", Keys: []uint64{42}})
	req.Header().Set(seqd.HeaderGeneration, forged)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := plain.Next(ctx, req); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Next without the token: %v, want unauthenticated", err)
	}
	// Gossip would spread a fence within a round or two; look for longer.
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
		for _, m := range c.Nodes {
			if nd := m.Node(); nd != nil && nd.Fenced() {
				t.Fatalf("%s is fenced by %q after calls without the token named a made-up generation", m.ID, nd.FencedBy())
			}
		}
	}
	advNext(t, cl, "default", 42)
}

// healthCheck calls grpc.health.v1.Health/Check (Connect, JSON) on addr
// without a token, naming gen in Seqd-Generation when it is not empty, and
// returns the Seqd-Generation of the answer.
func healthCheck(t *testing.T, addr, gen string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if gen != "" {
		req.Header.Set(seqd.HeaderGeneration, gen)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health check: %s", resp.Status)
	}
	return resp.Header.Get(seqd.HeaderGeneration)
}
