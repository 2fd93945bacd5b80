package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/proctest"
)

// BenchmarkGroupCost measures what raft groups cost an idle 3-process
// cluster, at 1, 4, 16 and 64 groups (SEQD_COST_GROUPS="1,4" to choose).
// Each count starts a new cluster (--lease-handoff, so that balancing the
// leaders takes seconds, not a lease per move), waits until every group is
// served by its preferred leader, lets it settle, and then, per node:
//
//   - cpu-%: CPU time (user + system, /proc/<pid>/stat) over 10 s, in % of
//     one core;
//   - rss-MiB and goroutines: at the end of that window (/proc, /metrics);
//   - raft-rpcs/s: raft RPCs the node processed (hashicorp/raft's
//     seqd_raft_rpc_*_count, process-global over its groups);
//   - fsyncs/s: fsync and fdatasync calls over a further 5 s, counted with
//     strace -c -f (strace slows the process, so CPU is not measured then).
//
// It reports the mean over the 3 nodes. Skipped with -short.
//
//	go test -run '^$' -bench '^BenchmarkGroupCost$' -benchtime 1x -timeout 30m ./cmd/seqbench
func BenchmarkGroupCost(b *testing.B) {
	if testing.Short() {
		b.Skip("starts real processes and measures them for seconds")
	}
	counts := []int{1, 4, 16, 64}
	if v := os.Getenv("SEQD_COST_GROUPS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("SEQD_COST_GROUPS: %v", err)
			}
			counts = append(counts, n)
		}
	}
	for _, groups := range counts {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			for range b.N {
				groupCost(b, groups)
			}
		})
	}
}

func groupCost(b *testing.B, groups int) {
	ps := proctest.Start(b, 3, "--groups", strconv.Itoa(groups), "--lease-handoff")
	start := time.Now()
	waitPreferred(b, ps[0], groups, 5*time.Minute)
	b.Logf("%d groups: every group served by its preferred leader %v after start", groups, time.Since(start).Round(100*time.Millisecond))
	time.Sleep(3 * time.Second)

	const window = 10 * time.Second
	cpu0, rpc0 := make([]float64, 3), make([]float64, 3)
	for i, p := range ps {
		cpu0[i] = cpuSeconds(b, p.PID())
		rpc0[i] = metricSum(b, p, raftRPC)
	}
	time.Sleep(window)
	var cpu, rss, gor, rpcs float64
	for i, p := range ps {
		cpu += (cpuSeconds(b, p.PID()) - cpu0[i]) / window.Seconds() * 100
		rpcs += (metricSum(b, p, raftRPC) - rpc0[i]) / window.Seconds()
		rss += rssMiB(b, p.PID())
		gor += metricSum(b, p, regexp.MustCompile(`^go_goroutines `))
	}
	fsyncs := 0.0
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, p := range ps {
		wg.Go(func() {
			n := countFsyncs(b, p.PID(), 5*time.Second)
			mu.Lock()
			fsyncs += n / 5
			mu.Unlock()
		})
	}
	wg.Wait()
	b.ReportMetric(cpu/3, "cpu-%")
	b.ReportMetric(rss/3, "rss-MiB")
	b.ReportMetric(gor/3, "goroutines")
	b.ReportMetric(rpcs/3, "raft-rpcs/s")
	b.ReportMetric(fsyncs/3, "fsyncs/s")
	b.Logf("%d groups, per node: CPU %.2f%% of a core, RSS %.1f MiB, %.0f goroutines, %.0f raft RPCs/s, %.1f fsyncs/s",
		groups, cpu/3, rss/3, gor/3, rpcs/3, fsyncs/3)
	for _, p := range ps {
		p.Kill9()
	}
}

var raftRPC = regexp.MustCompile(`^seqd_raft_rpc_[A-Za-z]+_count `)

// waitPreferred waits until every group has a serving leader that is its
// preferred one.
func waitPreferred(b *testing.B, p *proctest.Proc, groups int, timeout time.Duration) {
	c := seqv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+p.API)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := c.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
		cancel()
		if err == nil && len(st.Msg.GetGroups()) == groups {
			ok := true
			for _, g := range st.Msg.GetGroups() {
				// One group has no preferred leader (it is never balanced).
				ok = ok && g.GetServing() && (groups == 1 || g.GetLeaderId() == g.GetPreferredLeader())
			}
			if ok {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatalf("groups not all served by their preferred leaders within %v", timeout)
}

// cpuSeconds reads a process's user + system CPU time.
func cpuSeconds(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which is in parentheses).
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func rssMiB(b *testing.B, pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS for %d", pid)
	return 0
}

// metricSum sums the values of the /metrics lines matching re.
func metricSum(b *testing.B, p *proctest.Proc, re *regexp.Regexp) float64 {
	resp, err := http.Get("http://" + p.API + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if re.MatchString(line) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// countFsyncs counts a process's fsync and fdatasync calls for d with
// strace -c -f.
func countFsyncs(b *testing.B, pid int, d time.Duration) float64 {
	cmd := exec.Command("strace", "-c", "-f", "-e", "trace=fsync,fdatasync", "-p", strconv.Itoa(pid))
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		b.Skipf("strace: %v", err)
	}
	time.Sleep(d)
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	n := 0.0
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && (f[len(f)-1] == "fsync" || f[len(f)-1] == "fdatasync") {
			calls, err := strconv.ParseFloat(f[3], 64)
			if err == nil {
				n += calls
			}
		}
	}
	return n
}
