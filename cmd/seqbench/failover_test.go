package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/loadgen"
	"github.com/seqd/seqd/internal/proctest"
)

// BenchmarkFailover measures a failover of a 3-process cluster under load:
// 16 callers run Next (coalesced, a client with default options) and after
// 3s the leader is kill -9'd. Per iteration it reports
//
//   - failover-ms: from the kill to the first value served by the new
//     leader, as a probe client sees it that retries every few milliseconds
//     (the README's failover table);
//   - dip-zero-ms: from the kill to the end of the last 100ms interval in
//     which the callers got no value (the outage as the load sees it);
//   - recover90-ms: until throughput is back to 90% of the steady rate
//     before the kill for 1s;
//   - warm90-ms: the same, counted from the first value served by the new
//     leader instead of the kill (the warm-up: the new leader starts with
//     every section cold and raises one call's cold sections together).
//
// It reports the medians (-p50-ms) and the worst (-max-ms) of each, and logs
// the first iteration's throughput timeline. Between iterations the killed
// server is restarted and vouched for, and the cluster is healthy again.
//
// SEQD_FAILOVER_TIMING=fast uses the low-latency timing from the README;
// SEQD_FAILOVER_ARGS="--lease 1s ..." passes other flags to every server.
// SEQD_FAILOVER_KEYS=N spreads the callers' keys uniformly over N keys
// (default 100000, one section); above that, every key first takes a value
// (batched Next calls of 1000 keys), so that the cluster holds all N keys
// in N/100000 sections before the first kill. Skipped with -short.
//
//	go test -run '^$' -bench '^BenchmarkFailover$' -benchtime 20x -timeout 30m ./cmd/seqbench
func BenchmarkFailover(b *testing.B) {
	if testing.Short() {
		b.Skip("kills and restarts real processes; takes many seconds per iteration")
	}
	var extra []string
	timing := "defaults (heartbeat 500ms, election 500ms, raft leader lease 500ms, lease 1s)"
	after := 12 * time.Second
	if os.Getenv("SEQD_FAILOVER_TIMING") == "fast" {
		extra = []string{"--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
			"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms"}
		timing = "fast (heartbeat 300ms, election 300ms, raft leader lease 150ms, lease 500ms)"
		after = 6 * time.Second
	}
	if a := os.Getenv("SEQD_FAILOVER_ARGS"); a != "" {
		extra, timing = strings.Fields(a), a
	}
	keys := 100000
	if k := os.Getenv("SEQD_FAILOVER_KEYS"); k != "" {
		if _, err := fmt.Sscan(k, &keys); err != nil || keys < 1 {
			b.Fatalf("SEQD_FAILOVER_KEYS=%q: want a positive number of keys", k)
		}
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
	// The probe retries fast, so that it sees the new leader within a few
	// milliseconds of its first value.
	probe, err := client.New(addrs, client.Options{MinBackoff: 2 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		AttemptTimeout: 300 * time.Millisecond, RetryFor: time.Minute, DisableCoalescing: true})
	if err != nil {
		b.Fatal(err)
	}
	target := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		_, err := cl.Next(ctx, "default", op.Keys...)
		return err
	})
	if keys > 100000 {
		prefill(b, cl, keys)
	}
	var failovers, zeros, recovers, warms []time.Duration
	var first string
	for i := 0; b.Loop(); i++ {
		proctest.WaitHealthy(b, ps, time.Minute)
		leader := proctest.WaitLeader(b, ps, nil, time.Minute)
		// Every node caught up, and both clients pointed at the leader.
		for _, c := range []*client.Client{cl, probe} {
			if _, err := c.Next(context.Background(), "default", 1); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		killed := make(chan time.Duration, 1)
		failover := make(chan time.Duration, 1)
		go func() {
			time.Sleep(before)
			t0 := time.Now()
			leader.Kill9()
			killed <- time.Since(start)
			if _, err := probe.Next(context.Background(), "default", 1); err != nil {
				b.Errorf("failover %d: the probe got no value within a minute: %v", i, err)
			}
			failover <- time.Since(t0)
		}()
		res, err := loadgen.Run(context.Background(), target, loadgen.Config{
			Concurrency: 16, Duration: before + after, Timeline: tick, Keys: uint64(keys),
		})
		if err != nil {
			b.Fatal(err)
		}
		killAt := (<-killed).Seconds()
		took := <-failover
		if b.Failed() {
			b.FailNow()
		}
		zero, rec, steady := dip(res.Timeline, killAt, tick.Seconds())
		if rec < 0 {
			b.Logf("failover %d: throughput not back to 90%% of %.0f ids/s within %v", i, steady, after)
			rec = after
		}
		failovers = append(failovers, took)
		zeros = append(zeros, zero)
		recovers = append(recovers, rec)
		warms = append(warms, max(rec-took, 0))
		if i > 0 {
			// Later failovers: the rates of the 3 s after the kill, in
			// thousands of ids/s per 100ms interval.
			var after []string
			for _, s := range res.Timeline {
				if s.T > killAt && s.T <= killAt+3 {
					after = append(after, fmt.Sprintf("%.0f", s.IDsPerSec/1000))
				}
			}
			first += fmt.Sprintf("failover %d: steady %.0f ids/s; first value after %v; back to 90%% after %v; k ids/s after the kill: %s\n",
				i, steady, took.Round(time.Millisecond), rec, strings.Join(after, " "))
		}
		if i == 0 {
			first = fmt.Sprintf("steady %.0f ids/s; kill at %.2fs; first value %v after the kill; last interval with no value ends %v after it; back to 90%% after %v\n%s",
				steady, killAt, took, zero, rec, timelineText(res.Timeline, killAt))
		}
		leader.Start(b)
		proctest.WaitAdmitted(b, leader, time.Minute)
	}
	slices.Sort(failovers)
	slices.Sort(zeros)
	slices.Sort(recovers)
	slices.Sort(warms)
	b.ReportMetric(float64(failovers[len(failovers)/2].Milliseconds()), "failover-p50-ms")
	b.ReportMetric(float64(failovers[len(failovers)-1].Milliseconds()), "failover-max-ms")
	b.ReportMetric(float64(zeros[len(zeros)/2].Milliseconds()), "dip-zero-p50-ms")
	b.ReportMetric(float64(zeros[len(zeros)-1].Milliseconds()), "dip-zero-max-ms")
	b.ReportMetric(float64(recovers[len(recovers)/2].Milliseconds()), "recover90-p50-ms")
	b.ReportMetric(float64(recovers[len(recovers)-1].Milliseconds()), "recover90-max-ms")
	b.ReportMetric(float64(warms[len(warms)/2].Milliseconds()), "warm90-p50-ms")
	b.ReportMetric(float64(warms[len(warms)-1].Milliseconds()), "warm90-max-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("timing %s, %d keys, %d failovers: kill -9 → first value %v; outage (kill → end of the last 100ms with no value) %v; back to 90%% of steady %v (after the first value: %v)\nfirst failover: %s",
		timing, keys, len(zeros), failovers, zeros, recovers, warms, first)
}

// prefill gives every key below keys of space default a value, with
// batched Next calls of 1000 keys from 8 callers.
func prefill(b *testing.B, cl *client.Client, keys int) {
	b.Helper()
	start := time.Now()
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			batch := make([]uint64, 0, 1000)
			for {
				lo := next.Add(1000) - 1000
				if lo >= int64(keys) {
					errs <- nil
					return
				}
				batch = batch[:0]
				for k := lo; k < min(lo+1000, int64(keys)); k++ {
					batch = append(batch, uint64(k))
				}
				if _, err := cl.Next(context.Background(), "default", batch...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			b.Fatalf("prefilling %d keys: %v", keys, err)
		}
	}
	b.Logf("prefilled %d keys in %v", keys, time.Since(start).Round(time.Millisecond))
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

// BenchmarkFailoverIds measures what a leader's kill -9 costs flake ids in
// service mode: 16 callers run NextIds (one id per call, no client-side
// coalescing or retries) against the two nodes that are not the leader,
// each answering from its own worker, and after 3s the leader is kill -9'd.
// Per iteration it reports the failed calls and the slowest call; the
// metrics are the total of failed calls and the median and worst of the
// slowest call over the iterations. Between iterations the killed server is
// restarted and vouched for.
//
//	go test -run '^$' -bench '^BenchmarkFailoverIds$' -benchtime 10x -timeout 30m ./cmd/seqbench
func BenchmarkFailoverIds(b *testing.B) {
	if testing.Short() {
		b.Skip("kills and restarts real processes; takes many seconds per iteration")
	}
	const before, after = 3 * time.Second, 5 * time.Second
	ps := proctest.Start(b, 3)
	var failed int64
	var worst []time.Duration
	for i := 0; b.Loop(); i++ {
		proctest.WaitHealthy(b, ps, time.Minute)
		leader := proctest.WaitLeader(b, ps, nil, time.Minute)
		var survivors []seqv1connect.IdServiceClient
		for _, p := range ps {
			if p != leader {
				survivors = append(survivors, seqv1connect.NewIdServiceClient(http.DefaultClient, "http://"+p.API))
			}
		}
		// Each survivor holds its worker before the load starts.
		for _, s := range survivors {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			for {
				if _, err := s.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Count: 1})); err == nil {
					break
				} else if ctx.Err() != nil {
					b.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
		}
		var calls atomic.Uint64
		target := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
			s := survivors[calls.Add(1)%uint64(len(survivors))]
			_, err := s.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Count: 1}))
			return err
		})
		go func() {
			time.Sleep(before)
			leader.Kill9()
		}()
		res, err := loadgen.Run(context.Background(), target, loadgen.Config{
			Concurrency: 16, Duration: before + after, Keys: 1,
		})
		if err != nil {
			b.Fatal(err)
		}
		failed += res.Errors
		slowest := time.Duration(res.Latency.Max * float64(time.Millisecond))
		worst = append(worst, slowest)
		b.Logf("failover %d: %d calls, %d failed %v, slowest %v, p99.9 %.2fms", i, res.Calls, res.Errors, res.ErrorKinds, slowest, res.Latency.P999)
		if dir := os.Getenv("SEQD_FAILOVER_LOGS"); dir != "" && res.Errors > 0 {
			for _, p := range ps {
				_ = os.WriteFile(fmt.Sprintf("%s/failover-%d-%s.log", dir, i, p.ID), []byte(p.LogText()), 0o644)
			}
		}
		leader.Start(b)
		proctest.WaitAdmitted(b, leader, time.Minute)
	}
	slices.Sort(worst)
	b.ReportMetric(float64(failed), "failed-calls")
	b.ReportMetric(float64(worst[len(worst)/2].Microseconds())/1000, "slowest-p50-ms")
	b.ReportMetric(float64(worst[len(worst)-1].Microseconds())/1000, "slowest-max-ms")
	b.ReportMetric(0, "ns/op")
}
