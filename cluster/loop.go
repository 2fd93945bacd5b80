package cluster

import (
	"time"
)

// The host's periodic work runs on three loops, all started here
// (startLoops) when gossip is up, and all stopped when the node closes:
//
// The host loop (hostLoop) runs, every second and whenever gossip nudges
// it, these tasks in this order:
//
//  1. join the --join list (until one answers, and again when alone;
//     gossip.go);
//  2. without raft state: adopt the cluster's group count (adopt.go) and
//     bootstrap a new cluster (join.go);
//  3. decide admission for every group still shut (admission.go);
//  4. knock on --join servers gossip does not show alive (join.go);
//  5. reconcile: the routing version, the published metadata, and on a
//     leader membership, progress records, group placement and balancing
//     (below; membership.go, placement.go);
//  6. sample the peers' clocks (clock.go);
//  7. rejoin the gossip of the configuration's servers (join.go);
//  8. probe a full disk (disk.go).
//
// The contact loop (contactLoop) writes the contact records every
// contactEvery (contact.go): on a timer of its own, since a record must be
// written well within admit.ContactSlack and a pass of the host loop may
// wait on raft (a membership change, a leadership transfer).
//
// The stall loop (stallLoop) ticks every stallTick, so that the listen
// rule counts only time this process ran (stall.go).
func (n *Node) startLoops() {
	n.stall.start(time.Now())
	n.wg.Add(3)
	go n.hostLoop()
	go n.contactLoop()
	go n.stallLoop()
}

// hostLoop runs the host's periodic tasks (see above) until gossip closes.
func (n *Node) hostLoop() {
	defer n.wg.Done()
	g := n.gossip
	others := g.otherJoinAddrs()
	joined := len(others) == 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if len(others) > 0 && (!joined || n.ml.NumMembers() == 1) {
			if cnt, err := n.ml.Join(others); cnt > 0 {
				joined = true
			} else if err != nil {
				n.log.Debug("gossip join failed; will retry", "err", err)
			}
		}
		if joined && !n.hasState.Load() {
			g.checkGroupCount()
			g.maybeBootstrap()
		}
		g.admitPass(joined)
		g.knock()
		g.reconcile()
		n.startClockSample()
		g.rejoin()
		n.probeDisk()
		select {
		case <-g.done:
			return
		case <-g.kick:
		case <-tick.C:
		}
	}
}

// contactLoop writes the contact records every contactEvery (see
// contact.go) until the node closes.
func (n *Node) contactLoop() {
	defer n.wg.Done()
	t := time.NewTicker(contactEvery)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
			n.writeContacts()
		}
	}
}

// reconcile notes when this node has been added to a configuration, and on
// the leader runs membership (see membership.go).
func (g *gossip) reconcile() {
	n := g.n
	cf := n.authority().Raft().GetConfiguration()
	if cf.Error() != nil {
		return
	}
	conf := cf.Configuration()
	n.routingVersion.Store(routingVersion(n.authority().Raft().CurrentTerm(), conf))
	if len(conf.Servers) > 0 && !n.hasState.Load() {
		g.setHasState()
	}
	if pub := g.published.Load(); pub == nil || !pub.same(g.meta()) {
		g.refreshMeta()
	}
	if !n.GroupAdmitted(0) {
		return
	}
	if n.authority().IsLeader() {
		n.membership(conf)
	}
	for i := 1; i < len(n.groups); i++ {
		if n.GroupAdmitted(i) && n.groups[i].IsLeader() {
			n.recordGroupProgress(i)
			n.mirrorMembership(i, conf)
		}
	}
	n.balance()
}
