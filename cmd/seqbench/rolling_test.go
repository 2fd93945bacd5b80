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

// BenchmarkRollingRestart measures a planned rolling restart of a
// 3-process cluster under load: 64 callers run Next (coalesced, a client
// with default options, keys uniform over 1,000,000) while each server in
// turn, followers first and the leader last, gets SIGTERM (a leader hands
// leadership over before it exits), is started again with the same flags
// and data, and is vouched for and caught up before the next one goes.
// Per iteration it reports the failed calls and the worst call latency;
// the metrics are the total of failed calls, and the median and worst over
// the iterations of the worst call and of the longest 100ms-interval run
// without any value. Servers run on default settings unless
// SEQD_FAILOVER_ARGS gives flags. Skipped with -short.
//
//	go test -run '^$' -bench '^BenchmarkRollingRestart$' -benchtime 3x -timeout 30m ./cmd/seqbench
func BenchmarkRollingRestart(b *testing.B) {
	if testing.Short() {
		b.Skip("restarts real processes; takes about a minute per iteration")
	}
	extra := strings.Fields(os.Getenv("SEQD_FAILOVER_ARGS"))
	const lead = 3 * time.Second
	const run = 90 * time.Second
	const tick = 100 * time.Millisecond
	ps := proctest.Start(b, 3, extra...)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	cl, err := client.New(addrs, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	target := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		_, err := cl.Next(ctx, "default", op.Keys...)
		return err
	})
	var failed int64
	var worst, gaps []time.Duration
	var notes []string
	for i := 0; b.Loop(); i++ {
		proctest.WaitHealthy(b, ps, time.Minute)
		if _, err := cl.Next(context.Background(), "default", 1); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan string, 1)
		begin := time.Now()
		go func() {
			defer cancel()
			time.Sleep(lead)
			leader := proctest.LeaderOf(ps)
			order := slices.DeleteFunc(slices.Clone(ps), func(p *proctest.Proc) bool { return p == leader })
			if leader != nil {
				order = append(order, leader)
			}
			var steps []string
			for _, p := range order {
				t0 := time.Now()
				role := "follower"
				if p == leader {
					role = "leader"
				}
				p.Signal(15)
				<-p.Done()
				down := time.Since(t0)
				p.Start(b)
				proctest.WaitAdmitted(b, p, time.Minute)
				proctest.WaitHealthy(b, ps, time.Minute)
				steps = append(steps, fmt.Sprintf("%s (%s) SIGTERM at %.1fs, exit %v, back %v", p.ID, role, t0.Sub(begin).Seconds(),
					down.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond)))
			}
			time.Sleep(lead) // load after the last restart
			done <- strings.Join(steps, "; ")
		}()
		res, err := loadgen.Run(ctx, target, loadgen.Config{Concurrency: 64, Duration: run, Timeline: tick})
		if err != nil {
			b.Fatal(err)
		}
		var steps string
		select {
		case steps = <-done:
		default:
			b.Fatalf("rolling restart %d did not finish within %v", i, run)
		}
		gap, cur := time.Duration(0), time.Duration(0)
		var gapEnd float64
		for _, s := range res.Timeline {
			if s.IDsPerSec == 0 {
				cur += tick
				if cur > gap {
					gap, gapEnd = cur, s.T
				}
			} else {
				cur = 0
			}
		}
		failed += res.Errors
		worst = append(worst, time.Duration(res.Latency.Max*float64(time.Millisecond)))
		gaps = append(gaps, gap)
		notes = append(notes, fmt.Sprintf("restart %d: %d calls, %d failed %v, %.0f ids/s, p99 %.1f ms, p99.9 %.1f ms, worst %.1f ms, longest run of 100ms intervals without a value %v (ending at %.1fs); %s",
			i, res.Calls, res.Errors, res.ErrorKinds, res.IDsPerSec, res.Latency.P99, res.Latency.P999, res.Latency.Max, gap, gapEnd, steps))
	}
	slices.Sort(worst)
	slices.Sort(gaps)
	b.ReportMetric(float64(failed), "failed-calls")
	b.ReportMetric(float64(worst[len(worst)/2].Milliseconds()), "worst-call-p50-ms")
	b.ReportMetric(float64(worst[len(worst)-1].Milliseconds()), "worst-call-max-ms")
	b.ReportMetric(float64(gaps[len(gaps)/2].Milliseconds()), "no-value-p50-ms")
	b.ReportMetric(float64(gaps[len(gaps)-1].Milliseconds()), "no-value-max-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("flags %q, 64 callers:\n%s", extra, strings.Join(notes, "\n"))
}
