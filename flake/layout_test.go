package flake

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestPresetsAreValidAndDocumented(t *testing.T) {
	want := map[string]struct {
		bits  int
		years float64 // lifetime at least
		js    bool
	}{
		"snowflake":  {63, 69, false},
		"sonyflake":  {63, 174, false},
		"instagram":  {63, 34.8, false},
		"wide":       {63, 68, false},
		"js":         {53, 174, true},
		"js-seconds": {53, 136, true},
	}
	if len(PresetNames()) != len(want) || PresetNames()[0] != DefaultLayoutName {
		t.Fatalf("PresetNames() = %v", PresetNames())
	}
	for _, name := range PresetNames() {
		l, ok := Preset(name)
		if !ok {
			t.Fatalf("preset %q missing", name)
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w := want[name]
		if l.Bits() != w.bits || l.JSSafe() != w.js {
			t.Errorf("%s: %d bits, js %v; want %d, %v", name, l.Bits(), l.JSSafe(), w.bits, w.js)
		}
		life := time.Duration(l.End()-l.EpochMs) * time.Millisecond
		if years := life.Hours() / 24 / 365.25; years < w.years {
			t.Errorf("%s: lifetime %.1f years, want at least %.0f", name, years, w.years)
		}
		epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if name == "sonyflake" {
			epoch = time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC) // sonyflake's own
		}
		if l.EpochMs != epoch.UnixMilli() {
			t.Errorf("%s: epoch %d", name, l.EpochMs)
		}
	}
	d, _ := Preset("snowflake")
	if d.TimeBits != 41 || d.WorkerBits != 10 || d.SequenceBits != 12 || d.UnitMs != 1 {
		t.Errorf("default layout %+v", d)
	}
	if _, ok := Preset("nope"); ok {
		t.Error("unknown preset found")
	}
}

func TestValidateRejects(t *testing.T) {
	ok, _ := Preset("snowflake")
	for name, mut := range map[string]func(*Layout){
		"64 bits":       func(l *Layout) { l.TimeBits = 42 },
		"short time":    func(l *Layout) { l.TimeBits = 19 },
		"no workers":    func(l *Layout) { l.WorkerBits = 0 },
		"wide workers":  func(l *Layout) { l.WorkerBits = 25; l.TimeBits = 20; l.SequenceBits = 10 },
		"no sequence":   func(l *Layout) { l.SequenceBits = 0 },
		"wide sequence": func(l *Layout) { l.SequenceBits = 25; l.TimeBits = 20; l.WorkerBits = 10 },
		"zero unit":     func(l *Layout) { l.UnitMs = 0 },
		"long unit":     func(l *Layout) { l.UnitMs = MaxUnitMs + 1 },
		"early epoch":   func(l *Layout) { l.EpochMs = -1 },
		"endless":       func(l *Layout) { l.UnitMs = MaxUnitMs; l.TimeBits = 41 },
	} {
		l := ok
		mut(&l)
		if err := l.Validate(); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidLayout", name, err)
		}
	}
}

func TestComposeDecodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range PresetNames() {
		l, _ := Preset(name)
		for range 10000 {
			tu := 1 + r.Uint64N(l.MaxUnit())
			w, s, sh := r.Uint64N(l.Workers()), r.Uint64N(l.MaxSequence()+1), r.Uint64N(l.Shards())
			id := l.ComposeShard(tu, sh, w, s)
			if id <= 0 {
				t.Fatalf("%s: ComposeShard(%d,%d,%d,%d) = %d", name, tu, sh, w, s, id)
			}
			d, err := l.Decode(id)
			if err != nil || d.Unit != tu || d.Worker != w || d.Sequence != s || d.Shard != sh || d.UnixMs != l.UnitStart(tu) {
				t.Fatalf("%s: Decode(%d) = %+v, %v; want %d/%d/%d/%d", name, id, d, err, tu, sh, w, s)
			}
		}
		for _, bad := range []int64{0, -1, l.Compose(0, 3, 4)} {
			if _, err := l.Decode(bad); !errors.Is(err, ErrInvalidID) {
				t.Errorf("%s: Decode(%d) = %v, want ErrInvalidID", name, bad, err)
			}
		}
		if l.Bits() < 63 {
			if _, err := l.Decode(1 << l.Bits()); !errors.Is(err, ErrInvalidID) {
				t.Errorf("%s: Decode of a too-wide id = %v", name, err)
			}
		}
	}
}

func TestLowerBound(t *testing.T) {
	l, _ := Preset("sonyflake") // 10 ms units, so ms inside a unit matters
	at := l.EpochMs + 12345
	b, ok := l.LowerBound(at)
	if !ok {
		t.Fatal("no bound")
	}
	d, _ := l.Decode(b)
	if d.UnixMs < at || d.UnixMs >= at+int64(l.UnitMs) || d.Worker != 0 || d.Sequence != 0 {
		t.Fatalf("bound %d decodes to %+v, want the first unit at or after %d", b, d, at)
	}
	prev := l.Compose(d.Unit-1, l.Workers()-1, l.MaxSequence())
	if prev >= b {
		t.Fatalf("an id of the unit before (%d) is not below the bound %d", prev, b)
	}
	if b0, _ := l.LowerBound(0); b0 != l.Compose(1, 0, 0) {
		t.Fatalf("LowerBound before the epoch = %d", b0)
	}
	if _, ok := l.LowerBound(l.End()); ok {
		t.Fatal("a bound past the end of life")
	}
}

func TestEndSaturates(t *testing.T) {
	l := Layout{EpochMs: 1 << 62, UnitMs: MaxUnitMs, TimeBits: 40, WorkerBits: 10, SequenceBits: 12}
	if l.End() != 1<<63-1 {
		t.Fatalf("End = %d", l.End())
	}
	if err := l.Validate(); !errors.Is(err, ErrInvalidLayout) {
		t.Fatalf("a layout whose end overflows validated: %v", err)
	}
}
