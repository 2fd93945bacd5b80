package groupstest_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// A flake namespace created a moment ago issues ids through a server whose
// copy of group 0 has not applied the creation (its group 0 traffic is cut):
// the server asks group 0's leader instead of answering not_found, and a
// namespace nobody created stays not_found.
func TestGroupsNewNamespaceOnLaggingServer(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Groups: 3})
	c.WaitBalanced(60 * time.Second)
	leaders := c.GroupLeaders()
	var lag *testcluster.Member
	for _, m := range c.Nodes {
		if m != leaders[0] {
			lag = m
			break
		}
	}
	lag.Node().CutGroupTraffic(0, true)
	defer lag.Node().CutGroupTraffic(0, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := client.New([]string{leaders[0].APIAddr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "late"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := lag.Node().Namespace("late"); ok {
		t.Fatal("the lagging server's group 0 applied the create although its traffic was cut")
	}
	direct, err := client.New([]string{lag.APIAddr}, client.Options{DisableRouting: true, RetryFor: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := direct.NextIds(ctx, "late", 3)
	if err != nil {
		t.Fatalf("NextIds through a server whose copy of group 0 lags: %v", err)
	}
	if len(ids) != 3 || ids[0] >= ids[1] || ids[1] >= ids[2] {
		t.Fatalf("ids %v, want 3 increasing ids", ids)
	}
	if _, err := direct.NextIds(ctx, "never-created", 1); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("NextIds on a namespace never created: %v, want not_found", err)
	}
}

// A leader that does not hold its lease yet (it waits out its predecessor's)
// neither creates a namespace nor answers not_found from its own state: an
// older leader may still serve, so both are unavailable until it serves.
func TestNamespacesOnlyWhileServing(t *testing.T) {
	c, nl := leaderWaitingOutLease(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct, err := client.New([]string{nl.APIAddr}, client.Options{DisableRouting: true, RetryFor: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, cerr := direct.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "later"})
	_, nerr := direct.NextIds(ctx, "nobody", 1)
	if nl.Node().Allocator().Serving() {
		t.Skip("the new leader served before the calls (a slow machine)")
	}
	if connect.CodeOf(cerr) != connect.CodeUnavailable {
		t.Fatalf("CreateNamespace on a leader waiting out the lease: %v, want unavailable", cerr)
	}
	if connect.CodeOf(nerr) != connect.CodeUnavailable {
		t.Fatalf("NextIds of an unknown namespace on a leader waiting out the lease: %v, want unavailable", nerr)
	}
	c.WaitServingLeader(30 * time.Second)
	cl, err := client.New(c.APIAddrs()[1:], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "later"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.NextIds(ctx, "nobody", 1); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("NextIds of an unknown namespace on a serving leader: %v, want not_found", err)
	}
}

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
