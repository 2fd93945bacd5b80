package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/group"
	"github.com/seqd/seqd/internal/logbridge"
)

// applyTimeout bounds how long a raft membership change may wait to be
// enqueued.
const applyTimeout = 5 * time.Second

// ErrShutdownStuck means raft did not stop in time (see group.Close).
var ErrShutdownStuck = group.ErrShutdownStuck

// Node is one running seqd server: the host of its raft groups (see
// groups.go). It owns what all groups share: the raft listener, its gate
// and the multiplexer on it, gossip, membership and vouching, the routing
// version.
type Node struct {
	cfg Config
	log *slog.Logger

	// groups are the node's raft groups, one transport each over mux;
	// group 0 is the authority (see authority).
	groups     []*group.Group
	transports []*raft.NetworkTransport
	mux        *muxLayer
	// gates is each group's admission state (admission.go); each group's
	// raft gate is in mux (muxLayer.Open, Shut).
	gates []*gate
	// fenced is set, and fence holds the record, once this server is
	// fenced for good (fence.go).
	fenced atomic.Bool
	fence  atomic.Pointer[fenceRecord]
	// sourceSeen is when this server last saw an admitted server of the
	// cluster its restore replaces (Unix ns; 0: never; admission.go).
	sourceSeen atomic.Int64
	// newerSeen is when it last saw a live server of a newer generation of
	// its lineage (a restore of its cluster).
	newerSeen atomic.Int64
	// legacySource is the cluster a build before generations restored this
	// data directory from ("" if none; see Generation).
	legacySource string
	// recordedContact is, per group, when this server last heard from a
	// leader of the group before it last stopped (Unix ms, 0: no record);
	// contacts the same since it started (contact.go).
	recordedContact []int64
	contacts        []atomic.Int64
	// stall watches for stalls of this process (stall.go).
	stall *stallWatch

	ml            *memberlist.Memberlist
	gossipAddr    string // host:port other servers reach this node's gossip on
	gossip        *gossip
	gossipStarted time.Time
	hasState      atomic.Bool
	disk          diskState
	// routingVersion is the routing version, computed only by the
	// reconcile pass (gossip.go) and read by headers and status alike.
	routingVersion atomic.Uint64

	wg      sync.WaitGroup
	closing chan struct{} // closed when close begins (see await)

	clocks clocks // the leader's samples of its peers' clocks (clock.go)

	spaceLookups lookups // questions to group 0's leader (spaces.go)

	traffic []groupTraffic // per group (follow.go)

	adopt   atomic.Int64  // the group count this server adopts (adopt.go)
	restart chan struct{} // closed when it must start again to adopt it

	memMu       sync.Mutex
	caughtSince map[string]time.Time // non-voters seen caught up, since when
	recordedAt  map[string]time.Time // when each server's raft index was last recorded
	warned      map[string]time.Time // warnOnce
	// Leader balancing (placement.go), under memMu.
	aliveSince     map[string]time.Time // members alive in gossip, since when
	balancing      bool                 // a transfer is in flight
	lastBalance    time.Time            // when the last one ended
	balanceRetry   map[int]time.Time    // per group: no new try before
	drained        atomic.Bool          // see Drain
	balanceMoves   atomic.Int64         // see BalanceMoves
	stopping       atomic.Bool          // Shutdown has begun: no balancing here
	missingSince   map[string]time.Time // "group/id" gone from group 0's configuration, since when
	progressFailed map[string]time.Time // API address → no progress question before

	closeOnce sync.Once
	closeErr  error
}

// Start opens the data directory, starts raft and gossip, and returns a
// running node. The node serves sequence calls only once it is the leader
// and holds the lease.
func Start(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), closing: make(chan struct{}), restart: make(chan struct{}),
		caughtSince: map[string]time.Time{}, warned: map[string]time.Time{}, recordedAt: map[string]time.Time{},
		aliveSince: map[string]time.Time{}, balanceRetry: map[int]time.Time{}, missingSince: map[string]time.Time{}, progressFailed: map[string]time.Time{}, stall: newStallWatch()}
	if err := n.open(); err != nil {
		n.closeGroups()
		n.closeTransports()
		return nil, err
	}
	if err := n.startGossip(); err != nil {
		n.Kill()
		return nil, err
	}
	return n, nil
}

func (n *Node) open() error {
	cfg := n.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	layer := cfg.StreamLayer
	if layer == nil {
		adv, err := advertised(n.log, "raft", cfg.RaftAdvertise, true, resolveWait)
		if err != nil {
			return err
		}
		t, err := newTCPLayer(cfg.RaftAddr, adv)
		if err != nil {
			return fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
		}
		layer = t
	}
	if cfg.RaftTLS.enabled() {
		srv, cli, err := cfg.RaftTLS.configs()
		if err != nil {
			return err
		}
		layer = &tlsLayer{StreamLayer: layer, server: srv, client: cli}
	}
	base := &diskLayer{StreamLayer: layer, disk: &n.disk}
	count, err := groupCount(cfg.DataDir, cfg.Groups, defaultGroups(cfg.BootstrapExpect))
	if err != nil {
		_ = base.Close()
		return err
	}
	// Every group's raft gate starts shut until the server is admitted in
	// that group: see admission.go.
	n.mux = newMux(base, count, n.log)
	n.contacts = make([]atomic.Int64, count)
	for i := 0; i < count; i++ {
		n.gates = append(n.gates, newGate())
		t := raft.NewNetworkTransport(n.mux.Group(i), 3, 10*time.Second, logbridge.NewWriter(n.log, "raft", cfg.RaftLogLevel))
		n.transports = append(n.transports, t)
	}
	// Before anything is opened (which creates the files): a group
	// directory lost while group 0 holds state must stay refused on the
	// next start too.
	existed := make([]bool, count)
	for i := 0; i < count; i++ {
		existed[i] = exists(filepath.Join(groupDir(cfg.DataDir, i), "raft.db"))
		if err := checkLogKept(groupDir(cfg.DataDir, i), i, existed[i]); err != nil {
			return err
		}
	}
	has0, err := hasRaftState(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := checkGroupState(has0, existed); err != nil {
		return err
	}
	from, err := readRestoredFrom(cfg.DataDir)
	if err != nil {
		return err
	}
	n.legacySource = from
	rec, err := readFence(cfg.DataDir)
	if err != nil {
		return err
	}
	if rec != nil {
		n.fenced.Store(true)
		n.fence.Store(rec)
		n.log.Error("this server was fenced for good: its cluster was replaced by a restore; it refuses raft and never serves. "+
			"To use it again: stop it, delete its data directory, and start it with a --join naming the restored cluster's servers",
			"refusal", "superseded", "superseded_by", rec.By, "learned_from", rec.From, "at", rec.At)
	}
	for i := 0; i < count; i++ {
		if err := checkIdentity(groupDir(cfg.DataDir, i), cfg.ID, i); err != nil {
			return err
		}
		n.recordedContact = append(n.recordedContact, readContact(groupDir(cfg.DataDir, i)))
		gc := group.Config{
			ID: cfg.ID, Dir: groupDir(cfg.DataDir, i), Transport: noPipeline{n.transports[i]}, Host: n,
			Index: i, Groups: count, Owns: ownsFunc(i, count),
			Options: cfg.Options, WallClock: n.WallMs, Logger: n.log,
		}
		if i > 0 {
			gc.Authority = n.groups[0].FSM()
			g0 := n.groups[0].Raft()
			gc.Follows = func() (raft.Configuration, error) {
				cf := g0.GetConfiguration()
				return cf.Configuration(), cf.Error()
			}
			gc.Logger = n.log.With("group", i)
		}
		if i > 0 || (count > 1 && cfg.Peers != nil) {
			// Group 0 asks only for routing (LookupSpace).
			gc.AskSpace = n.askSpace
		}
		g, err := group.Open(gc)
		if err != nil {
			return fmt.Errorf("group %d: %w", i, err)
		}
		n.groups = append(n.groups, g)
	}
	n.traffic = make([]groupTraffic, len(n.groups))
	g := n.groups[0]
	n.hasState.Store(g.HadState())
	return nil
}

// closeGroups closes every group, group 0 last: the others read it.
func (n *Node) closeGroups() error {
	var errs []error
	for i := len(n.groups) - 1; i >= 0; i-- {
		errs = append(errs, n.groups[i].Close())
	}
	return errors.Join(errs...)
}

// closeTransports closes every group's transport and the listener.
func (n *Node) closeTransports() {
	for _, t := range n.transports {
		_ = t.Close()
	}
	if n.mux != nil {
		_ = n.mux.Close()
	}
}

// Groups returns how many raft groups the cluster runs.
func (n *Node) Groups() int { return len(n.groups) }

// Group returns group i (0 <= i < Groups()).
func (n *Node) Group(i int) *group.Group { return n.groups[i] }

// KeyGroups returns a function that gives the group owning a key of space.
// With one group, every key is group 0's whatever the space, and nothing is
// looked up: whether the space exists is for group 0's leader to answer.
// With several, the space's section size comes as for Locator.
func (n *Node) KeyGroups(ctx context.Context, space string) (func(key uint64) int, error) {
	if len(n.groups) == 1 {
		return func(uint64) int { return 0 }, nil
	}
	locate, err := n.Locator(ctx, space)
	if err != nil {
		return nil, err
	}
	return func(key uint64) int {
		g, _ := locate(key)
		return g
	}, nil
}

// Locator returns where the keys of space live: a function that gives a
// key's group and the slot of its section. The space's settings come from
// this server's copy of group 0, or from group 0's leader when the copy
// lags (LookupSpace); an unknown space is an error wrapping
// seqd.ErrUnknownSpace.
func (n *Node) Locator(ctx context.Context, space string) (func(key uint64) (group int, slot uint32), error) {
	sp, err := n.LookupSpace(ctx, space)
	if err != nil {
		return nil, err
	}
	groups := len(n.groups)
	return func(key uint64) (int, uint32) {
		slot := seqd.SlotOf(space, key/sp.SectionSize)
		return seqd.SlotGroup(slot, groups), slot
	}, nil
}

// CutGroupTraffic cuts (or restores) the raft traffic of group i only, on
// this server, both ways: a test hook for per-group lease independence.
func (n *Node) CutGroupTraffic(i int, cut bool) { n.mux.Cut(i, cut) }

// GroupLeader returns the ID and API address of group i's leader as this
// node knows it; empty strings when unknown.
func (n *Node) GroupLeader(i int) (id, apiAddr string) {
	_, lid := n.groups[i].Raft().LeaderWithID()
	return n.leaderAddr(string(lid))
}

// ID returns the node's ID.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address other servers use to reach this node's raft.
func (n *Node) RaftAddr() string { return string(n.transports[0].LocalAddr()) }

// GossipAddr returns the address other servers use to reach this node's gossip.
func (n *Node) GossipAddr() string { return n.gossipAddr }

// leaderAddr returns id with its API address ("" if unknown).
func (n *Node) leaderAddr(id string) (string, string) {
	switch {
	case id == "":
		return "", ""
	case id == n.cfg.ID:
		return id, n.cfg.APIAddr
	}
	if m, ok := n.gossip.member(id); ok {
		return id, m.APIAddr
	}
	return id, ""
}

// Shutdown stops the node gracefully: a leader first drops its lease and
// in-memory state and hands leadership to another voter; then the node leaves
// gossip and stops raft. ctx bounds the handover.
func (n *Node) Shutdown(ctx context.Context) error {
	// Nobody's preferred leader from now on, so that no balancer moves a
	// group back here between its handover and the gossip leave; this
	// server's own balancer stops (the handovers below move its groups).
	n.stopping.Store(true)
	n.writeContacts()
	if !n.drained.Swap(true) && n.gossip != nil && n.ml != nil {
		n.gossip.refreshMeta()
	}
	var wg sync.WaitGroup
	for _, g := range n.groups {
		wg.Go(func() { g.Handover(ctx) })
	}
	wg.Wait()
	if n.ml != nil {
		if err := n.ml.Leave(time.Second); err != nil {
			n.log.Debug("gossip leave", "err", err)
		}
	}
	return n.close()
}

// Kill stops the node abruptly, as a crash would from the cluster's point of
// view: no handover, no gossip leave.
func (n *Node) Kill() error { return n.close() }

func (n *Node) close() error {
	n.closeOnce.Do(func() {
		close(n.closing)
		for _, g := range n.groups {
			g.Stop()
		}
		if n.gossip != nil {
			n.gossip.close()
		}
		if n.ml != nil {
			_ = n.ml.Shutdown()
		}
		// Raft stops before the host's goroutines are awaited, and the
		// stores close only after them, since gossip's reconcile pass
		// reads the group's raft and FSM until it returns.
		errs := make([]error, len(n.groups))
		var wg sync.WaitGroup
		for i, g := range n.groups {
			wg.Go(func() { errs[i] = g.ShutdownRaft() })
		}
		wg.Wait()
		if n.closeErr = errors.Join(errs...); errors.Is(n.closeErr, group.ErrShutdownStuck) {
			return // the stores stay open under raft's goroutines
		}
		n.wg.Wait()
		n.closeErr = n.closeGroups()
		n.closeTransports()
	})
	return n.closeErr
}
