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
	ctx := context.Background()
	leaders := waitGroupsSettled(t, c, cl, groups)
	keys := groupKeys(t, cl, groups, 2)
	all := slices.Concat(keys...)
	seen := &perKey{last: map[uint64]uint64{}}
	next := func(ks ...uint64) {
		t.Helper()
		v, err := cl.Next(ctx, "", ks...)
		if err != nil {
			t.Fatal(err)
		}
		seen.check(t, ks, v)
	}
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
