package cluster

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/logbridge"
	"github.com/seqd/seqd/lease"
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
	// Lineage and Number are the server's generation with Cluster (see
	// seqd.Generation; absent for servers of builds before generations and
	// servers without state); Admitted is whether it is admitted in group
	// 0; FencedBy, once it is fenced, the generation that fenced it (see
	// fence.go). Servers learn of each other's generations through them.
	Lineage  string `json:"l,omitempty"`
	Number   uint64 `json:"n,omitempty"`
	Admitted bool   `json:"a,omitempty"`
	FencedBy string `json:"f,omitempty"`
}

// Generation is the member's generation (unknown for builds before
// generations).
func (m Meta) Generation() seqd.Generation {
	if m.Lineage == "" {
		return seqd.Generation{}
	}
	return seqd.Generation{Lineage: m.Lineage, Number: m.Number, Cluster: m.Cluster}
}

// groups is how many raft groups a member runs.
func (m Member) groups() int { return max(m.Groups, 1) }

// admitMember is the member as cluster/admit sees it.
func (m Member) admitMember() admit.Member {
	return admit.Member{ID: m.ID, Alive: m.Alive, HasState: m.HasState, Generation: m.Generation(), Admitted: m.Admitted,
		RaftAddr: m.RaftAddr, Ready: m.Ready, Proto: m.Proto, Groups: m.Groups}
}

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

	published  atomic.Pointer[Meta] // the metadata last published
	rejoining  atomic.Bool          // a rejoin is in flight
	lastRejoin atomic.Int64         // unix nanos
	knockMu    sync.Mutex
	knocking   map[string]time.Time // per --join address: when its last knock ended (zero: in flight)
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
	adv, err := advertised(n.log, "gossip", n.cfg.GossipAdvertise, false, resolveWait)
	if err != nil {
		return err
	}
	mc.AdvertiseAddr = adv.(*net.TCPAddr).IP.String()
	mc.AdvertisePort = adv.(*net.TCPAddr).Port
	if len(n.cfg.GossipKey) > 0 {
		mc.SecretKey = n.cfg.GossipKey
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
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
	n.wg.Add(2)
	go g.loop()
	go n.contactLoop()
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

// meta is this node's metadata as it stands.
func (g *gossip) meta() Meta {
	n := g.n
	m := Meta{ID: n.cfg.ID, RaftAddr: n.cfg.RaftAdvertise, APIAddr: n.cfg.APIAddr, HasState: n.hasState.Load(),
		Cluster: n.fsm.ClusterID(), Proto: fsm.ProtocolVersion, Ready: g.ready(), Admitted: n.GroupAdmitted(0), FencedBy: n.FencedBy()}
	if len(n.groups) > 1 {
		m.Groups = len(n.groups)
	}
	m.Drained = n.drained.Load()
	if n.transport != nil {
		m.RaftAddr = string(n.transport.LocalAddr())
	}
	if gen := n.Generation(); gen.Known() {
		m.Lineage, m.Number = gen.Lineage, gen.Number
	}
	return m
}

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	m := g.meta()
	g.published.Store(&m)
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
	if m.ID != g.n.cfg.ID {
		g.n.learn(admit.Learned{Generation: m.Generation(), Served: m.Admitted, From: m.ID})
		if by, err := seqd.ParseGeneration(m.FencedBy); err == nil && by.Known() {
			// What fenced a server fences the servers of its cluster too.
			g.n.learn(admit.Learned{Generation: by, Served: true, From: m.ID})
		}
	}
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
	if pub := g.published.Load(); pub == nil || *pub != g.meta() {
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
