package nemesis

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	today := "Usage: seqd restore --margin N [--id ID] [--data-dir D] [--raft-addr A] FILE\n  --margin\n  --raft-addr\n"
	got := restoreArgs(today, "n2", "/d/n2", "10.0.0.2:7701", "/b/backup.db")
	want := []string{"restore", "--margin", "1000000000", "--id", "n2", "--data-dir", "/d/n2", "--raft-addr", "10.0.0.2:7701", "/b/backup.db"}
	if !slices.Equal(got, want) {
		t.Errorf("today: %q", got)
	}
	newer := today + "  --values-since\n      values issued since ...\n  --terms-since\n      raft terms since ...\n"
	got = restoreArgs(newer, "n2", "/d/n2", "10.0.0.2:7701", "/b/backup.db")
	want = []string{"restore", "--margin", "1000000000", "--id", "n2", "--data-dir", "/d/n2", "--raft-addr", "10.0.0.2:7701",
		"--values-since", "10000000", "--terms-since", "100", "/b/backup.db"}
	if !slices.Equal(got, want) {
		t.Errorf("newer: %q", got)
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

func TestWaitsFor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n2.log")
	log := `time=2026-11-23T10:43:41.844Z level=WARN msg="no leader answers, and vouching without one needs answers from enough voters to include every committed record: waiting for [n1 n3]. If some of them are gone for good (dead, their disks lost) and no server runs on an older copy of its data directory, restart the survivors with --assume-gone naming them" node=n2 id=n2
`
	if err := os.WriteFile(path, []byte("earlier: waiting for [n4]\n"+log), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &nodes.Node{ID: "n2", LogPath: path}
	for id, want := range map[string]bool{"n1": true, "n3": true, "n2": false, "n": false, "n4": true} {
		if got := waitsFor(n, 0, id); got != want {
			t.Errorf("waitsFor(%s) = %v, want %v", id, got, want)
		}
	}
	if waitsFor(n, int64(len("earlier: waiting for [n4]\n")), "n4") {
		t.Error("waitsFor read before its offset")
	}
}

func TestAfterRefusal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	n := &nodes.Node{ID: "n1", LogPath: path}
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`msg="raft gate open: bootstrapped a new cluster"
msg="this server's raft log ends at index 40, but n2 recorded it reaching index 41 (term 3): its data directory is an older copy, so it refuses"
`)
	if got := afterRefusal(n, 0); got != "" {
		t.Errorf("a gate opened before the refusal: %q", got)
	}
	if refusal(n, 0) != "older copy" {
		t.Errorf("refusal: %q", refusal(n, 0))
	}
	write(`msg="this server's raft log ends at index 40, but n2 recorded it reaching index 41 (term 3): its data directory is an older copy, so it refuses"
msg="raft gate open: the serving leader vouches for this server's log"
msg="serving as leader" term=3
`)
	if got := afterRefusal(n, 0); !strings.Contains(got, "OPENED") || !strings.Contains(got, "1 times") {
		t.Errorf("gate opened after the refusal: %q", got)
	}
	if got := served(n, 0); !strings.Contains(got, "1 times") {
		t.Errorf("served: %q", got)
	}
	// Several groups: each is vouched for on its own.
	write(`msg="raft gate open: group 0: the serving leader vouches for this server's log"
msg="group 3: this server's raft log ends at index 40, but n2 recorded it reaching index 41 (term 3): its data directory is an older copy, so it refuses"
msg="raft gate open: group 1: the serving leader vouches for this server's log"
`)
	if got := afterRefusal(n, 0); got != "" {
		t.Errorf("another group's gate opened after group 3's refusal: %q", got)
	}
	if gateOpenedBefore(n, 0) {
		t.Error("another group's gate opened before group 3's refusal, taken for group 3's")
	}
	write(`msg="raft gate open: group 3: the serving leader vouches for this server's log"
msg="group 3: this server's raft log ends at index 40, but n2 recorded it reaching index 41 (term 3): its data directory is an older copy, so it refuses"
msg="raft gate open: group 3: no leader answers; enough voters answered"
`)
	if got := afterRefusal(n, 0); !strings.Contains(got, "OPENED") {
		t.Errorf("group 3's gate opened after its refusal: %q", got)
	}
	if !gateOpenedBefore(n, 0) {
		t.Error("group 3's gate opened before its refusal: not seen")
	}
}
