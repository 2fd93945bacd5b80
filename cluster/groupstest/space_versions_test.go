package groupstest_test

import (
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	"github.com/seqd/seqd/cluster"
)

// Group 0's serving leader answers a space's record with its version over
// the wire (PeerService.Space): a live space, a deleted one with the
// section size it keeps, none for a space never created; every group of
// every server holds group 0's record at group 0's version once the calls
// answered (each asked group 0's leader, across servers, to follow).
func TestGroupsFollowGroupZerosVersions(t *testing.T) {
	const groups = 3
	c, cl, ctx := balancedCluster(t, groups, time.Minute)
	if _, err := cl.CreateSpace(ctx, "v", 10, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.UpdateSpace(ctx, "v", 20); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteSpace(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	leader := c.WaitServingLeader(10 * time.Second)
	peers := api.Peers{}.Host()
	zero, _ := leader.Node().Group(0).FSM().Record("v")
	if zero.Version < 3 || zero.Live() {
		t.Fatalf("group 0 holds %+v after a create, a step change and a delete", zero)
	}
	for _, tt := range []struct {
		name string
		want cluster.SpaceRecord
	}{
		{"v", zero},
		{"never", cluster.SpaceRecord{}},
	} {
		got, err := peers.Space(ctx, leader.APIAddr, tt.name)
		if err != nil || got != tt.want {
			t.Fatalf("Space(%s) from group 0's leader = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
	if _, err := cl.CreateSpace(ctx, "v", 30, 10); err != nil {
		t.Fatal(err)
	}
	zero, _ = leader.Node().Group(0).FSM().Record("v")
	if got, err := peers.Space(ctx, leader.APIAddr, "v"); err != nil || got != zero || !got.Live() {
		t.Fatalf("Space(v) after the create again = %+v, %v; want %+v", got, err, zero)
	}
	for _, m := range c.Nodes {
		if m == leader {
			continue
		}
		if _, err := peers.Space(ctx, m.APIAddr, "v"); err == nil {
			t.Fatalf("%s, which does not lead group 0, answered about a space", m.ID)
		}
	}
	want := seqd.Space{Name: "v", Step: 30, SectionSize: 10}
	for _, m := range c.Nodes {
		for g := range groups {
			waitUntil(t, 10*time.Second, m.ID+"'s group's record at group 0's version", func() bool {
				rec, _ := m.Node().Group(g).FSM().Record("v")
				return rec.Space == want && rec.Version == zero.Version
			})
		}
	}
}
