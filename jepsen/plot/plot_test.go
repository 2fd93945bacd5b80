package plot

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/jepsen/record"
)

func TestPlots(t *testing.T) {
	var ops []record.Op
	for i := range 3000 {
		typ := record.OK
		switch {
		case i%50 == 0:
			typ = record.Info
		case i%70 == 0:
			typ = record.Fail
		}
		at := time.Duration(i) * 10 * time.Millisecond
		ops = append(ops, record.Op{Index: int64(i), Client: "s0", F: record.Next, Type: typ, Invoke: at, Complete: at + time.Duration(i%97)*time.Millisecond})
	}
	windows := []record.Window{
		{ID: 1, Fault: "kill-leader", Start: 5 * time.Second, End: 8 * time.Second},
		{ID: 2, Fault: "partition-leader", Start: 12 * time.Second, End: 17 * time.Second},
		{ID: 3, Fault: "pause-leader", Start: 20 * time.Second, End: 22 * time.Second},
	}
	dir := t.TempDir()
	for name, f := range map[string]func(string, string, []record.Op, []record.Window) error{"latency.png": Latency, "rate.png": Rate} {
		path := filepath.Join(dir, name)
		if err := f(path, "test", ops, windows); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
			t.Errorf("%s: %v", name, b)
		}
		// Some pixel inside the kill window is shaded.
		c := &canvas{x0: 0, x1: 30, plotW: width - left - right}
		x := c.px(6)
		r, g, bl, _ := img.At(x, top+5).RGBA()
		if r>>8 != 255 || g>>8 == 255 || bl>>8 == 255 {
			t.Errorf("%s: pixel in the kill window is %d,%d,%d, want the kill shade", name, r>>8, g>>8, bl>>8)
		}
	}
	// An empty history still plots.
	if err := Latency(filepath.Join(dir, "empty.png"), "empty", nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0.3: 0.5, 1: 1, 7: 10, 18: 20, 45: 50, 0: 1} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}
