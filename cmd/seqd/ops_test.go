package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/proctest"
	"github.com/seqd/seqd/internal/testcluster"
)

// voters returns the voters in the cluster's configuration, as seqd status
// reports it through ps[i].
func voters(t *testing.T, addrs []string) map[string]bool {
	t.Helper()
	cl, err := client.New(addrs, client.Options{RetryFor: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := cl.ClusterStatus(ctx)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, n := range st.GetNodes() {
		if n.GetVoter() {
			out[n.GetId()] = true
		}
	}
	return out
}

func waitVoters(t *testing.T, addrs []string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v := voters(t, addrs)
		ok := len(v) == len(want)
		for _, id := range want {
			ok = ok && v[id]
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("voters %v, want %v", v, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestProcessOperations runs the operator procedures of the README on real
// processes under load: grow 3→5, shrink back to 3 with `seqd node remove`,
// wipe a server and re-add it, then back up, lose the cluster, restore it
// with `seqd restore`, and check that no value ever repeats or decreases.
func TestProcessOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for about a minute")
	}
	timing := []string{"--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms"}
	ps := proctest.New(t, 5, timing...)
	// Only the first three form the cluster; the other two join later with
	// the same flags (they see servers with state and wait to be added).
	// Every --join list names the first three only: a server bootstraps
	// only once it sees every server its --join names.
	first := strings.Join([]string{ps[0].Gossip, ps[1].Gossip, ps[2].Gossip}, ",")
	for _, p := range ps {
		for i, a := range p.Args {
			switch a {
			case "--bootstrap-expect":
				p.Args[i+1] = "3"
			case "--join":
				p.Args[i+1] = first
			}
		}
	}
	for _, p := range ps[:3] {
		p.Start(t)
	}
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	proctest.WaitLeader(t, ps[:3], nil, 30*time.Second)
	w := testcluster.StartSmartWorkload(t, "default", 16, addrs[:3], 3)
	w.WaitOK(t, 200, 30*time.Second)

	// Grow.
	ps[3].Start(t)
	ps[4].Start(t)
	waitVoters(t, addrs, "p1", "p2", "p3", "p4", "p5")
	w.WaitOK(t, 200, 30*time.Second)

	// Shrink: remove two (one may lead), then stop them.
	for _, p := range ps[3:] {
		if out, errOut, code := runCLI(t, nil, "node", "remove", "--addr", strings.Join(addrs[:3], ","), p.ID); code != 0 {
			t.Fatalf("node remove %s: exit %d %s %s", p.ID, code, out, errOut)
		}
		p.Signal(15)
		<-p.Done()
		w.WaitOK(t, 100, 30*time.Second)
	}
	waitVoters(t, addrs[:3], "p1", "p2", "p3")

	// Wipe p3 and restart it with the same flags: it refuses raft until
	// removed, then rejoins as a new server.
	victim := ps[2]
	if l := proctest.LeaderOf(ps[:3]); l == victim {
		victim = ps[1]
	}
	victim.Kill9()
	if err := os.RemoveAll(victim.Dir); err != nil {
		t.Fatal(err)
	}
	victim.Start(t)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(victim.LogText(), "seqd node remove "+victim.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("the wiped server did not say what to do; log:\n%s", victim.LogText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, code := runCLI(t, nil, "node", "remove", "--addr", strings.Join(addrs[:3], ","), victim.ID); code != 0 {
		t.Fatalf("removing the wiped server failed")
	}
	waitVoters(t, addrs[:3], "p1", "p2", "p3")
	w.WaitOK(t, 100, 30*time.Second)

	// Back up, issue more, lose everything, restore.
	backupLoseRestore(t, ps[:3], w, 3, timing...) // 3 groups: one per bootstrap server, the default
}

// TestProcessBackupRestoreGroups: the backup procedure of the README on
// real processes of a cluster of 3 raft groups under load: `seqd backup`
// gathers every group's part, `seqd restore` (with the bounds read from
// /metrics as the README says, per group for the terms) builds a cluster
// of 3 groups (refusing --groups 2), and every key of every group
// continues above every value handed out, with every group serving.
func TestProcessBackupRestoreGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	timing := []string{"--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms", "--groups", "3"}
	ps := proctest.Start(t, 3, timing...)
	waitGroupsBalanced(t, ps[0], 3, 60*time.Second)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	// Keys of one section each, over every group.
	const keys = 16
	groups := map[int]bool{}
	for k := range uint64(keys) {
		groups[seqd.GroupOfKey("g", 1, k, 3)] = true
	}
	if len(groups) != 3 {
		t.Fatalf("the keys cover groups %v", groups)
	}
	if out, errOut, code := runCLI(t, nil, "space", "create", "--addr", strings.Join(addrs, ","), "--step", "100", "--section-size", "1", "g"); code != 0 {
		t.Fatalf("space create: exit %d %s %s", code, out, errOut)
	}
	w := testcluster.StartSmartWorkload(t, "g", keys, addrs, 3)
	w.WaitOK(t, 300, 30*time.Second)
	backupLoseRestore(t, ps, w, 3, timing...)
}

// backupLoseRestore backs up the cluster of ps (of groups raft groups)
// with `seqd backup` while w runs, lets w hand out more values, kills every
// process, restores the first server of a new cluster with `seqd restore`
// into a new data directory, bounding what happened after the backup as
// the README says (V: the increase of seqd_values_taken_total summed over
// the servers; T: the largest increase of any group's
// seqd_group_raft_term, highest on any server, since the term its part of
// the backup records, plus 1), starts it with serve's extra flags, and
// checks that every key of w continues above every value w was handed.
func backupLoseRestore(t *testing.T, ps []*proctest.Proc, w *testcluster.Workload, groups int, extra ...string) {
	t.Helper()
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	takenBefore := scrapeSum(t, ps, "seqd_values_taken_total")
	file := filepath.Join(t.TempDir(), "backup.db")
	out, errOut, code := runCLI(t, nil, "backup", "--addr", strings.Join(addrs, ","), file)
	if code != 0 {
		t.Fatalf("backup: exit %d %s %s", code, out, errOut)
	}
	t.Logf("backup: %s", out)
	sum, err := fsm.InspectBackup(file)
	if err != nil {
		t.Fatal(err)
	}
	parts := sum.Info.Parts
	if groups == 1 {
		parts = []fsm.GroupPart{{Term: sum.Info.Term}}
	}
	if sum.Info.GroupCount() != groups || len(parts) != groups {
		t.Fatalf("a backup of %d groups records %+v", groups, sum.Info)
	}
	w.WaitOK(t, 300, 30*time.Second) // values after the backup
	w.Stop()
	w.Check(t)
	var maxIssued uint64
	for _, op := range w.Ops() {
		maxIssued = max(maxIssued, op.Last)
	}
	values := scrapeSum(t, ps, "seqd_values_taken_total") - takenBefore
	var terms uint64 = 1
	for g, part := range parts {
		now := scrapeMax(t, ps, fmt.Sprintf("seqd_group_raft_term{group=%q}", strconv.Itoa(g)))
		terms = max(terms, now-part.Term+1)
	}
	for _, p := range ps {
		p.Kill9()
	}
	r := proctest.New(t, 1, extra...)[0]
	restore := func(more ...string) (string, string, int) {
		args := append([]string{"restore", "--values-since", strconv.FormatUint(values, 10), "--terms-since", strconv.FormatUint(terms, 10)}, more...)
		return runCLI(t, nil, append(args, "--id", r.ID, "--data-dir", r.Dir, "--raft-addr", r.Raft, file)...)
	}
	if groups > 1 {
		if out, errOut, code := restore("--groups", strconv.Itoa(groups-1)); code != 2 || !strings.Contains(errOut, "cannot change it") {
			t.Fatalf("restore with --groups %d: exit %d %s %s", groups-1, code, out, errOut)
		}
		if _, err := os.Stat(r.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused restore created %s (%v)", r.Dir, err)
		}
	}
	out, errOut, code = restore()
	if code != 0 {
		t.Fatalf("restore: exit %d %s %s", code, out, errOut)
	}
	t.Logf("restore (%d values, %d terms since the backup): %s", values, terms, out)
	r.Start(t)
	cl, err := client.New([]string{r.API}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range w.Keys {
		v, err := cl.Next(context.Background(), w.Space, k)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] <= maxIssued {
			t.Fatalf("key %d after restore: %d, but %d was issued before", k, v[0], maxIssued)
		}
	}
	table := routes(r)
	serving := 0
	for _, g := range table {
		if g.GetServing() {
			serving++
		}
	}
	if len(table) != groups || serving != groups {
		t.Fatalf("the restored cluster: %v, want %d groups serving", table, groups)
	}
	t.Logf("restored cluster of %d groups continues above %d", groups, maxIssued)
}

// scrape returns the values of the metric series named exactly series
// (name and labels) on each process of ps that answers.
func scrape(t *testing.T, ps []*proctest.Proc, series string) []uint64 {
	t.Helper()
	var out []uint64
	for _, p := range ps {
		resp, err := http.Get("http://" + p.API + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(body)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s on %s: %q", series, p.ID, v)
				}
				out = append(out, uint64(f))
			}
		}
	}
	if len(out) != len(ps) {
		t.Fatalf("%s found on %d of %d servers", series, len(out), len(ps))
	}
	return out
}

func scrapeSum(t *testing.T, ps []*proctest.Proc, series string) uint64 {
	var sum uint64
	for _, v := range scrape(t, ps, series) {
		sum += v
	}
	return sum
}

func scrapeMax(t *testing.T, ps []*proctest.Proc, series string) uint64 {
	var m uint64
	for _, v := range scrape(t, ps, series) {
		m = max(m, v)
	}
	return m
}
