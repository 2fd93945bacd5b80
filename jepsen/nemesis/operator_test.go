package nemesis

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/jepsen/nodes"
)

func TestPlanRestart(t *testing.T) {
	all := []string{"n1", "n2", "n3", "n4", "n5"}
	positions := map[string]int{}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		steps := planRestart(rng, all, "n3", nil)
		var order []string
		for i, s := range steps {
			if len(s.IDs) != 1 {
				t.Fatalf("seed %d: step %d starts %v together", seed, i, s.IDs)
			}
			if s.Pause < 0 || s.Pause > 3*time.Second || (i == len(steps)-1 && s.Pause != 0) {
				t.Fatalf("seed %d: pause %v at step %d", seed, s.Pause, i)
			}
			order = append(order, s.IDs[0])
		}
		sorted := slices.Clone(order)
		slices.Sort(sorted)
		if !slices.Equal(sorted, all) {
			t.Fatalf("seed %d: order %v is not every node once", seed, order)
		}
		switch i := slices.Index(order, "n3"); i {
		case 0:
			positions["first"]++
		case len(order) - 1:
			positions["last"]++
		default:
			positions["between"]++
		}
	}
	for _, p := range []string{"first", "last", "between"} {
		if positions[p] < 30 {
			t.Errorf("the wiped node came %s only %d times in 300: %v", p, positions[p], positions)
		}
	}
	// With laggers: they and the wiped node first, together, then the
	// others one at a time after a pause of at least 2s.
	rng := rand.New(rand.NewPCG(7, 1))
	steps := planRestart(rng, all, "n2", []string{"n4", "n5"})
	first := slices.Clone(steps[0].IDs)
	slices.Sort(first)
	if !slices.Equal(first, []string{"n2", "n4", "n5"}) || steps[0].Pause < 2*time.Second {
		t.Errorf("first step %v, pause %v", steps[0].IDs, steps[0].Pause)
	}
	if len(steps) != 3 || len(steps[1].IDs) != 1 || len(steps[2].IDs) != 1 {
		t.Errorf("steps %+v", steps)
	}
	if d := describePlan(steps); !strings.Contains(d, "+") || !strings.Contains(d, ", ") {
		t.Errorf("describePlan: %q", d)
	}
}

func TestLeaseAssignment(t *testing.T) {
	const short, long = 500 * time.Millisecond, 3 * time.Second
	cur := []time.Duration{short, short, short}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 2))
		got := leaseAssignment(rng, cur, short, long)
		if slices.Equal(got, cur) {
			t.Fatalf("seed %d: assignment unchanged %v", seed, got)
		}
		if !slices.Contains(got, short) || !slices.Contains(got, long) {
			t.Fatalf("seed %d: not mixed: %v", seed, got)
		}
		cur = got
	}
}

func TestRestoreArgs(t *testing.T) {
	// A build that computes the margin from the time since the backup: no
	// margin, no counts (its --help still lists them, for older backups).
	today := "Usage: seqd restore [--id ID] [--data-dir D] [--raft-addr A] [--clock-error 10m] FILE\n\n" +
		"  --margin\n      margin to use instead of the minimum\n  --terms-since\n      backups taken before protocol 5 only\n  --values-since\n"
	got := restoreArgs(today, "n2", "/d/n2", "10.0.0.2:7701", "/b/backup.db")
	want := []string{"restore", "--id", "n2", "--data-dir", "/d/n2", "--raft-addr", "10.0.0.2:7701", "/b/backup.db"}
	if !slices.Equal(got, want) {
		t.Errorf("today: %q", got)
	}
	// Builds whose restore needs --margin, without and with the counts.
	older := "Usage: seqd restore --margin N [--id ID] [--data-dir D] [--raft-addr A] FILE\n  --margin\n  --raft-addr\n"
	got = restoreArgs(older, "n2", "/d/n2", "10.0.0.2:7701", "/b/backup.db")
	want = []string{"restore", "--id", "n2", "--data-dir", "/d/n2", "--raft-addr", "10.0.0.2:7701", "--margin", "1000000000", "/b/backup.db"}
	if !slices.Equal(got, want) {
		t.Errorf("older: %q", got)
	}
	counts := older + "  --values-since\n      values issued since ...\n  --terms-since\n      raft terms since ...\n"
	got = restoreArgs(counts, "n2", "/d/n2", "10.0.0.2:7701", "/b/backup.db")
	want = []string{"restore", "--id", "n2", "--data-dir", "/d/n2", "--raft-addr", "10.0.0.2:7701", "--margin", "1000000000",
		"--values-since", "10000000", "--terms-since", "100", "/b/backup.db"}
	if !slices.Equal(got, want) {
		t.Errorf("with counts: %q", got)
	}
	// The build before the raise budget: the counts required, --margin
	// optional.
	counted := "Usage: seqd restore --values-since V --terms-since T [--max-step S] [--margin M] [--id ID] FILE\n  --terms-since\n  --values-since\n"
	if got = restoreArgs(counted, "n2", "/d/n2", "10.0.0.2:7701", "/b/backup.db"); !slices.Equal(got, want) {
		t.Errorf("counts required: %q", got)
	}
}

// The bounds restore-mistake passes must be accepted by seqd restore: their
// minimum margin, V + T × (1,000,000 + 2 × S), stays below the margin it
// passes, even with a step far above the run's default of 50.
func TestRestoreBoundsAccepted(t *testing.T) {
	for _, step := range []uint64{50, 10_000, 1_000_000} {
		if min := uint64(restoreValuesSince) + restoreTermsSince*(1_000_000+2*step); min > restoreMargin {
			t.Errorf("step %d: minimum margin %d above --margin %d: seqd restore would refuse every restore", step, min, restoreMargin)
		}
	}
}

// A line of a real seqd log (a wiped voter refusing), as the harness met it.
const wipedLine = `time=2026-11-26T18:59:06.949Z level=WARN msg="this server is a voter in the cluster's raft configuration and held raft state before, but its data directory has none (wiped or replaced): it refuses to vote or serve. To re-add it, run ` + "`seqd node remove n2`" + ` against the cluster; it then joins as a new server by itself" node=n2 admission=wiped id=n2 refusal=wiped`

func TestLogAttrs(t *testing.T) {
	a := logAttrs(wipedLine)
	if a["admission"] != "wiped" || a["refusal"] != "wiped" || a["id"] != "n2" || a["level"] != "WARN" || !strings.HasPrefix(a["msg"], "this server is a voter") {
		t.Errorf("attrs: %q", a)
	}
	// Words that are not key=value, quotes inside values, and a message
	// that names another attribute.
	a = logAttrs(`=== jepsen: start #2 at now: seqd serve x=1 msg="a \"quoted\" admission=stale inside" group=3 admission=quorum-wait`)
	if a["x"] != "1" || a["msg"] != `a "quoted" admission=stale inside` || a["group"] != "3" || a["admission"] != "quorum-wait" {
		t.Errorf("attrs: %q", a)
	}
}

// logger writes seqd-style log lines (slog's text format, as seqd serve
// writes them) to a node's log file.
func logger(t *testing.T, n *nodes.Node) *slog.Logger {
	t.Helper()
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return slog.New(slog.NewTextHandler(f, nil)).With("node", n.ID)
}

func TestAfterRefusal(t *testing.T) {
	dir := t.TempDir()
	var n *nodes.Node
	fresh := func() *slog.Logger {
		n = &nodes.Node{ID: "n1", LogPath: filepath.Join(dir, fmt.Sprintf("n1-%d.log", time.Now().UnixNano()))}
		return logger(t, n)
	}
	// Arguments as cluster/admission.go logs a verdict.
	admitted := func(l *slog.Logger, kind admit.Kind, group int) {
		args := []any{"admission", string(kind), "id", "n1"}
		if group >= 0 {
			args = append(args, "group", group)
		}
		l.Info("raft gate open: "+admit.Verdict{Kind: kind, Group: max(group, 0)}.Message("n1"), args...)
	}
	refused := func(l *slog.Logger, kind admit.Kind, group int) {
		args := []any{"admission", string(kind), "id", "n1"}
		if group >= 0 {
			args = append(args, "group", group)
		}
		l.Warn(admit.Verdict{Kind: kind, Group: max(group, 0), By: "n2", LastIndex: 40, RecordedIndex: 41, RecordedTerm: 3}.Message("n1"), append(args, "refusal", string(kind))...)
	}
	l := fresh()
	admitted(l, admit.ByBootstrap, -1)
	refused(l, admit.Stale, -1)
	if got := afterRefusal(n, 0); got != "" {
		t.Errorf("a gate opened before the refusal: %q", got)
	}
	if refusal(n, 0) != "stale" || gateOpened(n, 0) != "bootstrap" || !gateOpenedBefore(n, 0) {
		t.Errorf("refusal %q, gate %q", refusal(n, 0), gateOpened(n, 0))
	}
	l = fresh()
	refused(l, admit.Stale, -1)
	admitted(l, admit.ByLeader, -1)
	l.Info("serving as leader", "term", 3)
	if got := afterRefusal(n, 0); !strings.Contains(got, "OPENED") || !strings.Contains(got, "admission=leader after refusal=stale") || !strings.Contains(got, "1 times") {
		t.Errorf("gate opened after the refusal: %q", got)
	}
	if got := served(n, 0); !strings.Contains(got, "1 times") {
		t.Errorf("served: %q", got)
	}
	// Waits are not admissions.
	l = fresh()
	l.Info(admit.Verdict{Kind: admit.QuorumWait, Missing: []string{"n3"}}.Message("n1"), "admission", string(admit.QuorumWait), "id", "n1")
	if gateOpened(n, 0) != "" || refusal(n, 0) != "" {
		t.Errorf("a wait taken for a verdict: gate %q refusal %q", gateOpened(n, 0), refusal(n, 0))
	}
	// Several groups: each is admitted on its own.
	l = fresh()
	admitted(l, admit.ByLeader, 0)
	refused(l, admit.Stale, 3)
	admitted(l, admit.ByLeader, 1)
	if got := afterRefusal(n, 0); got != "" {
		t.Errorf("another group's gate opened after group 3's refusal: %q", got)
	}
	if gateOpenedBefore(n, 0) {
		t.Error("another group's gate opened before group 3's refusal, taken for group 3's")
	}
	l = fresh()
	admitted(l, admit.ByLeader, 3)
	refused(l, admit.Stale, 3)
	admitted(l, admit.ByAnswers, 3)
	if got := afterRefusal(n, 0); !strings.Contains(got, "OPENED") {
		t.Errorf("group 3's gate opened after its refusal: %q", got)
	}
	if !gateOpenedBefore(n, 0) {
		t.Error("group 3's gate opened before its refusal: not seen")
	}
	// A fence names no group: it is about every group, after any offset.
	l = fresh()
	admitted(l, admit.ByLeader, 2)
	off := n.LogSize()
	l.Error("fenced", "refusal", string(admit.Superseded), "admission", string(admit.Superseded), "id", "n1")
	if refusal(n, off) != "superseded" || refusal(n, 0) != "superseded" {
		t.Errorf("fence: %q", refusal(n, off))
	}
	// The real line.
	n = &nodes.Node{ID: "n2", LogPath: filepath.Join(dir, "n2.log")}
	if err := os.WriteFile(n.LogPath, []byte(wipedLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if refusal(n, 0) != "wiped" {
		t.Errorf("wiped: %q", refusal(n, 0))
	}
}

// Kinds are classified by the outcome their verdicts have in cluster/admit.
func TestKinds(t *testing.T) {
	for k, want := range map[admit.Kind]string{admit.ByLeader: "admit", admit.ByWitness: "admit", admit.BySolo: "admit", admit.ByFresh: "admit",
		admit.QuorumWait: "wait", admit.LeaderWait: "wait", admit.SoloWaiting: "wait", admit.NoAnswer: "wait",
		admit.Stale: "refuse", admit.Wiped: "refuse", admit.SourceRunning: "refuse", admit.Superseded: "refuse", admit.Foreign: "refuse", admit.Sibling: "refuse", admit.Removed: "refuse"} {
		got := "wait"
		if admitted(string(k)) {
			got = "admit"
		}
		if refusedKind(string(k)) {
			got = "refuse"
		}
		if got != want {
			t.Errorf("%s: %s, want %s", k, got, want)
		}
	}
	st := nodes.Status{Groups: map[int]nodes.GroupState{0: {RaftOpen: true, Admission: "leader"}, 2: {Admission: "stale"}, 1: {Admission: "quorum-wait"}}}
	if statusRefusal(st) != "stale" || !waiting(st, admit.QuorumWait) || waiting(st, admit.LeaderWait) || st.Admissions() != "0:leader 1:quorum-wait 2:stale" {
		t.Errorf("status: refusal %q, admissions %q", statusRefusal(st), st.Admissions())
	}
}
