package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func names(fs []Fault) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return out
}

func TestParse(t *testing.T) {
	fs, skipped, err := Parse("kill,pause-leader,partition", 3, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kill-leader", "kill-random", "kill-minority", "pause-leader", "partition-leader", "partition-halves", "partition-bridge"}
	if !slices.Equal(names(fs), want) {
		t.Errorf("got %v, want %v", names(fs), want)
	}
	if len(skipped) != 1 || !strings.HasPrefix(skipped[0], "partition-ring") {
		t.Errorf("skipped %v, want partition-ring (needs 5 nodes)", skipped)
	}
	// Without namespaces, network faults are skipped, process faults stay.
	fs, skipped, err = Parse("kill-leader,partition-leader,loss", 3, false)
	if err != nil || !slices.Equal(names(fs), []string{"kill-leader"}) || len(skipped) != 3 {
		t.Errorf("loopback: %v %v %v", names(fs), skipped, err)
	}
	if fs, _, err := Parse("none", 3, true); err != nil || len(fs) != 0 {
		t.Errorf("none: %v %v", fs, err)
	}
	// Membership faults: a group, implemented, and possible on loopback.
	fs, skipped, err = Parse("membership,kill-leader", 3, false)
	if want := []string{"member-remove", "member-return", "member-wipe", "kill-leader"}; err != nil || !slices.Equal(names(fs), want) || len(skipped) != 0 {
		t.Errorf("membership: %v %v %v, want %v", names(fs), skipped, err, want)
	}
	for _, f := range fs {
		if !f.Implemented() {
			t.Errorf("%s not implemented", f.Name)
		}
	}
	if _, skipped, err := Parse("membership", 2, true); err != nil || len(skipped) != 3 {
		t.Errorf("membership on 2 nodes: skipped %v, %v", skipped, err)
	}
	for _, bad := range []string{"frobnicate", "kill-leader,frobnicate", "member-remove,bogus"} {
		if _, _, err := Parse(bad, 3, true); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if _, _, err := Parse("member-wipe", 2, true); err == nil {
		t.Error("member-wipe named explicitly on 2 nodes accepted")
	}
	if _, _, err := Parse("partition-ring", 3, true); err == nil {
		t.Error("partition-ring named explicitly on 3 nodes accepted")
	}
	if fs, _, err := Parse("partition-ring", 5, true); err != nil || len(fs) != 1 {
		t.Errorf("ring on 5: %v %v", fs, err)
	}
	// Weights: a fault or a group listed W times.
	fs, _, err = Parse("stale-copy*3,kill-leader,pause*2", 3, true)
	want = []string{"stale-copy", "stale-copy", "stale-copy", "kill-leader", "pause-leader", "pause-leader", "pause-minority", "pause-minority"}
	if err != nil || !slices.Equal(names(fs), want) {
		t.Errorf("weights: %v %v, want %v", names(fs), err, want)
	}
	if got := Names(fs); !slices.Equal(got, []string{"stale-copy*3", "kill-leader", "pause-leader*2", "pause-minority*2"}) {
		t.Errorf("Names: %v", got)
	}
	for _, bad := range []string{"kill-leader*0", "kill-leader*21", "kill-leader*x", "kill-leader*2x", "kill-leader*"} {
		if _, _, err := Parse(bad, 3, true); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestEveryFaultDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range All {
		if f.Help == "" || f.Class == "" || seen[f.Name] {
			t.Errorf("fault %+v", f)
		}
		seen[f.Name] = true
	}
	for g, members := range Groups {
		for _, m := range members {
			if !seen[m] {
				t.Errorf("group %s names unknown fault %s", g, m)
			}
		}
	}
}

// sees returns the nodes each node can talk to (itself included).
func sees(g Grudge, n int) map[int][]int {
	out := map[int][]int{}
	for a := range n {
		for b := range n {
			if !slices.Contains(g[a], b) && !slices.Contains(g[b], a) {
				out[a] = append(out[a], b)
			}
		}
	}
	return out
}

func TestMajoritiesRing(t *testing.T) {
	// 5 nodes: every node sees itself and its two neighbours, a bare
	// majority; no two see the same one; every cut is both ways.
	ring := []int{3, 0, 4, 1, 2}
	g := MajoritiesRing(ring)
	s := sees(g, 5)
	views := map[string]bool{}
	for a := range 5 {
		if len(s[a]) != 3 {
			t.Errorf("node %d sees %v, want a bare majority", a, s[a])
		}
		views[fmt.Sprint(s[a])] = true
		for _, b := range g[a] {
			if !slices.Contains(g[b], a) {
				t.Errorf("%d drops %d but not the reverse", a, b)
			}
		}
	}
	if len(views) != 5 {
		t.Errorf("%d distinct majorities, want 5: %v", len(views), views)
	}
	if !slices.Equal(s[3], []int{0, 2, 3}) {
		t.Errorf("node 3 (between 2 and 0 in the ring) sees %v", s[3])
	}
	// 7 nodes: each node keeps a window of 4 (as in Jepsen, the cuts are
	// then not all symmetric).
	g = MajoritiesRing([]int{0, 1, 2, 3, 4, 5, 6})
	for a := range 7 {
		if len(g[a]) != 3 {
			t.Errorf("n=7: node %d drops %v, want 3 nodes", a, g[a])
		}
	}
}

func TestBridgeAndComplete(t *testing.T) {
	g := Bridge(2, []int{0, 1}, []int{3, 4})
	s := sees(g, 5)
	if len(s[2]) != 5 {
		t.Errorf("bridge sees %v, want everyone", s[2])
	}
	if !slices.Equal(s[0], []int{0, 1, 2}) || !slices.Equal(s[4], []int{2, 3, 4}) {
		t.Errorf("halves see %v and %v", s[0], s[4])
	}
	g = Complete([]int{1}, []int{0, 2})
	if !slices.Equal(g[1], []int{0, 2}) || !slices.Equal(g[0], []int{1}) || !slices.Equal(g[2], []int{1}) {
		t.Errorf("isolate 1: %v", g)
	}
	if d := g.Describe(func(i int) string { return []string{"a", "b", "c"}[i] }); d != "a⊘b b⊘a+c c⊘b" {
		t.Errorf("describe: %q", d)
	}
}

func TestMinority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 3: 1, 5: 2, 7: 3} {
		if got := minority(n); got != want {
			t.Errorf("minority(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestOperatorGroup(t *testing.T) {
	fs, skipped, err := Parse("operator", 3, false)
	want := []string{"stale-copy", "wipe-restart", "restore-mistake", "lease-change", "disk-full"}
	if err != nil || !slices.Equal(names(fs), want) || len(skipped) != 0 {
		t.Errorf("operator: %v %v %v, want %v", names(fs), skipped, err, want)
	}
	for _, f := range fs {
		if !f.Implemented() || f.Class != Operator {
			t.Errorf("%s: implemented %v, class %s", f.Name, f.Implemented(), f.Class)
		}
	}
	all, _, _ := Parse("all", 5, true)
	for _, f := range all {
		if f.Class == Operator {
			t.Errorf("all includes operator fault %s", f.Name)
		}
	}
	if _, _, err := Parse("disk-full", 2, true); err == nil {
		t.Error("disk-full named explicitly on 2 nodes accepted")
	}
}

func TestParseClockAndHolder(t *testing.T) {
	fs, skipped, err := Parse("clock,holder", 3, true)
	want := []string{"clock-holder", "clock-leader", "clock-all", "clock-restart", "pause-holder", "partition-holder"}
	if err != nil || !slices.Equal(names(fs), want) || len(skipped) != 0 {
		t.Fatalf("got %v %v %v, want %v", names(fs), skipped, err, want)
	}
	// Clock faults need no network namespaces; partition-holder does.
	fs, skipped, err = Parse("clock,holder", 3, false)
	if err != nil || len(fs) != 5 || len(skipped) != 1 || !strings.HasPrefix(skipped[0], "partition-holder") {
		t.Errorf("loopback: %v %v %v", names(fs), skipped, err)
	}
	// The holder faults last past the flake lease and range unless set.
	e := &Env{HolderPause: [2]time.Duration{time.Second, 2 * time.Second}}
	for _, c := range []struct {
		name string
		want *[2]time.Duration
	}{
		{"pause-holder", &e.HolderPause},
		{"partition-holder", &DefaultHolderPartition},
		{"clock-all", nil},
	} {
		f, _ := byName(c.name)
		got := f.holderDuration(e)
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("%s: duration %v, want %v", c.name, got, c.want)
		}
	}
	if DefaultHolderPause[0] <= 10*time.Second || DefaultHolderPartition[0] <= 30*time.Second {
		t.Error("default holder faults do not outlast the flake lease (10s) and range (30s)")
	}
	ctx := context.WithValue(context.Background(), durKey{}, 3*time.Second)
	if faultDuration(ctx) != 3*time.Second || faultDuration(context.Background()) != 0 {
		t.Error("faultDuration")
	}
}
