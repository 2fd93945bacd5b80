package history

import (
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func take(key, first, last uint64, start, end int) Op {
	return Op{Kind: Take, Key: key, First: first, Last: last, Start: ms(start), End: ms(end)}
}

func read(key, v uint64, start, end int) Op {
	return Op{Kind: Read, Key: key, First: v, Last: v, Start: ms(start), End: ms(end)}
}

func rules(as []Anomaly) map[string]int {
	m := map[string]int{}
	for _, a := range as {
		m[a.Rule]++
	}
	return m
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		ops  []Op
		want map[string]int
	}{
		{"valid sequential", []Op{take(1, 1, 1, 0, 1), take(1, 2, 2, 2, 3), read(1, 2, 4, 5), take(1, 5, 9, 6, 7)}, map[string]int{}},
		{"valid concurrent out of order", []Op{take(1, 2, 2, 0, 10), take(1, 1, 1, 1, 9)}, map[string]int{}},
		{"gaps are fine", []Op{take(1, 1, 1, 0, 1), take(1, 10001, 10001, 2, 3)}, map[string]int{}},
		{"keys are independent", []Op{take(1, 5, 5, 0, 1), take(2, 1, 1, 2, 3)}, map[string]int{}},
		{"duplicate", []Op{take(1, 3, 3, 0, 1), take(1, 3, 3, 0, 1)}, map[string]int{"C1": 1, "C2": 0}},
		{"overlapping reserve", []Op{take(1, 1, 10, 0, 1), take(1, 10, 12, 0, 1)}, map[string]int{"C1": 1}},
		{"decrease after completion", []Op{take(1, 5, 5, 0, 1), take(1, 4, 4, 2, 3)}, map[string]int{"C2": 1}},
		{"reserve then smaller", []Op{take(1, 5, 9, 0, 1), take(1, 7, 7, 2, 3)}, map[string]int{"C1": 1, "C2": 1}},
		{"stale current", []Op{take(1, 5, 5, 0, 1), read(1, 4, 2, 3)}, map[string]int{"C3": 1}},
		{"current from the future", []Op{read(1, 6, 0, 1), take(1, 6, 6, 2, 3)}, map[string]int{"C3": 1}},
		{"current concurrent with take", []Op{read(1, 6, 0, 3), take(1, 6, 6, 1, 2)}, map[string]int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := rules(Check(c.ops, 0))
			for _, r := range []string{"C1", "C2", "C3"} {
				if got[r] != c.want[r] {
					t.Errorf("%s: got %d anomalies, want %d (%v)", r, got[r], c.want[r], Check(c.ops, 0))
				}
			}
		})
	}
}

func TestCheckLimit(t *testing.T) {
	var ops []Op
	for i := range 50 {
		ops = append(ops, take(1, 7, 7, i*2, i*2+1))
	}
	if n := len(Check(ops, 3)); n != 6 { // 3 C1 + 3 C2
		t.Fatalf("got %d anomalies, want 6", n)
	}
}

func TestCheckCounts(t *testing.T) {
	var ops []Op
	for i := range 50 {
		ops = append(ops, take(1, 7, 7, i*2, i*2+1))
	}
	as, counts := CheckCounts(ops, 3)
	if len(as) != 6 || counts["C1"] != 49 || counts["C2"] != 49 {
		t.Fatalf("got %d anomalies and counts %v, want 6 and 49 C1, 49 C2", len(as), counts)
	}
	ops[3].Ref = 42
	as, _ = CheckCounts(ops[2:5], 0)
	found := false
	for _, a := range as {
		for _, o := range a.Ops {
			found = found || o.Ref == 42
		}
	}
	if !found {
		t.Fatalf("Ref not carried into anomalies: %v", as)
	}
}
