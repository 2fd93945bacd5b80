package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/seqd/seqd/internal/history"
	"github.com/seqd/seqd/jepsen/record"
)

func TestLinearValidHistory(t *testing.T) {
	r := Check(valid().ops, Options{})
	l := r.Checkers["linear"]
	if l == nil || l.Valid != Valid || l.Counts["L"] != 0 || l.Counts["unknown"] != 0 {
		t.Fatalf("linear on a valid history: %+v", l)
	}
	if !strings.Contains(l.Notes[0], "2 keys") || !strings.Contains(l.Notes[0], "2 linearizable, 0 not, 0 unknown") {
		t.Errorf("notes: %q", l.Notes)
	}
}

// Each rule of the contract, broken by a hand-made history, is found by the
// linearizability check on its own.
func TestLinearFindsEachRule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *h)
		// order says whether the pairwise rules see it too.
		order bool
	}{
		{"C1: one value returned to two concurrent calls", func(b *h) {
			b.next("s0", 0, 10, k(1), 5).next("s1", 0, 10, k(1), 5)
		}, true},
		{"C1: a reserve's range overlaps a later take", func(b *h) {
			b.reserve("s0", 0, 1, 1, 10, 1, 10).next("s1", 0, 1, k(1), 7)
		}, true},
		{"C2: a take below one that completed before it began", func(b *h) {
			b.next("s0", 0, 1, k(1), 10).next("p-n2-0", 2, 3, k(1), 5)
		}, true},
		{"C3: a current below a take that completed before it began", func(b *h) {
			b.next("s0", 0, 1, k(1), 10).current("p-n2-0", 2, 3, k(1), 5)
		}, true},
		{"C3: a take not above a current that completed before it began", func(b *h) {
			b.current("s0", 0, 1, k(1), 20).next("p-n2-0", 2, 3, k(1), 15)
		}, true},
		{"C3: a take not above a jump a current read after a failover", func(b *h) {
			b.next("s0", 0, 1, k(1), 10).current("s1", 2, 3, k(1), 100).next("s0", 4, 5, k(1), 50)
		}, true},
		// Every pair is fine (the takes are concurrent with every other
		// call, the currents read nothing taken before them), but no
		// order is: the current of 3 comes after the current of 7, so
		// neither take can come before it (3 would be below it), nor
		// after the current of 7 (5 is not above 7).
		{"a chain of concurrent calls that only a total order shows", func(b *h) {
			b.next("s0", 0, 10, k(1), 10).next("s1", 0, 10, k(1), 5).
				current("p-n1-0", 1, 2, k(1), 7).current("p-n1-0", 3, 4, k(1), 3)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &h{}
			tc.build(b)
			l := Linear(b.ops, LinearOptions{}, 10)
			if l.Valid != Invalid || l.Counts["L"] != 1 || len(l.Anomalies) != 1 {
				t.Fatalf("linear: %+v", l)
			}
			a := l.Anomalies[0]
			if a.Rule != "L" || a.Key != 1 || len(a.Ops) == 0 || !strings.Contains(a.Msg, "not linearizable") {
				t.Errorf("anomaly: %+v", a)
			}
			o := Order(b.ops, 10)
			if seen := o.Valid == Invalid; seen != tc.order {
				t.Errorf("the pairwise rules see it: %v, want %v (%+v)", seen, tc.order, o.Counts)
			}
		})
	}
}

// What the contract allows is linearizable: gaps, a Current that reads a
// jump after a failover (and takes above it), concurrent calls in any
// order, reads that go down while nothing was taken.
func TestLinearAllowsWhatTheContractAllows(t *testing.T) {
	b := &h{}
	b.next("s0", 0, 1, k(1), 10).
		current("s1", 2, 3, k(1), 100). // a jump
		next("s0", 4, 5, k(1), 101).
		next("s0", 6, 20, k(1), 300).
		next("s1", 7, 19, k(1), 200). // concurrent with 300: may come first
		current("p-n1-0", 8, 9, k(1), 250).
		reserve("p-n2-0", 21, 22, 1, 5, 1000, 1004). // a gap
		current("s0", 23, 24, k(2), 7).
		current("s0", 25, 26, k(2), 3) // nothing taken from key 2
	if l := Linear(b.ops, LinearOptions{}, 10); l.Valid != Valid {
		t.Fatalf("linear: %+v", l)
	}
}

// A key's history is cut where nothing is in flight, and each part starts
// from the state every earlier call left.
func TestLinearSegments(t *testing.T) {
	ops := []history.Op{
		{Kind: history.Take, Key: 1, First: 1, Last: 1, Start: ms(0), End: ms(10)},
		{Kind: history.Read, Key: 1, First: 9, Last: 9, Start: ms(5), End: ms(6)},
		{Kind: history.Take, Key: 1, First: 2, Last: 4, Start: ms(10), End: ms(12)}, // begins as the first ends: concurrent
		{Kind: history.Take, Key: 1, First: 20, Last: 20, Start: ms(13), End: ms(14)},
		{Kind: history.Read, Key: 1, First: 20, Last: 20, Start: ms(15), End: ms(16)},
	}
	segs := segments(1, ops)
	if len(segs) != 3 {
		t.Fatalf("%d segments: %+v", len(segs), segs)
	}
	if len(segs[0].ops) != 3 || segs[0].init != (counterState{}) {
		t.Errorf("first: %+v", segs[0])
	}
	if len(segs[1].ops) != 1 || segs[1].init != (counterState{Last: 4, Bound: 9}) {
		t.Errorf("second: %+v", segs[1])
	}
	if len(segs[2].ops) != 1 || segs[2].init != (counterState{Last: 20, Bound: 9}) {
		t.Errorf("third: %+v", segs[2])
	}
}

// hard adds, on key 3 from at (ms), the chain of concurrent calls of
// TestLinearFindsEachRule (two takes, 10 and 5, then two Currents, 7 and
// 3), with n Currents of distinct values concurrent with all of it: no
// pair breaks a rule, and no order exists, but proving it means trying
// every subset of the n Currents before the first of the chain (2^n
// states), far beyond any time limit for n = 40.
func hard(b *h, at, n int) {
	for i := range n {
		b.current("s0", at, at+300, k(3), uint64(10+i))
	}
	b.next("s1", at, at+300, k(3), 10).next("s2", at, at+300, k(3), 5).
		current("p-n1-0", at+1, at+2, k(3), 7).current("p-n1-0", at+3, at+4, k(3), 3)
}

// A segment porcupine does not decide in time (40 concurrent Currents of
// distinct values: its search is exponential in them) is decided by the
// forced order: not linearizable, naming the two Currents; and the same
// many Currents without the chain of 7 then 3 are linearizable.
func TestLinearForcedOrderDecidesWhatTheSearchCannot(t *testing.T) {
	b := valid()
	hard(b, 3000, 40)
	opt := Options{Linear: LinearOptions{SegmentTimeout: 300 * time.Millisecond}}
	start := time.Now()
	r := Check(b.ops, opt)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the check took %v with a 300ms segment limit", took)
	}
	l := r.Checkers["linear"]
	if l.Valid != Invalid || l.Counts["unknown"] != 0 || l.Counts["L"] != 1 || l.Counts["decided by order"] != 1 {
		t.Fatalf("linear: %+v", l)
	}
	if m := l.Anomalies[0].Msg; !strings.Contains(m, "current → 7 by p-n1-0") || !strings.Contains(m, "current → 3 by p-n1-0") {
		t.Errorf("anomaly: %s", m)
	}
	if r.Valid != Invalid {
		t.Errorf("the run's verdict: %v", r.Valid)
	}
	// Porcupine, given the time, agrees for small n.
	b = valid()
	hard(b, 3000, 8)
	if l := Linear(b.ops, LinearOptions{}, 10); l.Valid != Invalid || l.Counts["decided by order"] != 0 {
		t.Errorf("with 8 Currents: %+v", l)
	}
	// Without the chain: linearizable, decided by the order in time.
	b = valid()
	for i := range 40 {
		b.current("s0", 3000, 3300, k(3), uint64(10+i))
	}
	b.next("s1", 3000, 3300, k(3), 100).next("s2", 3000, 3300, k(3), 5)
	if l := Linear(b.ops, LinearOptions{SegmentTimeout: 300 * time.Millisecond}, 10); l.Valid != Valid || l.Counts["unknown"] != 0 {
		t.Errorf("40 concurrent Currents and two takes: %+v", l)
	}
}

// The forced order agrees with porcupine on every hand-made history of
// the rules, linearizable or not.
func TestForcedOrderAgreesWithPorcupine(t *testing.T) {
	cases := map[string]func(b *h){
		"valid":            func(b *h) {},
		"C1":               func(b *h) { b.next("s0", 900, 910, k(1), 5000).next("s1", 900, 910, k(1), 5000) },
		"C2":               func(b *h) { b.next("s0", 900, 901, k(1), 9000).next("p-n2-0", 902, 903, k(1), 8000) },
		"C3 current":       func(b *h) { b.next("s0", 900, 901, k(1), 9000).current("p-n2-0", 902, 903, k(1), 8000) },
		"C3 take":          func(b *h) { b.current("s0", 900, 901, k(1), 9000).next("p-n2-0", 902, 903, k(1), 8500) },
		"chain":            func(b *h) { hard(b, 900, 3) },
		"reserve overlaps": func(b *h) { b.reserve("s0", 900, 901, 1, 7000, 1, 10).next("s1", 900, 901, k(1), 7005) },
	}
	for name, build := range cases {
		b := valid()
		build(b)
		byIndex := map[int64]record.Op{}
		for _, o := range b.ops {
			byIndex[o.Index] = o
		}
		byKey := map[uint64][]history.Op{}
		for _, o := range record.ToHistory(b.ops) {
			byKey[o.Key] = append(byKey[o.Key], o)
		}
		illegal := 0
		for key, ops := range byKey {
			for _, s := range segments(key, ops) {
				res := porcupine.CheckOperations(CounterModel(s.init), porcupineOps(s.ops, byIndex))
				if ok, _, _ := forcedOrder(s); ok != res {
					t.Errorf("%s, key %d, segment of %d calls: porcupine %v, forced order %v", name, key, len(s.ops), res, ok)
				}
				if !res {
					illegal++
				}
			}
		}
		if (name == "valid") != (illegal == 0) {
			t.Errorf("%s: %d segments not linearizable", name, illegal)
		}
	}
}

// Segments the budget does not reach are unknown too.
func TestLinearBudget(t *testing.T) {
	l := Linear(valid().ops, LinearOptions{Budget: time.Nanosecond}, 10)
	if l.Valid != Unknown || l.Counts["unknown"] == 0 {
		t.Fatalf("linear: %+v", l)
	}
	if !strings.Contains(strings.Join(l.Notes, "\n"), "budget of 1ns ran out") {
		t.Errorf("notes: %q", l.Notes)
	}
}

// Failed and unknown calls constrain nothing: a timed-out call whose
// values nobody saw only leaves a gap.
func TestLinearIgnoresCallsWithoutAnswer(t *testing.T) {
	b := &h{}
	b.next("s0", 0, 1, k(1), 10).
		add(record.Op{Client: "s1", F: record.Next, Keys: k(1), Values: []uint64{3}, Type: record.Info, Invoke: ms(2), Complete: ms(3)})
	b.next("s0", 4, 5, k(1), 11)
	if l := Linear(b.ops, LinearOptions{}, 10); l.Valid != Valid {
		t.Fatalf("linear: %+v", l)
	}
}
