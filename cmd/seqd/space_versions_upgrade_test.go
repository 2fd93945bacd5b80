package main_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/proctest"
)

// lastBuildOfProtocol5 is the last commit of protocol 5, before space
// record versions (protocol 6): the build a rolling upgrade to this one
// starts from.
const lastBuildOfProtocol5 = "a4a8d62"

// TestSpaceVersionsAfterARollingUpgrade upgrades a cluster of the last
// build of protocol 5 (three servers, three raft groups) server by server
// to this build. While any server runs the previous build the cluster
// stays on protocol 5, its space changes are followed by every group (the
// call answers only then), and a server of this build can go back to the
// previous build on its data (nothing it wrote is versioned yet). Once
// every server runs this build the cluster moves to protocol 6, and
// changes made then (a step, a delete, a create again) are followed by
// every group of every server with group 0's version, as their files
// show; the previous build then refuses those files by their format.
func TestSpaceVersionsAfterARollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous build and runs processes for about half a minute")
	}
	began := time.Now()
	prev := buildPrevious(t, lastBuildOfProtocol5)
	t.Logf("%v: built %s", time.Since(began).Round(time.Second), lastBuildOfProtocol5)
	const groups = 3
	ps := proctest.New(t, 3, "--groups", strconv.Itoa(groups), "--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms")
	var addrs []string
	for _, p := range ps {
		p.Bin = prev
		p.Start(t)
		addrs = append(addrs, p.API)
	}
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	waitProtocol(t, addrs, 5, 30*time.Second)
	alive := func(stage string) { t.Helper(); allAlive(t, ps, stage) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.New(addrs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSpace(ctx, "s", 10, 10); err != nil {
		t.Fatal(err)
	}
	restart := func(p *proctest.Proc, bin string) {
		t.Helper()
		p.Signal(15)
		<-p.Done()
		p.Bin = bin
		p.Start(t)
		waitVoters(t, addrs, "p1", "p2", "p3")
		proctest.WaitAdmitted(t, p, 30*time.Second)
	}
	step := uint64(10)
	change := func(stage string) {
		t.Helper()
		step += 10
		if sp, err := updateStepAfterRestart(ctx, cl, "s", step); err != nil || sp.GetStep() != step {
			t.Fatalf("%s: UpdateSpace: %v, %v (every group must follow)", stage, sp, err)
		}
		if _, err := cl.Next(ctx, "s", 1, 2, 3, 10_001, 20_001); err != nil {
			t.Fatalf("%s: Next: %v", stage, err)
		}
		alive(stage)
	}

	// Two servers on this build: still protocol 5, changes followed.
	for _, p := range ps[:2] {
		restart(p, "")
		change(p.ID + " on this build")
		for _, addr := range addrs {
			if got := groupProtocol(t, addr); got != 5 {
				t.Fatalf("group 0 at %s moved to protocol %d while a server runs the previous build", addr, got)
			}
		}
	}
	// Before the move, the previous build reads what this one wrote.
	restart(ps[0], prev)
	change("p1 back on the previous build")
	restart(ps[0], "")
	t.Logf("%v: a mixed cluster on protocol 5", time.Since(began).Round(time.Second))

	// Every server on this build: the move, then versioned changes.
	restart(ps[2], "")
	waitProtocol(t, addrs, 6, 30*time.Second)
	t.Logf("%v: on protocol 6", time.Since(began).Round(time.Second))
	change("on protocol 6")
	if err := cl.DeleteSpace(ctx, "s"); err != nil {
		t.Fatalf("DeleteSpace on protocol 6: %v", err)
	}
	if _, err := cl.CreateSpace(ctx, "s", 70, 10); err != nil {
		t.Fatalf("CreateSpace again on protocol 6: %v", err)
	}
	if _, err := cl.Next(ctx, "s", 1, 2, 3, 10_001, 20_001); err != nil {
		t.Fatal(err)
	}
	alive("every server on this build")

	// Every group of every server holds group 0's record, at its version:
	// one step change, one delete, one create since the move.
	for _, p := range ps {
		p.Signal(15)
		<-p.Done()
	}
	for _, p := range ps {
		for g := range groups {
			dir := p.Dir
			if g > 0 {
				dir = filepath.Join(p.Dir, "groups", strconv.Itoa(g))
			}
			f, err := fsm.Open(filepath.Join(dir, "fsm.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			rec, ok := f.Record("s")
			_ = f.Close()
			if !ok || rec.Space.Step != 70 || rec.Version != 3 {
				t.Errorf("%s's group %d holds %+v (%v), want step 70 at version 3", p.ID, g, rec, ok)
			}
		}
	}
	// The previous build refuses data holding versions by its format,
	// never misreading it.
	ps[0].Bin = prev
	ps[0].Start(t)
	select {
	case <-ps[0].Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the previous build runs on data holding versions; log:\n%s", ps[0].LogText())
	}
	if log := ps[0].LogText(); !strings.Contains(log, "data format 6 was written by a newer seqd") {
		t.Fatalf("the previous build exited without refusing the data's format; log:\n%s", log)
	}
	t.Logf("%v: done", time.Since(began).Round(time.Second))
}

// updateStepAfterRestart changes a space's step right after a server
// restarted, when the change may be refused for a while: group 0's leader
// may not see the restarted server alive in gossip yet (failed_precondition,
// naming the server), and a group may not follow at once either (its
// leader waits for the same; deadline_exceeded). The same call again asks
// every group to follow again; any other error is returned at once.
func updateStepAfterRestart(ctx context.Context, cl *client.Client, name string, step uint64) (*seqv1.Space, error) {
	for attempt := 1; ; attempt++ {
		sp, err := cl.UpdateSpace(ctx, name, step)
		notSeen := connect.CodeOf(err) == connect.CodeFailedPrecondition && strings.Contains(err.Error(), "is not alive in gossip")
		if err == nil || connect.CodeOf(err) != connect.CodeDeadlineExceeded && !notSeen || attempt == 50 {
			return sp, err
		}
		select {
		case <-ctx.Done():
			return sp, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
