package api_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster/traffic"
	"github.com/seqd/seqd/internal/testcluster"
)

// nextLoop is callers taking values of keys, all in each call, through
// next until stop; it fails the test on a value of a key that is not above
// the caller's last of that key, and returns the calls that succeeded.
func nextLoop(t *testing.T, callers int, keys []uint64, next func(context.Context, []uint64) ([]uint64, error)) (stop func() int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			last := make([]uint64, len(keys))
			for ctx.Err() == nil {
				cctx, cc := context.WithTimeout(ctx, 5*time.Second)
				vals, err := next(cctx, keys)
				cc()
				if err != nil {
					time.Sleep(2 * time.Millisecond) // a leadership moving: retried
					continue
				}
				for i, v := range vals {
					if v <= last[i] {
						t.Errorf("key %d: %d after %d", keys[i], v, last[i])
					}
					last[i] = v
				}
				ok.Add(1)
			}
		})
	}
	var once sync.Once
	stop = func() int64 { once.Do(func() { cancel(); wg.Wait() }); return ok.Load() }
	t.Cleanup(func() { stop() })
	return stop
}

// TestLeadersFollowTheTrafficOfClientsThatDoNotRoute: 3 servers, 3 groups,
// leaders spread. Calls that enter at one server's front end (as the Redis
// protocol's and Leaf's do) with keys of every group move every group's
// leadership to that server, so that they take no hop; once they stop,
// the leaders are spread again. Calls of the Go client, which routes each
// key to its leader itself, move nothing.
func TestLeadersFollowTheTrafficOfClientsThatDoNotRoute(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	keys := testcluster.KeyPerGroup(groups)

	// The Go client: its calls count nowhere, whatever their rate.
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Under its load, a group's leadership that was away from its spread
	// position for longer than the traffic's window (its server drained)
	// goes back there once it may: the leader it was on does not count the
	// calls routed to it as its own traffic.
	var calls atomic.Int64
	stop := nextLoop(t, 16, keys, func(ctx context.Context, k []uint64) ([]uint64, error) {
		calls.Add(1)
		return cl.Next(ctx, "", k...)
	})
	from := c.GroupLeaders()[1]
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if _, err := from.Node().Drain(ctx, true); err != nil {
		t.Fatal(err)
	}
	away, before := time.Now(), calls.Load()
	time.Sleep(traffic.Window + time.Second) // the window fills with the away leader's calls
	if rate := float64(calls.Load()-before) / time.Since(away).Seconds(); rate < traffic.Floor {
		t.Fatalf("the Go client made %.0f calls a second, below the floor of %.0f: the check would prove nothing", rate, traffic.Floor)
	}
	if _, err := from.Node().Drain(ctx, false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deadline := start.Add(45 * time.Second)
	for {
		if _, ok := c.Balanced(); ok && c.GroupLeaders()[1] == from {
			break
		}
		if time.Now().After(deadline) {
			counts, _ := c.LeadCounts()
			t.Fatalf("group 1 did not go back to %s under the Go client's load within 45 s: %v", from.ID, counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("group 1 back on %s %v after its drain was undone, under the Go client's %.0f calls/s", from.ID,
		time.Since(start).Round(time.Millisecond), float64(calls.Load()-before)/time.Since(away).Seconds())
	stop()

	// The front end of the server that leads group 0 (any would do).
	entry := c.GroupLeaders()[0]
	q := entry.Server().Sequences()
	stop = nextLoop(t, 16, keys, func(ctx context.Context, k []uint64) ([]uint64, error) {
		vals, errs := q.Next(ctx, "", k)
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		return vals, nil
	})
	start = time.Now()
	deadline = start.Add(45 * time.Second)
	for c.LeadCountsOf(entry) != groups {
		if time.Now().After(deadline) {
			counts, _ := c.LeadCounts()
			t.Fatalf("the leaders did not follow the traffic to %s within 45 s: %v", entry.ID, counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("every group led by %s, where its calls enter, %v after they began", entry.ID, time.Since(start).Round(time.Millisecond))
	if calls := stop(); calls == 0 {
		t.Fatal("no call succeeded")
	}
	took := c.WaitBalanced(60 * time.Second)
	t.Logf("spread again %v after the calls stopped", took.Round(time.Millisecond))
}
