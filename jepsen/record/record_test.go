package record

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/internal/history"
)

func TestRecorderRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r, err := NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	a := r.Add(Op{Client: "s0", Node: "n1", F: Next, Keys: []uint64{1, 2, 1}, Type: OK, Values: []uint64{5, 1, 6}, Invoke: 1, Complete: 2})
	if r.Now() <= 0 {
		t.Error("clock did not advance")
	}
	r.Add(Op{Client: "p-n2-0", Node: "n2", F: Reserve, Keys: []uint64{3}, Count: 4, Type: OK, Values: []uint64{7, 10}, Invoke: 10, Complete: 20})
	r.Add(Op{Client: "p-n2-0", Node: "n2", F: Current, Keys: []uint64{3}, Type: Info, Error: "deadline", Invoke: 30, Complete: 40})
	r.Add(Op{Client: NemesisClient, F: FaultStart, Fault: "kill-leader", FaultID: 1, Targets: []string{"n1"}, Type: Info, Invoke: 50, Complete: 60})
	r.Add(Op{Client: NemesisClient, F: FaultHeal, Fault: "kill-leader", FaultID: 1, Targets: []string{"n1"}, Type: Info, Invoke: 70, Complete: 80})
	if a.Index != 0 {
		t.Errorf("first index %d", a.Index)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	mem := r.Ops()
	if len(ops) != 5 || len(mem) != 5 {
		t.Fatalf("%d ops loaded, %d in memory", len(ops), len(mem))
	}
	for i := range ops {
		if ops[i].String() != mem[i].String() {
			t.Errorf("line %d: %s, want %s", i, ops[i], mem[i])
		}
	}
	hs := ToHistory(ops)
	if len(hs) != 4 {
		t.Fatalf("%d per-key ops, want 4 (3 from the Next, 1 from the Reserve)", len(hs))
	}
	if hs[3].Kind != history.Take || hs[3].First != 7 || hs[3].Last != 10 || hs[3].Ref != 1 {
		t.Errorf("reserve as %+v", hs[3])
	}
	ws := Windows(ops, End(ops))
	if len(ws) != 1 || ws[0].Start != 60 || ws[0].Healing != 70 || ws[0].End != 80 || ws[0].Fault != "kill-leader" {
		t.Errorf("windows %+v", ws)
	}
	if End(ops) != 80 {
		t.Errorf("end %v", End(ops))
	}
}

func TestWindowNeverHealed(t *testing.T) {
	ops := []Op{{Client: NemesisClient, F: FaultStart, Fault: "pause-leader", FaultID: 3, Invoke: time.Second, Complete: time.Second}}
	ws := Windows(ops, 5*time.Second)
	if len(ws) != 1 || ws[0].End != 5*time.Second {
		t.Errorf("%+v", ws)
	}
}

func TestMembershipWindowStartsAtInvoke(t *testing.T) {
	ops := []Op{
		{Client: NemesisClient, F: FaultStart, Fault: "member-remove", Class: "membership", FaultID: 1, Invoke: time.Second, Complete: 3 * time.Second},
		{Client: NemesisClient, F: FaultHeal, Fault: "member-remove", Class: "membership", FaultID: 1, Invoke: 5 * time.Second, Complete: 9 * time.Second},
	}
	ws := Windows(ops, 10*time.Second)
	if len(ws) != 1 || ws[0].Start != time.Second || ws[0].Healing != 5*time.Second || ws[0].End != 9*time.Second {
		t.Errorf("%+v", ws)
	}
}

func TestOperatorWindowStartsAtInvokeWithOutcome(t *testing.T) {
	ops := []Op{
		{Client: NemesisClient, F: FaultStart, Fault: "stale-copy", Class: "operator", FaultID: 2, Invoke: time.Second, Complete: 4 * time.Second},
		{Client: NemesisClient, F: FaultHeal, Fault: "stale-copy", Class: "operator", FaultID: 2, Invoke: 6 * time.Second, Complete: 9 * time.Second,
			Outcome: []string{"n1 refused"}},
	}
	ws := Windows(ops, 10*time.Second)
	if len(ws) != 1 || ws[0].Start != time.Second || ws[0].End != 9*time.Second || len(ws[0].Outcome) != 1 || ws[0].Outcome[0] != "n1 refused" {
		t.Errorf("%+v", ws)
	}
}

func TestReadRejectsGarbage(t *testing.T) {
	if _, err := Read(bytes.NewBufferString("{\"index\":0}\nnot json\n")); err == nil {
		t.Error("garbage accepted")
	}
}

// TestFlakeRecords checks that flake records round-trip, that a sequence
// run's line (written before they existed) still reads, and which records
// are calls.
func TestFlakeRecords(t *testing.T) {
	l := flake.Layout{EpochMs: 1, UnitMs: 1, TimeBits: 41, WorkerBits: 3, SequenceBits: 4}
	in := []Op{
		{Client: HarnessClient, F: NamespaceInfo, Namespace: "ns", Layout: &l, Type: Info},
		{Client: "g1", Node: "embedded", Holder: "g1.2", F: IDs, Namespace: "ns", Count: 2, Type: OK, Values: []uint64{1 << 40, 1<<40 + 1}, WallMs: 1e12, Invoke: 5, Complete: 6},
	}
	var buf bytes.Buffer
	for _, o := range in {
		buf.WriteString(o.String() + "\n")
	}
	buf.WriteString(`{"index":7,"client":"s0","node":"n1","f":"next","keys":[1],"type":"ok","values":[3],"invoke_ns":1,"complete_ns":2}` + "\n")
	ops, err := Read(&buf)
	if err != nil || len(ops) != 3 {
		t.Fatalf("%d ops, %v", len(ops), err)
	}
	if *ops[0].Layout != l || ops[1].Holder != "g1.2" || ops[1].WallMs != 1e12 || ops[1].Values[1] != 1<<40+1 || ops[2].F != Next || ops[2].Layout != nil {
		t.Fatalf("read back %v", ops)
	}
	if ops[0].IsCall() || !ops[1].IsCall() || !ops[2].IsCall() || (Op{Client: NemesisClient}).IsCall() {
		t.Error("IsCall")
	}
}
