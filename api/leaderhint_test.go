package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestClientLearnsTheLeaderFromAForwardedAnswer: a client that starts on a
// follower gets its first answer through the follower (forwarded) and sends
// the next calls to the leader directly (the Seqd-Leader header alone: the
// routing table, which would also find the leader, is off).
func TestClientLearnsTheLeaderFromAForwardedAnswer(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	var follower *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			follower = m
			break
		}
	}
	cl, err := client.New([]string{follower.APIAddr, leader.APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Next(context.Background(), "default", 1); err != nil {
		t.Fatal(err)
	}
	if got := cl.Leader(); got != leader.APIAddr {
		t.Fatalf("client sends to %s after a forwarded answer, want the leader %s", got, leader.APIAddr)
	}
}
