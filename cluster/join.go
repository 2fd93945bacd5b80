package cluster

import (
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/lease"
)

// otherJoinAddrs returns the join addresses that are not this node's own.
func (g *gossip) otherJoinAddrs() []string {
	self := map[string]bool{g.n.cfg.GossipAddr: true, g.n.cfg.GossipAdvertise: true}
	if g.n.gossipAddr != "" {
		self[g.n.gossipAddr] = true
	}
	var out []string
	for _, a := range g.n.cfg.Join {
		if !self[a] {
			out = append(out, a)
		}
	}
	return out
}

// maybeBootstrap bootstraps raft with every server seen that is ready to,
// once admit.Bootstrap says so (see there for the rules).
func (g *gossip) maybeBootstrap() {
	n := g.n
	var members []admit.Member
	for _, m := range n.Members() {
		members = append(members, m.admitMember())
	}
	servers, v := admit.Bootstrap(admit.BootstrapFacts{Self: n.cfg.ID, HasState: n.hasState.Load(), Expect: n.cfg.BootstrapExpect,
		Groups: len(n.groups), Ready: g.ready(), Members: members})
	if v.Outcome != admit.Admit {
		if v.Kind != "" {
			n.logEvery("bootstrap:"+string(v.Kind), slog.LevelInfo, v.Message(n.cfg.ID), "bootstrap", string(v.Kind), "join", g.joinAddrs())
		}
		return
	}
	if len(servers) > n.cfg.BootstrapExpect {
		n.log.Warn("more servers than bootstrap-expect are up; bootstrapping with all of them", "seen", len(servers), "expect", n.cfg.BootstrapExpect)
	}
	var conf raft.Configuration
	for _, s := range servers {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.RaftAddr), Suffrage: raft.Voter})
	}
	// Group 0 last: its state is what says this server has bootstrapped
	// (see checkGroupState).
	for i := len(n.groups) - 1; i >= 0; i-- {
		err := n.groups[i].Raft().BootstrapCluster(conf).Error()
		if err != nil && err != raft.ErrCantBootstrap {
			n.log.Error("bootstrap failed", "group", i, "err", err)
			return
		}
	}
	n.log.Info("bootstrapped a new cluster", "servers", len(servers), "groups", len(n.groups))
	g.setHasState()
	n.admitAll()
}

// ready reports whether this server would bootstrap a new cluster now: it
// has no raft state, BootstrapExpect is positive, and every server its
// --join list names is alive in gossip.
func (g *gossip) ready() bool {
	n := g.n
	if n.hasState.Load() || n.cfg.BootstrapExpect == 0 {
		return false
	}
	alive := map[string]bool{}
	for _, m := range n.Members() {
		if m.Alive {
			alive[m.GossipAddr] = true
		}
	}
	for _, a := range g.joinAddrs() {
		if !alive[a] {
			return false
		}
	}
	return true
}

// joinAddrs resolves the --join list (other servers only) to the addresses
// memberlist reports, anew on every call: a name that does not resolve yet
// stays as it is, and counts as a server not seen (see resolve.go).
func (g *gossip) joinAddrs() []string {
	self := map[string]bool{resolveHostPort(g.n.cfg.GossipAddr): true, resolveHostPort(g.n.cfg.GossipAdvertise): true}
	var out []string
	for _, j := range g.otherJoinAddrs() {
		if r := resolveHostPort(j); !self[r] {
			out = append(out, r)
		}
	}
	return out
}

// rejoinInterval is how often a node joins again the gossip address of each
// server in its raft configuration. memberlist forgets a dead member after a
// while, and does not notice a member that restarted quickly on the same
// name and address (it answers the probes again), whose fresh gossip knows
// nobody; joining it exchanges the full member list. Without this a server
// restarted with a --join list that does not name the others (a lone first
// node that others joined) would stay alone in gossip.
const rejoinInterval = time.Second

// rejoin joins, in the background and one batch at a time, the last known
// gossip addresses of the other servers in the raft configuration.
func (g *gossip) rejoin() {
	n := g.n
	if time.Since(time.Unix(0, g.lastRejoin.Load())) < rejoinInterval || g.rejoining.Load() {
		return
	}
	cf := n.authority().Raft().GetConfiguration()
	if cf.Error() != nil {
		return
	}
	var addrs []string
	for _, s := range cf.Configuration().Servers {
		if m, ok := g.member(string(s.ID)); ok && m.GossipAddr != "" && m.ID != n.cfg.ID {
			addrs = append(addrs, m.GossipAddr)
		}
	}
	if len(addrs) == 0 {
		return
	}
	g.lastRejoin.Store(time.Now().UnixNano())
	g.rejoining.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer g.rejoining.Store(false)
		select {
		case <-g.done:
			return
		default:
		}
		if cnt, err := n.ml.Join(addrs); cnt > 0 {
			n.log.Debug("joined the configuration's servers through gossip again", "joined", cnt)
		} else if err != nil {
			n.log.Debug("joining the configuration's servers again", "err", err)
		}
	}()
}

// knock joins, in the background, each --join address whose server gossip
// does not show alive, each on its own (a dead address must not hold up
// the others): a server of the list that comes back later (a site that
// returns after its cluster was restored elsewhere) then exchanges
// metadata with this one within knockInterval, and learns of a generation
// that replaces its own before it serves (it listens lease.ListenWindow
// first: fence.go). rejoin covers the servers of the raft configuration.
func (g *gossip) knock() {
	n := g.n
	joins := g.joinAddrs()
	if len(joins) == 0 {
		return
	}
	alive := map[string]bool{}
	for _, m := range n.Members() {
		if m.Alive {
			alive[m.GossipAddr] = true
		}
	}
	now := time.Now()
	g.knockMu.Lock()
	defer g.knockMu.Unlock()
	if g.knocking == nil {
		g.knocking = map[string]time.Time{}
	}
	for _, a := range joins {
		if alive[a] {
			continue
		}
		if last, busy := g.knocking[a]; busy && (last.IsZero() || now.Sub(last) < lease.KnockInterval) {
			continue // in flight (zero), or knocked a moment ago
		}
		g.knocking[a] = time.Time{}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			select {
			case <-g.done:
				return
			default:
			}
			if cnt, _ := n.ml.Join([]string{a}); cnt > 0 {
				n.log.Debug("joined a --join server that gossip did not show alive", "addr", a)
			}
			g.knockMu.Lock()
			g.knocking[a] = time.Now()
			g.knockMu.Unlock()
		}()
	}
}
