package main_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/proctest"
)

// TestHelpEverywhere: every command and every level of subcommands answers
// -h with its usage on stdout and exit status 0.
func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"help"},
		{"serve", "-h"}, {"next", "-h"}, {"reserve", "-h"}, {"current", "-h"}, {"status", "-h"},
		{"health", "-h"}, {"backup", "-h"}, {"restore", "-h"},
		{"space", "-h"}, {"space", "--help"}, {"space", "create", "-h"}, {"space", "list", "-h"},
		{"node", "-h"}, {"node", "remove", "-h"}, {"node", "drain", "-h"},
		{"id", "-h"}, {"id", "help"}, {"id", "next", "-h"}, {"id", "decode", "-h"}, {"id", "workers", "-h"},
		{"id", "namespace", "-h"}, {"id", "namespace", "create", "-h"}, {"id", "namespace", "list", "-h"},
	} {
		out, stderr, code := runCLI(t, nil, args...)
		if code != 0 || !strings.Contains(out, "Usage") {
			t.Errorf("seqd %s: exit %d, stdout %q, stderr %q; want exit 0 and a usage", strings.Join(args, " "), code, out, stderr)
		}
	}
	// An unknown subcommand names the ones there are.
	for args, want := range map[string]string{
		"id frob":           "next [--namespace N]",
		"id namespace frob": "create NAME",
		"node frob":         "drain [--undo] ID",
		"space frob":        "list",
	} {
		_, stderr, code := runCLI(t, nil, strings.Fields(args)...)
		if code != 2 || !strings.Contains(stderr, `unknown subcommand "frob"`) || !strings.Contains(stderr, want) {
			t.Errorf("seqd %s: exit %d, stderr %q; want exit 2 listing %q", args, code, stderr, want)
		}
	}
}

// TestFlagsBeforeTheCommand: flags given before the command reach it
// ("seqd --addr A next 1" works as "seqd next --addr A 1", also through
// subcommands); flags with no command after them say where flags go.
func TestFlagsBeforeTheCommand(t *testing.T) {
	ps := proctest.Start(t, 1)
	proctest.WaitHealthy(t, ps, 30*time.Second)
	out, stderr, code := runCLI(t, nil, "--addr", ps[0].API, "--timeout", "20s", "next", "7", "7")
	if code != 0 || strings.Fields(out)[0] != "1" || strings.Fields(out)[1] != "2" {
		t.Fatalf("seqd --addr A next 7 7: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = runCLI(t, nil, "--addr="+ps[0].API, "space", "create", "orders", "--step", "100")
	if code != 0 || !strings.Contains(out, "orders") {
		t.Fatalf("seqd --addr=A space create orders: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = runCLI(t, nil, "--addr", ps[0].API, "id", "namespace", "create", "users", "--layout", "js")
	if code != 0 || !strings.Contains(out, "created namespace users") {
		t.Fatalf("seqd --addr A id namespace create users: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	_, stderr, code = runCLI(t, nil, "--addr", ps[0].API)
	if code != 2 || !strings.Contains(stderr, "flags go after the command") {
		t.Fatalf("seqd --addr A: exit %d, stderr %q; want exit 2 saying where flags go", code, stderr)
	}
}

// TestIDDecodeWarnsOnImpossibleIds: an id no holder of the cluster can have
// issued (a time past every range granted to its worker, a worker never
// granted) decodes with a warning; a real id decodes without one.
func TestIDDecodeWarnsOnImpossibleIds(t *testing.T) {
	ps := proctest.Start(t, 1)
	proctest.WaitHealthy(t, ps, 30*time.Second)
	addr := "--addr=" + ps[0].API
	out, stderr, code := runCLI(t, nil, "id", "next", addr, "--timeout", "20s")
	if code != 0 {
		t.Fatalf("id next: exit %d: %s", code, stderr)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The default layout: 41 bits of ms, 10 of worker, 12 of sequence.
	future := id + 3600_000<<22              // an hour later, same worker
	otherWorker := id&^(1023<<12) | 1000<<12 // worker 1000, never granted
	for _, c := range []struct {
		id   int64
		warn string
	}{
		{id, ""},
		{future, "is in the future"},
		{otherWorker, "worker 1000 has never been granted"},
	} {
		out, stderr, code := runCLI(t, nil, "id", "decode", addr, strconv.FormatInt(c.id, 10))
		if code != 0 || !strings.Contains(out, strconv.FormatInt(c.id, 10)) {
			t.Fatalf("id decode %d: exit %d, stdout %q, stderr %q", c.id, code, out, stderr)
		}
		switch {
		case c.warn == "" && stderr != "":
			t.Errorf("id decode of an issued id %d warned: %q", c.id, stderr)
		case c.warn != "" && !strings.Contains(stderr, "warning: id "+strconv.FormatInt(c.id, 10)+" cannot have been issued") || !strings.Contains(stderr, c.warn):
			t.Errorf("id decode %d: stderr %q, want a warning saying %q", c.id, stderr, c.warn)
		}
	}
}

// TestRoutineRestartLogsNoWarning: starting a single node, stopping it with
// SIGTERM and starting it again is routine: neither start logs a WARN or
// an ERROR.
func TestRoutineRestartLogsNoWarning(t *testing.T) {
	ps := proctest.Start(t, 1)
	p := ps[0]
	proctest.WaitHealthy(t, ps, 30*time.Second)
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("seqd did not exit on SIGTERM")
	}
	first := p.LogText()
	p.Start(t)
	proctest.WaitHealthy(t, ps, 30*time.Second)
	proctest.WaitAdmitted(t, p, 30*time.Second)
	for i, log := range []string{first, p.LogText()} {
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Errorf("start %d of a single node logged: %s", i+1, line)
			}
		}
	}
	if !strings.Contains(p.LogText(), "level=INFO") {
		t.Fatalf("the restart logged nothing at INFO: %q", p.LogText())
	}
}

// TestNodeDrainSelf: `seqd node drain --self` drains the server --addr
// names, as a Kubernetes preStop hook runs it inside the pod: the leader
// hands its groups over and leads none after.
func TestNodeDrainSelf(t *testing.T) {
	ps := proctest.Start(t, 3)
	proctest.WaitHealthy(t, ps, 60*time.Second)
	l := proctest.WaitLeader(t, ps, nil, 30*time.Second)
	// Three servers run three groups: status says whose STATE and SERVING
	// the nodes table shows.
	if out, _, _ := runCLI(t, nil, "status", "--addr", l.API); !strings.Contains(out, "(STATE, SERVING and TERM above are group 0's") {
		t.Errorf("status does not say its nodes table is group 0's:\n%s", out)
	}
	out, stderr, code := runCLI(t, nil, "node", "drain", "--self", "--addr", l.API, "--timeout", "30s")
	if code != 0 || strings.TrimSpace(out) != l.ID+" drained: leads no group" {
		t.Fatalf("node drain --self at %s: exit %d, %q %q", l.ID, code, out, stderr)
	}
	if nl := proctest.WaitLeader(t, ps, l, 30*time.Second); nl == l {
		t.Fatalf("%s still leads after its drain", l.ID)
	}
	for _, args := range [][]string{{"node", "drain", "--self", "n1"}, {"node", "drain", "--self", "--addr", "a:1,b:2"}} {
		if _, stderr, code := runCLI(t, nil, args...); code != 2 || !strings.Contains(stderr, "node drain") {
			t.Errorf("seqd %v: exit %d, %q; want a usage error", args, code, stderr)
		}
	}
}
