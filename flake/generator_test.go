package flake

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func mustGen(t *testing.T, l Layout, w, lo, hi, lead uint64) *Generator {
	t.Helper()
	g, err := NewGenerator(l, w, lo, hi, lead)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGeneratorProperties drives generators with reference times that jump
// back and forward, and checks every id: unique, strictly increasing, of its
// worker, inside its range, and never more than the lead ahead.
func TestGeneratorProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	l := Layout{EpochMs: 0, UnitMs: 1, TimeBits: 30, WorkerBits: 3, SequenceBits: 2} // 4 ids per unit: borrows often
	for trial := range 200 {
		lo := r.Uint64N(1000)
		hi := lo + r.Uint64N(200)
		lead := r.Uint64N(20)
		w := r.Uint64N(l.Workers())
		g := mustGen(t, l, w, lo, hi, lead)
		now := lo + r.Uint64N(50) - min(lo, 25)
		var last int64
		var ids []int64
		for range 500 {
			switch r.IntN(4) {
			case 0:
				now -= min(now, r.Uint64N(30)) // a step back
			case 1:
				now += r.Uint64N(5)
			}
			var err error
			ids, err = g.Next(ids[:0], 1+r.IntN(8), now)
			for _, id := range ids {
				d, derr := l.Decode(id)
				switch {
				case derr != nil:
					t.Fatalf("trial %d: %v", trial, derr)
				case id <= last:
					t.Fatalf("trial %d: id %d after %d", trial, id, last)
				case d.Worker != w:
					t.Fatalf("trial %d: worker %d, want %d", trial, d.Worker, w)
				case d.Unit <= lo || d.Unit > hi:
					t.Fatalf("trial %d: unit %d outside (%d, %d]", trial, d.Unit, lo, hi)
				case d.Unit > now+lead:
					t.Fatalf("trial %d: unit %d more than %d ahead of %d", trial, d.Unit, lead, now)
				}
				last = id
			}
			if err != nil && !errors.Is(err, ErrRangeEnd) && !errors.Is(err, ErrAhead) {
				t.Fatalf("trial %d: %v", trial, err)
			}
		}
	}
}

// refGen is the per-id generator NextRun replaced, kept as the reference
// its runs must reproduce id for id.
type refGen struct {
	l               Layout
	w, lo, hi, lead uint64
	t, seq          uint64
}

func (g *refGen) next(n int, now uint64) ([]int64, error) {
	var dst []int64
	for ; n > 0; n-- {
		t, seq := max(now, g.lo+1), uint64(0)
		if t <= g.t {
			t, seq = g.t, g.seq+1
			if seq > g.l.MaxSequence() {
				t, seq = g.t+1, 0
			}
		}
		switch {
		case t > g.l.MaxUnit():
			return dst, ErrLifetime
		case t > g.hi:
			return dst, ErrRangeEnd
		case t > now && t-now > g.lead:
			return dst, ErrAhead
		}
		g.t, g.seq = t, seq
		dst = append(dst, int64(t<<(g.l.WorkerBits+g.l.SequenceBits)|g.w<<g.l.SequenceBits|seq))
	}
	return dst, nil
}

// TestGeneratorRunsMatchPerID drives NextRun and the per-id reference with
// the same calls and checks that the runs hold exactly the reference's ids
// and errors, that each run lies in one time unit, and that a run stops
// short of what was asked only at the end of its unit.
func TestGeneratorRunsMatchPerID(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	l := Layout{EpochMs: 0, UnitMs: 1, TimeBits: 30, WorkerBits: 3, SequenceBits: 3} // 8 ids per unit
	for trial := range 200 {
		lo := r.Uint64N(1000)
		if trial%4 == 0 {
			lo = l.MaxUnit() - r.Uint64N(50) // ranges that reach the layout's end
		}
		hi := lo + r.Uint64N(100)
		lead := r.Uint64N(10)
		w := r.Uint64N(l.Workers())
		g := mustGen(t, l, w, lo, hi, lead)
		ref := &refGen{l: l, w: w, lo: lo, hi: min(hi, l.MaxUnit()), lead: lead}
		now := lo + r.Uint64N(20) - min(lo, 10)
		for call := range 300 {
			if r.IntN(3) == 0 {
				now = now + r.Uint64N(4) - min(now, r.Uint64N(4))
			}
			n := 1 + r.IntN(20)
			want, wantErr := ref.next(n, now)
			var got []int64
			var err error
			for left := n; left > 0 && err == nil; {
				var run Run
				run, err = g.NextRun(left, now)
				if run.Count > 0 {
					first, _ := l.Decode(run.First)
					last, _ := l.Decode(run.Last())
					if first.Unit != last.Unit {
						t.Fatalf("trial %d call %d: run %+v spans units %d..%d", trial, call, run, first.Unit, last.Unit)
					}
					if run.Count < left && last.Sequence != l.MaxSequence() {
						t.Fatalf("trial %d call %d: run of %d for %d ends at sequence %d, not the unit's end", trial, call, run.Count, left, last.Sequence)
					}
				}
				got = AppendIDs(got, run)
				left -= run.Count
				if run.Count == 0 && err == nil {
					t.Fatalf("trial %d call %d: empty run without an error", trial, call)
				}
			}
			if !errors.Is(err, wantErr) || len(got) != len(want) {
				t.Fatalf("trial %d call %d: %d ids, %v; reference %d ids, %v", trial, call, len(got), err, len(want), wantErr)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("trial %d call %d: id %d is %d, reference %d", trial, call, i, got[i], want[i])
				}
			}
		}
	}
}

func TestRunAppendIDs(t *testing.T) {
	got := AppendIDs([]int64{1}, Run{First: 10, Count: 3}, Run{}, Run{First: 20, Count: 1})
	want := []int64{1, 10, 11, 12, 20}
	if len(got) != len(want) {
		t.Fatalf("AppendIDs = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("AppendIDs = %v, want %v", got, want)
		}
	}
	if (Run{First: 10, Count: 3}).Last() != 12 {
		t.Fatal("Last of 10+3 is not 12")
	}
}

func TestGeneratorBorrowsAndStops(t *testing.T) {
	l := Layout{UnitMs: 1, TimeBits: 30, WorkerBits: 4, SequenceBits: 2}
	g := mustGen(t, l, 5, 100, 103, 2)
	ids, err := g.Next(nil, 20, 101)
	// Units 101, 102 and 103 at 4 ids each: 101 is now, 102 and 103 are
	// borrowed within the lead of 2; unit 104 is past hi.
	if len(ids) != 12 || !errors.Is(err, ErrRangeEnd) {
		t.Fatalf("got %d ids, %v; want 12, ErrRangeEnd", len(ids), err)
	}
	if d, _ := l.Decode(ids[11]); d.Unit != 103 || d.Sequence != 3 {
		t.Fatalf("last id %+v", d)
	}
	g.Extend(110)
	g.Extend(105) // lower: no change
	if g.Hi() != 110 {
		t.Fatalf("Hi = %d", g.Hi())
	}
	ids, err = g.Next(nil, 20, 101)
	if len(ids) != 0 || !errors.Is(err, ErrAhead) {
		t.Fatalf("after extension at the same time: %d ids, %v; want 0, ErrAhead", len(ids), err)
	}
	ids, err = g.Next(nil, 4, 102)
	if len(ids) != 4 || err != nil {
		t.Fatalf("one unit later: %d ids, %v", len(ids), err)
	}
	if d, _ := l.Decode(ids[0]); d.Unit != 104 || d.Sequence != 0 {
		t.Fatalf("first id after the extension %+v", d)
	}
}

func TestGeneratorStartsAboveLo(t *testing.T) {
	l, _ := Preset("snowflake")
	g := mustGen(t, l, 7, 1000, 2000, 5)
	// A reference far behind the range (a holder whose estimate lags):
	// the ids still start above lo, and wait once the lead is used.
	ids, err := g.Next(nil, 1, 990)
	if !errors.Is(err, ErrAhead) || len(ids) != 0 {
		t.Fatalf("ids %v, %v; want ErrAhead", ids, err)
	}
	ids, err = g.Next(nil, 1, 998)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Decode(ids[0]); d.Unit != 1001 || d.Worker != 7 {
		t.Fatalf("first id %+v, want unit 1001", d)
	}
	if g.Lead(998) != 3 || g.Lead(2000) != 0 {
		t.Fatalf("Lead = %d, %d", g.Lead(998), g.Lead(2000))
	}
}

func TestGeneratorLifetime(t *testing.T) {
	l := Layout{UnitMs: 1, TimeBits: 20, WorkerBits: 1, SequenceBits: 1}
	g := mustGen(t, l, 0, l.MaxUnit()-1, l.MaxUnit()+100, 10)
	if g.Hi() != l.MaxUnit() {
		t.Fatalf("hi not capped: %d", g.Hi())
	}
	ids, err := g.Next(nil, 5, l.MaxUnit())
	if len(ids) != 2 || !errors.Is(err, ErrLifetime) {
		t.Fatalf("%d ids, %v; want 2, ErrLifetime", len(ids), err)
	}
}

func TestNewGeneratorRejects(t *testing.T) {
	l, _ := Preset("snowflake")
	if _, err := NewGenerator(l, l.Workers(), 0, 10, 1); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("worker out of range: %v", err)
	}
	if _, err := NewGenerator(l, 0, 10, 9, 1); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("inverted range: %v", err)
	}
	if _, err := NewGenerator(Layout{}, 0, 0, 1, 1); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("zero layout: %v", err)
	}
}

func BenchmarkGeneratorNext(b *testing.B) {
	l, _ := Preset("snowflake")
	g, _ := NewGenerator(l, 1, 0, l.MaxUnit(), 1<<40)
	ids := make([]int64, 0, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ids, _ = g.Next(ids[:0], 1, uint64(i>>12))
	}
}

// BenchmarkGeneratorBatch1000 issues 1000 ids per op, as ids (Next) and as
// runs (NextRun until the call has them): the per-id loop against a cost
// per run.
func BenchmarkGeneratorBatch1000(b *testing.B) {
	l, _ := Preset("snowflake")
	b.Run("ids", func(b *testing.B) {
		g, _ := NewGenerator(l, 1, 0, l.MaxUnit(), 1<<40)
		ids := make([]int64, 0, 1000)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			ids, _ = g.Next(ids[:0], 1000, uint64(i>>2))
		}
	})
	b.Run("runs", func(b *testing.B) {
		g, _ := NewGenerator(l, 1, 0, l.MaxUnit(), 1<<40)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			for left := 1000; left > 0; {
				r, _ := g.NextRun(left, uint64(i>>2))
				left -= r.Count
			}
		}
	})
}
