package groupstest_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestNamespacesNotFoundThroughFollowerOnlyWhileServing (review of
// 0574e5b): DESIGN §7 says "a leader that does not hold its lease answers
// an unknown namespace with unavailable, never not_found". 0574e5b checks
// the lease only where the server asked is the leader (api/id.go
// namespace, its local function). A follower that does not find a
// namespace forwards ListNamespaces to the leader, whose ListNamespaces
// (api/id_admin.go) answers from its own state whether or not it holds its
// lease; the follower then answers not_found from the state of a leader
// that may lack a namespace created since (the case the fix is about).
func TestNamespacesNotFoundThroughFollowerOnlyWhileServing(t *testing.T) {
	c, nl := leaderWaitingOutLease(t)
	var f *testcluster.Member
	for _, m := range c.Nodes {
		if m.Node() != nil && m != nl {
			f = m // the running follower (the old leader was killed)
		}
	}
	// The follower knows the new leader (a heartbeat away).
	deadline := time.Now().Add(30 * time.Second)
	for id, _ := f.Node().Leader(); id != nl.ID; id, _ = f.Node().Leader() {
		if time.Now().After(deadline) {
			t.Fatalf("%s does not know the leader %s", f.ID, nl.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct, err := client.New([]string{f.APIAddr}, client.Options{DisableRouting: true, RetryFor: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, nerr := direct.NextIds(ctx, "nobody", 1)
	if nl.Node().Allocator().Serving() {
		t.Skip("the new leader served before the call (a slow machine)")
	}
	if connect.CodeOf(nerr) != connect.CodeUnavailable {
		t.Fatalf("NextIds of an unknown namespace through follower %s while leader %s waits out the lease: %v, want unavailable", f.ID, nl.ID, nerr)
	}
}
