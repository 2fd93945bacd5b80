package main_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/proctest"
)

// TestServeRestartWithOtherGroupsRefused: a server whose data directory
// holds state of a cluster of 2 groups, started again with --groups 3 or
// --groups 1, refuses to start: it exits with status 2 and says the count
// is fixed. Started again without --groups and with another
// --bootstrap-expect (whose default would be 3 groups), it runs the 2
// recorded groups.
func TestServeRestartWithOtherGroupsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ps := proctest.New(t, 1)
	p := ps[0]
	base := append([]string(nil), p.Args...)
	p.Args = append(base, "--groups", "2")
	p.Start(t)
	waitGroupsBalanced(t, p, 1, 60*time.Second)
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop on SIGTERM")
	}
	for _, g := range []string{"3", "1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, proctest.Binary(t), append(append([]string(nil), base...), "--groups", g)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(out.String(), "--groups "+g+" cannot change it") {
			t.Fatalf("restart with --groups %s: %v (ctx %v), want exit status 2 and a refusal; output:\n%s", g, err, ctx.Err(), out.String())
		}
	}
	args := append([]string(nil), base...)
	for i, a := range args {
		if a == "--bootstrap-expect" {
			args[i+1] = "3"
		}
	}
	p.Args = args
	p.Start(t)
	if table := waitGroupsBalanced(t, p, 1, 60*time.Second); len(table) != 2 {
		t.Fatalf("restarted without --groups and with --bootstrap-expect 3: %d groups, want the recorded 2", len(table))
	}
}
