package groupstest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// keysOfGroups returns one key of each group of a space of section size
// size.
func keysOfGroups(space string, size uint64, groups int) []uint64 {
	keys := make([]uint64, groups)
	for sec, found := uint64(0), 0; found < groups; sec++ {
		if g := seqd.GroupOfKey(space, size, sec*size, groups); keys[g] == 0 {
			keys[g] = sec*size + 1
			found++
		}
	}
	return keys
}

// balancedCluster starts 3 nodes of groups groups, waits for their leaders
// to spread, and returns the cluster, a client and a context of timeout.
func balancedCluster(t *testing.T, groups int, timeout time.Duration) (*testcluster.Cluster, *client.Client, context.Context) {
	t.Helper()
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return c, cl, ctx
}

// TestGroupsSpaceChanges: in a cluster of 3 groups, a changed step reaches
// every group's record and its raises, a deleted space is not_found through
// every server for keys of every group as soon as DeleteSpace answered, and
// a space created again continues above every value handed out before; a
// floor set through any server holds for keys of every group, after the
// groups' leaders were killed too. Bad input is refused with the right code.
func TestGroupsSpaceChanges(t *testing.T) {
	const groups = 3
	c, cl, ctx := balancedCluster(t, groups, 3*time.Minute)
	if _, err := cl.CreateSpace(ctx, "s", 10, 10); err != nil {
		t.Fatal(err)
	}
	keys := keysOfGroups("s", 10, groups)
	last, err := cl.Next(ctx, "s", keys...)
	if err != nil {
		t.Fatal(err)
	}

	// A new step: every group follows, and raises use it.
	if sp, err := cl.UpdateSpace(ctx, "s", 1000); err != nil || sp.GetStep() != 1000 || sp.GetSectionSize() != 10 {
		t.Fatalf("UpdateSpace = %v, %v", sp, err)
	}
	for g, m := range c.GroupLeaders() {
		if m == nil {
			continue // between leaders: its next leader applied what the last one committed
		}
		if sp, ok := m.Node().Group(g).FSM().Space("s"); !ok || sp.Step != 1000 {
			t.Fatalf("group %d's leader's record after UpdateSpace answered: %+v, %v", g, sp, ok)
		}
	}
	// A raise starts with a call that leaves less than half a step: one
	// that the old step began, or a leader that changed before it raised,
	// needs the next call (a raise by the old step of 10 never reaches 500
	// ahead).
	waitUntil(t, 20*time.Second, "raises a step of 1000 ahead", func() bool {
		if last, err = cl.Next(ctx, "s", keys...); err != nil {
			t.Fatal(err)
		}
		for g, m := range c.GroupLeaders() {
			if m == nil || m.Node().Group(g).FSM().Max("s", keys[g]/10) < last[g]+500 {
				return false
			}
		}
		return true
	})

	// Deleted: not_found at once, through every server, for every group.
	if err := cl.DeleteSpace(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for _, addr := range c.APIAddrs() {
		direct, err := client.New([]string{addr}, client.Options{DisableRouting: true, RetryFor: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for g, k := range keys {
			if _, err := direct.Next(ctx, "s", k); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("Next of group %d's key through %s after DeleteSpace: %v, want not_found", g, addr, err)
			}
		}
		spaces, err := direct.ListSpaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range spaces {
			if sp.GetName() == "s" {
				t.Fatalf("ListSpaces through %s lists the deleted space", addr)
			}
		}
	}
	if _, err := cl.CreateSpace(ctx, "s", 5, 20); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("creating the deleted space with another section size: %v, want already_exists", err)
	}
	// Created again: above every value handed out, in every group.
	if _, err := cl.CreateSpace(ctx, "s", 5, 10); err != nil {
		t.Fatal(err)
	}
	again, err := cl.Next(ctx, "s", keys...)
	if err != nil {
		t.Fatalf("Next right after the space was created again: %v", err)
	}
	for g := range keys {
		if again[g] <= last[g] {
			t.Fatalf("group %d: %d after the space came back, %d before it was deleted", g, again[g], last[g])
		}
	}

	// A floor, through a follower, for keys of every group.
	follower := c.Nodes[0]
	if c.ServingLeader() == follower {
		follower = c.Nodes[1]
	}
	viaFollower, err := client.New([]string{follower.APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	const floor = 1_000_000_000
	if err := viaFollower.SetFloor(ctx, "s", floor, keys...); err != nil {
		t.Fatal(err)
	}
	vals, err := cl.Next(ctx, "s", keys...)
	if err != nil {
		t.Fatal(err)
	}
	for g, v := range vals {
		if v <= floor {
			t.Fatalf("group %d: %d after a floor of %d", g, v, floor)
		}
	}
	for g, m := range c.GroupLeaders() {
		if m == nil {
			continue
		}
		m.Kill()
		c.WaitServingLeader(30*time.Second, m)
		m.Restart()
		c.WaitAdmitted(m, 30*time.Second)
		if v, err := cl.Next(ctx, "s", keys[g]); err != nil || v[0] <= vals[g] {
			t.Fatalf("group %d after its leader was killed: %v, %v (before: %d)", g, v, err, vals[g])
		}
	}

	// Bad input, checked by the server (the Go client checks some first).
	raw := seqv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+c.APIAddrs()[0])
	for name, c := range map[string]struct {
		err  error
		code connect.Code
	}{
		"a floor above 2^63-1":         {second(raw.SetFloor(ctx, connect.NewRequest(&seqv1.SetFloorRequest{Space: "s", Keys: []uint64{1}, Floor: 1 << 63}))), connect.CodeInvalidArgument},
		"floors and keys of two sizes": {second(raw.SetFloor(ctx, connect.NewRequest(&seqv1.SetFloorRequest{Space: "s", Keys: []uint64{1, 2}, Floors: []uint64{3}}))), connect.CodeInvalidArgument},
		"no keys":                      {second(raw.SetFloor(ctx, connect.NewRequest(&seqv1.SetFloorRequest{Space: "s", Floor: 3}))), connect.CodeInvalidArgument},
		"a step of 0":                  {second(cl.UpdateSpace(ctx, "s", 0)), connect.CodeInvalidArgument},
		"a step above 2^40":            {second(cl.UpdateSpace(ctx, "s", seqd.MaxStep+1)), connect.CodeInvalidArgument},
		"updating an unknown space":    {second(cl.UpdateSpace(ctx, "nope", 5)), connect.CodeNotFound},
		"deleting an unknown space":    {cl.DeleteSpace(ctx, "nope"), connect.CodeNotFound},
		"deleting the default space":   {cl.DeleteSpace(ctx, seqd.DefaultSpaceName), connect.CodeInvalidArgument},
		"a malformed space name":       {cl.DeleteSpace(ctx, "Bad Name"), connect.CodeInvalidArgument},
	} {
		if connect.CodeOf(c.err) != c.code {
			t.Errorf("%s: %v, want %v", name, c.err, c.code)
		}
	}
	// A floor below the current value changes nothing.
	cur, err := cl.Current(ctx, "s", keys[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.SetFloor(ctx, "s", 5, keys[0]); err != nil {
		t.Fatal(err)
	}
	if v, err := cl.Next(ctx, "s", keys[0]); err != nil || v[0] != cur[0]+1 {
		t.Fatalf("Next after a floor below the value: %v, %v; want %d", v, err, cur[0]+1)
	}
}

func second[T any](_ T, err error) error { return err }

// TestGroupsFollowGroupZeroByThemselves: a change made in group 0 alone
// (as when the call could not reach a group's leader) reaches every other
// group by the groups' own periodic check, which asks group 0's serving
// leader.
func TestGroupsFollowGroupZeroByThemselves(t *testing.T) {
	const groups = 3
	c, cl, ctx := balancedCluster(t, groups, time.Minute)
	if _, err := cl.CreateSpace(ctx, "quiet", 10, 10); err != nil {
		t.Fatal(err)
	}
	keys := keysOfGroups("quiet", 10, groups)
	if _, err := cl.Next(ctx, "quiet", keys...); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServingLeader(30*time.Second).Node().UpdateSpace(ctx, "quiet", 77); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "every group's record of the new step", func() bool {
		for g, m := range c.GroupLeaders() {
			if m == nil {
				return false
			}
			if sp, ok := m.Node().Group(g).FSM().Space("quiet"); !ok || sp.Step != 77 {
				return false
			}
		}
		return true
	})
	if err := c.WaitServingLeader(30*time.Second).Node().DeleteSpace(ctx, "quiet"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "every group's record of the deletion", func() bool {
		for g, m := range c.GroupLeaders() {
			if m == nil {
				return false
			}
			if _, deleted := m.Node().Group(g).FSM().Deleted("quiet"); !deleted {
				return false
			}
		}
		return true
	})
}

// TestGroupsSpaceCreatedAgainOnALaggingCopy: a server's copy of group 0
// that recorded a space's deletion but not its creation again (its group-0
// traffic cut) still serves the space for the group it leads: a record of
// a deletion is asked of group 0's leader, like a space never seen, since
// the copy may lag.
func TestGroupsSpaceCreatedAgainOnALaggingCopy(t *testing.T) {
	const groups = 3
	c, cl, ctx := balancedCluster(t, groups, 2*time.Minute)
	if _, err := cl.CreateSpace(ctx, "s", 10, 10); err != nil {
		t.Fatal(err)
	}
	keys := keysOfGroups("s", 10, groups)
	if _, err := cl.Next(ctx, "s", keys...); err != nil {
		t.Fatal(err)
	}
	leaders := c.GroupLeaders()
	var lag *testcluster.Member
	var g int
	for i := 1; i < groups; i++ {
		if leaders[i] != nil && leaders[i] != leaders[0] {
			lag, g = leaders[i], i
		}
	}
	if lag == nil {
		t.Fatalf("no server leads a group other than 0 without leading group 0: %v", leaders)
	}
	if err := cl.DeleteSpace(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, lag.ID+"'s copy of group 0 recording the deletion", func() bool {
		_, deleted := lag.Node().Group(0).FSM().Deleted("s")
		return deleted
	})
	lag.Node().CutGroupTraffic(0, true)
	defer lag.Node().CutGroupTraffic(0, false)
	if _, err := cl.CreateSpace(ctx, "s", 10, 10); err != nil {
		t.Fatal(err)
	}
	direct, err := client.New([]string{lag.APIAddr}, client.Options{DisableRouting: true, RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Next(ctx, "s", keys[g]); err != nil {
		t.Fatalf("Next of group %d's key through its leader %s, whose copy of group 0 lags behind the space's creation again: %v", g, lag.ID, err)
	}
}
