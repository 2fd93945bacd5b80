package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/proctest"
)

// TestBenchCommand runs seqbench against one real process: a short run
// reports throughput, percentiles and raft entries (JSON checked), bad flags
// exit 2 before any load, and a load the cluster refuses (unknown space)
// stops at once with exit 1.
func TestBenchCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real process")
	}
	ps := proctest.Start(t, 1)
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	addr := ps[0].API

	out, errOut, code := runSeqbench(t, "--addr", addr, "--count", "2000", "--warmup", "0",
		"--concurrency", "8", "--keys", "100", "--step", "100", "--space", "benchspace", "--json", "--progress", "0")
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s", code, errOut)
	}
	var rep struct {
		Median struct {
			Calls, IDs, Errors int64
			CallsPerSec        float64 `json:"calls_per_s"`
			Latency            struct {
				P50 float64 `json:"p50_ms"`
				P99 float64 `json:"p99_ms"`
				Max float64 `json:"max_ms"`
			}
		}
		Raft *struct {
			Entries     uint64
			IDsPerEntry float64 `json:"ids_per_entry"`
		}
		Coalescing *struct{ Calls, Requests uint64 }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	m := rep.Median
	if m.Calls != 2000 || m.IDs != 2000 || m.Errors != 0 || m.CallsPerSec <= 0 {
		t.Fatalf("bench counted %d calls, %d ids, %d errors, %.0f calls/s; want 2000, 2000, 0, > 0", m.Calls, m.IDs, m.Errors, m.CallsPerSec)
	}
	if !(0 < m.Latency.P50 && m.Latency.P50 <= m.Latency.P99 && m.Latency.P99 <= m.Latency.Max) {
		t.Fatalf("latency percentiles out of order: %+v", m.Latency)
	}
	// 2000 values of 100 keys in a space with step 100: a section's mark
	// moves once per 100 values of it, so there are raises, but far fewer
	// entries than values.
	if rep.Raft == nil || rep.Raft.Entries == 0 || rep.Raft.Entries > 2000/100+20 {
		t.Fatalf("raft report %+v: want between 1 and 40 entries for 2000 ids at step 100", rep.Raft)
	}
	// 8 callers, one request in flight at a time: calls share requests.
	// (Calls cut off at the end of the run count here too.)
	if rep.Coalescing == nil || rep.Coalescing.Calls < 2000 || rep.Coalescing.Requests == 0 || rep.Coalescing.Requests >= rep.Coalescing.Calls {
		t.Fatalf("coalescing report %+v: want at least 2000 calls in fewer requests", rep.Coalescing)
	}

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--concurrency", "0"}, 2, "--concurrency"},
		{[]string{"--batch", "20000"}, 2, "at most 10000 keys"},
		{[]string{"--mix", "reserve=1", "--batch", "2000000"}, 2, "at most 1000000 values"},
		{[]string{"--dist", "pareto"}, 2, "--dist"},
		{[]string{"--mix", "frob=1"}, 2, "frob"},
		{[]string{"--space", "nope", "--no-raft-stats", "--duration", "5s"}, 1, "not_found"},
	} {
		args := append([]string{"--addr", addr, "--progress", "0", "--warmup", "0"}, c.args...)
		start := time.Now()
		_, errOut, code := runSeqbench(t, args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("seqbench %v: exit %d, stderr %q; want exit %d mentioning %q", args, code, errOut, c.code, c.msg)
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("seqbench %v took %v: a refused load must stop at the first error", args, took)
		}
	}
}
