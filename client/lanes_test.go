package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestGroupsOfOneLeaderShareOneMessage: the coalesced Next calls of the
// groups one server leads go to it as one stream message per round trip,
// not one per group. On a single server leading three groups, a call
// naming keys of every group is one request, and a second one too; the
// values are the server's, in the keys' order, and go up per key.
func TestGroupsOfOneLeaderShareOneMessage(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 1, testcluster.Options{Groups: groups})
	cl, err := client.New(c.APIAddrs(), client.Options{RetryFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	leaders := waitGroupsSettled(t, c, cl, groups)
	keys := groupKeys(t, cl, groups, 2)
	all := slices.Concat(keys...)
	seen := &perKey{last: map[uint64]uint64{}}
	next := seen.nexter(t, cl)
	waitGroupLeaders(t, cl, leaders, func() { next(all...) })
	// The stream opens in the background: wait until a call goes on it.
	deadline := time.Now().Add(30 * time.Second)
	for cl.BatchStats().Streamed == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no request went on a stream")
		}
		next(all...)
	}
	for round := range 2 {
		before := cl.BatchStats()
		next(all...)
		after := cl.BatchStats()
		if got := after.Requests - before.Requests; got != 1 || after.Streamed-before.Streamed != 1 {
			t.Fatalf("round %d: a call with keys of %d groups of one leader took %d requests (%d streamed), want 1 stream message",
				round, groups, got, after.Streamed-before.Streamed)
		}
		if got := after.Keys - before.Keys; got != uint64(len(all)) {
			t.Fatalf("round %d: %d keys sent for %d", round, got, len(all))
		}
	}
}

// TestAnswersOfOtherGroupsLeaveTheClusterLeader: a client that sends whole
// calls (DisableRouting) to group 0's leader keeps sending them there,
// although the stream answers name where a share of another group went:
// only an answer of group 0 says where the cluster's leader is.
func TestAnswersOfOtherGroupsLeaveTheClusterLeader(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	leaders := c.GroupLeaders()
	addrs := []string{leaders[0].APIAddr}
	for _, m := range c.Nodes {
		if m != leaders[0] {
			addrs = append(addrs, m.APIAddr)
		}
	}
	cl, err := client.New(addrs, client.Options{DisableRouting: true, RetryFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	keys := testcluster.KeyPerGroup(groups)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for cl.BatchStats().Streamed < 20 {
		if time.Now().After(deadline) {
			t.Fatal("no calls went on a stream")
		}
		if _, err := cl.Next(ctx, "", keys[0], keys[1]); err != nil {
			t.Fatal(err)
		}
		if moved := c.GroupLeaders(); moved[0] != leaders[0] || moved[1] != leaders[1] {
			t.Fatalf("a leader moved during the test: %v", moved)
		}
		if got := cl.Leader(); got != leaders[0].APIAddr {
			t.Fatalf("after an answer naming group 1's leader the client sends to %s, not group 0's leader %s", got, leaders[0].APIAddr)
		}
	}
	if cl.ForwardedAnswers() == 0 {
		t.Fatal("no answer named a leader: the check proves nothing")
	}
}
