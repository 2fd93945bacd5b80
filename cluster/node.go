package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sections"
)

// applyTimeout bounds how long a raft Apply may wait to be enqueued.
const applyTimeout = 5 * time.Second

// raftShutdownWait bounds how long Shutdown and Kill wait for raft to stop.
const raftShutdownWait = 15 * time.Second

// ErrShutdownStuck means raft did not stop within raftShutdownWait.
var ErrShutdownStuck = errors.New("raft did not shut down in time")

// Node is one running seqd server.
type Node struct {
	cfg Config
	log *slog.Logger

	raft      *raft.Raft
	fsm       *fsm.FSM
	logStore  *raftboltdb.BoltStore
	snaps     *raft.FileSnapshotStore
	transport *raft.NetworkTransport
	gate      *gatedLayer
	alloc     *sections.Allocator

	ml            *memberlist.Memberlist
	gossipAddr    string // host:port other servers reach this node's gossip on
	gossip        *gossip
	gossipStarted time.Time
	hasState      atomic.Bool
	vouchedCh     chan struct{} // signalled when the gate opens
	disk          diskState
	logScan       logScan // see seenInLog
	// routingVersion caches RoutingVersion for response headers.
	routingVersion atomic.Uint64

	notify chan bool
	stop   chan struct{}
	wg     sync.WaitGroup

	leadMu     sync.Mutex
	leadCancel context.CancelFunc

	stats nodeStats

	memMu       sync.Mutex
	caughtSince map[string]time.Time // non-voters seen caught up, since when
	recordedAt  map[string]time.Time // when each server's raft index was last recorded
	warned      map[string]time.Time // warnOnce

	closeOnce sync.Once
	closeErr  error
}

// nodeStats are counters reported by Status.
type nodeStats struct {
	leaderChanges  atomic.Int64
	renewals       atomic.Int64
	renewalErrors  atomic.Int64
	servingSince   atomic.Int64 // unix nanos when this node last started serving as leader
	lastFailoverNs atomic.Int64 // became leader → serving, last time
	lastLeaseWait  atomic.Int64 // the lease wait of the last leadership (see leaseWait)
}

// Start opens the data directory, starts raft and gossip, and returns a
// running node. The node serves sequence calls only once it is the leader
// and holds the lease.
func Start(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), notify: make(chan bool, 16), stop: make(chan struct{}),
		vouchedCh:   make(chan struct{}, 1),
		caughtSince: map[string]time.Time{}, warned: map[string]time.Time{}, recordedAt: map[string]time.Time{}}
	if err := n.open(); err != nil {
		n.closeStores()
		return nil, err
	}
	n.wg.Add(1)
	go n.leadership()
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
	raftOut := newLogWriter(n.log, "raft", cfg.RaftLogLevel)

	f, err := fsm.Open(filepath.Join(cfg.DataDir, "fsm.db"), n.log)
	if err != nil {
		return err
	}
	n.fsm = f
	f.SetDiskHook(n.setFSMDisk)
	ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.DataDir, "raft.db")})
	if err != nil {
		return fmt.Errorf("raft log store %s: %w", filepath.Join(cfg.DataDir, "raft.db"), err)
	}
	n.logStore = ls
	snaps, err := raft.NewFileSnapshotStore(cfg.DataDir, 2, raftOut)
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	n.snaps = snaps

	layer := cfg.StreamLayer
	if layer == nil {
		adv, err := net.ResolveTCPAddr("tcp", cfg.RaftAdvertise)
		if err != nil {
			return fmt.Errorf("%w: raft advertise address %q: %v", ErrInvalidConfig, cfg.RaftAdvertise, err)
		}
		if adv.IP == nil || adv.IP.IsUnspecified() {
			return fmt.Errorf("%w: raft advertise address %q must be a routable IP", ErrInvalidConfig, cfg.RaftAdvertise)
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
	n.gate = &gatedLayer{StreamLayer: layer, disk: &n.disk}
	n.transport = raft.NewNetworkTransport(n.gate, 3, 10*time.Second, raftOut)

	has, err := raft.HasExistingState(ls, ls, snaps)
	if err != nil {
		return fmt.Errorf("reading raft state: %w", err)
	}
	n.hasState.Store(has)
	// The raft gate starts shut until the server is vouched for: see vouch.go.

	rc, err := cfg.raftConfig(n.notify, raftOut)
	if err != nil {
		return err
	}
	rc.Logger = newHCLogger(raftOut, "raft")
	ds := diskStore{BoltStore: ls, n: n}
	cache, err := raft.NewLogCache(512, ds)
	if err != nil {
		return err
	}
	r, err := raft.NewRaft(rc, f, cache, ds, snaps, noPipeline{n.transport})
	if err != nil {
		return fmt.Errorf("starting raft: %w", err)
	}
	n.raft = r
	n.alloc = sections.New(store{n}, sections.Options{
		Clock:             cfg.LeaseClock,
		MaxKeysPerSection: cfg.MaxKeysPerSection,
		Logger:            n.log,
		OnRaise:           cfg.OnRaise,
	})
	return nil
}

// Allocator returns the node's allocator (it serves only on the leader).
func (n *Node) Allocator() *sections.Allocator { return n.alloc }

// ID returns the node's ID.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address other servers use to reach this node's raft.
func (n *Node) RaftAddr() string { return string(n.transport.LocalAddr()) }

// GossipAddr returns the address other servers use to reach this node's gossip.
func (n *Node) GossipAddr() string { return n.gossipAddr }

// IsLeader reports whether raft considers this node the leader. Serving also
// needs the lease: see Allocator().Serving().
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the ID and API address of the current leader as this node
// knows it; empty strings when unknown.
func (n *Node) Leader() (id, apiAddr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	id = string(lid)
	if id == n.cfg.ID {
		return id, n.cfg.APIAddr
	}
	if m, ok := n.gossip.member(id); ok {
		return id, m.APIAddr
	}
	return id, ""
}

// TransferLeadership asks raft to hand leadership to server id (any voter
// when id is empty) and waits for the outcome. It must run on the leader.
// The lease is not revoked first: a failed transfer leaves this node
// serving, and a successful one steps it down (revoking the lease) before
// the new leader can serve, which waits out this node's lease anyway.
func (n *Node) TransferLeadership(id string) error {
	if !n.IsLeader() {
		return seqd.ErrNotLeader
	}
	if id == "" {
		return n.raft.LeadershipTransfer().Error()
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id {
			return n.raft.LeadershipTransferToServer(s.ID, s.Address).Error()
		}
	}
	return fmt.Errorf("%w: %q", ErrUnknownServer, id)
}

// Snapshot makes raft take a snapshot of this node's state now (and
// compact its log behind it, keeping the trailing entries).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// ClusterID returns the cluster's ID ("" until the cluster has one).
func (n *Node) ClusterID() string { return n.fsm.ClusterID() }

// Space returns a committed space from this node's FSM.
func (n *Node) Space(name string) (seqd.Space, bool) { return n.fsm.Space(name) }

// ServerSeen reports whether the cluster recorded server id holding raft
// state, and the highest raft index recorded for its log.
func (n *Node) ServerSeen(id string) (bool, uint64) { return n.fsm.ServerSeen(id) }

// Max returns the high-water mark of a section in this node's FSM.
func (n *Node) Max(space string, section uint64) uint64 { return n.fsm.Max(space, section) }

// Spaces returns every committed space in this node's FSM.
func (n *Node) Spaces() []seqd.Space { return n.fsm.Spaces() }

// CreateSpace creates a space through raft. It must run on the leader. It
// reports created = false when the space already exists with the same
// settings, and fails with fsm.ErrSpaceExists when the settings differ.
func (n *Node) CreateSpace(ctx context.Context, s seqd.Space) (created bool, err error) {
	if err := seqd.ValidateSpace(s); err != nil {
		return false, err
	}
	if !n.IsLeader() {
		return false, seqd.ErrNotLeader
	}
	if old, ok := n.fsm.Space(s.Name); ok {
		if old == s {
			return false, nil
		}
		return false, seqd.ErrSpaceExists
	}
	if err := n.apply(ctx, fsm.EncodeCreateSpace(s)); err != nil {
		return false, err
	}
	return true, nil
}

// apply submits one entry and waits until it is committed and applied here.
// A non-nil FSM response is returned as the error.
func (n *Node) apply(ctx context.Context, data []byte) error {
	f := n.raft.Apply(data, applyTimeout)
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		if err = f.Error(); err != nil {
			return
		}
		if rerr, ok := f.Response().(error); ok {
			err = rerr
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", seqd.ErrNotLeader, err)
	}
	return err
}

// store adapts the node to sections.Store.
type store struct{ n *Node }

func (s store) Space(name string) (seqd.Space, bool) {
	return s.n.fsm.Space(name)
}

func (s store) Max(space string, section uint64) uint64 { return s.n.fsm.Max(space, section) }

func (s store) Raise(ctx context.Context, marks []seqd.Mark) error {
	return s.n.apply(ctx, fsm.EncodeRaise(marks))
}

// Shutdown stops the node gracefully: a leader first drops its lease and
// in-memory state and hands leadership to another voter; then the node leaves
// gossip and stops raft. ctx bounds the handover.
func (n *Node) Shutdown(ctx context.Context) error {
	if n.IsLeader() {
		n.alloc.Revoke()
		n.stepDownLead()
		if n.hasOtherVoters() {
			f := n.raft.LeadershipTransfer()
			errc := make(chan error, 1)
			go func() { errc <- f.Error() }()
			select {
			case err := <-errc:
				if err != nil {
					n.log.Warn("leadership transfer failed", "err", err)
				} else {
					n.log.Info("leadership handed over")
				}
			case <-ctx.Done():
				n.log.Warn("leadership transfer timed out")
			}
		}
	}
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
		close(n.stop)
		if n.alloc != nil {
			n.alloc.Revoke()
		}
		if n.fsm != nil {
			n.fsm.Stop() // an apply waiting for disk space gives up, so raft can stop
		}
		n.stepDownLead()
		if n.gossip != nil {
			n.gossip.close()
		}
		if n.ml != nil {
			_ = n.ml.Shutdown()
		}
		if n.raft != nil {
			errc := make(chan error, 1)
			go func() { errc <- n.raft.Shutdown().Error() }()
			select {
			case err := <-errc:
				n.closeErr = err
			case <-time.After(raftShutdownWait):
				// Do not close the stores under raft's running goroutines.
				n.closeErr = ErrShutdownStuck
				n.log.Error("raft did not shut down in time; leaving its stores open", "waited", raftShutdownWait)
				return
			}
		}
		n.wg.Wait()
		if n.alloc != nil {
			n.alloc.Close()
		}
		if n.transport != nil {
			_ = n.transport.Close()
		}
		n.closeStores()
	})
	return n.closeErr
}

func (n *Node) closeStores() {
	if n.logStore != nil {
		_ = n.logStore.Close()
	}
	if n.fsm != nil {
		_ = n.fsm.Close()
	}
}

func (n *Node) hasOtherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			return true
		}
	}
	return false
}
