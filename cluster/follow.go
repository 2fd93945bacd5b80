package cluster

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/cluster/traffic"
)

// Leaders follow the traffic of clients that do not route (the Redis
// protocol, Leaf's API, Connect calls from curl or a browser): a group whose
// Next values mostly enter the cluster at one server is led from there, so
// that its calls take no hop (cluster/traffic decides; placement.go moves
// the leadership as it moves it to a group's spread position). Every
// server counts the values of every group that entered at it, and a
// group's leader also those forwarded to it, by the server they came from
// (api calls NoteValues).

// NoteValues counts n values of a Next call of group that entered the
// cluster at origin (a server's ID) from a client that does not route.
func (n *Node) NoteValues(group int, origin string, count int) {
	if group >= 0 && group < len(n.traffic) {
		n.traffic[group].Add(origin, count, time.Now())
	}
}

// trafficLeader is the server that should lead group i by its traffic, of
// conf's voters that are not drained and follow the traffic themselves
// (Meta.Follows) ("" for none: the spread position stands).
func (n *Node) trafficLeader(i int, conf raft.Configuration, now time.Time) string {
	if i >= len(n.traffic) {
		return ""
	}
	rates := n.traffic[i].Rates(now)
	if len(rates) == 0 {
		return ""
	}
	voters := make(map[string]bool, len(conf.Servers))
	for _, s := range conf.Servers {
		voters[string(s.ID)] = s.Suffrage == raft.Voter
	}
	return traffic.Leader(n.cfg.ID, rates, func(id string) bool { return voters[id] && !n.isDrained(id) && n.follows(id) })
}

// follows reports whether server id takes groups by their traffic: this
// server does; another says so in gossip.
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
