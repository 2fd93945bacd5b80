package cluster

import (
	"time"
)

// loop is the host's scheduler: every second, and whenever gossip nudges
// it, it runs the host's periodic tasks in this order:
//
//  1. join the --join list (until one answers, and again when alone);
//  2. without raft state: adopt the cluster's group count (adopt.go) and
//     bootstrap a new cluster (join.go);
//  3. decide admission for every group still shut (admission.go);
//  4. knock on --join servers gossip does not show alive (join.go);
//  5. reconcile: the routing version, the published metadata, and on a
//     leader membership, progress records, group placement and balancing
//     (membership.go, placement.go);
//  6. sample the peers' clocks (clock.go);
//  7. rejoin the gossip of the configuration's servers (join.go);
//  8. probe a full disk (disk.go).
//
// The contact records have a loop of their own (contact.go).
func (g *gossip) loop() {
	defer g.n.wg.Done()
	others := g.otherJoinAddrs()
	joined := len(others) == 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if len(others) > 0 && (!joined || g.n.ml.NumMembers() == 1) {
			if cnt, err := g.n.ml.Join(others); cnt > 0 {
				joined = true
			} else if err != nil {
				g.n.log.Debug("gossip join failed; will retry", "err", err)
			}
		}
		if joined && !g.n.hasState.Load() {
			g.checkGroupCount()
			g.maybeBootstrap()
		}
		g.admitPass(joined)
		g.knock()
		g.reconcile()
		g.n.startClockSample()
		g.rejoin()
		g.n.probeDisk()
		select {
		case <-g.done:
			return
		case <-g.kick:
		case <-tick.C:
		}
	}
}

// reconcile notes when this node has been added to a configuration, and on
// the leader runs membership (see membership.go).
func (g *gossip) reconcile() {
	n := g.n
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	conf := cf.Configuration()
	n.routingVersion.Store(routingVersion(n.raft.CurrentTerm(), conf))
	if len(conf.Servers) > 0 && !n.hasState.Load() {
		g.setHasState()
	}
	if pub := g.published.Load(); pub == nil || !pub.same(g.meta()) {
		g.refreshMeta()
	}
	if !n.GroupAdmitted(0) {
		return
	}
	if n.IsLeader() {
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
