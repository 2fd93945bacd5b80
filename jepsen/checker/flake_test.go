package checker

import (
	"strings"
	"testing"

	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/jepsen/record"
)

// small is the flake workload's layout: 1 ms units, 8 workers, 16 ids per
// unit.
var small = flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 41, WorkerBits: 3, SequenceBits: 4}

// wall0 is the harness's wall clock at the start of the synthetic runs.
var wall0 = flake.DefaultEpoch.UnixMilli() + 86_400_000

// id composes an id of small at ms after wall0, worker w, sequence s.
func id(ms int, w, s uint64) uint64 {
	return uint64(small.Compose(small.Unit(wall0+int64(ms)), w, s))
}

func (b *h) namespace(name string, l flake.Layout, obfuscation string) *h {
	return b.add(record.Op{Client: record.HarnessClient, F: record.NamespaceInfo, Namespace: name, Layout: &l, Obfuscation: obfuscation, Type: record.Info})
}

// ids records an ok ids call of namespace "ns" from start to end (ms since
// wall0, which is also the recorder's origin).
func (b *h) ids(client, holder string, start, end int, vals ...uint64) *h {
	return b.add(record.Op{Client: client, Holder: holder, F: record.IDs, Namespace: "ns", Count: uint32(len(vals)), Values: vals,
		Invoke: ms(start), Complete: ms(end), WallMs: wall0 + int64(start)})
}

func (b *h) finalIDs(node string, typ string, vals ...uint64) *h {
	return b.add(record.Op{Client: "final-" + node, Node: node, F: record.IDs, Namespace: "ns", Count: uint32(max(len(vals), 1)), Values: vals,
		Type: typ, Invoke: ms(5000), Complete: ms(5001), WallMs: wall0 + 5000})
}

// validIDs is a flake history with nothing wrong: two holders of worker 1
// one after the other (the second above the first), a concurrent call of
// worker 2 with a smaller id, borrowing across units, and final calls.
func validIDs() *h {
	b := &h{}
	b.namespace("ns", small, "").
		ids("g0", "g0.1", 0, 2, id(0, 1, 0), id(0, 1, 1), id(1, 1, 0)).
		ids("p-n1-0", "n1", 1, 3, id(0, 2, 0)).
		ids("g0", "g0.2", 10, 12, id(40, 1, 0)). // a new holder of worker 1, its range ahead
		ids("s0", "", 11, 14, id(11, 2, 0), id(11, 2, 1)).
		add(record.Op{Client: "p-n2-0", Node: "n2", F: record.IDs, Namespace: "ns", Count: 3, Type: record.Fail, Error: "unavailable",
			Invoke: ms(20), Complete: ms(21), WallMs: wall0 + 20}).
		finalIDs("n1", record.OK, id(5000, 2, 0)).
		finalIDs("n2", record.OK, id(5000, 3, 0))
	return b
}

func TestFlakeValid(t *testing.T) {
	r := Check(validIDs().ops, Options{})
	for _, name := range []string{"G1", "G2", "G3", "final-ids"} {
		if c := r.Checkers[name]; c == nil || c.Valid != Valid {
			t.Fatalf("%s: %+v", name, c)
		}
	}
	if r.Valid != Valid || r.Checkers["order"] != nil {
		t.Fatalf("valid flake history judged %s (sequence checkers: %v)", r.Valid, r.Checkers["order"])
	}
	st := r.Flake
	if st == nil || st.IDs != 9 || st.OKCalls != 6 || st.Calls != 7 || len(st.Namespaces) != 1 {
		t.Fatalf("stats %+v", st)
	}
	w := st.Namespaces[0].Workers
	if len(w) != 3 || w[0].Worker != 1 || w[0].IDs != 4 || w[0].Holders != 2 || w[1].Worker != 2 || w[1].Holders != 2 || w[1].Calls != 3 {
		t.Fatalf("workers %+v", w)
	}
}

func TestFlakeG1Duplicate(t *testing.T) {
	b := validIDs()
	dup := id(11, 2, 1)
	b.ids("g1", "g1.1", 30, 31, id(30, 4, 0), dup)
	r := Check(b.ops, Options{})
	g1 := r.Checkers["G1"]
	if g1.Valid != Invalid || g1.Counts["G1"] != 1 || r.Valid != Invalid {
		t.Fatalf("G1 %+v", g1)
	}
	a := g1.Anomalies[0]
	if a.Key != dup || len(a.Ops) != 2 || a.Ops[0].Client != "s0" || a.Ops[1].Client != "g1" || !strings.Contains(a.Msg, "returned twice") {
		t.Fatalf("anomaly %+v", a)
	}
	// A repeat inside one response counts too.
	b = validIDs()
	b.ids("g1", "g1.1", 30, 31, id(30, 4, 0), id(30, 4, 0))
	if g1 := Check(b.ops, Options{}).Checkers["G1"]; g1.Counts["G1"] != 1 || !strings.Contains(g1.Anomalies[0].Msg, "the same call") {
		t.Fatalf("G1 within a call: %+v", g1)
	}
	// The same id in two namespaces is fine.
	b = validIDs()
	b.namespace("other", small, "")
	b.add(record.Op{Client: "s1", F: record.IDs, Namespace: "other", Values: []uint64{dup}, Invoke: ms(40), Complete: ms(41), WallMs: wall0 + 40})
	if g1 := Check(b.ops, Options{}).Checkers["G1"]; g1.Valid != Valid {
		t.Fatalf("an id in two namespaces: %+v", g1)
	}
}

func TestFlakeG2(t *testing.T) {
	// Worker 1: a call that began after one completed got a smaller id
	// (a reused worker whose new range started below the old one's).
	b := validIDs()
	b.ids("g1", "g1.1", 30, 31, id(5, 1, 0))
	r := Check(b.ops, Options{})
	g2 := r.Checkers["G2"]
	if g2.Valid != Invalid || g2.Counts["G2"] != 1 || g2.Anomalies[0].Key != 1 {
		t.Fatalf("G2 %+v", g2)
	}
	if a := g2.Anomalies[0]; len(a.Ops) != 2 || a.Ops[0].Holder != "g0.2" || a.Ops[1].Holder != "g1.1" {
		t.Fatalf("G2 anomaly ops %+v", a.Ops)
	}
	// Concurrent calls may come in any order.
	b = validIDs()
	b.ids("g1", "g1.1", 11, 13, id(5, 1, 3))
	if g2 := Check(b.ops, Options{}).Checkers["G2"]; g2.Valid != Valid {
		t.Fatalf("concurrent calls: %+v", g2)
	}
	// One response's ids must strictly increase.
	b = validIDs()
	b.ids("g1", "g1.1", 30, 31, id(30, 5, 1), id(30, 5, 0))
	if g2 := Check(b.ops, Options{}).Checkers["G2"]; g2.Counts["G2-response"] != 1 || g2.Valid != Invalid {
		t.Fatalf("G2-response %+v", g2)
	}
	// An obfuscated namespace is not checked.
	b = &h{}
	b.namespace("ns", small, "ff1").ids("g0", "", 0, 1, 900).ids("g0", "", 2, 3, 100, 50)
	if g2 := Check(b.ops, Options{}).Checkers["G2"]; g2.Valid != Valid || len(g2.Notes) == 0 {
		t.Fatalf("obfuscated: %+v", g2)
	}
}

func TestFlakeG3(t *testing.T) {
	// An id 5 s ahead of its call.
	b := validIDs()
	b.ids("g1", "g1.1", 30, 31, id(5030, 4, 0))
	g3 := Check(b.ops, Options{}).Checkers["G3"]
	if g3.Valid != Invalid || g3.Counts["G3"] != 1 || !strings.Contains(g3.Anomalies[0].Msg, "4.999s from its call") {
		t.Fatalf("G3 %+v", g3)
	}
	// And one 2 s behind.
	b = validIDs()
	b.ids("g1", "g1.1", 3000, 3001, id(1000, 4, 0))
	if g3 := Check(b.ops, Options{}).Checkers["G3"]; g3.Counts["G3"] != 1 {
		t.Fatalf("G3 behind %+v", g3)
	}
	// Within a second of the call is fine, on either side.
	b = validIDs()
	b.ids("g1", "g1.1", 3000, 3010, id(2001, 4, 0), id(4009, 4, 0))
	if g3 := Check(b.ops, Options{}).Checkers["G3"]; g3.Valid != Valid {
		t.Fatalf("G3 within bounds %+v", g3)
	}
	// A run with a clock fault is not checked, and says so.
	b = validIDs()
	b.ids("g1", "g1.1", 30, 31, id(5030, 4, 0)).fault(1, "clock-all", 25, 35)
	g3 = Check(b.ops, Options{}).Checkers["G3"]
	if g3.Valid != Valid || len(g3.Anomalies) != 0 || !strings.Contains(g3.Notes[0], "not checked") || !strings.Contains(g3.Notes[0], "clock-all") ||
		!strings.Contains(strings.Join(g3.Notes, " "), "measured only: 1 calls had an id more than 1s") {
		t.Fatalf("G3 with a clock fault %+v", g3)
	}
}

func TestFlakeFinalIDs(t *testing.T) {
	b := validIDs()
	b.finalIDs("n3", record.Fail)
	r := Check(b.ops, Options{})
	if f := r.Checkers["final-ids"]; f.Valid != Unknown || !strings.Contains(strings.Join(f.Notes, " "), "n3: no successful") || r.Valid != Unknown {
		t.Fatalf("final-ids %+v, run %s", f, r.Valid)
	}
	b = &h{}
	b.namespace("ns", small, "").ids("g0", "", 0, 1, id(0, 1, 0))
	if f := Check(b.ops, Options{}).Checkers["final-ids"]; f.Valid != Unknown {
		t.Fatalf("no final calls: %+v", f)
	}
}
