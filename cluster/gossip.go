package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster/admit"
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
	// Lineage and Number are the server's generation with Cluster (see
	// seqd.Generation; absent for servers of builds before generations and
	// servers without state); Admitted is whether it is admitted in group
	// 0; FencedBy, once it is fenced, the generation that fenced it (see
	// fence.go). Servers learn of each other's generations through them.
	Lineage  string `json:"l,omitempty"`
	Number   uint64 `json:"n,omitempty"`
	Admitted bool   `json:"a,omitempty"`
	FencedBy string `json:"f,omitempty"`
	// Kinds is the set of ignorable command kinds the server applies (see
	// fsm.KindsApplied; absent, so 0, for builds before it, which apply
	// fsm.KindsAppliedBefore).
	Kinds uint64 `json:"k,omitempty"`
	// FlakeClusters lists the cluster values of the flake namespaces of the
	// server's cluster that have a cluster field, as its state has them
	// (see Node.ClusterValueInUse).
	FlakeClusters []uint64 `json:"fc,omitempty"`
	// Follows is true for a server that takes and keeps groups for their
	// traffic (follow.go; not --leaders-follow-traffic=false, not a build
	// before it): only such a server is handed a group for its traffic,
	// so that none is handed one it would hand back.
	Follows bool `json:"t,omitempty"`
	// Holds lists the groups the server leads and keeps for their traffic
	// (follow.go), as a bitmap in hex (group i: bit i%8 of byte i/8), so
	// that every server shows the preference its leader acts on.
	Holds string `json:"h,omitempty"`
}

// Generation is the member's generation (unknown for builds before
// generations).
func (m Meta) Generation() seqd.Generation {
	if m.Lineage == "" {
		return seqd.Generation{}
	}
	return seqd.Generation{Lineage: m.Lineage, Number: m.Number, Cluster: m.Cluster}
}

// same reports whether m and o say the same (an empty list and none alike).
func (m Meta) same(o Meta) bool {
	if !slices.Equal(m.FlakeClusters, o.FlakeClusters) {
		return false
	}
	m.FlakeClusters, o.FlakeClusters = nil, nil
	return reflect.DeepEqual(m, o)
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

	kick chan struct{} // nudges the host loop (loop.go)
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
	n.startLoops()
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
		Cluster: n.authority().FSM().ClusterID(), Proto: fsm.ProtocolVersion, Ready: g.ready(), Admitted: n.GroupAdmitted(0), FencedBy: n.FencedBy()}
	if len(n.groups) > 1 {
		m.Groups = len(n.groups)
	}
	m.Drained, m.Follows, m.Holds = n.drained.Load(), !n.cfg.SpreadLeaders, n.heldForTraffic(time.Now())
	m.Kinds, m.FlakeClusters = fsm.KindsApplied(), n.flakeClusterValues()
	if n.transports[0] != nil {
		m.RaftAddr = string(n.transports[0].LocalAddr())
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
	if len(b) > limit && len(m.FlakeClusters) > 0 {
		// The flake cluster values are a courtesy check (ClusterValueInUse);
		// what identifies the server must fit.
		g.n.log.Warn("gossip metadata too large: publishing it without the flake cluster values", "bytes", len(b), "limit", limit)
		m.FlakeClusters = nil
		b, _ = json.Marshal(m)
	}
	if len(b) > limit && m.Holds != "" {
		// So is Holds (what status shows as preferred).
		m.Holds = ""
		b, _ = json.Marshal(m)
	}
	if len(b) > limit {
		g.n.log.Error("gossip metadata too large", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}

// NotifyMsg, GetBroadcasts, LocalState and MergeRemoteState implement
// memberlist.Delegate; seqd sends no user messages.
func (g *gossip) NotifyMsg([]byte) {}

func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }

func (g *gossip) LocalState(join bool) []byte { return nil }

func (g *gossip) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin, NotifyLeave and NotifyUpdate implement memberlist.EventDelegate.
func (g *gossip) NotifyJoin(node *memberlist.Node) { g.update(node, true) }

func (g *gossip) NotifyLeave(node *memberlist.Node) { g.update(node, false) }

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
