package api_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/cluster/traffic"
	"github.com/seqd/seqd/internal/testcluster"
)

// perGroup is how many keys of each group a call names: a group's values
// come at perGroup times the calls' rate, well over the traffic floor even
// under -race.
const perGroup = 16

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
// leadership to that server, so that they take no hop, and every server
// shows that preference; once they stop, the leaders stay there while the
// cluster is idle, and are spread again once other calls come.
// Calls of the Go client count nowhere: routed (each key to its leader),
// they keep no leader off its spread position; not routed
// (DisableRouting: whole calls to one server, which forwards the other
// groups' shares), they move no leader either.
func TestLeadersFollowTheTrafficOfClientsThatDoNotRoute(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	keys := testcluster.KeysOfEachGroup(groups, perGroup)
	from := c.GroupLeaders()[1]
	pinned := c.GroupLeaders()[2]

	routed, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer routed.Close()
	whole, err := client.New([]string{pinned.APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	begun := time.Now()
	stop := nextLoop(t, 16, keys, func(ctx context.Context, k []uint64) ([]uint64, error) { return routed.Next(ctx, "", k...) })
	stopWhole := nextLoop(t, 12, keys, func(ctx context.Context, k []uint64) ([]uint64, error) { return whole.Next(ctx, "", k...) })
	// And Connect calls whose caller forged the entry mark of the front
	// ends (naming pinned), to every server: a mark counts only at the
	// server it names, or at the leader that server forwarded to.
	var forger atomic.Int64
	stopForged := nextLoop(t, 12, keys, func(ctx context.Context, k []uint64) ([]uint64, error) {
		m := c.Nodes[forger.Add(1)%int64(len(c.Nodes))]
		req := connect.NewRequest(&seqv1.NextRequest{Keys: k})
		req.Header().Set(seqd.HeaderEntry, pinned.ID)
		resp, err := seqv1connect.NewSequenceServiceClient(http.DefaultClient, "http://"+m.APIAddr).Next(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.Msg.GetValues(), nil
	})

	// Group 1 away from its spread position for longer than the traffic's
	// window (its server drained) goes back there once it may.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if _, err := from.Node().Drain(ctx, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(traffic.Window + time.Second) // a window of the away leader's calls
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
	t.Logf("group 1 back on %s %v after its drain was undone", from.ID, time.Since(start).Round(time.Millisecond))
	// And stays: the calls sent whole to one server move nothing.
	before := c.BalanceMoves()
	time.Sleep(traffic.Window + time.Second) // a negative: no condition to wait for
	if n := c.BalanceMoves() - before; n != 0 {
		counts, _ := c.LeadCounts()
		t.Fatalf("the Go client's calls moved %d leaderships of a balanced cluster: %v", n, counts)
	}
	took := time.Since(begun).Seconds()
	r, w, f := perGroup*float64(stop())/took, perGroup*float64(stopWhole())/took, perGroup*float64(stopForged())/took
	if min(r, w, f) < traffic.Floor {
		t.Fatalf("%.0f routed, %.0f whole and %.0f forged values of each group a second, one below the floor of %.0f: the checks would prove nothing", r, w, f, traffic.Floor)
	}
	t.Logf("%.0f routed, %.0f whole (at %s) and %.0f forged values/s of each group kept the leaders spread", r, w, pinned.ID, f)

	// The front end of the server that leads group 0 (any would do), once
	// one serves.
	var entry *testcluster.Member
	for deadline = time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if entry = c.GroupLeaders()[0]; entry != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("group 0 has no serving leader")
		}
	}
	q := entry.Server().Sequences()
	stop = nextLoop(t, 16, keys, frontNext(q))
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
	// Every server shows the preference the leaders act on (the leader's
	// gossip), which seqd status and the metrics report.
	for deadline = time.Now().Add(10 * time.Second); !preferEverywhere(c, entry.ID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			for _, m := range c.Nodes {
				for _, g := range m.Node().Status().Groups {
					t.Errorf("%s says group %d prefers %q, want %s", m.ID, g.Group, g.Preferred, entry.ID)
				}
			}
			t.FailNow()
		}
	}
	if calls := stop(); calls == 0 {
		t.Fatal("no call succeeded")
	}
	// Idle, the groups stay where their traffic left them, and every
	// server still says so.
	before = c.BalanceMoves()
	time.Sleep(traffic.Window + 2*time.Second) // a negative: no condition to wait for
	if n := c.BalanceMoves() - before; n != 0 || c.LeadCountsOf(entry) != groups {
		counts, _ := c.LeadCounts()
		t.Fatalf("%d leaderships moved while the cluster was idle: %v, want every group at %s", n, counts, entry.ID)
	}
	if !preferEverywhere(c, entry.ID) {
		t.Fatalf("idle, a server no longer says the groups prefer %s", entry.ID)
	}
	// Other values (the Go client's, routed, which count nowhere) spread
	// them again.
	stop = nextLoop(t, 16, keys, func(ctx context.Context, k []uint64) ([]uint64, error) { return routed.Next(ctx, "", k...) })
	spread := c.WaitBalanced(60 * time.Second)
	t.Logf("spread again %v after the Go client's calls began", spread.Round(time.Millisecond))
	if calls := stop(); calls == 0 {
		t.Fatal("no routed call succeeded")
	}
}

// preferEverywhere reports whether every member's status has id as every
// group's preferred leader.
func preferEverywhere(c *testcluster.Cluster, id string) bool {
	for _, m := range c.Nodes {
		for _, g := range m.Node().Status().Groups {
			if g.Preferred != id {
				return false
			}
		}
	}
	return true
}

// TestLeadersStaySpreadWhenToldTo: front-end calls that enter at one
// server over the floor move no leader when the leaders of the groups are
// told to stay spread (--leaders-follow-traffic=false), nor when the
// entry server is (a setting changed one server at a time): no leader
// hands a group to a server that would hand it back.
func TestLeadersStaySpreadWhenToldTo(t *testing.T) {
	t.Run("the leaders", func(t *testing.T) { staySpread(t, func(i int) bool { return i != 0 }) })
	t.Run("the entry server", func(t *testing.T) { staySpread(t, func(i int) bool { return i == 0 }) })
}

// staySpread runs front-end calls into the server that leads group 0, the
// members i with spread(i) told to stay spread, and checks that no
// leadership moves.
func staySpread(t *testing.T, spread func(i int) bool) {
	const groups = 3
	c := testcluster.New(t, 3, testcluster.Options{Groups: groups}, func(i int, m *testcluster.Member) { m.SpreadLeaders = spread(i) })
	c.WaitBalanced(60 * time.Second)
	entry := c.GroupLeaders()[0]
	if entry != c.Nodes[0] {
		t.Fatalf("group 0 is led by %s, not by the first server (the preferred one)", entry.ID)
	}
	keys := testcluster.KeysOfEachGroup(groups, perGroup)
	before, begun := c.BalanceMoves(), time.Now()
	q := entry.Server().Sequences()
	stop := nextLoop(t, 16, keys, frontNext(q))
	time.Sleep(traffic.Window + time.Second) // a negative: no condition to wait for
	rate := perGroup * float64(stop()) / time.Since(begun).Seconds()
	if rate < traffic.Floor {
		t.Fatalf("%.0f values of each group a second: below the floor of %.0f, the check would prove nothing", rate, traffic.Floor)
	}
	if n := c.BalanceMoves() - before; n != 0 {
		counts, _ := c.LeadCounts()
		t.Fatalf("%d leaderships moved: %v", n, counts)
	}
	t.Logf("%.0f values/s of each group at %s's front end moved no leader", rate, entry.ID)
}

// frontNext is a nextLoop call through a server's front-end path, as the
// Redis protocol and Leaf's API call it.
func frontNext(q *api.Sequences) func(context.Context, []uint64) ([]uint64, error) {
	return func(ctx context.Context, k []uint64) ([]uint64, error) {
		vals, errs := q.Next(ctx, "", k)
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		return vals, nil
	}
}
