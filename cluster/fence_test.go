package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
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

// A client carries generations between clusters that never gossip: a
// backup of cluster S is restored as R elsewhere (its gossip never meets
// S's) while S still runs, and a client that had answers from R calls S. S
// learns from the client's Seqd-Generation that a newer generation of its
// lineage has served, and stops for good before it answers; the client
// never returns a value from S.
func TestAClientCarriesTheGenerationToTheClusterItReplaced(t *testing.T) {
	s := testcluster.Start(t, 1, testcluster.Options{Redis: true})
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
	// Nor over the other front ends: Leaf's HTTP API, the Redis protocol.
	resp, err := http.Get("http://" + s.Nodes[0].APIAddr + "/api/segment/get/default")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a fenced server's Leaf answer: %d, want 503", resp.StatusCode)
	}
	if line := respCommand(t, s.Nodes[0].RedisAddr, "INCR 7"); !strings.HasPrefix(line, "-") {
		t.Fatalf("a fenced server's INCR answer: %q, want an error", line)
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

// respCommand sends one inline Redis command to addr and returns the first
// line of its reply.
func respCommand(t *testing.T, addr, cmd string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}
