package main_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/proctest"
)

// BenchmarkFailover measures, per iteration, the time from kill -9 of the
// leader process of a 3-process cluster to the first value served by the new
// leader (seen by a client that polls every few milliseconds over all nodes).
// It reports the median and worst as failover-p50-ms and failover-max-ms.
//
// SEQD_FAILOVER_TIMING=fast uses the low-latency timing from the README;
// anything else uses seqd's defaults. Skipped with -short.
//
//	go test -run '^$' -bench Failover -benchtime 20x ./cmd/seqbench
func BenchmarkFailover(b *testing.B) {
	if testing.Short() {
		b.Skip("kills and restarts real processes; takes seconds per iteration")
	}
	var extra []string
	timing := "defaults (heartbeat 1s, election 1s, raft leader lease 500ms, lease 2s)"
	if os.Getenv("SEQD_FAILOVER_TIMING") == "fast" {
		extra = []string{"--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
			"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms"}
		timing = "fast (heartbeat 300ms, election 300ms, raft leader lease 150ms, lease 500ms)"
	}
	ps := proctest.Start(b, 3, extra...)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	cl, err := client.New(addrs, client.Options{MinBackoff: 2 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		AttemptTimeout: 300 * time.Millisecond, RetryFor: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		leader := proctest.WaitLeader(b, ps, nil, time.Minute)
		// Every node caught up and the client pointed at the leader.
		if _, err := cl.Next(ctx, "default", 1); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		leader.Kill9()
		if _, err := cl.Next(ctx, "default", 1); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		leader.Start(b)
		proctest.WaitHealthy(b, ps, time.Minute)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "failover-p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "failover-max-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("timing %s: %d failovers, kill -9 → first value: %v", timing, len(took), took)
}
