package client_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// hostLog is an http.RoundTripper that records the host of every
// SequenceService request (each attempt, including ones that fail to connect).
type hostLog struct {
	base  http.RoundTripper
	mu    sync.Mutex
	hosts []string
}

func (h *hostLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/seq.v1.SequenceService/") {
		h.mu.Lock()
		h.hosts = append(h.hosts, r.URL.Host)
		h.mu.Unlock()
	}
	return h.base.RoundTrip(r)
}

// take returns the hosts recorded since the last take.
func (h *hostLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.hosts
	h.hosts = nil
	return out
}

func waitRouting(t *testing.T, cl *client.Client, what string, ok func(client.Routing) bool) client.Routing {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		r := cl.Routing()
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("routing table never %s: %+v", what, r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRoutingTable: a client given one follower's address learns the
// cluster's members and leader from the routing table and sends calls
// straight to the leader; after the leader dies and a new one serves, the
// next call costs at most one extra round trip and the calls after it go to
// the new leader directly; a membership change is picked up as well.
func TestRoutingTable(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(45 * time.Second)
	var follower *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			follower = m
			break
		}
	}
	log := &hostLog{base: &http.Transport{}}
	cl, err := client.New([]string{follower.APIAddr}, client.Options{
		HTTPClient: &http.Client{Transport: log}, DisableCoalescing: true, RetryFor: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var last uint64
	next := func() {
		t.Helper()
		v, err := cl.Next(ctx, "default", 1)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] <= last {
			t.Fatalf("Next gave %d after %d", v[0], last)
		}
		last = v[0]
	}

	next() // through the follower, which forwards it
	first := waitRouting(t, cl, "names the leader and all 3 members", func(r client.Routing) bool {
		return r.Version != 0 && r.Leader == leader.APIAddr && len(r.Nodes) == 3
	})
	log.take()
	for range 5 {
		next()
	}
	if got := log.take(); !slices.Equal(got, slices.Repeat([]string{leader.APIAddr}, 5)) {
		t.Fatalf("5 calls with a fresh routing table went to %v, want the leader %s only", got, leader.APIAddr)
	}

	// Leader change: kill the leader; once a new one serves, the first call
	// may try the dead leader once, and later calls go to the new leader.
	leader.Kill()
	nl := c.WaitServingLeader(45*time.Second, leader)
	log.take()
	next()
	got := log.take()
	t.Logf("first call after the leader change: %v", got)
	if len(got) > 2 {
		t.Fatalf("first call after the leader change took %d requests (%v), want at most 2", len(got), got)
	}
	// The refresh that call started may have asked a server that did not
	// know the new leader yet (the third, lagging): calls go on, as a
	// user's would, and each answer or failure starts another.
	r2 := waitRouting(t, cl, "moves to the new leader", func(r client.Routing) bool {
		if r.Leader == nl.APIAddr && r.Version != 0 && r.Version != first.Version {
			return true
		}
		next()
		return false
	})
	if r2.Version>>32 <= first.Version>>32 {
		t.Fatalf("routing version %x after the leader change, %x before: want a later term", r2.Version, first.Version)
	}
	log.take()
	for range 5 {
		next()
	}
	if got := log.take(); !slices.Equal(got, slices.Repeat([]string{nl.APIAddr}, 5)) {
		t.Fatalf("5 calls after the refresh went to %v, want the new leader %s only", got, nl.APIAddr)
	}

	// Membership change: a fourth server joins; the table learns it.
	n4 := c.Join()
	waitRouting(t, cl, "learns the joined member", func(r client.Routing) bool {
		if !slices.Contains(r.Nodes, n4.APIAddr) {
			next() // answers carry the new routing version
			return false
		}
		return true
	})
}
