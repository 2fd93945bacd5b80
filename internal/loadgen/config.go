package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Kind is an operation.
type Kind int

// The operations of a sequence service.
const (
	// Next takes one new value for each of Op.Keys (ids: len(Keys)).
	Next Kind = iota
	// Reserve takes Op.Count consecutive values for Op.Keys[0] (ids: Count).
	Reserve
	// Current reads the current value of each of Op.Keys (ids: 0).
	Current
	// IDs takes Op.Count flake ids from the cluster (ids: Count).
	IDs
	// Embedded takes Op.Count flake ids from an embedded generator in
	// the load tool's process (ids: Count).
	Embedded
	// Runs takes Op.Count flake ids from the cluster as runs of
	// consecutive ids (ids: Count).
	Runs
	numKinds
)

var kindNames = [numKinds]string{"next", "reserve", "current", "ids", "embedded", "runs"}

func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Op is one call. Its Keys slice is reused by the caller after Do returns.
type Op struct {
	Kind  Kind
	Keys  []uint64
	Count uint32
}

// IDs returns how many new values the operation delivers when it succeeds.
func (o *Op) IDs() int64 {
	switch o.Kind {
	case Next:
		return int64(len(o.Keys))
	case Reserve, IDs, Embedded, Runs:
		return int64(o.Count)
	}
	return 0
}

// Target runs operations. Do is called concurrently from every worker.
type Target interface {
	Do(ctx context.Context, op *Op) error
}

// TargetFunc adapts a function to Target.
type TargetFunc func(ctx context.Context, op *Op) error

// Do calls f.
func (f TargetFunc) Do(ctx context.Context, op *Op) error { return f(ctx, op) }

// MixEntry weights one kind of operation.
type MixEntry struct {
	Kind   Kind
	Weight int
}

// ParseMix parses "next=90,current=10" (also "next:90"). Weights are relative.
func ParseMix(s string) ([]MixEntry, error) {
	var out []MixEntry
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, ok := strings.Cut(part, "=")
		if !ok {
			name, w, ok = strings.Cut(part, ":")
		}
		weight := 1
		if ok {
			n, err := strconv.Atoi(w)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("mix %q: weight %q is not a whole number", s, w)
			}
			weight = n
		}
		k := Kind(-1)
		for i, kn := range kindNames {
			if kn == name {
				k = Kind(i)
			}
		}
		if k < 0 {
			return nil, fmt.Errorf("mix %q: unknown operation %q (want next, reserve or current)", s, name)
		}
		if weight > 0 {
			out = append(out, MixEntry{k, weight})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mix %q: no operation with a positive weight", s)
	}
	return out, nil
}

// Config describes a run. Zero values take the defaults noted.
type Config struct {
	// Concurrency is the number of callers (default 1).
	Concurrency int
	// Duration is how long to measure after Warmup (default 10s unless
	// Count is set).
	Duration time.Duration
	// Count stops the run after this many measured calls (0: no limit).
	Count int64
	// Warmup runs the load this long before measuring (not counted).
	Warmup time.Duration
	// Rate is the target rate in calls/s over all callers (0: as fast as
	// each caller can go). With a rate, latency counts from each call's
	// intended start time.
	Rate float64
	// Keys is the number of distinct keys, KeyOffset + 0 .. Keys-1 (default 1000000).
	Keys, KeyOffset uint64
	// Dist is "uniform" (default), "zipf" or "sequential" (0, 1, 2, ...
	// over all callers, wrapping at Keys).
	Dist string
	// ZipfS is the zipf exponent, > 1 (default 1.1).
	ZipfS float64
	// Mix weights the operations (default: Next only).
	Mix []MixEntry
	// Batch is the keys per Next or Current call and the count per Reserve (default 1).
	Batch int
	// CallTimeout, when positive, bounds one call with a context deadline
	// (0: no per-call deadline; the Target bounds its calls).
	CallTimeout time.Duration
	// Progress, when set, receives a line every ProgressEvery (default 1s).
	Progress      io.Writer
	ProgressEvery time.Duration
	// Timeline, when positive, samples throughput every Timeline (over the
	// whole run, warmup included) into Result.Timeline.
	Timeline time.Duration
	// Classify names an error for Result.Errors (default: its text, cut at 80 characters).
	Classify func(error) string
	// Seed makes key choices repeatable (0: random).
	Seed uint64
	// CPUPIDs are the server processes whose CPU time Result.CPU reports
	// (Linux), next to this process's own.
	CPUPIDs []int
}

func (cfg *Config) defaults() error {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Duration <= 0 && cfg.Count <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Keys == 0 {
		cfg.Keys = 1000000
	}
	if cfg.Dist == "" {
		cfg.Dist = "uniform"
	}
	switch cfg.Dist {
	case "uniform", "sequential":
	case "zipf":
		if cfg.ZipfS == 0 {
			cfg.ZipfS = 1.1
		}
		if cfg.ZipfS <= 1 {
			return fmt.Errorf("zipf exponent %v must be above 1", cfg.ZipfS)
		}
		if cfg.Keys < 2 {
			return errors.New("zipf needs at least 2 keys")
		}
	default:
		return fmt.Errorf("unknown key distribution %q (want uniform, zipf or sequential)", cfg.Dist)
	}
	if len(cfg.Mix) == 0 {
		cfg.Mix = []MixEntry{{Next, 1}}
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1
	}
	if cfg.Rate < 0 {
		return fmt.Errorf("rate %v must not be negative", cfg.Rate)
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = time.Second
	}
	if cfg.Classify == nil {
		cfg.Classify = func(err error) string {
			s := err.Error()
			if len(s) > 80 {
				s = s[:80]
			}
			return s
		}
	}
	return nil
}
