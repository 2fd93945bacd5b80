package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/proctest"
)

// mixedCluster is a cluster of three servers formed from this build and
// 8ee10ee (protocol 4), with p2's raft or API address behind a proxy that
// a test can cut or make hang (newMixed).
type mixedCluster struct {
	ps    []*proctest.Proc
	addrs []string
	prev  string
	fast  []string // raft timers of a server meant to lead
	slow  []string // raft timers of a server meant not to
	base  [][]string
	proxy *cutProxy
	last  map[string]uint64 // space/key: the largest value read
}

// nextAbove takes n values of each key and fails on any value at or below
// one read before for its key.
func (d *mixedCluster) nextAbove(t *testing.T, space string, keys []uint64, n int, stage string) {
	t.Helper()
	cl, err := client.New(d.addrs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	leader := proctest.LeaderOf(d.ps)
	first := map[string]uint64{}
	defer func() { t.Logf("%s (leader %v): from %v to %v", stage, leaderID(leader), first, d.last) }()
	for i := 0; i < n; i++ {
		for _, k := range keys {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			v, err := cl.Next(ctx, space, k)
			cancel()
			if err != nil {
				t.Fatalf("%s: key %d: %v", stage, k, err)
			}
			sk := fmt.Sprintf("%s/%d", space, k)
			if v[0] <= d.last[sk] {
				t.Fatalf("%s: %s got %d after %d: a value repeated or went back", stage, sk, v[0], d.last[sk])
			}
			if i == 0 {
				first[sk] = v[0]
			}
			d.last[sk] = v[0]
		}
	}
}

func leaderID(p *proctest.Proc) string {
	if p == nil {
		return "unknown"
	}
	return p.ID
}

// restart starts p again on bin ("" for this build) with its base flags
// and extra.
func (d *mixedCluster) restart(t *testing.T, i int, bin string, extra ...string) {
	t.Helper()
	p := d.ps[i]
	p.Kill9()
	p.Bin = bin
	p.Args = append(append([]string(nil), d.base[i]...), extra...)
	p.Start(t)
}

// newMixed starts a cluster of three servers on protocol 4: p1 of this
// build leads (fast raft timers), p2 of this build follows (slow ones) with
// its address of kind via (--advertise-raft or --advertise-api) behind a
// proxy, and p3 of 8ee10ee follows (slow ones); every server runs groups
// raft groups.
func newMixed(t *testing.T, via string, groups int) *mixedCluster {
	t.Helper()
	prev := buildPrevious(t, "8ee10ee")
	d := &mixedCluster{prev: prev, last: map[string]uint64{},
		fast: []string{"--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms"},
		slow: []string{"--raft-heartbeat-timeout", "5s", "--raft-election-timeout", "5s", "--raft-leader-lease-timeout", "150ms"},
	}
	d.ps = proctest.New(t, 3, "--lease", "500ms", "--groups", strconv.Itoa(groups))
	to := d.ps[1].Raft
	if via == "--advertise-api" {
		to = d.ps[1].API
	}
	d.proxy = newCutProxy(t, to)
	d.ps[1].Args = append(d.ps[1].Args, via, d.proxy.Addr)
	for _, p := range d.ps {
		d.base = append(d.base, append([]string(nil), p.Args...))
		d.addrs = append(d.addrs, p.API)
	}
	d.ps[0].Args = append(d.ps[0].Args, d.fast...)
	d.ps[1].Args = append(d.ps[1].Args, d.slow...)
	d.ps[2].Bin = prev
	d.ps[2].Args = append(d.ps[2].Args, d.slow...)
	for _, p := range d.ps {
		p.Start(t)
	}
	proctest.WaitLeader(t, d.ps, nil, 30*time.Second)
	waitProtocol(t, d.addrs, 4, 30*time.Second)
	d.lead(t, d.ps[0])
	d.nextAbove(t, "default", []uint64{0}, 10, "on protocol 4")
	return d
}

// groupsSeen is what a server reports of its own raft groups.
type groupsSeen struct {
	proto, applied []uint64
	leads          []bool
}

// ownGroups is what the server at addr reports of its groups raft groups
// (zeros when it does not answer).
func ownGroups(addr string, groups int) groupsSeen {
	g := groupsSeen{proto: make([]uint64, groups), applied: make([]uint64, groups), leads: make([]bool, groups)}
	cl, err := client.New([]string{addr}, client.Options{RetryFor: time.Millisecond})
	if err != nil {
		return g
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := cl.ClusterStatus(ctx)
	if err != nil {
		return g
	}
	for _, n := range st.GetNodes() {
		if n.GetId() != st.GetNodeId() {
			continue
		}
		for _, s := range n.GetGroups() {
			if i := int(s.GetGroup()); i < groups {
				g.proto[i], g.applied[i], g.leads[i] = s.GetProtocol(), s.GetAppliedIndex(), s.GetRaftState() == "leader"
			}
		}
	}
	return g
}

// every reports whether every one of xs is want.
func every(xs []uint64, want uint64) bool {
	for _, x := range xs {
		if x != want {
			return false
		}
	}
	return true
}

// lead hands leadership on (SIGTERM: a leader transfers it on its way
// out; then the server starts again as it was) until target leads, at
// most 8 times, and returns the leader.
func (d *mixedCluster) lead(t *testing.T, target *proctest.Proc) *proctest.Proc {
	t.Helper()
	leader := proctest.WaitLeader(t, d.ps, nil, 30*time.Second)
	for i := 0; i < 8 && leader != target; i++ {
		leader.Signal(15)
		<-leader.Done()
		leader.Start(t)
		proctest.WaitAdmitted(t, leader, 30*time.Second)
		leader = proctest.WaitLeader(t, d.ps, nil, 30*time.Second)
	}
	return leader
}

// TestAServerThatAnsweredAMoveNeverRunsAnOlderBuild: a server that told a
// leader it speaks the protocol a move goes to never runs an older build on
// its data afterwards, even if the move's entry never reached it. p2 is cut
// off from raft (its API and gossip up) while p3 is upgraded: p1 asks p2
// and p3, both answer this build's protocol, and the group moves with p3's
// vote. p2, still on
// protocol 4, is then started on 8ee10ee, as an operator rolling back does:
// it must refuse its data (it would otherwise lead a group whose entries it
// cannot follow, handing out values under raises no replica budgets). On
// this build it comes back, and values keep rising.
func TestAServerThatAnsweredAMoveNeverRunsAnOlderBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a previous release and runs processes")
	}
	d := newMixed(t, "--advertise-raft", 1)
	d.proxy.Cut(true)
	d.restart(t, 2, "", d.slow...)
	proctest.WaitAdmitted(t, d.ps[2], 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for !every(ownGroups(d.ps[0].API, 1).proto, fsm.ProtocolVersion) {
		if time.Now().After(deadline) {
			t.Fatalf("the group did not move to protocol %d; log of p1:\n%s", fsm.ProtocolVersion, d.ps[0].LogText())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := ownGroups(d.ps[1].API, 1).proto; !every(got, 4) {
		t.Fatalf("p2 (cut off from raft) holds protocol %v, want 4", got)
	}
	d.restart(t, 1, d.prev, d.fast...)
	select {
	case <-d.ps[1].Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("p2 runs 8ee10ee on data it promised to protocol %d; log:\n%s", fsm.ProtocolVersion, d.ps[1].LogText())
	}
	if log := d.ps[1].LogText(); !strings.Contains(log, "written by a newer seqd") {
		t.Fatalf("p2 on 8ee10ee exited without refusing its data's format; log:\n%s", log)
	}
	d.proxy.Cut(false)
	d.restart(t, 1, "", d.fast...)
	waitVoters(t, d.addrs, "p1", "p2", "p3")
	proctest.WaitAdmitted(t, d.ps[1], 30*time.Second)
	d.nextAbove(t, "default", []uint64{0, 1, 2}, 20, "p2 back on this build")
	allAlive(t, d.ps, "p2 back on this build")
}

// TestAPromiseOutlivesARestartOfTheServerThatMadeIt: a server's promise
// (it answered a move, so its data refuses older builds) holds across a
// restart on this build. raft installs a server's latest local snapshot
// every time it starts; p2's was taken before it promised, so a start
// that installs it must keep the data marked. p2 takes snapshots often,
// is cut off from raft, answers p1's move to 5 (the group moves with
// p3's vote), restarts on this build (still cut off, so the move's entry
// does not reach it), and is then started on 8ee10ee, which must refuse
// its data: 8ee10ee applies the move's entry as a refused command and
// carries on at protocol 4.
func TestAPromiseOutlivesARestartOfTheServerThatMadeIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a previous release and runs processes")
	}
	d := newMixed(t, "--advertise-raft", 1)
	snapshots := []string{"--snapshot-threshold", "1", "--snapshot-interval", "50ms"}
	d.restart(t, 1, "", append(append([]string(nil), d.slow...), snapshots...)...)
	proctest.WaitAdmitted(t, d.ps[1], 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		metas, _ := filepath.Glob(filepath.Join(d.ps[1].Dir, "snapshots", "*", "meta.json"))
		if len(metas) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p2 took no raft snapshot; log:\n%s", d.ps[1].LogText())
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.proxy.Cut(true)
	d.restart(t, 2, "", d.slow...)
	proctest.WaitAdmitted(t, d.ps[2], 30*time.Second)
	deadline = time.Now().Add(30 * time.Second)
	for !every(ownGroups(d.ps[0].API, 1).proto, fsm.ProtocolVersion) {
		if time.Now().After(deadline) {
			t.Fatalf("the group did not move to protocol %d; log of p1:\n%s", fsm.ProtocolVersion, d.ps[0].LogText())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := ownGroups(d.ps[1].API, 1).proto; !every(got, 4) {
		t.Fatalf("p2 (cut off from raft) holds protocol %v, want 4", got)
	}
	d.restart(t, 1, "", d.slow...)
	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(d.ps[1].LogText(), "restored snapshot") {
		if time.Now().After(deadline) {
			t.Fatalf("p2 did not install its snapshot on start; log:\n%s", d.ps[1].LogText())
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.restart(t, 1, d.prev, d.fast...)
	select {
	case <-d.ps[1].Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("p2 runs 8ee10ee on data it promised to protocol %d before a restart; log:\n%s", fsm.ProtocolVersion, d.ps[1].LogText())
	}
	if log := d.ps[1].LogText(); !strings.Contains(log, "written by a newer seqd") {
		t.Fatalf("p2 on 8ee10ee exited without refusing its data's format; log:\n%s", log)
	}
	d.proxy.Cut(false)
	d.restart(t, 1, "", d.fast...)
	waitVoters(t, d.addrs, "p1", "p2", "p3")
	proctest.WaitAdmitted(t, d.ps[1], 30*time.Second)
	d.nextAbove(t, "default", []uint64{0, 1, 2}, 20, "p2 back on this build")
	allAlive(t, d.ps, "p2 back on this build")
}

// TestAServerAddedAfterAMoveNeverRunsAnOlderBuild: a server added to a
// cluster on this build's protocol never runs an older build on the cluster's data.
// Gossip says which protocol a joiner's process spoke when it last told;
// the joiner may be stopped and started on an older build right after it
// was added, before the move's entry reaches it: 8ee10ee applies that
// entry as a refused command and carries on at protocol 4. p4 joins a
// cluster of this build on its protocol with its raft address cut off, so
// that it is added but receives nothing, and is then started on 8ee10ee
// and let through: it must refuse its data.
func TestAServerAddedAfterAMoveNeverRunsAnOlderBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a previous release and runs processes")
	}
	prev := buildPrevious(t, "8ee10ee")
	timing := []string{"--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms", "--groups", "1"}
	ps := proctest.Start(t, 3, timing...)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	waitProtocol(t, addrs, fsm.ProtocolVersion, 30*time.Second)
	p4 := joiner(t, ps, "p4", append([]string{"--bootstrap-expect", "4"}, timing...)...)
	proxy := newCutProxy(t, p4.Raft)
	proxy.Cut(true)
	p4.Args = append(p4.Args, "--advertise-raft", proxy.Addr)
	p4.Start(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := nodeState(ps[0], "p4"); n != nil && n.GetInConfiguration() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p4 was not added; log of p1:\n%s", ps[0].LogText())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p4.Kill9()
	p4.Bin = prev
	p4.Start(t)
	proxy.Cut(false)
	select {
	case <-p4.Done():
	case <-time.After(30 * time.Second):
		g := ownGroups(p4.API, 1)
		t.Fatalf("p4 runs 8ee10ee on the data of a cluster on protocol %d (it holds protocol %v at applied index %v); log:\n%s", fsm.ProtocolVersion, g.proto, g.applied, p4.LogText())
	}
	if log := p4.LogText(); !strings.Contains(log, "written by a newer seqd") {
		t.Fatalf("p4 on 8ee10ee exited without refusing its data's format; log:\n%s", log)
	}
}
