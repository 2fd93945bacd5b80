package groupstest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/testcluster"
)

// keysPerGroup returns one key of the default space owned by each group.
func keysPerGroup(groups int) []uint64 { return testcluster.KeyPerGroup(groups) }

// TestGroupsSpreadLeadersAndServeEveryKey: 3 nodes with 6 groups lead 2
// groups each soon after bootstrap; a call naming keys of every group is
// split, served by each group's leader and answered in order; after a
// node is killed and restarted the leaders are balanced again, and then
// stay put.
func TestGroupsSpreadLeadersAndServeEveryKey(t *testing.T) {
	const groups = 6
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	took := c.WaitBalanced(30 * time.Second)
	counts, _ := c.LeadCounts()
	for id, n := range counts {
		if n != 2 {
			t.Fatalf("%s leads %d groups, want 2: %v", id, n, counts)
		}
	}
	t.Logf("6 groups on 3 nodes balanced 2/2/2 %v after start", took.Round(time.Millisecond))

	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := keysPerGroup(groups)
	last := make([]uint64, len(keys))
	for round := 0; round < 20; round++ {
		vals, err := cl.Next(ctx, seqd.DefaultSpaceName, keys...)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, v := range vals {
			if v <= last[i] {
				t.Fatalf("key %d: %d after %d", keys[i], v, last[i])
			}
			last[i] = v
		}
	}
	// LocateKeys names the group owning each key, as the slots say.
	located, err := cl.LocateKeys(ctx, "", keys...)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range located {
		if int(g) != i {
			t.Fatalf("LocateKeys: key %d in group %d, want %d", keys[i], g, i)
		}
	}
	if _, err := cl.LocateKeys(ctx, "nosuch", 1); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("LocateKeys of an unknown space: %v, want not_found", err)
	}
	// Every group's allocator served its own key, and only that.
	for i, m := range c.GroupLeaders() {
		if got := m.Node().Group(i).Allocator().ValuesTaken(); got == 0 {
			t.Fatalf("group %d's leader %s took no values", i, m.ID)
		}
	}

	// A backup holds every group's part (backup_test.go restores one).
	file := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Backup(ctx, f); err != nil {
		t.Fatalf("backup of a 6-group cluster: %v", err)
	}
	f.Close()
	if sum, err := fsm.InspectBackup(file); err != nil || sum.Info.Groups != groups || len(sum.Info.Parts) != groups {
		t.Fatalf("backup of a 6-group cluster: %+v, %v", sum.Info, err)
	}

	victim := c.Nodes[1]
	victim.Kill()
	for {
		if _, all := c.LeadCounts(); all {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	vals, err := cl.Next(ctx, seqd.DefaultSpaceName, keys...)
	if err != nil {
		t.Fatalf("after the kill: %v", err)
	}
	for i, v := range vals {
		if v <= last[i] {
			t.Fatalf("after the kill, key %d: %d after %d", keys[i], v, last[i])
		}
	}
	victim.Restart()
	took = c.WaitBalanced(60 * time.Second)
	t.Logf("balanced again %v after the restart", took.Round(time.Millisecond))
	// Balanced, the balancers move nothing more (a leader lost to an
	// election on a loaded machine is not a move; the counters say what
	// the balancers did).
	moves := c.BalanceMoves
	terms := func() (sum uint64) {
		for _, m := range c.Nodes {
			if node := m.Node(); node != nil {
				for g := range node.Groups() {
					sum += node.Group(g).Raft().CurrentTerm()
				}
			}
		}
		return sum
	}
	for attempt := 1; ; attempt++ {
		before, t0 := moves(), terms()
		deadline := time.Now().Add(5 * time.Second)
		elected := false
		for time.Now().Before(deadline) && !elected {
			elected = terms() != t0 // an election (a loaded machine): the balancer may move back
			if after := moves(); after != before && !elected {
				t.Fatalf("the balancers moved %d more groups after balancing", after-before)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !elected {
			break
		}
		if attempt == 3 {
			t.Fatal("elections kept happening after balancing (3 windows of 5 s)")
		}
		t.Logf("an election during the stability window (attempt %d): waiting for balance again", attempt)
		c.WaitBalanced(60 * time.Second)
	}
}

// A server whose group directory was lost while group 0's survived refuses
// to start: that group forgot its votes and acknowledged entries. A start
// with another --groups is refused too.
func TestGroupsLostGroupDirectoryOrOtherCountRefused(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{Groups: 3})
	m := c.Nodes[0]
	c.WaitBalanced(30 * time.Second)
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "g2")
	if err := os.Rename(filepath.Join(m.Dir, "groups", "2"), saved); err != nil {
		t.Fatal(err)
	}
	err := m.TryRestart()
	if err == nil || !strings.Contains(err.Error(), "group 2's directory is missing") {
		t.Fatalf("restart without group 2's directory: %v, want a refusal naming group 2", err)
	}
	if err := os.RemoveAll(filepath.Join(m.Dir, "groups", "2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(saved, filepath.Join(m.Dir, "groups", "2")); err != nil {
		t.Fatal(err)
	}
	c.SetGroups(4)
	if err := m.TryRestart(); err == nil || !strings.Contains(err.Error(), "--groups 4 cannot change it") {
		t.Fatalf("restart with --groups 4: %v, want a refusal", err)
	}
	c.SetGroups(0) // as recorded
	m.Restart()
	c.WaitBalanced(30 * time.Second)
}

// Cutting one group's raft traffic on its leader stops that leader serving
// within a lease of its last renewal, and a new leader serves the group
// only after that; the node's other groups keep their leases throughout.
func TestGroupsLeaseIndependence(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(30 * time.Second)
	leaders := c.GroupLeaders()
	const cut = 1
	old := leaders[cut].Node()
	// The other groups this node leads (with 3 groups on 3 nodes, none; so
	// watch every group's lease on every node instead).
	type lapse struct {
		group int
		node  string
	}
	stop := make(chan struct{})
	lapses := make(chan lapse, 100)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for g, m := range leaders {
				if g == cut {
					continue
				}
				if n := m.Node(); n == nil || !n.Group(g).Allocator().Serving() {
					lapses <- lapse{g, m.ID}
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	cutAt := time.Now()
	old.CutGroupTraffic(cut, true)
	// The old leader stops serving the cut group within lease + margin
	// of the cut (its last renewal was at most then).
	for old.Group(cut).Allocator().Serving() {
		if time.Since(cutAt) > 5*time.Second {
			t.Fatal("the cut leader still serves its group after 5s")
		}
		time.Sleep(time.Millisecond)
	}
	stoppedAt := time.Now()
	// The lease was renewed at most at the cut and runs 400ms (the test
	// cluster's lease); allow for the polling's scheduling under -race.
	if d := stoppedAt.Sub(cutAt); d > 400*time.Millisecond+300*time.Millisecond {
		t.Fatalf("the cut leader served its group %v after the cut, past its lease", d)
	}
	var next *testcluster.Member
	for next == nil {
		if time.Since(cutAt) > 30*time.Second {
			t.Fatal("no new leader for the cut group within 30s")
		}
		if m := c.GroupLeaders()[cut]; m != nil && m != leaders[cut] {
			next = m
		}
		time.Sleep(time.Millisecond)
	}
	servedAt := time.Now()
	close(stop)
	if !servedAt.After(stoppedAt) {
		t.Fatalf("the new leader served at %v, before the old one stopped at %v", servedAt, stoppedAt)
	}
	t.Logf("cut group %d: old leader stopped %v after the cut, %s served it %v after the cut",
		cut, stoppedAt.Sub(cutAt).Round(time.Millisecond), next.ID, servedAt.Sub(cutAt).Round(time.Millisecond))
	select {
	case l := <-lapses:
		t.Fatalf("group %d's lease on %s lapsed while only group %d was cut", l.group, l.node, cut)
	default:
	}
	old.CutGroupTraffic(cut, false)
}

// Draining a server moves every group it leads to the other servers, and
// none comes back while it stays drained; undoing the drain balances the
// leaders again. With the lease handoff, each move leaves its group
// without a serving leader for far less than a lease.
func TestGroupsDrainMovesEveryGroup(t *testing.T) {
	const groups = 6
	const lease = 2 * time.Second
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups, LeaseHandoff: true, Lease: lease})
	c.WaitBalanced(60 * time.Second)
	cl, err := client.New(c.APIAddrs()[1:], client.Options{}) // not through the drained node
	if err != nil {
		t.Fatal(err)
	}
	drained := c.Nodes[0]
	// Watch every group's serving leader while the drain runs.
	stop := make(chan struct{})
	worst := make([]time.Duration, groups)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		since := make([]time.Time, groups)
		for {
			select {
			case <-stop:
				return
			default:
			}
			now := time.Now()
			for g, m := range c.GroupLeaders() {
				if m != nil {
					if !since[g].IsZero() {
						worst[g] = max(worst[g], now.Sub(since[g]))
					}
					since[g] = time.Time{}
				} else if since[g].IsZero() {
					since[g] = now
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	led, err := cl.DrainNode(ctx, drained.ID, false)
	close(stop)
	<-watched
	if err != nil || led != 0 {
		t.Fatalf("drain: %d groups still led, %v", led, err)
	}
	var longest time.Duration
	for _, w := range worst {
		longest = max(longest, w)
	}
	t.Logf("drain moved 2 groups; the longest a group went without a serving leader: %v (lease %v)", longest.Round(time.Millisecond), lease)
	if longest >= lease {
		t.Fatalf("a group went %v without a serving leader during a drain with the handoff, want under the %v lease", longest, lease)
	}
	// Nobody moves a group to the drained server. (It may win an
	// election on a loaded machine, as any voter may; it then hands the
	// group on as soon as it serves it.)
	othersMoves := func() (n int64) {
		for _, m := range c.Nodes[1:] {
			n += m.Node().BalanceMoves()
		}
		return n
	}
	movesBefore := othersMoves()
	deadline := time.Now().Add(5 * time.Second)
	var ledSince time.Time
	for time.Now().Before(deadline) || !ledSince.IsZero() {
		n := c.LeadCountsOf(drained)
		switch {
		case n != 0 && othersMoves() != movesBefore:
			t.Fatalf("the drained server leads %d groups again, after %d moves by the others", n, othersMoves()-movesBefore)
		case n != 0 && ledSince.IsZero():
			ledSince = time.Now()
			t.Logf("the drained server won an election (no move by the others): it must hand the group on")
		case n != 0 && time.Since(ledSince) > 10*time.Second:
			t.Fatalf("the drained server still leads %d groups %v after winning them", n, time.Since(ledSince))
		case n == 0:
			ledSince = time.Time{}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := cl.DrainNode(ctx, "nosuch", false); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("drain of an unknown server: %v, want not_found", err)
	}
	if _, err := cl.DrainNode(ctx, drained.ID, true); err != nil {
		t.Fatal(err)
	}
	took := c.WaitBalanced(60 * time.Second)
	t.Logf("balanced again %v after the drain was undone", took.Round(time.Millisecond))
}

// A server whose group count disagrees with the cluster's record never
// serves: its group-count file lost while groups/ remains is refused at
// start; with both gone it starts as a one-group server, and even as
// group 0's raft leader it serves nothing (it hands leadership on), so no
// key of another group gets a value twice.
func TestGroupsCountMismatchNeverServes(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Groups: 2})
	c.WaitBalanced(60 * time.Second)
	x := c.Nodes[0]
	if err := x.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(x.Dir, "group-count")); err != nil {
		t.Fatal(err)
	}
	c.SetGroups(0)
	if err := x.TryRestart(); err == nil || !strings.Contains(err.Error(), "is missing while the data directory holds groups/") {
		t.Fatalf("restart without the group-count file: %v, want a refusal", err)
	}
	if err := os.RemoveAll(filepath.Join(x.Dir, "groups")); err != nil {
		t.Fatal(err)
	}
	x.Restart() // as a server of one group (the previous build would refuse protocol 4 state)
	c.WaitAdmitted(x, 30*time.Second)
	deadline := time.Now().Add(8 * time.Second)
	ledAsRaft := false
	for time.Now().Before(deadline) {
		n := x.Node()
		if n.Allocator().Serving() {
			t.Fatal("a one-group server serves group 0 of a two-group cluster")
		}
		ledAsRaft = ledAsRaft || n.IsLeader()
		for _, m := range c.Nodes[1:] {
			if o := m.Node(); o != nil && o.IsLeader() && o.Allocator().Serving() {
				_ = o.TransferLeadership(x.ID) // try to make it lead group 0
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the one-group server led group 0 in raft at some point: %v", ledAsRaft)
	c.WaitServingLeader(failoverWait, x) // group 0 is served by another server
}

// A server that joined a cluster of several groups and stopped before
// every group's leader added it (its group directories exist, without
// state) starts again.
func TestGroupsJoinedServerRestartsBeforeEveryGroupAddedIt(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{Groups: 2})
	c.WaitBalanced(60 * time.Second)
	m := c.Join()
	m.Node().CutGroupTraffic(1, true)
	deadline := time.Now().Add(30 * time.Second)
	for m.Node().Group(0).Raft().LastIndex() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the joining server got no group 0 state")
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.Kill()
	if err := m.TryRestart(); err != nil {
		t.Fatalf("restart of a server that joined group 0 only: %v", err)
	}
}

// A space created in group 0 serves keys of every group almost at once:
// a group's leader copies it into its group before its first raise.
func TestGroupsNewSpaceServesEveryGroup(t *testing.T) {
	const groups = 3
	c, cl, ctx := balancedCluster(t, groups, time.Minute)
	if _, err := cl.CreateSpace(ctx, "fresh", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	keys := keysOfGroups("fresh", 1000, groups)
	// A group leader's copy of group 0 may lag the create by a heartbeat;
	// it then asks group 0's leader: the first call succeeds.
	if _, err := cl.Next(ctx, "fresh", keys...); err != nil {
		t.Fatalf("Next on a space created %v ago: %v", time.Since(created).Round(time.Millisecond), err)
	}
	t.Logf("a new space served keys of all %d groups %v after it was created", groups, time.Since(created).Round(time.Millisecond))
	for i, m := range c.GroupLeaders() {
		if _, ok := m.Node().Group(i).FSM().Space("fresh"); !ok {
			t.Fatalf("group %d has no copy of the space after serving it", i)
		}
	}
}

// TestGroupsNewSpaceOnLaggingServer: a server whose copy of group 0 lags
// (its group 0 traffic is cut, so it never hears of the create) still
// serves a space created through group 0's leader, at once: it asks group
// 0's leader before it would answer not_found, for the split and for the
// groups it leads; an unknown space is still not_found.
func TestGroupsNewSpaceOnLaggingServer(t *testing.T) {
	const groups = 3
	lag, leaders, _, _ := createWhileLagging(t, groups, "late", 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := make([]uint64, groups)
	for sec, found := uint64(0), 0; found < groups; sec++ {
		if g := seqd.GroupOfKey("late", 10, sec*10, groups); keys[g] == 0 {
			keys[g] = sec*10 + 1
			found++
		}
	}
	// Retried only while unavailable (a test lease may lapse for a moment
	// on a loaded machine); not_found is never retried.
	vals, err := alone(t, lag).Next(ctx, "late", keys...)
	if err != nil {
		t.Fatalf("Next through a server whose copy of group 0 lags: %v", err)
	}
	for i, v := range vals {
		if v != 1 {
			t.Fatalf("key %d (group %d): %d, want 1", keys[i], i, v)
		}
	}
	for i := 1; i < groups; i++ {
		if leaders[i] == lag {
			if _, ok := lag.Node().Group(i).FSM().Space("late"); !ok {
				t.Fatalf("group %d, led by the lagging server, served the space without copying it", i)
			}
		}
	}
	// A space never created is in no copy, so it is always asked of group
	// 0's leader: asked once the cut is healed, since a server cut off
	// from group 0 for an election timeout no longer knows that leader.
	lag.Node().CutGroupTraffic(0, false)
	if _, err := alone(t, lag).Next(ctx, "never-created", keys[0]); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Next on a space never created: %v, want not_found", err)
	}
}

// alone returns a client of m alone that retries a call while it is
// unavailable (m learning group 0's leader again after its group 0 traffic
// was cut, or a test lease lapsing for a moment on a loaded machine), and
// never retries not_found.
func alone(t *testing.T, m *testcluster.Member) *client.Client {
	t.Helper()
	cl, err := client.New([]string{m.APIAddr}, client.Options{DisableRouting: true, RetryFor: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// groupVoters returns, per group, the voters of the configuration its
// serving leader holds (nil for a group without one).
func groupVoters(c *testcluster.Cluster) [][]string {
	leaders := c.GroupLeaders()
	out := make([][]string, len(leaders))
	for i, l := range leaders {
		if l == nil {
			continue
		}
		cf := l.Node().Group(i).Raft().GetConfiguration()
		if cf.Error() != nil {
			continue
		}
		out[i] = []string{}
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				out[i] = append(out[i], string(s.ID))
			}
		}
	}
	return out
}

// TestGroupsRemoveNodeThroughAnyServer: RemoveNode sent to a server that
// does not lead group 0 is forwarded there, and group 0's leader asks
// every other group's leader itself: the server is removed from every
// group and the call answers at once, and a server no group lists (a
// mistyped ID) is not_found at once, as through group 0's leader.
func TestGroupsRemoveNodeThroughAnyServer(t *testing.T) {
	c, n4 := joinedFourth(t, 3)
	l0 := servingLeader(t, c, 0)
	var via *testcluster.Member
	for _, m := range c.Nodes[:3] {
		if m != l0 {
			via = m
		}
	}
	cl, err := client.New([]string{via.APIAddr}, client.Options{DisableRouting: true, AttemptTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	if err := cl.RemoveNode(ctx, n4.ID); err != nil {
		t.Fatalf("remove %s through %s, which does not lead group 0: %v", n4.ID, via.ID, err)
	}
	for i, vs := range groupVoters(c) {
		if slices.Contains(vs, n4.ID) {
			t.Fatalf("RemoveNode(%s) returned while group %d still lists it: %v", n4.ID, i, vs)
		}
	}
	if err := cl.RemoveNode(ctx, "nosuch"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("removing a server no group lists, through %s: %v, want not_found", via.ID, err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("the two removals took %v: a call on every group waited for its deadline", d)
	}
}

// TestGroupsRemoveNodeFromEveryGroup: 5 servers, 3 groups. Removing two
// servers one after the other, and stopping each as the procedure says,
// leaves no group counting them: RemoveNode answers once every group has
// removed the server, so that a third failure afterwards (one of the 3
// remaining servers killed) leaves every group a quorum of 2 of 3. (Before,
// the groups other than 0 dropped a removed server only 5 s after group 0,
// and lost their quorum: 2 of 5.)
func TestGroupsRemoveNodeFromEveryGroup(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	n4, n5 := c.Join(), c.Join()
	deadline := time.Now().Add(60 * time.Second)
	for {
		all := true
		for _, vs := range groupVoters(c) {
			all = all && len(vs) == 5
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the groups' voters did not reach 5: %v", groupVoters(c))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cl, err := client.New(c.APIAddrs()[:3], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, m := range []*testcluster.Member{n4, n5} {
		if err := cl.RemoveNode(ctx, m.ID); err != nil {
			t.Fatalf("remove %s: %v", m.ID, err)
		}
		for i, vs := range groupVoters(c) {
			if slices.Contains(vs, m.ID) {
				t.Fatalf("RemoveNode(%s) returned while group %d still lists it: %v", m.ID, i, vs)
			}
		}
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.RemoveNode(ctx, n5.ID); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("removing a server no group lists: %v, want not_found", err)
	}
	victim := c.Nodes[2]
	victim.Kill()
	keys := keysPerGroup(groups)
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, err := cl.Next(ctx, seqd.DefaultSpaceName, keys...); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("with 2 of the 3 remaining servers up, keys of every group: %v (voters %v)", err, groupVoters(c))
		}
	}
}

// leaderWaitingOutLease starts 3 servers with a 3 s lease, kills the
// serving leader and returns the cluster and the new leader as soon as it
// leads while still waiting out its predecessor's lease.
func leaderWaitingOutLease(t *testing.T) (*testcluster.Cluster, *testcluster.Member) {
	t.Helper()
	c := testcluster.Start(t, 3, testcluster.Options{Lease: 3 * time.Second})
	c.WaitServingLeader(30 * time.Second).Kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range c.Nodes {
			if n := m.Node(); n != nil && n.IsLeader() && !n.Allocator().Serving() {
				return c, m
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader waiting out the lease")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCreateSpaceOnlyWhileServing: a new leader waiting out its
// predecessor's lease refuses CreateSpace (unavailable: the old leader may
// still serve, and would answer not_found for the space after
// CreateSpace returned); once it serves, it creates it.
func TestCreateSpaceOnlyWhileServing(t *testing.T) {
	c, nl := leaderWaitingOutLease(t)
	sp := seqd.Space{Name: "later", Step: 10, SectionSize: 10}
	if _, err := nl.Node().CreateSpace(context.Background(), sp); !errors.Is(err, seqd.ErrNotServing) {
		if nl.Node().Allocator().Serving() {
			t.Skip("the new leader served before the call (a slow machine)")
		}
		t.Fatalf("CreateSpace on a leader waiting out the lease: %v, want not serving", err)
	}
	c.WaitServingLeader(30 * time.Second)
	cl, err := client.New(c.APIAddrs()[1:], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSpace(context.Background(), sp.Name, sp.Step, sp.SectionSize); err != nil {
		t.Fatal(err)
	}
}

// A group follows a space change only on a leader that serves it: a new
// leader still waiting out its predecessor's lease refuses (not serving,
// which the change's fan-out tries again), since the predecessor may still
// serve its older record until then, after the change would have returned.
// Once it serves, the change is followed and returns.
func TestAGroupFollowsASpaceChangeOnlyWhileServing(t *testing.T) {
	const groups = 2
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups, Lease: 3 * time.Second})
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.CreateSpace(ctx, "s", 10, 10); err != nil {
		t.Fatal(err)
	}
	c.WaitBalanced(60 * time.Second) // group 0's leader outlives the kill
	servingLeader(t, c, 1).Kill()
	var nl *testcluster.Member
	waitUntil(t, failoverWait, "a new leader of group 1 waiting out the lease", func() bool {
		for _, m := range c.Nodes {
			if n := m.Node(); n != nil && n.Group(1).IsLeader() && !n.Group(1).Allocator().Serving() {
				nl = m
				return true
			}
		}
		return false
	})
	err = nl.Node().FollowSpace(ctx, 1, "s")
	if nl.Node().Group(1).Allocator().Serving() {
		t.Skip("the new leader served before the call returned (a slow machine)")
	}
	if !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("FollowSpace on a leader of group 1 waiting out the lease: %v, want not serving", err)
	}
	var live []string
	for _, m := range c.Nodes {
		if m.Node() != nil {
			live = append(live, m.APIAddr)
		}
	}
	// An attempt long enough for the lease wait (the default, 1 s, would
	// answer deadline_exceeded: committed, not yet followed by group 1).
	up, err := client.New(live, client.Options{AttemptTimeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sp, err := up.UpdateSpace(ctx, "s", 20); err != nil || sp.GetStep() != 20 {
		t.Fatalf("UpdateSpace while group 1's new leader waits out the lease: %v, %v", sp, err)
	}
	if !nl.Node().Group(1).Allocator().Serving() {
		t.Fatal("UpdateSpace returned before group 1's new leader served")
	}
	if rec, ok := nl.Node().Group(1).FSM().Record("s"); !ok || rec.Space.Step != 20 {
		t.Fatalf("group 1 on its serving leader holds %+v (%v), want step 20", rec, ok)
	}
}

// Whether a server is in a group is that group's leader's answer, never a
// copy: group 0's leader, whose copy of another group lags behind that
// group's removal of a server, answers a second RemoveNode of it with
// not_found, as every group's leader says it is gone.
func TestGroupsRemoveNodeAsksEveryGroupsLeader(t *testing.T) {
	const groups = 3
	c, n4 := joinedFourth(t, groups)
	l0 := servingLeader(t, c, 0)
	lag := -1
	for g := 1; g < groups; g++ {
		if servingLeader(t, c, g) != l0 {
			lag = g
		}
	}
	if lag < 0 {
		t.Fatalf("group 0's leader %s leads every group", l0.ID)
	}
	// Group 0's leader stops hearing group lag: its copy keeps n4.
	l0.Node().CutGroupTraffic(lag, true)
	defer l0.Node().CutGroupTraffic(lag, false)
	cl, err := client.New([]string{l0.APIAddr}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.RemoveNode(ctx, n4.ID); err != nil {
		t.Fatalf("remove %s: %v", n4.ID, err)
	}
	if !slices.Contains(raftVoters(l0.Node().Group(lag).Raft()), n4.ID) {
		t.Fatalf("group %d's copy on %s lost %s although its traffic is cut", lag, l0.ID, n4.ID)
	}
	if err := cl.RemoveNode(ctx, n4.ID); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("removing %s again, while %s's copy of group %d still lists it: %v, want not_found", n4.ID, l0.ID, lag, err)
	}
}

// joinedFourth starts 3 servers of groups raft groups, waits for their
// leaders to spread, adds a fourth, and waits until every server's copy of
// every group lists it as a voter (a copy may lag its group's leader: one
// that took the entry adding it as a nonvoter, not the promotion).
func joinedFourth(t *testing.T, groups int) (*testcluster.Cluster, *testcluster.Member) {
	t.Helper()
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	c.WaitBalanced(60 * time.Second)
	n4 := c.Join()
	waitUntil(t, 60*time.Second, "every copy of every group lists "+n4.ID+" as a voter", func() bool {
		for _, m := range c.Nodes {
			for g := range groups {
				if !slices.Contains(raftVoters(m.Node().Group(g).Raft()), n4.ID) {
					return false
				}
			}
		}
		return true
	})
	return c, n4
}

// raftServers is the servers (voters and nonvoters) of r's configuration
// as r holds it.
func raftServers(r *raft.Raft) []string {
	var out []string
	if cf := r.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			out = append(out, string(s.ID))
		}
	}
	return out
}

// raftVoters is the voters of r's configuration as r holds it.
func raftVoters(r *raft.Raft) []string {
	var out []string
	if cf := r.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				out = append(out, string(s.ID))
			}
		}
	}
	return out
}
