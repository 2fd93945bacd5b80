package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/group"
	"github.com/seqd/seqd/server"
)

// Join starts one more node that joins the running cluster through gossip
// (bootstrap-expect as for the others, so it must not bootstrap on its own).
func (c *Cluster) Join() *Member {
	c.t.Helper()
	i := len(c.Nodes)
	m := &Member{c: c, ID: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(c.t.TempDir(), fmt.Sprintf("n%d", i+1))}
	c.Nodes = append(c.Nodes, m)
	if err := m.start(i); err != nil {
		c.t.Fatalf("starting %s: %v", m.ID, err)
	}
	return m
}

func (m *Member) start(expect int) error {
	var joins []string
	for _, o := range m.c.Nodes {
		if o != m && o.GossipAddr != "" {
			joins = append(joins, o.GossipAddr)
		}
	}
	if m.Join != nil {
		joins = m.Join
	}
	lease, hb := m.c.opts.Lease, m.c.opts.Heartbeat
	if m.Lease != 0 {
		lease = m.Lease
	}
	if m.Heartbeat != 0 {
		hb = m.Heartbeat
	}
	bind := func(addr string) string {
		if addr == "" {
			return "127.0.0.1:0"
		}
		return addr
	}
	raftBind, gossipBind, apiBind := bind(m.RaftAddr), bind(m.GossipAddr), bind(m.APIAddr)
	layer, err := listenFaulty(raftBind)
	if err != nil {
		return err
	}
	apiLn, err := listenRetry(apiBind)
	if err != nil {
		layer.Close()
		return err
	}
	m.RaftAddr = layer.Addr().String()
	m.APIAddr = apiLn.Addr().String()
	var redisLn net.Listener
	if m.c.opts.Redis {
		if redisLn, err = listenRetry(bind(m.RedisAddr)); err != nil {
			layer.Close()
			apiLn.Close()
			return err
		}
		m.RedisAddr = redisLn.Addr().String()
	}
	srv, err := server.New(server.Config{
		APIListener:   apiLn,
		RedisListener: redisLn,
		Cluster: cluster.Config{
			ID: m.ID, DataDir: m.Dir,
			StreamLayer: layer, RaftAdvertise: m.RaftAddr,
			GossipAddr: gossipBind, APIAddr: m.APIAddr,
			Join: joins, BootstrapExpect: expect, AssumeGone: m.AssumeGone,
			WallClock: m.WallClock,
			Options: group.Options{
				Lease: lease, LeaseClock: m.LeaseClock, HeartbeatTimeout: hb, ElectionTimeout: hb,
				LeaderLeaseTimeout: hb / 2, CommitTimeout: 5 * time.Millisecond,
				MaxKeysPerSection: m.c.opts.MaxKeysPerSection,
				SnapshotThreshold: m.c.opts.SnapshotThreshold, TrailingLogs: m.c.opts.TrailingLogs,
				SnapshotInterval: snapshotInterval(m.c.opts.SnapshotThreshold),
				LeaseHandoff:     m.c.opts.LeaseHandoff && !m.NoLeaseHandoff,
			},
			MinVoters: m.c.opts.MinVoters, DeadServerGrace: m.c.opts.DeadServerGrace,
			Groups: m.groups(), SpreadLeaders: m.c.opts.SpreadLeaders || m.SpreadLeaders,
		},
		ClusterSecret: m.c.opts.ClusterSecret,
		Token:         m.c.opts.Token, TokenSequence: m.c.opts.TokenSequence,
		Logger: m.c.log.With("node", m.ID),
	})
	if err != nil {
		layer.Close()
		return err
	}
	m.GossipAddr = srv.Node().GossipAddr()
	m.mu.Lock()
	m.srv, m.layer = srv, layer
	m.mu.Unlock()
	return nil
}

// listenRetry listens on addr, retrying briefly: a port just released by a
// killed node may still be in use for a moment.
func listenRetry(addr string) (net.Listener, error) {
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// Server returns the member's server; nil while it is stopped.
func (m *Member) Server() *server.Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.srv
}

// Node returns the running node, or nil when it is stopped.
func (m *Member) Node() *cluster.Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.srv == nil {
		return nil
	}
	return m.srv.Node()
}

// Kill stops the node as a crash would: no leadership handover, no gossip
// leave, API connections dropped.
func (m *Member) Kill() {
	m.mu.Lock()
	srv := m.srv
	m.srv = nil
	m.mu.Unlock()
	if srv == nil {
		return
	}
	if err := srv.Kill(); err != nil {
		m.c.t.Logf("kill %s: %v", m.ID, err)
	}
}

// Shutdown stops the node gracefully (a leader hands leadership over).
func (m *Member) Shutdown() error {
	m.mu.Lock()
	srv := m.srv
	m.srv = nil
	m.mu.Unlock()
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Close(ctx)
}

// Replace starts a new server with a new ID and an empty data directory on
// the addresses of the stopped member m (a machine replaced, keeping its
// address), and returns it.
func (c *Cluster) Replace(m *Member, id string) *Member {
	c.t.Helper()
	if m.Node() != nil {
		c.t.Fatalf("replace %s: still running", m.ID)
	}
	r := &Member{c: c, ID: id, Dir: filepath.Join(c.t.TempDir(), id), RaftAddr: m.RaftAddr, GossipAddr: m.GossipAddr, APIAddr: m.APIAddr}
	c.Nodes = append(c.Nodes, r)
	if err := r.start(len(c.Nodes)); err != nil {
		c.t.Fatalf("starting %s: %v", id, err)
	}
	return r
}

// groups is the --groups m starts with (see Options.Groups).
func (m *Member) groups() int {
	if m.c.opts.Groups != 0 {
		return m.c.opts.Groups
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "group-count")); err == nil {
		return 0 // as recorded
	}
	return 1
}

// CopyData copies a stopped node's data directory to dst (a file-level
// backup of one server, as an operator might take).
func (m *Member) CopyData(dst string) {
	if m.Node() != nil {
		m.c.t.Fatalf("copy %s: still running", m.ID)
	}
	if err := os.CopyFS(dst, os.DirFS(m.Dir)); err != nil {
		m.c.t.Fatal(err)
	}
}

// RestoreData replaces a stopped node's data directory with src.
func (m *Member) RestoreData(src string) {
	m.Wipe()
	if err := os.CopyFS(m.Dir, os.DirFS(src)); err != nil {
		m.c.t.Fatal(err)
	}
}

// Wipe deletes a stopped node's data directory (a disk replaced or wiped).
func (m *Member) Wipe() {
	if m.Node() != nil {
		m.c.t.Fatalf("wipe %s: still running", m.ID)
	}
	if err := os.RemoveAll(m.Dir); err != nil {
		m.c.t.Fatal(err)
	}
}

// Restart starts a stopped node again on the same addresses and data.
func (m *Member) Restart() {
	m.c.t.Helper()
	if err := m.TryRestart(); err != nil {
		m.c.t.Fatalf("restart %s: %v", m.ID, err)
	}
}

// TryRestart is Restart that returns the error of a start that fails.
func (m *Member) TryRestart() error {
	if m.Node() != nil {
		return fmt.Errorf("restart %s: still running", m.ID)
	}
	return m.start(len(m.c.Nodes))
}

// Isolate cuts the node's raft traffic in both directions.
func (m *Member) Isolate() { m.layer.Cut() }

// Heal restores the node's raft traffic.
func (m *Member) Heal() { m.layer.Heal() }
