package checker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/seqd/seqd/jepsen/record"
)

// h builds synthetic histories; times are in milliseconds.
type h struct{ ops []record.Op }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func (b *h) add(o record.Op) *h {
	o.Index = int64(len(b.ops))
	if o.Type == "" {
		o.Type = record.OK
	}
	if o.Node == "" {
		o.Node = "n1"
	}
	b.ops = append(b.ops, o)
	return b
}

func (b *h) next(client string, start, end int, keys []uint64, vals ...uint64) *h {
	return b.add(record.Op{Client: client, F: record.Next, Keys: keys, Values: vals, Invoke: ms(start), Complete: ms(end)})
}

func (b *h) reserve(client string, start, end int, key uint64, count uint32, first, last uint64) *h {
	return b.add(record.Op{Client: client, F: record.Reserve, Keys: []uint64{key}, Count: count, Values: []uint64{first, last}, Invoke: ms(start), Complete: ms(end)})
}

func (b *h) current(client string, start, end int, keys []uint64, vals ...uint64) *h {
	return b.add(record.Op{Client: client, F: record.Current, Keys: keys, Values: vals, Invoke: ms(start), Complete: ms(end)})
}

func (b *h) failed(client string, start, end int, typ string) *h {
	return b.add(record.Op{Client: client, F: record.Next, Keys: []uint64{1}, Type: typ, Error: "unavailable", Invoke: ms(start), Complete: ms(end)})
}

func (b *h) fault(id int, name string, start, end int) *h {
	b.add(record.Op{Client: record.NemesisClient, F: record.FaultStart, Fault: name, FaultID: id, Class: "process", Targets: []string{"n1"}, Type: record.Info, Invoke: ms(start), Complete: ms(start)})
	return b.add(record.Op{Client: record.NemesisClient, F: record.FaultHeal, Fault: name, FaultID: id, Class: "process", Targets: []string{"n1"}, Type: record.Info, Invoke: ms(end), Complete: ms(end)})
}

func (b *h) final(at int, keys []uint64, vals ...uint64) *h {
	return b.add(record.Op{Client: "final", F: record.Current, Keys: keys, Values: vals, Invoke: ms(at), Complete: ms(at + 1)})
}

func k(keys ...uint64) []uint64 { return keys }

// valid is a history with every kind of call, a fault, and nothing wrong.
func valid() *h {
	b := &h{}
	b.next("s0", 0, 2, k(1), 1).
		next("s1", 1, 3, k(1, 2, 1), 2, 1, 3). // concurrent with the first: any order
		reserve("p-n1-0", 4, 5, 1, 10, 4, 13).
		current("p-n2-0", 6, 7, k(1, 2), 13, 1).
		failed("p-n3-0", 8, 9, record.Fail).
		failed("p-n3-1", 8, 1008, record.Info).
		fault(1, "kill-leader", 10, 1010).
		next("s0", 1500, 1501, k(1), 10014). // a failover skips values: a gap is fine
		current("s1", 1502, 1503, k(1), 10014).
		final(2000, k(1, 2), 10014, 1)
	return b
}

func TestValidHistory(t *testing.T) {
	r := Check(valid().ops, Options{})
	if r.Valid != Valid {
		b, _ := json.MarshalIndent(r.Checkers, "", " ")
		t.Fatalf("valid history judged %s: %s", r.Valid, b)
	}
	if r.Ops.Total != 8 || r.Ops.OK != 6 || r.Ops.Fail != 1 || r.Ops.Info != 1 {
		t.Errorf("counts %+v, want 8 calls: 6 ok, 1 fail, 1 info (final reads and nemesis excluded)", r.Ops)
	}
	if r.Ops.ByF["next-multi"]["ok"] != 1 {
		t.Errorf("by f: %v", r.Ops.ByF)
	}
}

// Each case adds one anomaly to the valid history.
func TestAnomalies(t *testing.T) {
	cases := []struct {
		name    string
		add     func(b *h)
		checker string
		rule    string
		// linear: the linearizability check finds it too.
		linear bool
	}{
		{"C1 duplicate between concurrent calls", func(b *h) { b.next("s2", 1, 3, k(2), 1) }, "order", "C1", true},
		{"C1 reserve overlapping a next", func(b *h) { b.next("s2", 4, 5, k(1), 7) }, "order", "C1", true},
		{"C2 smaller value after a completed call", func(b *h) { b.next("p-n1-1", 1600, 1601, k(1), 20) }, "order", "C2", true},
		{"C2 deposed leader answers on another node", func(b *h) {
			b.add(record.Op{Client: "p-n2-1", Node: "n2", F: record.Next, Keys: k(1), Values: []uint64{14}, Invoke: ms(1600), Complete: ms(1601)})
		}, "order", "C2", true},
		{"C3 stale current", func(b *h) { b.current("p-n1-1", 1600, 1601, k(1), 13) }, "order", "C3", true},
		{"C3 current from the future", func(b *h) { b.current("p-n1-1", 1504, 1505, k(2), 5); b.next("s3", 1506, 1507, k(2), 5) }, "order", "C3", true},
		{"repeated key not increasing", func(b *h) { b.next("s2", 1600, 1601, k(3, 3), 9, 8) }, "shape", "repeat-order", false},
		{"value 0", func(b *h) { b.next("s2", 1600, 1601, k(4), 0) }, "shape", "shape", true},
		{"wrong number of values", func(b *h) { b.next("s2", 1600, 1601, k(4, 5), 7) }, "shape", "shape", false},
		{"reserve of the wrong size", func(b *h) { b.reserve("s2", 1600, 1601, 6, 5, 1, 3) }, "shape", "shape", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := valid()
			c.add(b)
			r := Check(b.ops, Options{})
			if r.Valid != Invalid {
				t.Fatalf("verdict %s, want false", r.Valid)
			}
			res := r.Checkers[c.checker]
			if res.Valid != Invalid || res.Counts[c.rule] == 0 {
				t.Fatalf("%s: %+v, want a %s anomaly", c.checker, res, c.rule)
			}
			for name, other := range r.Checkers {
				if name == c.checker {
					continue
				}
				if want := name == "linear" && c.linear; (other.Valid == Invalid) != want {
					t.Errorf("checker %s: %+v (want invalid: %v)", name, other, want)
				}
			}
			a := res.Anomalies[0]
			if a.Rule != c.rule || len(a.Ops) == 0 || a.Msg == "" {
				t.Errorf("anomaly %+v", a)
			}
			for _, o := range a.Ops {
				if o.Client == "" || o.F == "" {
					t.Errorf("anomaly op not mapped back to its record: %+v", o)
				}
			}
		})
	}
}

func TestRestart(t *testing.T) {
	b := &h{}
	b.next("s0", 0, 1, k(1), 100).
		fault(1, "kill-all", 10, 20).
		next("s0", 30, 31, k(1), 101).
		final(50, k(1), 101)
	if r := Check(b.ops, Options{}); r.Valid != Valid || r.Checkers["restart"].Notes[0] != "1 full-cluster restarts checked" {
		t.Fatalf("valid restart: %s %+v", r.Valid, r.Checkers["restart"])
	}
	// A value at or below one acknowledged before the cluster went down.
	b.next("p-n2-0", 40, 41, k(1), 99)
	r := Check(b.ops, Options{})
	if got := r.Checkers["restart"]; got.Valid != Invalid || got.Counts["R1"] != 1 {
		t.Fatalf("restart: %+v, want one R1", got)
	}
	// wipe-restart is a full-cluster restart too.
	b = &h{}
	b.next("s0", 0, 1, k(1), 100).fault(1, "wipe-restart", 10, 20).next("s0", 30, 31, k(1), 100).final(50, k(1), 101)
	if got := Check(b.ops, Options{}).Checkers["restart"]; got.Valid != Invalid || got.Counts["R1"] != 1 {
		t.Fatalf("wipe-restart: %+v, want one R1", got)
	}
	// Calls in flight across the restart do not count.
	b = &h{}
	b.next("s0", 0, 15, k(1), 100).fault(1, "kill-all", 10, 20).next("s0", 18, 31, k(1), 50).final(50, k(1), 101)
	if got := Check(b.ops, Options{}).Checkers["restart"]; got.Valid != Valid {
		t.Fatalf("overlapping calls flagged: %+v", got)
	}
}

func TestFinalReadsMissingIsUnknown(t *testing.T) {
	b := &h{}
	b.next("s0", 0, 1, k(1), 1)
	b.add(record.Op{Client: "final", F: record.Current, Keys: k(1), Type: record.Info, Error: "deadline", Invoke: ms(5), Complete: ms(30005)})
	r := Check(b.ops, Options{})
	if r.Valid != Unknown || r.Checkers["final-reads"].Valid != Unknown {
		t.Fatalf("verdict %s, final-reads %+v; want unknown", r.Valid, r.Checkers["final-reads"])
	}
	// An anomaly still makes the verdict false.
	b.next("s1", 2, 3, k(1), 1)
	if r := Check(b.ops, Options{}); r.Valid != Invalid {
		t.Fatalf("verdict %s, want false", r.Valid)
	}
}

func TestNoSuccessIsUnknown(t *testing.T) {
	b := &h{}
	b.failed("s0", 0, 1, record.Fail).final(5, k(1), 0)
	if r := Check(b.ops, Options{}); r.Valid != Unknown {
		t.Fatalf("verdict %s with no successful call, want unknown", r.Valid)
	}
}

func TestLimitCountsAll(t *testing.T) {
	b := &h{}
	b.next("s0", 0, 1, k(1), 100)
	for i := range 30 {
		b.next("p", 10+2*i, 11+2*i, k(1), uint64(50+i))
	}
	r := Check(b.ops, Options{Limit: 3})
	o := r.Checkers["order"]
	if o.Counts["C2"] != 30 || len(o.Anomalies) != 3 {
		t.Fatalf("counts %v with %d examples, want 30 C2 and 3 examples", o.Counts, len(o.Anomalies))
	}
}

func TestAvailability(t *testing.T) {
	b := &h{}
	// ok every 10ms for 1s, nothing between 1000 and 3000 (a fault from
	// 1200 to 2500), then ok again from 3000.
	for i := range 100 {
		b.next("s0", i*10, i*10+1, k(1), uint64(i+1))
	}
	b.failed("s1", 1500, 1600, record.Fail)
	b.fault(1, "pause-leader", 1200, 2500)
	for i := range 10 {
		b.next("s0", 3000+i*10, 3001+i*10, k(1), uint64(1000+i))
	}
	b.final(3200, k(1), 2000)
	a := Check(b.ops, Options{}).Availability
	if got, want := time.Duration(a.LongestGap), ms(3001-991); got != want {
		t.Errorf("longest gap %v, want %v", got, want)
	}
	if len(a.Faults) != 1 {
		t.Fatalf("faults %+v", a.Faults)
	}
	f := a.Faults[0]
	if got, want := time.Duration(f.Outage), ms(3001-1200); got != want {
		t.Errorf("outage %v, want %v (from the fault's start)", got, want)
	}
	if got, want := time.Duration(f.AfterHeal), ms(3001-2500); got != want {
		t.Errorf("first ok after heal %v, want %v", got, want)
	}
	if a.OKRate < 0.99 || a.OKRate >= 1 {
		t.Errorf("ok rate %v", a.OKRate)
	}
	if len(a.PerSecond) != 4 || a.PerSecond[0].OK != 100 || a.PerSecond[1].Fail != 1 {
		t.Errorf("per second %+v", a.PerSecond)
	}
}

func TestValidityJSON(t *testing.T) {
	for _, v := range []Validity{Valid, Invalid, Unknown} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back Validity
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Errorf("%s → %s → %s", v, b, back)
		}
	}
	if Merge(Valid, Unknown) != Unknown || Merge(Unknown, Invalid, Valid) != Invalid || Merge() != Valid {
		t.Error("Merge")
	}
}

// The timeline of a C2 anomaly: porcupine finds the excerpt not
// linearizable and the HTML is written.
func TestVisualize(t *testing.T) {
	b := valid()
	b.next("p-n1-1", 1600, 1601, k(1), 20)
	r := Check(b.ops, Options{})
	a := r.Checkers["order"].Anomalies[0]
	path := filepath.Join(t.TempDir(), "a.html")
	res, err := Visualize(path, a, b.ops, record.Windows(b.ops, record.End(b.ops)))
	if err != nil {
		t.Fatal(err)
	}
	if res != porcupine.Illegal {
		t.Errorf("porcupine: %v, want Illegal", res)
	}
	html, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(html), "next") {
		t.Fatalf("html: %v %d bytes", err, len(html))
	}
	// And a valid excerpt is linearizable under the model.
	m := CounterModel(counterState{})
	ops := []porcupine.Operation{
		{ClientId: 0, Input: counterInput{Kind: 0}, Call: 0, Output: [2]uint64{2, 2}, Return: 10},
		{ClientId: 1, Input: counterInput{Kind: 0}, Call: 1, Output: [2]uint64{1, 1}, Return: 9},
		{ClientId: 0, Input: counterInput{Kind: 1}, Call: 11, Output: [2]uint64{5, 5}, Return: 12},
		{ClientId: 1, Input: counterInput{Kind: 0}, Call: 13, Output: [2]uint64{6, 8}, Return: 14},
	}
	if !porcupine.CheckOperations(m, ops) {
		t.Error("a valid per-key history is not linearizable under CounterModel")
	}
	ops = append(ops, porcupine.Operation{ClientId: 2, Input: counterInput{Kind: 1}, Call: 15, Output: [2]uint64{7, 7}, Return: 16})
	if porcupine.CheckOperations(m, ops) {
		t.Error("a stale current is linearizable under CounterModel")
	}
}

// A fault's finding (something no history shows) makes the run invalid,
// and is not a fault window.
func TestFindings(t *testing.T) {
	b := valid()
	b.add(record.Op{Client: record.NemesisClient, F: record.Finding, Fault: "kill-leader", FaultID: 1, Rule: "failover",
		Error: "group 0 without a serving leader for 12s while 2 of 3 voters ran", Type: record.Info, Invoke: ms(10), Complete: ms(1010)})
	r := Check(b.ops, Options{})
	f := r.Checkers["findings"]
	if r.Valid != Invalid || f.Valid != Invalid || f.Counts["failover"] != 1 || len(f.Anomalies) != 1 ||
		!strings.Contains(f.Anomalies[0].Msg, "failover (fault kill-leader #1): group 0 without a serving leader") {
		t.Fatalf("verdict %v, findings %+v", r.Valid, f)
	}
	if ws := record.Windows(b.ops, record.End(b.ops)); len(ws) != 1 || ws[0].Fault != "kill-leader" || ws[0].End != ms(1010) {
		t.Errorf("windows %+v", ws)
	}
	if f := Check(valid().ops, Options{}).Checkers["findings"]; f.Valid != Valid {
		t.Errorf("findings of a valid history: %+v", f)
	}
}
