package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/proctest"
)

// clusterProtocols asks the cluster at addrs for every server's protocol,
// as gossip publishes it, for the protocols of the answering server's
// groups, and for the cluster ID ("" until every server publishes the
// same).
func clusterProtocols(addrs []string) (nodes, groups []uint64, id string, err error) {
	cl, err := client.New(addrs, client.Options{})
	if err != nil {
		return nil, nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := cl.ClusterStatus(ctx)
	if err != nil {
		return nil, nil, "", err
	}
	id = st.GetClusterId()
	for _, n := range st.GetNodes() {
		if n.GetClusterId() != id {
			id = ""
		}
		nodes = append(nodes, n.GetProtocol())
		if n.GetId() == st.GetNodeId() {
			for _, g := range n.GetGroups() {
				groups = append(groups, g.GetProtocol())
			}
		}
	}
	return nodes, groups, id, nil
}

// waitProtocol waits until the 3 servers at addrs and every group run
// protocol want.
func waitProtocol(t *testing.T, addrs []string, want uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var nodes, gs []uint64
	var id string
	var err error
	for time.Now().Before(deadline) {
		nodes, gs, id, err = clusterProtocols(addrs)
		ok := err == nil && id != "" && len(nodes) == 3 && len(gs) > 0
		for _, p := range append(nodes, gs...) {
			ok = ok && p == want
		}
		if ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("not on protocol %d within %v: nodes %v groups %v cluster %q err %v", want, timeout, nodes, gs, id, err)
}

// groupProtocol is the protocol of group 0 as the server at addr holds it.
func groupProtocol(t *testing.T, addr string) uint64 {
	t.Helper()
	_, gs, _, err := clusterProtocols([]string{addr})
	if err != nil || len(gs) == 0 {
		t.Fatalf("the protocol of %s's group 0: %v %v", addr, gs, err)
	}
	return gs[0]
}

// holdsProtocol checks that the group protocol at p stays want until p
// logs, after its first from bytes of log, a line with every one of parts
// (the leader's reason not to move), or for within if it logs none (a
// reason it logged less than a minute before is not logged again).
func holdsProtocol(t *testing.T, p *proctest.Proc, from int, want uint64, within time.Duration, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if got := groupProtocol(t, p.API); got != want {
			t.Fatalf("%s moved to protocol %d (want %d kept)", p.ID, got, want)
		}
		for _, line := range strings.Split(p.LogText()[from:], "\n") {
			all := true
			for _, s := range parts {
				all = all && strings.Contains(line, s)
			}
			if all {
				t.Logf("%s keeps protocol %d: %s", p.ID, want, line)
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s kept protocol %d for %v", p.ID, want, within)
}

// TestProtocolMoveRestsOnEveryServersAnswer: a cluster moves to a newer
// protocol only on every server's answer of the moment, never on gossip
// alone. A mixed cluster (two servers of this build, one of 8ee10ee, one
// raft group) runs protocol 4. A server of this build is killed (kill -9:
// gossip still shows it alive, speaking this build's protocol, for about
// two seconds) and the 8ee10ee server is replaced by this build at once:
// the leader must not move while the killed server cannot answer, nor once
// it is back on 8ee10ee (a downgrade, which would stop on protocol 5's
// entries or hand out values under raises its replicas do not apply).
// Values keep rising throughout, and the cluster moves to this build's
// protocol once the server runs this build.
func TestProtocolMoveRestsOnEveryServersAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a previous release and runs processes")
	}
	prev := buildPrevious(t, "8ee10ee")
	timing := []string{"--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms", "--groups", "1"}
	ps := proctest.New(t, 3)
	base := append([]string(nil), ps[2].Args...)
	var addrs []string
	for i, p := range ps {
		if i == 2 {
			// Slow raft timers: a server of this build leads.
			p.Bin = prev
			p.Args = append(p.Args, "--groups", "1", "--lease", "500ms", "--raft-heartbeat-timeout", "5s", "--raft-election-timeout", "5s")
		} else {
			p.Args = append(p.Args, timing...)
		}
		p.Start(t)
		addrs = append(addrs, p.API)
	}
	old := ps[2]
	leader := proctest.WaitLeader(t, ps, nil, 30*time.Second)
	waitProtocol(t, addrs, 4, 30*time.Second)
	for leader == old {
		// The old server's timers are slow: it leads only when it formed
		// the cluster; hand leadership on by restarting it.
		old.Signal(15)
		<-old.Done()
		old.Start(t)
		waitVoters(t, addrs, "p1", "p2", "p3")
		proctest.WaitAdmitted(t, old, 30*time.Second)
		leader = proctest.WaitLeader(t, ps, old, 30*time.Second)
	}
	cl, err := client.New(addrs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	take := func(n int, stage string) {
		t.Helper()
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			v, err := cl.Next(ctx, "default", 0)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
			if v[0] <= last {
				t.Fatalf("%s: key 0 got %d after %d", stage, v[0], last)
			}
			last = v[0]
		}
	}
	take(20, "mixed, on protocol 4")

	victim := ps[0]
	if victim == leader {
		victim = ps[1]
	}
	from := len(leader.LogText())
	victim.Kill9()
	old.Kill9()
	old.Bin = ""
	old.Args = append(base, timing...)
	old.Start(t)
	// The leader asks the servers of its configuration, or finds the
	// killed one gone from gossip, and stays on 4 either way.
	holdsProtocol(t, leader, from, 4, 10*time.Second, "does not move", victim.ID)
	take(20, "with a server killed")

	// The killed server comes back on 8ee10ee with its data.
	from = len(leader.LogText())
	victim.Bin = prev
	victim.Start(t)
	waitVoters(t, addrs, "p1", "p2", "p3")
	proctest.WaitAdmitted(t, victim, 30*time.Second)
	holdsProtocol(t, leader, from, 4, 10*time.Second, "speaks protocol 4", victim.ID)
	take(20, "with a server downgraded")
	allAlive(t, ps, "with a server downgraded")

	// Back on this build: the cluster moves to this build's protocol.
	victim.Signal(15)
	<-victim.Done()
	victim.Bin = ""
	victim.Start(t)
	waitProtocol(t, addrs, fsm.ProtocolVersion, 60*time.Second)
	take(20, "on this build's protocol")
	allAlive(t, ps, "on this build's protocol")
}
