package main_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/loadgen"
	"github.com/seqd/seqd/internal/proctest"
)

// BenchmarkFailoverDip measures the throughput dip around a failover, as a
// client with default options sees it: 16 callers run Next (coalesced)
// against a 3-process cluster; after 3s the leader is kill -9'd; throughput
// is sampled every 100ms. Per iteration it finds the steady rate before the
// kill, the time from the kill to the last 100ms interval without any value
// served (dip-zero-ms: the outage), and the time until throughput is back to
// 90% of the steady rate for 1s (recover90-ms). It reports the medians and
// the worst, and logs the first iteration's timeline.
//
// SEQD_FAILOVER_TIMING=fast uses the low-latency timing from the README.
// Skipped with -short.
//
//	go test -run '^$' -bench FailoverDip -benchtime 5x -timeout 30m ./cmd/seqbench
func BenchmarkFailoverDip(b *testing.B) {
	if testing.Short() {
		b.Skip("kills and restarts real processes; takes many seconds per iteration")
	}
	var extra []string
	timing := "defaults"
	after := 12 * time.Second
	if os.Getenv("SEQD_FAILOVER_TIMING") == "fast" {
		extra = []string{"--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
			"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms"}
		timing = "fast"
		after = 6 * time.Second
	}
	const before = 3 * time.Second
	const tick = 100 * time.Millisecond
	ps := proctest.Start(b, 3, extra...)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	cl, err := client.New(addrs, client.Options{RetryFor: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	target := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		_, err := cl.Next(ctx, "default", op.Keys...)
		return err
	})
	var zeros, recovers []time.Duration
	var first string
	for i := 0; b.Loop(); i++ {
		proctest.WaitHealthy(b, ps, time.Minute)
		leader := proctest.WaitLeader(b, ps, nil, time.Minute)
		if _, err := cl.Next(context.Background(), "default", 1); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		killed := make(chan time.Duration, 1)
		go func() {
			time.Sleep(before)
			leader.Kill9()
			killed <- time.Since(start)
		}()
		res, err := loadgen.Run(context.Background(), target, loadgen.Config{
			Concurrency: 16, Duration: before + after, Timeline: tick, Keys: 100000,
		})
		if err != nil {
			b.Fatal(err)
		}
		killAt := (<-killed).Seconds()
		zero, rec, steady := dip(res.Timeline, killAt, tick.Seconds())
		if rec < 0 {
			b.Logf("failover %d: throughput not back to 90%% of %.0f ids/s within %v", i, steady, after)
			rec = after
		}
		zeros = append(zeros, zero)
		recovers = append(recovers, rec)
		if i == 0 {
			first = fmt.Sprintf("steady %.0f ids/s; kill at %.2fs; last interval with no value ends %v after the kill; back to 90%% after %v\n%s",
				steady, killAt, zero, rec, timelineText(res.Timeline, killAt))
		}
		leader.Start(b)
		proctest.WaitVouched(b, leader, time.Minute)
	}
	slices.Sort(zeros)
	slices.Sort(recovers)
	b.ReportMetric(float64(zeros[len(zeros)/2].Milliseconds()), "dip-zero-p50-ms")
	b.ReportMetric(float64(zeros[len(zeros)-1].Milliseconds()), "dip-zero-max-ms")
	b.ReportMetric(float64(recovers[len(recovers)/2].Milliseconds()), "recover90-p50-ms")
	b.ReportMetric(float64(recovers[len(recovers)-1].Milliseconds()), "recover90-max-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("timing %s, %d failovers: outage (kill → end of the last 100ms with no value) %v; back to 90%% of steady %v\nfirst failover: %s",
		timing, len(zeros), zeros, recovers, first)
}

// dip analyses a timeline around a kill at killAt seconds: the steady rate
// (median of the 100ms rates from 1s to the kill), the end of the last
// interval after the kill without any value, and the start of the first 1s
// window after the kill whose mean rate is at least 90% of the steady rate
// (-1 if none).
func dip(tl []loadgen.Sample, killAt, tick float64) (zero, recover time.Duration, steady float64) {
	var pre []float64
	for _, s := range tl {
		if s.T > 1 && s.T <= killAt {
			pre = append(pre, s.IDsPerSec)
		}
	}
	if len(pre) > 0 {
		slices.Sort(pre)
		steady = pre[len(pre)/2]
	}
	sec := func(t float64) time.Duration {
		return time.Duration((t - killAt) * float64(time.Second)).Round(time.Millisecond)
	}
	first := -1
	for i, s := range tl {
		if s.T <= killAt {
			continue
		}
		if first < 0 {
			first = i
		}
		if s.IDsPerSec == 0 {
			zero = sec(s.T)
		}
	}
	recover = -1
	need := int(1/tick + 0.5)
	for i := first; first >= 0 && i+need <= len(tl); i++ {
		sum := 0.0
		for _, s := range tl[i : i+need] {
			sum += s.IDsPerSec
		}
		if sum/float64(need) >= 0.9*steady {
			recover = max(sec(tl[i].T-tick), 0)
			break
		}
	}
	return zero, recover, steady
}

func timelineText(tl []loadgen.Sample, killAt float64) string {
	var b strings.Builder
	b.WriteString("  t(s)  ids/s (per 100ms interval)\n")
	for _, s := range tl {
		mark := ""
		if s.T > killAt && s.T-0.1 <= killAt {
			mark = "  <- kill -9 of the leader"
		}
		fmt.Fprintf(&b, "  %5.1f  %8.0f%s\n", s.T, s.IDsPerSec, mark)
	}
	return b.String()
}
