package leasemodel

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The default budget: a few seconds without -race, well under a minute
// with it on a 2-core machine; every mutant below is found within it.
// SEQD_MODEL_STEPS and SEQD_MODEL_SEED run longer, or elsewhere:
//
//	SEQD_MODEL_STEPS=500000000 SEQD_MODEL_SEED=7 go test -timeout 0 -run 'TestModelHolds$' -v ./internal/leasemodel
const defaultSteps = 4_000_000

func budget(t *testing.T) Config {
	cfg := Config{Seed: 1, Steps: defaultSteps}
	if v := os.Getenv("SEQD_MODEL_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("SEQD_MODEL_STEPS=%q: want a positive number of steps", v)
		}
		cfg.Steps = n
	}
	if v := os.Getenv("SEQD_MODEL_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			t.Fatalf("SEQD_MODEL_SEED=%q: want a number", v)
		}
		cfg.Seed = n
	}
	return cfg
}

// The real rules keep every property, and the exploration reaches the
// protocol's corners (a check of runs that never got there would pass
// whatever the rules).
func TestModelHolds(t *testing.T) {
	cfg := budget(t)
	start := time.Now()
	res := Explore(cfg)
	t.Logf("seed %d: %d steps, %d runs in %v; %v", cfg.Seed, res.Steps, res.Runs, time.Since(start).Round(time.Millisecond), res.Stats)
	if res.Violation != nil {
		t.Fatalf("%v\n%s", res.Violation, res.Trace)
	}
	for _, corner := range []string{
		"leaderships that served", "served after a certified release", "releases written", "releases not written",
		"transfers", "resumed after a failed transfer", "admitted by witness", "admitted by leader", "admitted by solo", "admitted by answers",
		"restores", "fenced",
	} {
		if res.Stats[corner] == 0 {
			t.Errorf("the exploration never reached %q", corner)
		}
	}
}

// A checker that cannot fail is a defect: each mutant replaces one
// decision with a broken one, and the checker must find a violation of
// the property that decision protects within the default budget. The
// run that found it replays to the same violation from its seed.
func TestModelFindsMutants(t *testing.T) {
	for _, c := range []struct {
		name  string
		rules Rules
		want  string
	}{
		{"a release certifies whatever its term, and any leader writes one", anyRelease{}, Overlap},
		{"no generation fencing", noFence{}, Fenced},
		{"the old availability rule: every other voter of 3 answers", oldAvailability{}, Unavailable},
		{"the lease wait without the margin for clock rates", noMargin{}, Overlap},
		{"no listen rule: a leader serves before gossip can tell it of a restore", noListen{}, Overlap},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := budget(t)
			cfg.Rules = c.rules
			start := time.Now()
			res := Explore(cfg)
			if res.Violation == nil {
				t.Fatalf("no violation in %d steps (%d runs)", res.Steps, res.Runs)
			}
			t.Logf("seed %d: found after %d steps (%d runs) in %v: %v\n%s", cfg.Seed, res.Steps, res.Runs,
				time.Since(start).Round(time.Millisecond), res.Violation, res.Trace)
			if res.Violation.Property != c.want {
				t.Errorf("found %s, want %s", res.Violation.Property, c.want)
			}
			if again := Replay(cfg, res.RunSeed); again.Violation == nil || *again.Violation != *res.Violation || again.Trace != res.Trace {
				t.Errorf("run %#x does not replay to the same violation and trace: %v", res.RunSeed, again.Violation)
			}
			if !strings.Contains(res.Trace, "VIOLATION") {
				t.Errorf("the trace does not end in the violation:\n%s", res.Trace)
			}
		})
	}
}

// BenchmarkExplore measures the checker's speed: one run (40 s of real
// time, 3 or 5 servers) per iteration, with the real rules.
func BenchmarkExplore(b *testing.B) {
	steps := 0
	for i := range b.N {
		steps += Explore(Config{Seed: uint64(i), Steps: 1}).Steps
	}
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}
