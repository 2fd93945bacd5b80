package main_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/proctest"
)

// lastBuildWithoutSpaceChanges is the last commit before floors, space
// changes, namespace deletion and layout fields (the build a rolling
// upgrade to this one starts from).
const lastBuildWithoutSpaceChanges = "8ee10ee"

// TestSpaceChangesInAMixedCluster runs this build next to two servers of
// the build before space changes, this one leading: a floor (a raise every
// build applies) holds after leadership moves to an older server; the
// space and namespace changes, which older servers would skip, are refused
// (failed_precondition) while they run; a namespace with a shard field is
// created and kept by the older servers (which refuse to issue its ids)
// without any server stopping; and once every server runs this build the
// changes are made, and the namespace, read back from what the older
// servers stored, has its shard field.
func TestSpaceChangesInAMixedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous build and runs processes for about a minute")
	}
	began := time.Now()
	prev := buildPrevious(t, lastBuildWithoutSpaceChanges)
	t.Logf("%v: built %s", time.Since(began).Round(time.Second), lastBuildWithoutSpaceChanges)
	ps := proctest.New(t, 3, "--groups", "1", "--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms")
	// A rolling upgrade starts from a cluster of the previous build (on
	// its protocol); then p1 runs this build. A leader of this build
	// moves a cluster only to its own protocol, so a cluster formed
	// mixed would stay on protocol 1.
	var addrs []string
	for _, p := range ps {
		p.Bin = prev
		p.Start(t)
		addrs = append(addrs, p.API)
	}
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	alive := func(stage string) { t.Helper(); allAlive(t, ps, stage) }
	if oc, err := client.New(addrs, client.Options{}); err == nil {
		// The previous build's first leader moved the cluster to its
		// protocol: flake ids are served.
		octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := oc.NextIds(octx, "", 1)
		ocancel()
		if err != nil {
			t.Fatalf("the previous build's cluster: %v", err)
		}
	}
	ps[0].Signal(15)
	<-ps[0].Done()
	ps[0].Bin = ""
	ps[0].Start(t)
	proctest.WaitAdmitted(t, ps[0], 30*time.Second)
	restart := func(p *proctest.Proc) {
		t.Helper()
		p.Signal(15)
		<-p.Done()
		p.Start(t)
		waitVoters(t, addrs, "p1", "p2", "p3")
		proctest.WaitAdmitted(t, p, 30*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// This build leads: drain the older servers (the previous build has
	// drains) until it does.
	admin, err := client.New(addrs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		l := proctest.WaitLeader(t, ps, nil, 30*time.Second)
		if l == ps[0] {
			break
		}
		if attempt == 8 {
			t.Fatal("leadership never reached this build's server")
		}
		if _, err := admin.DrainNode(ctx, l.ID, false); err != nil {
			t.Logf("draining %s: %v", l.ID, err)
		}
	}
	t.Logf("%v: this build leads", time.Since(began).Round(time.Second))
	cl, err := client.New([]string{ps[0].API}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSpace(ctx, "s", 10, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Next(ctx, "s", 1, 11); err != nil {
		t.Fatal(err)
	}
	if err := cl.SetFloor(ctx, "s", 1_000_000, 1); err != nil {
		t.Fatalf("SetFloor in a mixed cluster: %v", err)
	}
	// Flake ids need the cluster's protocol moved up, which this build's
	// leader does once gossip shows it every server's: wait for it.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := cl.NextIds(ctx, "", 1)
		if err == nil {
			break
		}
		if connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	refused := map[string]error{
		"UpdateSpace":     second(cl.UpdateSpace(ctx, "s", 500)),
		"DeleteSpace":     cl.DeleteSpace(ctx, "s"),
		"DeleteNamespace": cl.DeleteNamespace(ctx, "default"),
	}
	for what, err := range refused {
		if connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Fatalf("%s while older servers run: %v, want failed_precondition", what, err)
		}
	}
	if _, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: "photos", Layout: "instagram"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.NextShardIds(ctx, "photos", 10, 5); err != nil {
		t.Fatal(err)
	}
	older, _ := client.New([]string{ps[1].API}, client.Options{DisableRouting: true, RetryFor: time.Second})
	if ids, err := older.NextIds(ctx, "photos", 1); err == nil {
		t.Fatalf("an older server issued %v of a namespace with a shard field", ids)
	}
	alive("the changes in a mixed cluster")
	t.Logf("%v: the changes in a mixed cluster", time.Since(began).Round(time.Second))

	// Leadership moves to an older server: the floor holds there.
	ps[0].Signal(15)
	<-ps[0].Done()
	any, _ := client.New(addrs[1:], client.Options{})
	if v, err := any.Next(ctx, "s", 1); err != nil || v[0] <= 1_000_000 {
		t.Fatalf("Next on an older leader after the floor: %v, %v", v, err)
	}
	ps[0].Start(t)
	waitVoters(t, addrs, "p1", "p2", "p3")
	proctest.WaitAdmitted(t, ps[0], 30*time.Second)
	alive("an older leader")
	t.Logf("%v: an older leader", time.Since(began).Round(time.Second))

	// Every server on this build.
	for _, p := range ps[1:] {
		p.Bin = ""
		restart(p)
	}
	all, _ := client.New(addrs, client.Options{})
	if sp, err := updateStepAfterRestart(ctx, all, "s", 500); err != nil || sp.GetStep() != 500 {
		t.Fatalf("UpdateSpace once every server runs this build: %v, %v", sp, err)
	}
	l, err := all.GetLayout(ctx, "photos")
	if err != nil || l.GetShardBits() != 13 || l.GetObfuscation() != "fields" {
		t.Fatalf("the namespace older servers stored: %v, %v", l, err)
	}
	for _, a := range addrs {
		one, _ := client.New([]string{a}, client.Options{DisableRouting: true})
		ids, err := one.NextShardIds(ctx, "photos", 5, 77)
		if err != nil {
			t.Fatalf("NextIds via %s: %v", a, err)
		}
		if d, err := one.Decode(ctx, "photos", ids[0]); err != nil || d.GetShard() != 77 {
			t.Fatalf("Decode via %s: %v, %v", a, d, err)
		}
	}
	if err := all.DeleteSpace(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	alive("every server on this build")
}

func second[T any](_ T, err error) error { return err }
