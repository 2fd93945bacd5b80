package fsm

import (
	"testing"

	"github.com/seqd/seqd"
)

// FSM benchmarks: the cost of applying one committed entry (a bbolt write
// transaction with fsync for entries that change state). Compare with
// benchstat: go test -run '^$' -bench . -count 6 ./fsm

// BenchmarkApplyRaise16Marks applies a raise that carries 16 sections' marks
// (raises of several sections share one entry).
func BenchmarkApplyRaise16Marks(b *testing.B) {
	f, _ := openTest(b)
	a := &applier{t: b, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 10000, SectionSize: 100000}))
	marks := make([]seqd.Mark, 16)
	var hi uint64
	for b.Loop() {
		hi += 10000
		for i := range marks {
			marks[i] = seqd.Mark{Space: "users", Section: uint64(i), Max: hi}
		}
		a.mustOK(EncodeRaise(marks))
	}
}

// BenchmarkApplyNoop applies a lease renewal (no state change, no disk write).
func BenchmarkApplyNoop(b *testing.B) {
	f, _ := openTest(b)
	a := &applier{t: b, f: f}
	data := EncodeNoop()
	for b.Loop() {
		a.mustOK(data)
	}
}

// BenchmarkMax reads a section's mark from the in-memory mirror (what a new
// leader does when it loads a section).
func BenchmarkMax(b *testing.B) {
	f, _ := openTest(b)
	a := &applier{t: b, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 10000, SectionSize: 100000}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 3, Max: 10000}}))
	for b.Loop() {
		if f.Max("users", 3) != 10000 {
			b.Fatal("wrong max")
		}
	}
}
