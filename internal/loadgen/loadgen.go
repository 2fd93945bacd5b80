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
	"context"
	"fmt"
	mrand "math/rand"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

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
				if op.Kind == Reserve || op.Kind == IDs || op.Kind == Embedded || op.Kind == Runs {
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

	// CPU time over the measured window: from measureFrom until the run
	// stops.
	var cpuFrom, cpuTo cpuSample
	cpuDone := make(chan struct{})
	go func() {
		defer close(cpuDone)
		t := time.NewTimer(time.Until(measureFrom))
		defer t.Stop()
		select {
		case <-t.C:
		case <-runCtx.Done():
			return
		}
		cpuFrom = sampleCPU(cfg.CPUPIDs)
		<-runCtx.Done()
		cpuTo = sampleCPU(cfg.CPUPIDs)
	}()

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
	<-cpuDone

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
	res.CPU = cpuBetween(cpuFrom, cpuTo, res.IDs)
	return res, nil
}
