package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/proctest"
)

// routes asks p for the routing table; nil if it does not answer.
func routes(p *proctest.Proc) []*seqv1.GroupRoute {
	c := seqv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+p.API)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
	if err != nil {
		return nil
	}
	return st.Msg.GetGroups()
}

// waitGroupsBalanced waits until every group has a serving leader, its
// preferred one, and each of the n processes leads the same number of
// groups (±1), and returns the table. (Counts can be even while a group is
// still to move to its preferred leader; a move then interrupts it.)
func waitGroupsBalanced(t *testing.T, ask *proctest.Proc, n int, timeout time.Duration) []*seqv1.GroupRoute {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last []*seqv1.GroupRoute
	for time.Now().Before(deadline) {
		last = routes(ask)
		leads := map[string]int{}
		ok := len(last) > 0
		for _, g := range last {
			ok = ok && g.GetServing() && g.GetLeaderApiAddr() != "" && g.GetLeaderId() == g.GetPreferredLeader()
			leads[g.GetLeaderId()]++
		}
		lo, hi := len(last), 0
		for _, c := range leads {
			lo, hi = min(lo, c), max(hi, c)
		}
		if ok && len(leads) == n && hi-lo <= 1 {
			return last
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("groups not balanced over %d servers within %v: %v", n, timeout, last)
	return nil
}

// TestGroupIsolationUnderKill: 3 processes with 6 groups, a caller per
// group sending Next for one key of its group straight to the group's
// leader (as a routing client does). A kill -9 of one server fails no call
// of the groups it did not lead and stalls none of them for long, while the
// groups it led recover on the other servers (their callers then go
// through a surviving server, which forwards to the new leader).
func TestGroupIsolationUnderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes")
	}
	const groups = 6
	ps := proctest.Start(t, 3, "--groups", fmt.Sprint(groups))
	table := waitGroupsBalanced(t, ps[0], 3, 60*time.Second)
	victim := ps[1]
	var survivor *proctest.Proc = ps[0]
	keys := make([]uint64, groups)
	for sec, found := uint64(0), 0; found < groups; sec++ {
		g := seqd.GroupOfKey(seqd.DefaultSpaceName, seqd.DefaultSectionSize, sec*seqd.DefaultSectionSize, groups)
		if keys[g] == 0 {
			keys[g] = sec*seqd.DefaultSectionSize + 1
			found++
		}
	}
	type record struct {
		start, at time.Time
		val       uint64
		err       error
	}
	var mu sync.Mutex
	recs := make([][]record, groups)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	hc := api.NewH2CClient()
	led := map[int]bool{}
	for g, r := range table {
		addr := r.GetLeaderApiAddr()
		if r.GetLeaderId() == victim.ID {
			led[g] = true
			addr = survivor.API
		}
		c := seqv1connect.NewSequenceServiceClient(hc, "http://"+addr)
		wg.Go(func() {
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				start := time.Now()
				resp, err := c.Next(cctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{keys[g]}}))
				ccancel()
				rec := record{start: start, at: time.Now(), err: err}
				if err == nil {
					rec.val = resp.Msg.GetValues()[0]
				} else if ctx.Err() != nil {
					return
				}
				mu.Lock()
				recs[g] = append(recs[g], rec)
				mu.Unlock()
				if err != nil {
					time.Sleep(5 * time.Millisecond) // a failing call returns at once; do not spin
				}
			}
		})
	}
	time.Sleep(2 * time.Second) // load before the kill
	killedAt := time.Now()
	victim.Kill9()
	// Until every group led by the victim serves again, and 2s more.
	recovered := map[int]time.Time{}
	deadline := time.Now().Add(30 * time.Second)
	for len(recovered) < len(led) && time.Now().Before(deadline) {
		mu.Lock()
		for g := range led {
			if _, ok := recovered[g]; ok {
				continue
			}
			for _, r := range recs[g] {
				if r.err == nil && r.start.After(killedAt) {
					recovered[g] = r.at
					break
				}
			}
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	if len(recovered) < len(led) {
		t.Fatalf("groups led by the killed server recovered: %v of %v", recovered, led)
	}
	for g := range groups {
		var last record
		var maxGap time.Duration
		failed := 0
		for _, r := range recs[g] {
			if r.err != nil {
				failed++
				continue
			}
			if last.val != 0 {
				if r.val <= last.val {
					t.Fatalf("group %d: value %d after %d", g, r.val, last.val)
				}
				if r.at.After(killedAt) {
					maxGap = max(maxGap, r.at.Sub(last.at))
				}
			}
			last = r
		}
		if led[g] {
			// The single-group failover takes 1.3s (median) to 1.8s on
			// defaults; allow for a loaded machine.
			if d := recovered[g].Sub(killedAt); d > 5*time.Second {
				t.Errorf("group %d, led by the killed server, served again only %v after the kill", g, d)
			}
			t.Logf("group %d (led by the killed server): first value %v after the kill, %d failed calls",
				g, recovered[g].Sub(killedAt).Round(time.Millisecond), failed)
			continue
		}
		t.Logf("group %d: %d calls, %d failed, longest gap after the kill %v", g, len(recs[g]), failed, maxGap.Round(time.Millisecond))
		if failed > 0 {
			t.Errorf("group %d, not led by the killed server: %d failed calls", g, failed)
		}
		// The lease is 1s: a gap this long would mean the group's serving
		// was touched. (The target, 100ms, is reported by the log
		// line above; a loaded CI machine can stall a process longer.)
		if maxGap > 500*time.Millisecond {
			t.Errorf("group %d, not led by the killed server: a gap of %v after the kill", g, maxGap)
		}
	}
}

// joiner prepares a server that joins the cluster of ps (its --join list
// names theirs), with extra flags, without starting it.
func joiner(t *testing.T, ps []*proctest.Proc, id string, extra ...string) *proctest.Proc {
	t.Helper()
	p := &proctest.Proc{ID: id,
		API:    fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)),
		Raft:   fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)),
		Gossip: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)),
		Dir:    filepath.Join(t.TempDir(), id)}
	var joins []string
	for _, q := range ps {
		joins = append(joins, q.Gossip)
	}
	p.Args = append([]string{"serve", "--id", p.ID, "--data-dir", p.Dir,
		"--api-addr", p.API, "--raft-addr", p.Raft, "--gossip-addr", p.Gossip,
		"--join", strings.Join(joins, ",")}, extra...)
	t.Cleanup(func() {
		p.Kill9()
		if t.Failed() {
			t.Logf("log of %s:\n%s", p.ID, p.LogText())
		}
	})
	return p
}

// nodeState asks p for its status and returns the row of server id.
func nodeState(p *proctest.Proc, id string) *seqv1.Node {
	c := seqv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+p.API)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
	if err != nil {
		return nil
	}
	for _, n := range st.Msg.GetNodes() {
		if n.GetId() == id {
			return n
		}
	}
	return nil
}

// TestDefaultGroupsAndAdoption: three servers started with the same flags
// and no --groups run one raft group per bootstrap server, one led by
// each. A new server started without --groups but with another
// --bootstrap-expect (its own default would be 4 groups) holds no state,
// adopts the cluster's 3, starts again by itself and takes part in every
// group. A new server started with --groups 2 stays out and says why.
func TestDefaultGroupsAndAdoption(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ps := proctest.Start(t, 3)
	table := waitGroupsBalanced(t, ps[0], 3, 60*time.Second)
	if len(table) != 3 {
		t.Fatalf("3 servers without --groups run %d groups, want 3", len(table))
	}

	p4 := joiner(t, ps, "p4", "--bootstrap-expect", "4")
	p4.Start(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := nodeState(p4, "p4")
		if n != nil && n.GetInConfiguration() && n.GetRaftOpen() && len(n.GetGroups()) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p4 did not take part in the 3 groups: %v", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(p4.LogText(), "adopts the cluster's count") {
		t.Fatal("p4 joined without adopting the cluster's group count (its log does not say so)")
	}
	if b, err := os.ReadFile(filepath.Join(p4.Dir, "group-count")); err != nil || strings.TrimSpace(string(b)) != "3" {
		t.Fatalf("p4's group-count file: %q, %v", b, err)
	}
	// p4 is in every group's configuration.
	deadline = time.Now().Add(30 * time.Second)
	for in := 0; in < 3; {
		in = 0
		for _, g := range routes(ps[0]) {
			if slices.Contains(g.GetVoters(), "p4") {
				in++
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("p4 votes in %d of 3 groups", in)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl, err := client.New([]string{p4.API}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := make([]uint64, 0, 3)
	for k, seen := uint64(0), map[int]bool{}; len(keys) < 3; k += seqd.DefaultSectionSize {
		if g := seqd.GroupOfKey(seqd.DefaultSpaceName, seqd.DefaultSectionSize, k, 3); !seen[g] {
			seen[g] = true
			keys = append(keys, k)
		}
	}
	if _, err := cl.Next(ctx, seqd.DefaultSpaceName, keys...); err != nil {
		t.Fatalf("Next through p4 on keys of every group: %v", err)
	}

	p5 := joiner(t, ps, "p5", "--groups", "2")
	p5.Start(t)
	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(p5.LogText(), "start it with --groups 3") {
		if time.Now().After(deadline) {
			t.Fatal("p5, started with --groups 2, did not say that the cluster runs 3 groups")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := nodeState(ps[0], "p5"); n != nil && n.GetInConfiguration() {
		t.Fatal("p5, started with another --groups, was added to the cluster")
	}
}

// balanceMoves sums seqd_balance_moves_total over the running processes;
// ok is false if one did not answer.
func balanceMoves(ps []*proctest.Proc) (sum int64, ok bool) {
	for _, p := range ps {
		resp, err := http.Get("http://" + p.API + "/metrics")
		if err != nil {
			return 0, false
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, false
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "seqd_balance_moves_total "); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, false
				}
				sum += int64(n)
				found = true
			}
		}
		if !found {
			return 0, false
		}
	}
	return sum, true
}

// leadCounts returns the routing table's groups led per process and
// whether every group has a serving leader.
func leadCounts(ask *proctest.Proc) (map[string]int, []uint64, bool) {
	counts := map[string]int{}
	var terms []uint64
	table := routes(ask)
	all := len(table) > 0
	for _, g := range table {
		all = all && g.GetServing() && g.GetLeaderId() != ""
		counts[g.GetLeaderId()]++
		terms = append(terms, g.GetTerm())
	}
	return counts, terms, all
}

// TestGroupsBalanceBoundAndStable: 3 processes with 6 groups lead 2/2/2
// within 10 s of their start; after one is killed (-9) and started again
// they are balanced again (max - min <= 1) within 15 s of its restart, and
// then no balancer moves a group for 60 s (an election on a loaded machine
// starts the minute again, at most twice).
func TestGroupsBalanceBoundAndStable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes and watches them for a minute")
	}
	const groups = 6
	balancedBy := func(ask *proctest.Proc, want int, timeout time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			counts, _, all := leadCounts(ask)
			lo, hi := groups, 0
			for _, n := range counts {
				lo, hi = min(lo, n), max(hi, n)
			}
			if all && len(counts) == want && hi-lo <= 1 {
				return time.Since(start)
			}
			if time.Since(start) > timeout {
				t.Fatalf("not balanced within %v: %v", timeout, counts)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ps := proctest.New(t, 3, "--groups", fmt.Sprint(groups))
	for _, p := range ps {
		p.Start(t)
	}
	took := balancedBy(ps[0], 3, 10*time.Second)
	if counts, _, _ := leadCounts(ps[0]); counts[ps[0].ID] != 2 || counts[ps[1].ID] != 2 || counts[ps[2].ID] != 2 {
		t.Fatalf("6 groups on 3 servers: %v, want 2/2/2", counts)
	}
	t.Logf("6 groups led 2/2/2 %v after the processes started", took.Round(time.Millisecond))
	// seqd status prints one row per group, with its protocol (the newest,
	// every server being up).
	out, errOut, code := runCLI(t, nil, "status", "--addr", ps[0].API)
	if code != 0 {
		t.Fatalf("seqd status: exit %d: %s", code, errOut)
	}
	rows := regexp.MustCompile(`(?m)^[0-5]\s+p[1-3]\s+true\s+\d+\s+(\d+|-)\s+p[1-3]\s+\d+-\d+\s+\S+$`).FindAllStringSubmatch(out, -1)
	if len(rows) != groups {
		t.Fatalf("seqd status: %d group rows, want %d:\n%s", len(rows), groups, out)
	}
	for _, r := range rows {
		if r[1] != strconv.FormatUint(fsm.ProtocolVersion, 10) {
			t.Fatalf("seqd status: a group row on protocol %s, want %d:\n%s", r[1], fsm.ProtocolVersion, out)
		}
	}

	victim := ps[1]
	victim.Kill9()
	victim.Start(t)
	took = balancedBy(ps[0], 3, 15*time.Second)
	t.Logf("balanced again %v after the killed server restarted", took.Round(time.Millisecond))
	for attempt := 1; ; attempt++ {
		before, ok := balanceMoves(ps)
		_, terms, _ := leadCounts(ps[0])
		if !ok || terms == nil {
			t.Fatal("a server did not answer")
		}
		end := time.Now().Add(60 * time.Second)
		elected := false
		for time.Now().Before(end) && !elected {
			time.Sleep(500 * time.Millisecond)
			after, ok := balanceMoves(ps)
			_, now, _ := leadCounts(ps[0])
			elected = len(now) == len(terms) && !slices.Equal(now, terms) && after == before
			if ok && after != before {
				t.Fatalf("the balancers moved %d groups within a minute of balancing (terms %v -> %v)", after-before, terms, now)
			}
		}
		if !elected {
			return
		}
		if attempt == 3 {
			t.Fatal("elections kept happening after balancing (3 windows of a minute)")
		}
		t.Logf("an election (not a move) within the minute; watching again")
		balancedBy(ps[0], 3, 15*time.Second)
	}
}
