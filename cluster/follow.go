package cluster

import (
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/cluster/traffic"
)

// Leaders follow the traffic of the front ends that cannot route (the
// Redis protocol, Leaf's API): a group whose Next values mostly enter the
// cluster at one server's front ends is led from there, so that its calls
// take no hop (cluster/traffic decides; placement.go moves the leadership
// as it moves it to a group's spread position). Every server counts the
// values of every group that entered at it, and a group's leader also
// those forwarded to it, by the server they entered at (api calls
// NoteValues; which calls count is decided where they enter: api/keys.go,
// noteValues). The leader publishes the groups it keeps for their traffic
// in gossip (Meta.Holds), so that every server shows that preference.

// groupTraffic is what a server knows of one group's traffic.
type groupTraffic struct {
	meter  traffic.Meter    // where its counted values entered
	served traffic.Activity // the values it took as the group's leader
	// heldTerm is the term in which this server, leading the group, last
	// kept it for its traffic (0: it did not at its last decision).
	heldTerm atomic.Uint64
}

// NoteValues counts n values of a Next call of group that entered the
// cluster at origin (a server's ID) through a front end that cannot route.
func (n *Node) NoteValues(group int, origin string, count int) {
	if group >= 0 && group < len(n.traffic) {
		n.traffic[group].meter.Add(origin, count, time.Now())
	}
}

// trafficLeader is the server that should lead group i by its traffic, of
// conf's voters that are not drained and follow the traffic themselves
// (Meta.Follows) ("" for none: the spread position stands). It is asked
// only of the group's leader, which remembers whether it kept the group
// for its traffic (so an idle group stays: cluster/traffic).
func (n *Node) trafficLeader(i int, conf raft.Configuration, now time.Time) string {
	if i >= len(n.traffic) || n.cfg.SpreadLeaders {
		return ""
	}
	t, r := &n.traffic[i], n.groups[i].Raft()
	term := r.CurrentTerm()
	t.served.Observe(n.groups[i].Allocator().ValuesTaken(), now)
	voters := make(map[string]bool, len(conf.Servers))
	for _, s := range conf.Servers {
		voters[string(s.ID)] = s.Suffrage == raft.Voter
	}
	g := traffic.Group{Leader: n.cfg.ID, Rates: t.meter.Rates(now), Held: t.heldTerm.Load() == term, Served: t.served.Rate(now)}
	id := traffic.Leader(g, func(id string) bool { return voters[id] && !n.isDrained(id) && n.follows(id) })
	if id == n.cfg.ID {
		t.heldTerm.Store(term)
	} else {
		t.heldTerm.Store(0)
	}
	return id
}

// follows reports whether server id takes groups for their traffic: this
// server does (trafficLeader is not asked otherwise); another says so in
// gossip.
func (n *Node) follows(id string) bool {
	if id == n.cfg.ID {
		return true
	}
	if n.gossip == nil {
		return false
	}
	m, ok := n.gossip.member(id)
	return ok && m.Follows
}

// heldForTraffic is Meta.Holds: the groups this server leads whose traffic
// prefers it.
func (n *Node) heldForTraffic(now time.Time) string {
	var bits []byte
	for i, g := range n.groups {
		if !g.IsLeader() {
			continue
		}
		cf := g.Raft().GetConfiguration()
		if cf.Error() != nil || n.trafficLeader(i, cf.Configuration(), now) != n.cfg.ID {
			continue
		}
		for len(bits) <= i/8 {
			bits = append(bits, 0)
		}
		bits[i/8] |= 1 << (i % 8)
	}
	return hex.EncodeToString(bits)
}

// holds reports whether a Meta.Holds bitmap has group i.
func holds(bitmap string, i int) bool {
	b, err := hex.DecodeString(bitmap)
	return err == nil && i/8 < len(b) && b[i/8]&(1<<(i%8)) != 0
}

// heldBy returns the server that leads group i (as this server knows it) if
// it keeps the group for its traffic, and is alive and not drained.
func (n *Node) heldBy(i int) string {
	id, _ := n.GroupLeader(i)
	if id == "" || n.gossip == nil || n.isDrained(id) {
		return ""
	}
	if m, ok := n.gossip.member(id); ok && m.Alive && holds(m.Holds, i) {
		return id
	}
	return ""
}
