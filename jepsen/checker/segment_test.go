package checker

import (
	"testing"

	"github.com/seqd/seqd/jepsen/record"
)

// TestSegments: values segments handed out are checked for uniqueness with
// every Next and Reserve of their keys (S1) and for order per segment (S2);
// values of different segments may interleave in any order.
func TestSegments(t *testing.T) {
	seg := func(client string, key uint64, vals ...uint64) record.Op {
		return record.Op{Client: client, F: record.Segment, Type: record.OK, Keys: []uint64{key}, Count: uint32(len(vals)), Values: vals}
	}
	ok := []record.Op{
		seg("g0", 1, 1, 2, 3),
		seg("g1", 1, 101, 102),
		seg("g0", 1, 4),
		seg("g1", 1, 201), // another range of g1: trend-increasing only
		{Client: "s0", F: record.Next, Type: record.OK, Keys: []uint64{1}, Values: []uint64{301}},
		{Client: "s0", F: record.Reserve, Type: record.OK, Keys: []uint64{1}, Count: 10, Values: []uint64{310, 319}},
		seg("g2", 2, 5), // another key may reuse the numbers
		{Client: "s1", F: record.Next, Type: record.Info, Keys: []uint64{1}, Values: []uint64{3}}, // not ok: no constraint
	}
	if r := Segments(ok, 10); r.Valid != Valid {
		t.Fatalf("a valid history: %+v", r)
	}
	for name, c := range map[string]struct {
		op   record.Op
		rule string
	}{
		"a value two segments handed out":       {seg("g2", 1, 102), "S1"},
		"a segment value inside a Reserve":      {seg("g3", 1, 315), "S1"},
		"a Next value a segment handed out":     {record.Op{Client: "s2", F: record.Next, Type: record.OK, Keys: []uint64{1}, Values: []uint64{2}}, "S1"},
		"a Reserve over a segment's values":     {record.Op{Client: "s2", F: record.Reserve, Type: record.OK, Keys: []uint64{1}, Count: 5, Values: []uint64{199, 203}}, "S1"},
		"a segment going back":                  {seg("g0", 1, 3), "S1"},
		"a segment going back to a fresh value": {seg("g1", 1, 150), "S2"},
	} {
		r := Segments(append(append([]record.Op(nil), ok...), c.op), 10)
		if r.Valid != Invalid || r.Counts[c.rule] == 0 {
			t.Errorf("%s: %+v, want %s", name, r.Counts, c.rule)
		}
	}
}
