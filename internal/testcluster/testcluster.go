// Package testcluster runs real seqd nodes in one process for tests: real
// hashicorp/raft groups over TCP on 127.0.0.1, real bbolt files in temporary
// directories, real memberlist gossip and real HTTP API listeners.
//
// Faults: Kill stops a node as a crash would (no handover), Restart brings it
// back on the same addresses and data directory, and Isolate cuts its raft
// traffic in both directions (every connection is closed and new ones are
// refused) until Heal.
package testcluster

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sections"
	"github.com/seqd/seqd/server"
)

// Options tune a test cluster.
type Options struct {
	// Lease is the leader lease (default 400ms).
	Lease time.Duration
	// Heartbeat is raft's heartbeat and election timeout (default 300ms).
	Heartbeat time.Duration
	// MaxKeysPerSection is passed to every node.
	MaxKeysPerSection int
	// MinVoters and DeadServerGrace are passed to every node (0: defaults).
	MinVoters       int
	DeadServerGrace time.Duration
	// SnapshotThreshold and TrailingLogs are passed to every node (0: defaults).
	SnapshotThreshold, TrailingLogs uint64
	// ClusterSecret is every node's flake obfuscation secret.
	ClusterSecret []byte
	// Groups is every node's --groups (0: one group for a new data
	// directory, and the recorded count for one that holds it, so that
	// in-process clusters do not take the product's default of one group
	// per bootstrap server).
	Groups int
	// LeaseHandoff is every node's --lease-handoff.
	LeaseHandoff bool
	// SpreadLeaders is every node's --leaders-follow-traffic=false.
	SpreadLeaders bool
	// Redis serves the Redis protocol front end on every node
	// (Member.RedisAddr).
	Redis bool
	// Token and TokenSequence are every node's --token and
	// --token-sequence.
	Token         string
	TokenSequence bool
}

// Cluster is a set of in-process nodes.
type Cluster struct {
	t     testing.TB
	opts  Options
	log   *slog.Logger
	Nodes []*Member
}

// Member is one node of a Cluster and its addresses, which stay the same
// across restarts.
type Member struct {
	c          *Cluster
	ID         string
	Dir        string
	RaftAddr   string
	GossipAddr string
	APIAddr    string
	RedisAddr  string // with Options.Redis

	// Lease, when set, overrides the cluster's lease for this member's
	// next start (a rolling change of --lease). Join, when not nil, is the
	// member's --join list instead of every other member's gossip address.
	// LeaseClock, when set, times the member's lease instead of the default
	// clock. Set them while the member is stopped.
	Lease      time.Duration
	Heartbeat  time.Duration // raft heartbeat and election timeout override
	Join       []string
	AssumeGone []string
	LeaseClock sections.Clock
	// NoLeaseHandoff, when set, starts the member with --lease-handoff=false
	// whatever Options.LeaseHandoff says (mixed settings).
	NoLeaseHandoff bool
	// SpreadLeaders, when set, starts the member with
	// --leaders-follow-traffic=false (a rolling change of the setting).
	SpreadLeaders bool
	// WallClock, when set, is the member's wall clock in Unix ms (a
	// clock-step test).
	WallClock func() int64

	mu    sync.Mutex
	srv   *server.Server // nil while stopped
	layer *FaultLayer
}

// Start starts n nodes that bootstrap one cluster together (bootstrap-expect n).
func Start(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	return New(t, n, opts, nil)
}

// New is Start with each member's settings adjusted by setup (if not nil)
// before it starts.
func New(t testing.TB, n int, opts Options, setup func(i int, m *Member)) *Cluster {
	t.Helper()
	c := &Cluster{t: t, opts: withDefaults(opts), log: testLogger()}
	for i := range n {
		m := &Member{c: c, ID: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1))}
		if setup != nil {
			setup(i, m)
		}
		c.Nodes = append(c.Nodes, m)
		if err := m.start(n); err != nil {
			t.Fatalf("starting %s: %v", m.ID, err)
		}
	}
	t.Cleanup(c.Close)
	return c
}

func testLogger() *slog.Logger {
	if os.Getenv("SEQD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// StartRestored starts a one-node cluster from a backup file, prepared as
// `seqd restore` does with the given margin (which must be at least the
// minimum for no values and one term since the backup; for a backup taken
// on protocol 5 or later, at least the margin of the time since, which is
// used when larger: see fsm.TimeMargin). Grow it with Join.
func StartRestored(t testing.TB, backup string, margin uint64, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t, opts: withDefaults(opts), log: testLogger()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	m := &Member{c: c, ID: "r1", Dir: filepath.Join(t.TempDir(), "r1"), RaftAddr: addr}
	sum, err := fsm.InspectBackup(backup)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Budgeted() {
		tm, err := fsm.TimeMargin(sum.Earliest(), time.Now().Add(time.Minute), fsm.DefaultClockError) // a minute ahead: PrepareRestore reads the clock later
		if err != nil {
			t.Fatal(err)
		}
		margin = max(margin, tm)
	}
	if _, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: backup, Margin: margin, ValuesSince: 0, TermsSince: 1,
		ID: m.ID, DataDir: m.Dir, RaftAdvertise: addr}); err != nil {
		t.Fatal(err)
	}
	c.Nodes = append(c.Nodes, m)
	if err := m.start(1); err != nil {
		t.Fatalf("starting restored node: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// StartRestoredDir starts a one-node cluster of a member id whose data
// directory dir a restore has prepared (cluster.PrepareRestore) with raft
// address raftAddr. Grow it with Join.
func StartRestoredDir(t testing.TB, id, dir, raftAddr string, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t, opts: withDefaults(opts), log: testLogger()}
	m := &Member{c: c, ID: id, Dir: dir, RaftAddr: raftAddr}
	c.Nodes = append(c.Nodes, m)
	if err := m.start(1); err != nil {
		t.Fatalf("starting restored node: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func withDefaults(opts Options) Options {
	if opts.Lease == 0 {
		opts.Lease = 400 * time.Millisecond
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 300 * time.Millisecond
	}
	return opts
}

// Close stops every node.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, m := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); m.Kill() }()
	}
	wg.Wait()
}

// APIAddrs returns every member's API address.
func (c *Cluster) APIAddrs() []string {
	var out []string
	for _, m := range c.Nodes {
		out = append(out, m.APIAddr)
	}
	return out
}

// ServingLeader returns the member that leads and holds the lease, or nil.
func (c *Cluster) ServingLeader() *Member {
	for _, m := range c.Nodes {
		if servesGroup0(m.Node()) {
			return m
		}
	}
	return nil
}

// servesGroup0 reports whether n is running, leads group 0 and holds its
// lease.
func servesGroup0(n *cluster.Node) bool {
	return n != nil && n.Group(0).IsLeader() && n.Group(0).Allocator().Serving()
}

// WaitServingLeader waits until some member other than the excluded ones
// leads and holds the lease, and returns it.
func (c *Cluster) WaitServingLeader(timeout time.Duration, exclude ...*Member) *Member {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, m := range c.Nodes {
			excluded := false
			for _, e := range exclude {
				excluded = excluded || e == m
			}
			if !excluded && servesGroup0(m.Node()) {
				return m
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("no serving leader within %v", timeout)
	return nil
}

// WaitGroupLeader waits until group g has a serving leader and returns it.
func (c *Cluster) WaitGroupLeader(g int, timeout time.Duration) *Member {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ls := c.GroupLeaders(); g < len(ls) && ls[g] != nil {
			return ls[g]
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("group %d has no serving leader within %v", g, timeout)
	return nil
}

// WaitAdmitted waits until m (running) is vouched for: its raft gate is open.
// A rolling restart waits for it before stopping the next server.
func (c *Cluster) WaitAdmitted(m *Member, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if n := m.Node(); n != nil && n.Admitted() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("%s was not vouched for within %v", m.ID, timeout)
}

// WaitVoters waits until the leader's configuration has n voters (joining
// servers are promoted only after keeping up for a couple of seconds).
func (c *Cluster) WaitVoters(n int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := c.ServingLeader(); l != nil {
			if conf, err := l.Node().Configuration(); err == nil {
				v := 0
				for _, s := range conf {
					if s.Voter {
						v++
					}
				}
				if v == n {
					return
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("configuration did not reach %d voters within %v", n, timeout)
}

// snapshotInterval checks for snapshots often when a test asks for them.
func snapshotInterval(threshold uint64) time.Duration {
	if threshold > 0 {
		return 50 * time.Millisecond
	}
	return 0
}

// SeedBootstrap writes into the (stopped, wiped) data directories of ms the
// state a server has right after it bootstrapped a new cluster whose
// configuration lists every one of ms as a voter (what each of them would
// write if all bootstrapped together): a raft log holding only the
// configuration, at index 1.
func (c *Cluster) SeedBootstrap(ms ...*Member) {
	c.t.Helper()
	var conf raft.Configuration
	for _, m := range ms {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Voter})
	}
	for _, m := range ms {
		if m.Node() != nil {
			c.t.Fatalf("seed %s: still running", m.ID)
		}
		if err := os.MkdirAll(m.Dir, 0o750); err != nil {
			c.t.Fatal(err)
		}
		ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(m.Dir, "raft.db")})
		if err != nil {
			c.t.Fatal(err)
		}
		snaps, err := raft.NewFileSnapshotStore(m.Dir, 2, io.Discard)
		if err != nil {
			c.t.Fatal(err)
		}
		_, trans := raft.NewInmemTransport(raft.ServerAddress(m.RaftAddr))
		rc := raft.DefaultConfig()
		rc.LocalID = raft.ServerID(m.ID)
		if err := raft.BootstrapCluster(rc, ls, ls, snaps, trans, conf); err != nil {
			c.t.Fatal(err)
		}
		ls.Close()
	}
}

// SetGroups changes every member's --groups for its next start.
func (c *Cluster) SetGroups(n int) { c.opts.Groups = n }

// GroupLeaders returns, per group, the member that leads the group and
// holds its lease (nil where none does).
func (c *Cluster) GroupLeaders() []*Member {
	var out []*Member
	for _, m := range c.Nodes {
		n := m.Node()
		if n == nil {
			continue
		}
		if out == nil {
			out = make([]*Member, n.Groups())
		}
		for i := range n.Groups() {
			if g := n.Group(i); g.IsLeader() && g.Allocator().Serving() && i < len(out) {
				out[i] = m
			}
		}
	}
	return out
}

// LeadCounts returns how many groups each running member leads and serves
// (by member ID), and whether every group has a serving leader.
func (c *Cluster) LeadCounts() (map[string]int, bool) {
	counts := map[string]int{}
	for _, m := range c.Nodes {
		if m.Node() != nil {
			counts[m.ID] = 0
		}
	}
	all := true
	for _, m := range c.GroupLeaders() {
		if m == nil {
			all = false
			continue
		}
		counts[m.ID]++
	}
	return counts, all
}

// Balanced reports whether every group has a serving leader and the
// counts of groups led per running member differ by at most one, with the
// counts. The balancer moves no leadership of a balanced cluster.
func (c *Cluster) Balanced() (map[string]int, bool) {
	counts, all := c.LeadCounts()
	lo, hi := 1<<30, 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	return counts, all && hi-lo <= 1
}

// WaitBalanced waits until the cluster is balanced and returns how long it
// took.
func (c *Cluster) WaitBalanced(timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for {
		counts, ok := c.Balanced()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			c.t.Fatalf("leaders not balanced within %v: %v", timeout, counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LeadCountsOf returns how many groups m leads and serves.
func (c *Cluster) LeadCountsOf(m *Member) int {
	n := 0
	for _, l := range c.GroupLeaders() {
		if l == m {
			n++
		}
	}
	return n
}

// BalanceMoves sums the leadership moves the running members' balancers
// started.
func (c *Cluster) BalanceMoves() (n int64) {
	for _, m := range c.Nodes {
		if node := m.Node(); node != nil {
			n += node.BalanceMoves()
		}
	}
	return n
}

// KeysOfEachGroup returns n keys of the default space of each of groups
// raft groups (consecutive keys of one section: KeyPerGroup's and the
// next n-1).
func KeysOfEachGroup(groups, n int) []uint64 {
	var keys []uint64
	for _, k := range KeyPerGroup(groups) {
		for i := range uint64(n) {
			keys = append(keys, k+i)
		}
	}
	return keys
}

// KeyPerGroup returns, for each of groups raft groups, a key of the default
// space that the group owns.
func KeyPerGroup(groups int) []uint64 {
	keys := make([]uint64, groups)
	found := 0
	for sec := uint64(0); found < groups; sec++ {
		g := seqd.GroupOfKey(seqd.DefaultSpaceName, seqd.DefaultSectionSize, sec*seqd.DefaultSectionSize, groups)
		if keys[g] == 0 {
			keys[g] = sec*seqd.DefaultSectionSize + 1
			found++
		}
	}
	return keys
}
