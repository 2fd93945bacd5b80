package fsm

import (
	"testing"
)

// FSM benchmarks: the cost of applying one committed entry (a bbolt write
// transaction with fsync for entries that change state). Compare with
// benchstat: go test -run '^$' -bench . -count 6 ./fsm

// BenchmarkApplyRaise16Marks applies a raise that carries 16 sections' marks
// (raises of several sections share one entry).
func BenchmarkApplyRaise16Marks(b *testing.B) {
	f, _ := openTest(b)
	a := &applier{t: b, f: f}
	a.mustOK(EncodeCreateSpace(Space{"users", 10000, 100000}))
	marks := make([]Mark, 16)
	var hi uint64
	for b.Loop() {
		hi += 10000
		for i := range marks {
			marks[i] = Mark{"users", uint64(i), hi}
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
	a.mustOK(EncodeCreateSpace(Space{"users", 10000, 100000}))
	a.mustOK(EncodeRaise([]Mark{{"users", 3, 10000}}))
	for b.Loop() {
		if f.Max("users", 3) != 10000 {
			b.Fatal("wrong max")
		}
	}
}
