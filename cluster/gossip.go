package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/logbridge"
)

// Meta is what each server publishes about itself through gossip.
type Meta struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft"`
	APIAddr  string `json:"api"`
	// HasState is true once the server has raft state (bootstrapped, or
	// added to a configuration). Servers never bootstrap while any server
	// they see has state.
	HasState bool `json:"state"`
	// Cluster is the ID of the cluster whose state the server holds ("" for
	// none yet, and for servers of the first release).
	Cluster string `json:"c,omitempty"`
	// Proto is the highest replicated-command protocol the server speaks
	// (absent, so 0, for servers of the first release: protocol 1).
	Proto uint64 `json:"p,omitempty"`
	// Ready is true while the server would bootstrap a new cluster: it has
	// no raft state, a positive BootstrapExpect, and sees every server its
	// --join list names (see maybeBootstrap). Servers of the first release
	// do not say; they count as ready when they have no state.
	Ready bool `json:"r,omitempty"`
	// Groups is how many raft groups the server runs (absent, so 0, for
	// servers of builds without groups: one).
	Groups int `json:"g,omitempty"`
	// Drained is true while the server is drained (see Node.Drain): it is
	// nobody's preferred leader.
	Drained bool `json:"d,omitempty"`
	// Kinds is the set of ignorable command kinds the server applies (see
	// fsm.KindsApplied; absent, so 0, for builds before it, which apply
	// fsm.KindsAppliedBefore).
	Kinds uint64 `json:"k,omitempty"`
	// FlakeClusters lists the cluster values of the flake namespaces of the
	// server's cluster that have a cluster field, as its state has them
	// (see Node.ClusterValueInUse).
	FlakeClusters []uint64 `json:"fc,omitempty"`
}

// groups is how many raft groups a member runs.
func (m Member) groups() int { return max(m.Groups, 1) }

// Member is a server seen through gossip.
type Member struct {
	Meta
	GossipAddr string
	Alive      bool
	// DownSince is when gossip last saw the member fail or leave (zero while alive).
	DownSince time.Time
}

// gossip is the memberlist delegate: it serves this node's metadata and
// tracks the other servers'.
type gossip struct {
	n *Node

	mu      sync.RWMutex
	members map[string]Member // by ID

	kick chan struct{} // nudges the reconcile loop
	done chan struct{}

	published      atomic.Value // the cluster ID last published in metadata
	publishedReady atomic.Bool  // Ready as last published
	rejoining      atomic.Bool  // a rejoin is in flight
	lastRejoin     atomic.Int64 // unix nanos
	joinAddrs      []string     // the --join list, resolved (other servers only)
}

func (n *Node) startGossip() error {
	g := &gossip{n: n, members: make(map[string]Member), kick: make(chan struct{}, 1), done: make(chan struct{})}
	n.gossip = g

	host, portStr, _ := net.SplitHostPort(n.cfg.GossipAddr)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("%w: gossip port %q", ErrInvalidConfig, portStr)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = n.cfg.ID
	mc.BindAddr = host
	mc.BindPort = port
	ahost, aportStr, _ := net.SplitHostPort(n.cfg.GossipAdvertise)
	aport, err := strconv.Atoi(aportStr)
	if err != nil {
		return fmt.Errorf("%w: gossip advertise port %q", ErrInvalidConfig, aportStr)
	}
	mc.AdvertiseAddr = ahost
	mc.AdvertisePort = aport
	if len(n.cfg.GossipKey) > 0 {
		mc.SecretKey = n.cfg.GossipKey
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	g.resolveJoins()
	mc.Delegate = g
	mc.Events = g
	mc.LogOutput = logbridge.NewWriter(n.log, "memberlist", n.cfg.RaftLogLevel)
	// Quicker failure detection than the WAN-friendly defaults: these are
	// servers on one LAN.
	mc.ProbeInterval = 500 * time.Millisecond
	mc.GossipInterval = 100 * time.Millisecond
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("gossip on %s: %w", n.cfg.GossipAddr, err)
	}
	n.ml = ml
	n.gossipStarted = time.Now()
	// Read once, before anything else can update the local node.
	n.gossipAddr = ml.LocalNode().Address()
	n.wg.Add(1)
	go g.loop()
	return nil
}

func (g *gossip) close() {
	select {
	case <-g.done:
	default:
		close(g.done)
	}
}

func (g *gossip) nudge() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	cluster := g.n.fsm.ClusterID()
	ready := g.ready()
	g.published.Store(cluster)
	g.publishedReady.Store(ready)
	m := Meta{ID: g.n.cfg.ID, RaftAddr: g.n.cfg.RaftAdvertise, APIAddr: g.n.cfg.APIAddr, HasState: g.n.hasState.Load(),
		Cluster: cluster, Proto: fsm.ProtocolVersion, Ready: ready}
	if len(g.n.groups) > 1 {
		m.Groups = len(g.n.groups)
	}
	m.Drained = g.n.drained.Load()
	m.Kinds, m.FlakeClusters = fsm.KindsApplied(), g.n.flakeClusterValues()
	if g.n.transport != nil {
		m.RaftAddr = string(g.n.transport.LocalAddr())
	}
	b, _ := json.Marshal(m)
	if len(b) > limit {
		g.n.log.Error("gossip metadata too large", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}

// NotifyMsg, GetBroadcasts, LocalState and MergeRemoteState implement
// memberlist.Delegate; seqd sends no user messages.
func (g *gossip) NotifyMsg([]byte)                           {}
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (g *gossip) LocalState(join bool) []byte                { return nil }
func (g *gossip) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin, NotifyLeave and NotifyUpdate implement memberlist.EventDelegate.
func (g *gossip) NotifyJoin(node *memberlist.Node)   { g.update(node, true) }
func (g *gossip) NotifyLeave(node *memberlist.Node)  { g.update(node, false) }
func (g *gossip) NotifyUpdate(node *memberlist.Node) { g.update(node, true) }

func (g *gossip) update(node *memberlist.Node, alive bool) {
	var m Meta
	if err := json.Unmarshal(node.Meta, &m); err != nil || m.ID == "" {
		g.n.log.Warn("ignoring gossip member with unreadable metadata", "name", node.Name, "addr", node.Address())
		return
	}
	if m.ID != node.Name {
		g.n.log.Warn("ignoring gossip member whose name and ID differ", "name", node.Name, "id", m.ID)
		return
	}
	g.mu.Lock()
	old, seen := g.members[m.ID]
	mem := Member{Meta: m, GossipAddr: node.Address(), Alive: alive, DownSince: old.DownSince}
	switch {
	case alive:
		mem.DownSince = time.Time{}
	case !seen || old.Alive:
		mem.DownSince = time.Now()
	}
	g.members[m.ID] = mem
	g.mu.Unlock()
	g.nudge()
}

func (g *gossip) member(id string) (Member, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	m, ok := g.members[id]
	return m, ok
}

// Members returns every server seen through gossip, sorted by ID.
func (n *Node) Members() []Member {
	n.gossip.mu.RLock()
	defer n.gossip.mu.RUnlock()
	out := make([]Member, 0, len(n.gossip.members))
	for _, m := range n.gossip.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

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

// loop joins the other servers (retrying until one answers, and again
// whenever this node is alone), bootstraps a new cluster when
// BootstrapExpect servers without state see each other, and on the leader
// adds servers that joined through gossip to the raft configuration.
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
		g.checkGate(joined)
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

// maybeBootstrap bootstraps raft with every server seen that is ready to
// (see ready), once there are BootstrapExpect of them, this one included,
// and none has raft state. Requiring every server to see all of its --join
// list keeps servers that lost their data (wiped disks) from founding a new
// cluster while a server of their old cluster, which they were told to
// join, is down: a new cluster would hand out values the old one did.
func (g *gossip) maybeBootstrap() {
	n := g.n
	if n.hasState.Load() || n.cfg.BootstrapExpect == 0 {
		return
	}
	if !g.ready() {
		n.warnOnce("bootstrap-joins", "not bootstrapping yet: waiting to see every server --join names (a server bootstraps only with all of them)",
			"join", g.joinAddrs)
		return
	}
	var servers []raft.Server
	for _, m := range n.Members() {
		if !m.Alive {
			continue
		}
		if m.HasState && m.ID != n.cfg.ID {
			n.warnOnce("nobootstrap", "not bootstrapping: a cluster exists; waiting for its leader to add this server", "seen", m.ID)
			return
		}
		if m.ID != n.cfg.ID && !m.Ready && m.Proto != 0 {
			continue // it would not bootstrap (yet): it does not count
		}
		if m.groups() != len(n.groups) {
			n.warnOnce("bootstrap-groups:"+m.ID, fmt.Sprintf("not bootstrapping: server %s runs %d raft groups, this one %d; start every server of a new cluster with the same --groups", m.ID, m.groups(), len(n.groups)),
				"id", m.ID)
			return
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Voter})
	}
	if len(servers) < n.cfg.BootstrapExpect {
		return
	}
	if len(servers) > n.cfg.BootstrapExpect {
		n.log.Warn("more servers than bootstrap-expect are up; bootstrapping with all of them", "seen", len(servers), "expect", n.cfg.BootstrapExpect)
	}
	// Group 0 last: its state is what says this server has bootstrapped
	// (see checkGroupState).
	for i := len(n.groups) - 1; i >= 0; i-- {
		err := n.groups[i].Raft().BootstrapCluster(raft.Configuration{Servers: servers}).Error()
		if err != nil && err != raft.ErrCantBootstrap {
			n.log.Error("bootstrap failed", "group", i, "err", err)
			return
		}
	}
	n.log.Info("bootstrapped a new cluster", "servers", len(servers), "groups", len(n.groups))
	g.setHasState()
	n.vouchAll("bootstrapped a new cluster")
}

func (g *gossip) setHasState() {
	if g.n.hasState.Swap(true) {
		return
	}
	g.refreshMeta()
}

// refreshMeta publishes this node's metadata again (HasState or the
// cluster ID changed).
func (g *gossip) refreshMeta() {
	if err := g.n.ml.UpdateNode(time.Second); err != nil {
		g.n.log.Debug("gossip metadata update", "err", err)
	}
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
	for _, a := range g.joinAddrs {
		if !alive[a] {
			return false
		}
	}
	return true
}

// resolveJoins resolves the --join list (other servers only) to the
// addresses memberlist reports, once.
func (g *gossip) resolveJoins() {
	resolve := func(a string) string {
		if r, err := net.ResolveTCPAddr("tcp", a); err == nil {
			return r.String()
		}
		return a
	}
	self := map[string]bool{resolve(g.n.cfg.GossipAddr): true, resolve(g.n.cfg.GossipAdvertise): true}
	for _, j := range g.otherJoinAddrs() {
		if r := resolve(j); !self[r] {
			g.joinAddrs = append(g.joinAddrs, r)
		}
	}
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
	cf := n.raft.GetConfiguration()
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
	if pub, _ := g.published.Load().(string); pub != n.fsm.ClusterID() || g.publishedReady.Load() != g.ready() {
		g.refreshMeta()
	}
	if !n.GroupVouched(0) {
		return
	}
	if n.IsLeader() {
		n.membership(conf)
	}
	for i := 1; i < len(n.groups); i++ {
		if n.GroupVouched(i) && n.groups[i].IsLeader() {
			n.recordGroupProgress(i)
			n.mirrorMembership(i, conf)
		}
	}
	n.balance()
}
