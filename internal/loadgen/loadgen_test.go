package loadgen

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCountsCallsIDsAndErrors(t *testing.T) {
	var n atomic.Int64
	boom := errors.New("boom")
	tgt := TargetFunc(func(ctx context.Context, op *Op) error {
		if n.Add(1)%10 == 0 {
			return boom
		}
		if op.Kind == Next && len(op.Keys) != 3 {
			t.Errorf("Next with %d keys, want 3", len(op.Keys))
		}
		if op.Kind == Reserve && (op.Count != 3 || len(op.Keys) != 1) {
			t.Errorf("Reserve %v", op)
		}
		for _, k := range op.Keys {
			if k < 100 || k >= 150 {
				t.Errorf("key %d outside 100..149", k)
			}
		}
		return nil
	})
	mix, err := ParseMix("next=2,reserve=1,current:1")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), tgt, Config{Concurrency: 4, Count: 1000, Keys: 50, KeyOffset: 100, Batch: 3, Mix: mix, Dist: "zipf"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls < 1000 || res.Errors == 0 || res.ErrorKinds["boom"] != res.Errors {
		t.Fatalf("calls %d errors %d kinds %v", res.Calls, res.Errors, res.ErrorKinds)
	}
	var ids int64
	for name, k := range res.ByKind {
		ids += k.IDs
		if name == "current" && k.IDs != 0 {
			t.Fatalf("current delivered %d ids", k.IDs)
		}
	}
	if ids != res.IDs || res.IDs == 0 || res.Latency.Max <= 0 {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Summary(), "throughput") {
		t.Fatal(res.Summary())
	}
}

func TestRateSchedulesCalls(t *testing.T) {
	var n atomic.Int64
	tgt := TargetFunc(func(ctx context.Context, op *Op) error { n.Add(1); return nil })
	res, err := Run(context.Background(), tgt, Config{Concurrency: 4, Duration: 500 * time.Millisecond, Rate: 200, Timeline: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls < 60 || res.Calls > 140 {
		t.Fatalf("%d calls in 0.5s at 200/s", res.Calls)
	}
	if len(res.Timeline) < 3 {
		t.Fatalf("timeline %v", res.Timeline)
	}
}

func TestBadConfig(t *testing.T) {
	tgt := TargetFunc(func(ctx context.Context, op *Op) error { return nil })
	for _, cfg := range []Config{{Dist: "pareto"}, {Dist: "zipf", ZipfS: 0.5}, {Rate: -1}} {
		if _, err := Run(context.Background(), tgt, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	if _, err := ParseMix("next=x"); err == nil {
		t.Error("bad weight accepted")
	}
	if _, err := ParseMix("delete=1"); err == nil {
		t.Error("unknown operation accepted")
	}
}

// BenchmarkRunOverhead is the load generator's own cost per call (a target
// that returns at once), with 64 callers.
func BenchmarkRunOverhead(b *testing.B) {
	tgt := TargetFunc(func(ctx context.Context, op *Op) error { return nil })
	for b.Loop() {
		if _, err := Run(context.Background(), tgt, Config{Concurrency: 64, Count: 10000}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10000), "ns/call")
}

func TestMedianByIDs(t *testing.T) {
	if MedianByIDs(nil) != nil {
		t.Fatal("median of no runs")
	}
	a, b, c := &Result{IDsPerSec: 3}, &Result{IDsPerSec: 1}, &Result{IDsPerSec: 2}
	runs := []*Result{a, b, c}
	if m := MedianByIDs(runs); m != c {
		t.Fatalf("median %v, want the run with 2 ids/s", m.IDsPerSec)
	}
	if runs[0] != a || runs[1] != b {
		t.Fatal("runs reordered")
	}
}
