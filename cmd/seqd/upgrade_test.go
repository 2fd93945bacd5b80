package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/proctest"
	"github.com/seqd/seqd/internal/testcluster"
)

// previousReleases are the builds a rolling upgrade starts from: the last
// commit of the first release's data format and command set (protocol 1),
// the last commit before flake ids (protocol 2, data format 2), the last
// commit before raft groups, the raft multiplexer and the lease release
// (protocol 3, one group), and the last commit before generations and the
// raise budget (protocol 4, groups: 3 by default on 3 servers), and the
// last commit before space record versions (protocol 5).
//
// Without SEQD_LONG_TESTS, the upgrades from the second and third (long)
// are skipped, to keep CI within its time: the first release and the last
// two stay (every step between them is a move the others take too, and the
// last two's builds serve the mixed-cluster tests as well).
var previousReleases = []struct {
	commit   string
	protocol uint64
	long     bool
}{{"2be74fd", 1, false}, {"dc5fb21", 2, true}, {"3f91119", 3, true}, {"8ee10ee", 4, false}, {lastBuildOfProtocol5, 5, false}}

// TestRollingUpgradeFromPreviousRelease runs a 3-node cluster of the
// previous release under load, replaces its servers one at a time with this
// build (SIGTERM, start the new binary with the same flags and data), and
// checks that no server of either build stops, that clients see no anomaly
// (C1-C3), that flake ids are refused (unavailable) while servers of the
// previous build run, and that once every server runs this build the
// cluster moves to this build's protocol (a cluster ID, lease records, flake
// ids) and keeps serving. Then one more rolling restart changes --lease:
// the lease records make that safe.
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous releases and runs processes for about two minutes")
	}
	for _, prev := range previousReleases {
		t.Run(prev.commit, func(t *testing.T) {
			if prev.long && os.Getenv("SEQD_LONG_TESTS") == "" {
				t.Skip("an upgrade from a release between the first and the last: SEQD_LONG_TESTS=1 runs it (docs/chaos-testing.md)")
			}
			rollingUpgrade(t, prev.commit, prev.protocol)
		})
	}
}

func rollingUpgrade(t *testing.T, commit string, prevProtocol uint64) {
	prev := buildPrevious(t, commit)
	timing := []string{"--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms"}
	ps := proctest.New(t, 3, timing...)
	var addrs []string
	for _, p := range ps {
		p.Bin = prev
		p.Start(t)
		addrs = append(addrs, p.API)
	}
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	w := testcluster.StartSmartWorkload(t, "default", 16, addrs, 3)
	w.WaitOK(t, 200, 30*time.Second)

	alive := func(stage string) { t.Helper(); allAlive(t, ps, stage) }
	upgrade := func(p *proctest.Proc) {
		t.Helper()
		t.Logf("%s: upgrading %s", time.Now().Format("15:04:05.000"), p.ID)
		p.Signal(15)
		<-p.Done()
		w.WaitOK(t, 50, 30*time.Second)
		p.Bin = ""
		// This build's planned moves release the lease (its default): a
		// server of the previous build must take the release entry in
		// stride.
		p.Start(t)
		waitVoters(t, addrs, "p1", "p2", "p3")
		// As a rolling procedure must: the next server stops only once
		// this one takes part in raft again.
		proctest.WaitAdmitted(t, p, 30*time.Second)
		w.WaitOK(t, 100, 30*time.Second)
		alive("upgrading " + p.ID)
	}
	// Upgrade p1, then hand leadership over (restarting old leaders on the
	// old build) until the upgraded server leads two old ones: the new
	// build must then keep writing the previous protocol only. p1 is the
	// server whose leadership of group 0 the builds of several groups
	// restore by themselves (the lowest ID: placement's preferred leader),
	// where any other one leads group 0 only until p1 has been up for a
	// few seconds again: waiting for that other one to lead after a restart
	// of p1 was a race the balancer could win eight times in a row.
	first := ps[0]
	upgrade(first)
	// An attempt is one restart of a serving leader: a new leader still
	// in its listen window serves nothing yet, and is waited for.
	for attempt := 0; ; attempt++ {
		l := proctest.WaitLeader(t, ps, nil, 30*time.Second)
		if l == first {
			break
		}
		if attempt == 8 {
			t.Fatalf("leadership never reached the upgraded server %s", first.ID)
		}
		l.Signal(15)
		<-l.Done()
		l.Start(t) // the old build again
		waitVoters(t, addrs, "p1", "p2", "p3")
		w.WaitOK(t, 50, 30*time.Second)
	}
	w.WaitOK(t, 300, 30*time.Second)
	alive("the upgraded server leading two of the previous release")
	if st, err := client.New([]string{first.API}, client.Options{DisableRouting: true}); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := st.ClusterStatus(ctx)
		cancel()
		for _, n := range s.GetNodes() {
			if err == nil && n.GetProtocol() > prevProtocol {
				t.Fatalf("the cluster moved past protocol %d while servers of the previous release run: %v", prevProtocol, s)
			}
		}
		// Flake ids need every server on this build's protocol: the
		// upgraded leader refuses them, and nothing stops. The client
		// retries unavailable until its deadline, so a call that ends
		// in the middle of an attempt (a slow one while the cluster
		// settles after the restarts above) reads deadline_exceeded:
		// that is tried again; an id, or any other code, fails the test.
		for attempt := 0; ; attempt++ {
			ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
			_, err = st.NextIds(ctx, "", 1)
			cancel()
			if prevProtocol >= fsm.KindProtocol(fsm.KindFlake) {
				// The previous build has flake ids: they are served.
				if err != nil {
					t.Fatalf("NextIds on a mixed cluster of the same protocol: %v", err)
				}
				break
			}
			if connect.CodeOf(err) == connect.CodeUnavailable {
				break
			}
			if connect.CodeOf(err) != connect.CodeDeadlineExceeded || attempt == 10 {
				t.Fatalf("NextIds on a mixed cluster: %v, want unavailable", err)
			}
		}
		alive("NextIds on a mixed cluster")
	}
	// The upgraded leader stops gracefully: it hands leadership over with
	// a lease release (on protocol 3), which the previous build skips; a
	// server of the previous build then leads, waiting out the lease.
	t.Logf("%s: stopping the upgraded leader %s", time.Now().Format("15:04:05.000"), first.ID)
	first.Signal(15)
	<-first.Done()
	w.WaitOK(t, 100, 30*time.Second)
	for _, p := range ps {
		select {
		case <-p.Done():
			if p != first {
				t.Fatalf("after a handover by the upgraded leader, %s (%s) exited; log:\n%s", p.ID, binName(p), p.LogText())
			}
		default:
		}
	}
	first.Start(t)
	waitVoters(t, addrs, "p1", "p2", "p3")
	proctest.WaitAdmitted(t, first, 30*time.Second) // before the next server stops
	alive("a handover by the upgraded leader")
	for _, p := range ps {
		if p != first {
			upgrade(p)
		}
	}
	// Every server runs this build: the cluster moves to its protocol.
	cl, err := client.New(addrs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	waitProtocol(t, addrs, fsm.ProtocolVersion, 30*time.Second)
	w.WaitOK(t, 100, 30*time.Second)
	// The upgraded cluster keeps its raft group count: one from a build
	// before groups, whatever this build's default for new clusters (one
	// per bootstrap server: 3 here), and 3 from a build with groups.
	groups := 1
	if prevProtocol >= 4 {
		groups = 3
	}
	if st, err := cl.ClusterStatus(context.Background()); err != nil || len(st.GetGroups()) != groups {
		t.Fatalf("the upgraded cluster runs %d groups, want %d (%v)", len(st.GetGroups()), groups, err)
	}
	for _, p := range ps {
		if b, err := os.ReadFile(filepath.Join(p.Dir, "group-count")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(groups) {
			t.Fatalf("%s's group-count after the upgrade: %q, %v", p.ID, b, err)
		}
	}
	seen := map[int64]bool{}
	for _, a := range addrs {
		one, _ := client.New([]string{a}, client.Options{DisableRouting: true})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ids, err := one.NextIds(ctx, "", 100)
		cancel()
		if err != nil {
			t.Fatalf("NextIds on %s after the upgrade: %v", a, err)
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("id %d twice", id)
			}
			seen[id] = true
		}
	}
	// A rolling restart that raises --lease on the way.
	for _, p := range ps {
		p.Signal(15)
		<-p.Done()
		for i, a := range p.Args {
			if a == "--lease" {
				p.Args[i+1] = "2s"
			}
		}
		p.Start(t)
		waitVoters(t, addrs, "p1", "p2", "p3")
		w.WaitOK(t, 100, 30*time.Second)
		alive("changing --lease on " + p.ID)
	}
	if prevProtocol == 3 {
		// A server replaced with the flags of the others (--bootstrap-expect
		// 3, whose default is 3 groups) joins the one-group cluster: it
		// adopts the cluster's count.
		p := ps[2]
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := cl.RemoveNode(ctx, p.ID)
		cancel()
		if err != nil {
			t.Fatalf("removing %s: %v", p.ID, err)
		}
		p.Signal(15)
		<-p.Done()
		if err := os.RemoveAll(p.Dir); err != nil {
			t.Fatal(err)
		}
		p.Start(t)
		waitVoters(t, addrs, "p1", "p2", "p3")
		proctest.WaitAdmitted(t, p, 30*time.Second)
		if b, err := os.ReadFile(filepath.Join(p.Dir, "group-count")); err != nil || strings.TrimSpace(string(b)) != "1" || !strings.Contains(p.LogText(), "adopts the cluster's count") {
			t.Fatalf("the replacement %s did not adopt the cluster's one group: %q, %v", p.ID, b, err)
		}
		w.WaitOK(t, 100, 30*time.Second)
	}
	w.Stop()
	w.Check(t)
	for _, p := range ps {
		if strings.Contains(p.LogText(), "panic") {
			t.Errorf("%s logged a panic:\n%s", p.ID, p.LogText())
		}
	}
	if st, err := os.Stat(prev); err != nil || st.Size() == 0 {
		t.Fatalf("previous build missing: %v", err)
	}
}

// allAlive fails the test if a process of ps exited.
func allAlive(t *testing.T, ps []*proctest.Proc, stage string) {
	t.Helper()
	for _, p := range ps {
		select {
		case <-p.Done():
			t.Fatalf("%s: %s (%s) exited; log:\n%s", stage, p.ID, binName(p), p.LogText())
		default:
		}
	}
}

func binName(p *proctest.Proc) string {
	if p.Bin == "" {
		return "this build"
	}
	return "previous release"
}

// lastBuildWithoutRuns is the last commit whose NextIds answers ids one by
// one only (it knows no NextIdsRequest.runs).
const lastBuildWithoutRuns = "ed5f7c9"

// TestClientOnServerWithoutRuns runs this build's client against a node of
// the last build that knows no runs of ids, as during a rolling upgrade:
// the client asks for runs, the server ignores the field and answers ids,
// and every NextIds form still gets the right number of strictly
// increasing ids (NextIdRuns merging consecutive ones into runs).
func TestClientOnServerWithoutRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a previous commit")
	}
	prev := buildPrevious(t, lastBuildWithoutRuns)
	ps := proctest.New(t, 1)
	ps[0].Bin = prev
	ps[0].Start(t)
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	cl, err := client.New([]string{ps[0].API}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last int64
	increasing := func(form string, ids []int64, want int) {
		t.Helper()
		if len(ids) != want {
			t.Fatalf("%s: %d ids, want %d", form, len(ids), want)
		}
		for _, id := range ids {
			if id <= last {
				t.Fatalf("%s: id %d after %d", form, id, last)
			}
			last = id
		}
	}
	for _, n := range []uint32{1, 100, 1000, 10000} {
		ids, err := cl.NextIds(ctx, "", n)
		if err != nil {
			t.Fatalf("NextIds(%d) on the previous build: %v", n, err)
		}
		increasing(fmt.Sprintf("NextIds(%d)", n), ids, int(n))
		runs, err := cl.NextIdRuns(ctx, "", n)
		if err != nil {
			t.Fatalf("NextIdRuns(%d) on the previous build: %v", n, err)
		}
		ids = flake.AppendIDs(nil, runs...)
		increasing(fmt.Sprintf("NextIdRuns(%d)", n), ids, int(n))
		// The ids of one time unit are consecutive: the client merges
		// them back into runs (a default-layout unit holds 4096).
		if units := (int(n) + 4095) / 4096; len(runs) > 3*units+2 {
			t.Fatalf("NextIdRuns(%d): %d runs; consecutive ids were not merged", n, len(runs))
		}
	}
}

// TestFreshMixedClusterMovesToTheCommonProtocol: a cluster formed new from
// two servers of this build and one of the last release before it
// (protocol 4), led by a server of this build, moves to protocol 4, the
// highest all three speak, as a cluster of the previous release alone
// would: it gets a cluster ID and serves flake ids. (It stayed on protocol
// 1, refusing flake ids, when a leader moved a cluster only to its own
// protocol.)
func TestFreshMixedClusterMovesToTheCommonProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and runs processes")
	}
	// The last release of protocol 4 (8ee10ee), as written: started from
	// a4a8d62, the server of the previous release won the first election
	// despite its timers in one run of three.
	last := previousReleases[3]
	prev := buildPrevious(t, last.commit)
	ps := proctest.New(t, 3, "--lease", "500ms")
	// The server of the previous release starts first: the server that
	// sees every other one first bootstraps, and one that bootstraps alone
	// leads the first term whatever its timers.
	// Its far slower raft timers then let a server of this build win the
	// first election.
	ps[2].Bin = prev
	ps[2].Args = append(ps[2].Args, "--raft-heartbeat-timeout", "5s", "--raft-election-timeout", "5s")
	ps[2].Start(t)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(ps[2].LogText(), "seqd serving"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start; log:\n%s", ps[2].ID, ps[2].LogText())
		}
	}
	for _, p := range ps[:2] {
		p.Args = append(p.Args, "--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms")
		p.Start(t)
	}
	if l := proctest.WaitLeader(t, ps, nil, 30*time.Second); l == ps[2] {
		t.Fatalf("the server of the previous release (%s) won the first election despite its 5 s timers", l.ID)
	}
	cl, err := client.New([]string{ps[0].API, ps[1].API, ps[2].API}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	waitProtocol(t, []string{ps[0].API, ps[1].API, ps[2].API}, last.protocol, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if ids, err := cl.NextIds(ctx, "", 10); err != nil || len(ids) != 10 {
		t.Fatalf("NextIds on a fresh mixed cluster on protocol %d: %v, %v", last.protocol, ids, err)
	}
}
