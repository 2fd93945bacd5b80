package groupstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestGroupAllocatorResolvesLaggingSpace: the space resolver lives under the
// allocator, not in the API. On a server whose copy of group 0 lags (its
// group 0 traffic is cut, so it never hears of the create), the allocator
// of a group it leads serves a space created a moment ago on the first
// call, with no "unknown space": it finds the space through group 0's
// leader and copies it into its group first. A space that exists nowhere
// is still unknown, and a deleted one is not_found through that server.
func TestGroupAllocatorResolvesLaggingSpace(t *testing.T) {
	const groups, size = 3, 10
	lag, _, led, admin := createWhileLagging(t, groups, "moment", size)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, ok := lag.Node().Group(led).FSM().Space("moment"); ok {
		t.Fatalf("group %d holds the space before any call", led)
	}
	var key uint64
	for k := uint64(1); ; k += size {
		if seqd.GroupOfKey("moment", size, k, groups) == led {
			key = k
			break
		}
	}
	alloc := lag.Node().Group(led).Allocator()
	// The first call that reaches the allocator while it serves finds the
	// space: never "unknown space". (A test lease may lapse for a moment on
	// a loaded machine: a call then fails on the lease, which says nothing
	// of the space, and is made again once the allocator serves.)
	// Every call below is made so.
	serving := func(call func() ([]uint64, error)) ([]uint64, error) {
		for deadline := time.Now().Add(10 * time.Second); ; {
			v, err := call()
			if !errors.Is(err, seqd.ErrLeaseNotHeld) || time.Now().After(deadline) {
				return v, err
			}
			for !alloc.Serving() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	cur, err := serving(func() ([]uint64, error) { return alloc.Current(ctx, "moment", []uint64{key}) })
	if err != nil {
		t.Fatalf("the first call of group %d's allocator on a space created a moment ago: %v", led, err)
	}
	if cur[0] != 0 {
		t.Fatalf("Current of a new key: %d, want 0", cur[0])
	}
	if _, ok := lag.Node().Group(led).FSM().Space("moment"); !ok {
		t.Fatalf("group %d served the space without copying it into its own state", led)
	}
	next := func(space string) ([]uint64, error) {
		return serving(func() ([]uint64, error) { return alloc.Next(ctx, space, []uint64{key}) })
	}
	if vals, err := next("moment"); err != nil || vals[0] != 1 {
		t.Fatalf("Next: %v %v, want [1]", vals, err)
	}
	if _, err := lag.Node().LookupSpace(ctx, "moment"); err != nil {
		t.Fatalf("routing's lookup on the lagging server: %v", err)
	}
	if _, err := next("nowhere"); !errors.Is(err, seqd.ErrUnknownSpace) {
		t.Fatalf("Next on a space never created: %v, want unknown space", err)
	}
	// Deleted: not_found through that server too, once it can ask group
	// 0's leader again (see TestGroupsNewSpaceOnLaggingServer).
	lag.Node().CutGroupTraffic(0, false)
	if err := admin.DeleteSpace(ctx, "moment"); err != nil {
		t.Fatal(err)
	}
	if _, err := alone(t, lag).Next(ctx, "moment", key); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Next on a deleted space through the formerly lagging server: %v, want not_found", err)
	}
	if _, err := next("moment"); !errors.Is(err, seqd.ErrUnknownSpace) {
		t.Fatalf("group %d's allocator on a deleted space: %v, want unknown space", led, err)
	}
}

// createWhileLagging starts servers with groups groups, cuts group 0's
// traffic on a server that leads group led > 0 but not group 0 (so that
// its copy of group 0 lags), and creates space through group 0's leader
// (admin's server). The test heals the cut.
func createWhileLagging(t *testing.T, groups int, space string, size uint64,
) (lag *testcluster.Member, leaders []*testcluster.Member, led int, admin *client.Client) {
	t.Helper()
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	leaders = c.GroupLeaders()
	for i := 1; i < groups && lag == nil; i++ {
		if leaders[i] != leaders[0] {
			lag, led = leaders[i], i
		}
	}
	if lag == nil {
		t.Fatalf("no server leads a group other than group 0 without leading group 0: %v", leaders)
	}
	lag.Node().CutGroupTraffic(0, true)
	admin, err := client.New([]string{leaders[0].APIAddr}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.CreateSpace(ctx, space, 1000, size); err != nil {
		t.Fatal(err)
	}
	if _, ok := lag.Node().Group(0).FSM().Space(space); ok {
		t.Fatal("the lagging server's group 0 applied the create although its traffic was cut")
	}
	return lag, leaders, led, admin
}
