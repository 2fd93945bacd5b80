package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
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
	file := filepath.Join(t.TempDir(), "backup.db")
	if out, errOut, code := runCLI(t, nil, "backup", "--addr", strings.Join(addrs[:3], ","), file); code != 0 {
		t.Fatalf("backup: exit %d %s %s", code, out, errOut)
	}
	w.WaitOK(t, 300, 30*time.Second) // values after the backup
	w.Stop()
	w.Check(t)
	var maxIssued uint64
	for _, op := range w.Ops() {
		maxIssued = max(maxIssued, op.Last)
	}
	for _, p := range ps[:3] {
		p.Kill9()
	}
	r := proctest.New(t, 1, timing...)[0]
	// Bounds for what happened after the backup: the workload's values
	// since (per section at most all of them) and the terms (generous).
	out, errOut, code := runCLI(t, nil, "restore", "--values-since", strconv.Itoa(len(w.Ops())*20), "--terms-since", "50",
		"--id", r.ID, "--data-dir", r.Dir, "--raft-addr", r.Raft, file)
	if code != 0 {
		t.Fatalf("restore: exit %d %s %s", code, out, errOut)
	}
	t.Logf("restore: %s", out)
	r.Start(t)
	cl, err := client.New([]string{r.API}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k := uint64(0); k < 16; k++ {
		v, err := cl.Next(context.Background(), "default", k)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] <= maxIssued {
			t.Fatalf("key %d after restore: %d, but %d was issued before", k, v[0], maxIssued)
		}
	}
	t.Logf("restored cluster continues above %d", maxIssued)
}
