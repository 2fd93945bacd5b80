// Package loadgen drives a load against a sequence service and measures it:
// a fixed number of concurrent callers (closed loop) or a target call rate
// (open loop, latency measured from each call's intended start so that a
// stalled server is not hidden: no coordinated omission), keys drawn from a
// uniform, zipf or sequential distribution, a mix of operations, throughput
// in calls/s and ids/s, and latency percentiles from HdrHistograms.
//
// It knows nothing about seqd: a Target runs one operation. `seqbench`
// (internal/bench) drives seqd through package client; the bench/ module drives Redis,
// PostgreSQL and etcd with the same workload.
package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
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
	numKinds
)

var kindNames = [numKinds]string{"next", "reserve", "current"}

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
	case Reserve:
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
}

// Latency holds percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p99_9_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// KindResult is the outcome of one kind of operation.
type KindResult struct {
	Calls   int64   `json:"calls"`
	IDs     int64   `json:"ids"`
	Errors  int64   `json:"errors"`
	Latency Latency `json:"latency"`
}

// Sample is the throughput in one timeline interval.
type Sample struct {
	// T is the end of the interval, in seconds since the start of the run
	// (warmup included).
	T           float64 `json:"t_s"`
	CallsPerSec float64 `json:"calls_per_s"`
	IDsPerSec   float64 `json:"ids_per_s"`
	Errors      int64   `json:"errors"`
}

// Result is a finished run. Latency covers successful calls only.
type Result struct {
	Concurrency int                   `json:"concurrency"`
	Rate        float64               `json:"target_rate,omitempty"`
	Batch       int                   `json:"batch"`
	Keys        uint64                `json:"keys"`
	Dist        string                `json:"dist"`
	Seconds     float64               `json:"seconds"`
	Calls       int64                 `json:"calls"`
	IDs         int64                 `json:"ids"`
	Errors      int64                 `json:"errors"`
	CallsPerSec float64               `json:"calls_per_s"`
	IDsPerSec   float64               `json:"ids_per_s"`
	Latency     Latency               `json:"latency"`
	ByKind      map[string]KindResult `json:"by_kind"`
	ErrorKinds  map[string]int64      `json:"error_kinds,omitempty"`
	Timeline    []Sample              `json:"timeline,omitempty"`
	// StartLag is, with a target rate, how late calls started after their
	// scheduled time (a backlog of calls, or the load generator itself
	// waking late); it is part of Latency.
	StartLag *Latency `json:"start_lag,omitempty"`
	// Service is, with a target rate, the latency of successful calls from
	// their actual start (Latency minus StartLag, per call).
	Service *Latency `json:"service,omitempty"`
}

const (
	histLow     = 1           // µs
	histHigh    = 100_000_000 // µs: 100 s
	histDigits  = 3
	maxShards   = 16
	maxErrKinds = 64
)

// shard is a set of histograms shared by a few workers.
type shard struct {
	mu       sync.Mutex
	all      *hdrhistogram.Histogram
	interval *hdrhistogram.Histogram
	kinds    [numKinds]*hdrhistogram.Histogram
	lag      *hdrhistogram.Histogram // open loop: how late calls started
	service  *hdrhistogram.Histogram // open loop: latency from the actual start
	calls    [numKinds]int64
	ids      [numKinds]int64
	errs     [numKinds]int64
	errKinds map[string]int64
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histLow, histHigh, histDigits) }

// Run runs the load until the duration or the count is reached or ctx ends.
// An error is returned only for a bad configuration.
func Run(ctx context.Context, t Target, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	nshards := min(cfg.Concurrency, maxShards)
	shards := make([]*shard, nshards)
	for i := range shards {
		s := &shard{all: newHist(), interval: newHist(), lag: newHist(), service: newHist(), errKinds: map[string]int64{}}
		for k := range s.kinds {
			s.kinds[k] = newHist()
		}
		shards[i] = s
	}
	totalWeight := 0
	for _, m := range cfg.Mix {
		totalWeight += m.Weight
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}

	var (
		issued   atomic.Int64 // calls started (rate schedule and Count)
		measured atomic.Int64 // measured calls finished
		cCalls   atomic.Int64 // every finished call, for progress and timeline
		cIDs     atomic.Int64
		cErrs    atomic.Int64
		seqKey   atomic.Uint64
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	var stopAt time.Time
	if cfg.Duration > 0 {
		stopAt = measureFrom.Add(cfg.Duration)
	}
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.Rate)
	}

	var wg sync.WaitGroup
	for w := range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh := shards[w%nshards]
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			var zipf *mrand.Zipf
			if cfg.Dist == "zipf" {
				zipf = mrand.NewZipf(mrand.New(mrand.NewSource(int64(seed)+int64(w))), cfg.ZipfS, 1, cfg.Keys-1)
			}
			key := func() uint64 {
				switch {
				case zipf != nil:
					return cfg.KeyOffset + zipf.Uint64()
				case cfg.Dist == "sequential":
					return cfg.KeyOffset + (seqKey.Add(1)-1)%cfg.Keys
				}
				return cfg.KeyOffset + r.Uint64N(cfg.Keys)
			}
			op := &Op{Keys: make([]uint64, 0, cfg.Batch)}
			for runCtx.Err() == nil {
				n := issued.Add(1)
				begin := time.Now()
				var lag time.Duration
				if interval > 0 {
					due := start.Add(time.Duration(n-1) * interval)
					if d := time.Until(due); d > 0 {
						t := time.NewTimer(d)
						select {
						case <-t.C:
						case <-runCtx.Done():
							t.Stop()
							return
						}
					}
					begin = due
					lag = time.Since(due)
				}
				if !stopAt.IsZero() && begin.After(stopAt) {
					cancel()
					return
				}
				// Pick the operation.
				op.Kind = cfg.Mix[0].Kind
				if len(cfg.Mix) > 1 {
					x := r.IntN(totalWeight)
					for _, m := range cfg.Mix {
						if x < m.Weight {
							op.Kind = m.Kind
							break
						}
						x -= m.Weight
					}
				}
				op.Keys = op.Keys[:0]
				op.Count = 0
				if op.Kind == Reserve {
					op.Keys = append(op.Keys, key())
					op.Count = uint32(cfg.Batch)
				} else {
					for range cfg.Batch {
						op.Keys = append(op.Keys, key())
					}
				}
				var err error
				if cfg.CallTimeout > 0 {
					cctx, ccancel := context.WithTimeout(runCtx, cfg.CallTimeout)
					err = t.Do(cctx, op)
					ccancel()
				} else {
					err = t.Do(runCtx, op)
				}
				end := time.Now()
				if err != nil && runCtx.Err() != nil {
					return // cut short by the end of the run: not a failure
				}
				ids := op.IDs()
				cCalls.Add(1)
				if err != nil {
					cErrs.Add(1)
				} else {
					cIDs.Add(ids)
				}
				if begin.Before(measureFrom) {
					continue
				}
				m := measured.Add(1)
				if cfg.Count > 0 && m > cfg.Count {
					cancel() // others finished the count while this call ran
					return
				}
				us := max(end.Sub(begin).Microseconds(), 1)
				sh.mu.Lock()
				if interval > 0 {
					_ = sh.lag.RecordValue(max(lag.Microseconds(), 1))
					if err == nil {
						_ = sh.service.RecordValue(max((end.Sub(begin) - lag).Microseconds(), 1))
					}
				}
				sh.calls[op.Kind]++
				if err != nil {
					sh.errs[op.Kind]++
					name := cfg.Classify(err)
					if _, ok := sh.errKinds[name]; ok || len(sh.errKinds) < maxErrKinds {
						sh.errKinds[name]++
					}
				} else {
					sh.ids[op.Kind] += ids
					_ = sh.all.RecordValue(us)
					_ = sh.interval.RecordValue(us)
					_ = sh.kinds[op.Kind].RecordValue(us)
				}
				sh.mu.Unlock()
				if cfg.Count > 0 && m == cfg.Count {
					cancel()
					return
				}
			}
		}()
	}

	// Progress lines and the timeline.
	var timeline []Sample
	monDone := make(chan struct{})
	go func() {
		defer close(monDone)
		var tlTick, prTick <-chan time.Time
		if cfg.Timeline > 0 {
			t := time.NewTicker(cfg.Timeline)
			defer t.Stop()
			tlTick = t.C
		}
		if cfg.Progress != nil {
			t := time.NewTicker(cfg.ProgressEvery)
			defer t.Stop()
			prTick = t.C
		}
		lastTL, lastPR := start, start
		var tlCalls, tlIDs, tlErrs, prCalls, prIDs, prErrs int64
		merged := newHist()
		for {
			select {
			case <-runCtx.Done():
				return
			case now := <-tlTick:
				c, i, e := cCalls.Load(), cIDs.Load(), cErrs.Load()
				d := now.Sub(lastTL).Seconds()
				timeline = append(timeline, Sample{T: now.Sub(start).Seconds(),
					CallsPerSec: float64(c-tlCalls) / d, IDsPerSec: float64(i-tlIDs) / d, Errors: e - tlErrs})
				lastTL, tlCalls, tlIDs, tlErrs = now, c, i, e
			case now := <-prTick:
				c, i, e := cCalls.Load(), cIDs.Load(), cErrs.Load()
				d := now.Sub(lastPR).Seconds()
				merged.Reset()
				for _, s := range shards {
					s.mu.Lock()
					merged.Merge(s.interval)
					s.interval.Reset()
					s.mu.Unlock()
				}
				phase := ""
				if now.Before(measureFrom) {
					phase = " (warmup)"
				}
				fmt.Fprintf(cfg.Progress, "%7.1fs  calls/s %9.0f  ids/s %10.0f  p50 %7.3fms  p99 %7.3fms  max %8.3fms  errors %d%s\n",
					now.Sub(start).Seconds(), float64(c-prCalls)/d, float64(i-prIDs)/d,
					ms(merged.ValueAtQuantile(50)), ms(merged.ValueAtQuantile(99)), ms(merged.Max()), e-prErrs, phase)
				lastPR, prCalls, prIDs, prErrs = now, c, i, e
			}
		}
	}()
	wg.Wait()
	end := time.Now()
	cancel()
	<-monDone

	res := &Result{Concurrency: cfg.Concurrency, Rate: cfg.Rate, Batch: cfg.Batch, Keys: cfg.Keys, Dist: cfg.Dist,
		ByKind: map[string]KindResult{}, ErrorKinds: map[string]int64{}, Timeline: timeline}
	if !stopAt.IsZero() && end.After(stopAt) {
		end = stopAt
	}
	res.Seconds = end.Sub(measureFrom).Seconds()
	all, lag, service := newHist(), newHist(), newHist()
	var kinds [numKinds]*hdrhistogram.Histogram
	for k := range kinds {
		kinds[k] = newHist()
	}
	var calls, ids, errs [numKinds]int64
	for _, s := range shards {
		all.Merge(s.all)
		lag.Merge(s.lag)
		service.Merge(s.service)
		for k := range kinds {
			kinds[k].Merge(s.kinds[k])
			calls[k] += s.calls[k]
			ids[k] += s.ids[k]
			errs[k] += s.errs[k]
		}
		for n, c := range s.errKinds {
			res.ErrorKinds[n] += c
		}
	}
	for k := range kinds {
		res.Calls += calls[k]
		res.IDs += ids[k]
		res.Errors += errs[k]
		if calls[k] > 0 {
			res.ByKind[Kind(k).String()] = KindResult{Calls: calls[k], IDs: ids[k], Errors: errs[k], Latency: latency(kinds[k])}
		}
	}
	if res.Seconds > 0 {
		res.CallsPerSec = float64(res.Calls-res.Errors) / res.Seconds
		res.IDsPerSec = float64(res.IDs) / res.Seconds
	}
	res.Latency = latency(all)
	if interval > 0 {
		l, sv := latency(lag), latency(service)
		res.StartLag, res.Service = &l, &sv
	}
	return res, nil
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

func ms(us int64) float64 { return float64(us) / 1000 }

func latency(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000,
	}
}

// Summary formats a result for people: throughput, then latency, then errors.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d calls in %.2fs (concurrency %d, batch %d, %d keys %s", r.Calls, r.Seconds, r.Concurrency, r.Batch, r.Keys, r.Dist)
	if r.Rate > 0 {
		fmt.Fprintf(&b, ", target %.0f calls/s", r.Rate)
	}
	fmt.Fprintf(&b, ")\n")
	fmt.Fprintf(&b, "throughput  %.0f calls/s  %.0f ids/s\n", r.CallsPerSec, r.IDsPerSec)
	l := r.Latency
	fmt.Fprintf(&b, "latency     p50 %.3fms  p90 %.3fms  p99 %.3fms  p99.9 %.3fms  max %.3fms  mean %.3fms\n", l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
	if len(r.ByKind) > 1 {
		names := make([]string, 0, len(r.ByKind))
		for n := range r.ByKind {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			k := r.ByKind[n]
			fmt.Fprintf(&b, "  %-8s  %d calls  %d ids  %d errors  p50 %.3fms  p99 %.3fms  max %.3fms\n", n, k.Calls, k.IDs, k.Errors, k.Latency.P50, k.Latency.P99, k.Latency.Max)
		}
	}
	if l := r.StartLag; l != nil {
		fmt.Fprintf(&b, "start lag   p50 %.3fms  p90 %.3fms  p99 %.3fms  p99.9 %.3fms  max %.3fms (how late calls started; included above)\n", l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	if l := r.Service; l != nil {
		fmt.Fprintf(&b, "service     p50 %.3fms  p90 %.3fms  p99 %.3fms  p99.9 %.3fms  max %.3fms (from the actual start)\n", l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	if r.Errors > 0 {
		fmt.Fprintf(&b, "errors      %d\n", r.Errors)
		names := make([]string, 0, len(r.ErrorKinds))
		for n := range r.ErrorKinds {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return r.ErrorKinds[names[i]] > r.ErrorKinds[names[j]] })
		for _, n := range names {
			fmt.Fprintf(&b, "  %8d  %s\n", r.ErrorKinds[n], n)
		}
	}
	return b.String()
}

// MedianByIDs returns the run with the median ids/s (the upper middle one of
// an even number), or nil for none. runs is not reordered.
func MedianByIDs(runs []*Result) *Result {
	if len(runs) == 0 {
		return nil
	}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b *Result) int { return cmp.Compare(a.IDsPerSec, b.IDsPerSec) })
	return sorted[len(sorted)/2]
}

// LoadAvg returns the machine's 1-minute load average, or 0 where
// /proc/loadavg is missing (not Linux).
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}
