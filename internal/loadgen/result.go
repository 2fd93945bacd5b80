package loadgen

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
)

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
	// CPU is the CPU time of this process and of Config.CPUPIDs over the
	// measured part of the run, when /proc tells.
	CPU *CPU `json:"cpu,omitempty"`
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
	if c := r.CPU; c != nil {
		fmt.Fprintf(&b, "cpu         client %.2fs (%.2f µs/id)  servers %.2fs (%.2f µs/id)\n", c.ClientSeconds, c.ClientUsPerID, c.ServerSeconds, c.ServerUsPerID)
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
