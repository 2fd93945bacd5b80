package nemesis

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/jepsen/nodes"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// The failover clock counts a group's time without a serving leader only
// while it should have one, and reports each stretch over the target once.
func TestFailoverClock(t *testing.T) {
	c := newFailoverClock(ms(1000), 2)
	at := 0
	step := func(counts bool, serving ...int) {
		c.observe(ms(at), counts, func(g int) bool { return slices.Contains(serving, g) })
		at += 100
	}
	// Both groups serve; then group 1 is not seen with a leader for 1.5 s,
	// of which 0.7 s do not count (no majority, say), then group 0 for
	// 1.4 s (from the last look that saw it served).
	for range 3 {
		step(true, 0, 1)
	}
	for range 8 {
		step(true, 0) // group 1: 0.8 s that count
	}
	for range 7 {
		step(false, 0) // not counted
	}
	step(true, 0, 1) // group 1 serves again: 0.8 s + a step counted, under the target
	for range 14 {
		step(true, 1) // group 0: 1.3 s
	}
	step(true, 0, 1)
	c.end(ms(at))
	if l := c.longest[1]; l < ms(800) || l > ms(900) {
		t.Errorf("group 1's longest stretch %v, want 0.8-0.9s (the time without a majority not counted)", l)
	}
	if l := c.longest[0]; l != ms(1400) {
		t.Errorf("group 0's longest stretch %v, want 1.4s", l)
	}
	if len(c.over) != 1 || c.over[0].group != 0 || c.over[0].from != ms(1800) || c.over[0].to != ms(3300) {
		t.Errorf("over the target: %+v", c.over)
	}
	// A stretch still open at the end is closed there.
	c = newFailoverClock(ms(500), 1)
	for i := range 10 {
		c.observe(ms(100*i), true, func(int) bool { return i == 0 })
	}
	c.end(ms(1000))
	if len(c.over) != 1 || c.over[0].from != 0 || c.over[0].to != ms(1000) {
		t.Errorf("open stretch: %+v", c.over)
	}
}

// A server that says it serves a group in three looks in a row, with the
// cut-off leader saying so in the middle one, overlapped its lease; fewer
// looks, or another term in between, prove nothing.
func TestOverlap(t *testing.T) {
	round := func(from int, serving map[string]uint64) servingRound {
		return servingRound{from: ms(from), to: ms(from + 5), serving: serving}
	}
	rounds := []servingRound{
		round(0, map[string]uint64{"n1": 3}),
		round(20, map[string]uint64{"n1": 3, "n3": 4}),
		round(40, map[string]uint64{"n3": 4}),
		round(60, map[string]uint64{"n3": 4}),
	}
	if id, _ := overlap(rounds, "n1"); id != "" {
		t.Errorf("n3's first look taken for an overlap with %s", id)
	}
	rounds[2] = round(40, map[string]uint64{"n1": 3, "n3": 5})
	if id, _ := overlap(rounds, "n1"); id != "" {
		t.Errorf("another term taken for the same lease: %s", id)
	}
	rounds[2] = round(40, map[string]uint64{"n1": 3, "n3": 4})
	if id, r := overlap(rounds, "n1"); id != "n3" || r.from != ms(40) {
		t.Errorf("overlap: %q at %v", id, r.from)
	}
	if first, last := firstLast(rounds, "n1", ms(10)); first != ms(20) || last != ms(45) {
		t.Errorf("n1 served %v..%v", first, last)
	}
	if first, _ := firstLast(rounds, "n2", 0); first != -1 {
		t.Errorf("n2 never served: %v", first)
	}
}

// A restarted server is admitted everywhere once a verdict opened each of
// its groups' gates (or its only group's).
func TestAdmittedEverywhere(t *testing.T) {
	dir := t.TempDir()
	n := &nodes.Node{ID: "n1", LogPath: filepath.Join(dir, "n1.log")}
	l := logger(t, n)
	l.Info("raft gate open: ...", "admission", string(admit.ByWitness), "id", "n1", "group", 0)
	l.Info("waiting", "admission", string(admit.QuorumWait), "id", "n1", "group", 1)
	if admittedEverywhere(n, 0, 2) {
		t.Error("group 1 waits, yet admitted everywhere")
	}
	off := n.LogSize()
	l.Info("raft gate open: ...", "admission", string(admit.ByLeader), "id", "n1", "group", 1)
	if !admittedEverywhere(n, 0, 2) || admittedEverywhere(n, off, 2) {
		t.Error("both groups' gates opened (one after the offset)")
	}
	m := &nodes.Node{ID: "n2", LogPath: filepath.Join(dir, "n2.log")}
	logger(t, m).Info("raft gate open: ...", "admission", string(admit.ByAnswers), "id", "n2")
	if !admittedEverywhere(m, 0, 1) {
		t.Error("its only group's gate opened")
	}
}

func TestParseFencing(t *testing.T) {
	faults, skipped, err := Parse("fencing", 3, true)
	if err != nil || len(skipped) != 0 {
		t.Fatal(err, skipped)
	}
	if got := Names(faults); !slices.Equal(got, []string{"stop-new-leader", "restore-source-returns", "restart-then-crash"}) {
		t.Errorf("fencing: %v", got)
	}
	spare := 0
	for _, f := range faults {
		if f.NeedsSpare() {
			spare++
		}
	}
	if spare != 1 {
		t.Errorf("%d faults need a spare slot", spare)
	}
	// Without namespaces, stop-new-leader (a partition) cannot run.
	faults, skipped, err = Parse("fencing", 3, false)
	if err != nil || len(faults) != 2 || len(skipped) != 1 {
		t.Errorf("loopback: %v, skipped %v, %v", Names(faults), skipped, err)
	}
	if _, _, err := Parse("restart-then-crash", 1, true); err == nil {
		t.Error("restart-then-crash on 1 node accepted")
	}
}
