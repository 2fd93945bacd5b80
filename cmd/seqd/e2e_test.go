package main_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/proctest"
	"github.com/seqd/seqd/internal/testcluster"
)

func runCLI(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(proctest.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestCommandLineErrors(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	tooManyKeys := make([]string, seqd.MaxKeys+1)
	for i := range tooManyKeys {
		tooManyKeys[i] = strconv.Itoa(i)
	}
	cases := []struct {
		env  []string
		args []string
		code int
		msg  string
	}{
		{nil, nil, 2, "Usage"},
		{nil, []string{"frobnicate"}, 2, "unknown command"},
		{nil, []string{"serve", "--bogus"}, 2, "bogus"},
		{nil, []string{"serve", "extra"}, 2, "no arguments"},
		{nil, []string{"serve", "--bootstrap-expect", "-1"}, 2, "bootstrap-expect"},
		{nil, []string{"serve", "--groups", "300"}, 2, "--groups must be 1 to 256"},
		{nil, []string{"serve", "--groups", "-1"}, 2, "--groups must be 1 to 256"},
		{nil, []string{"node", "drain"}, 2, "node drain takes one ID, or --self"},
		{nil, []string{"serve", "--api-addr", "nonsense"}, 2, "host:port"},
		{nil, []string{"serve", "--api-addr", "127.0.0.1:0"}, 2, "fixed port"},
		{nil, []string{"serve", "--advertise-raft", "0.0.0.0:7701"}, 2, "unspecified"},
		{nil, []string{"serve", "--log-level", "loud"}, 2, "log level"},
		{[]string{"SEQD_BOOTSTRAP_EXPECT=three"}, []string{"serve"}, 2, "SEQD_BOOTSTRAP_EXPECT"},
		{nil, []string{"next"}, 2, "KEY"},
		{nil, []string{"next", "abc"}, 2, "unsigned"},
		{nil, []string{"next", "-5"}, 2, ""},
		{nil, []string{"reserve", "1"}, 2, "KEY COUNT"},
		{nil, []string{"reserve", "1", "0"}, 2, "COUNT"},
		// The server's limits, checked before any call: a usage error.
		{nil, []string{"reserve", "1", "1000001"}, 2, "from 1 to 1000000"},
		{nil, []string{"reserve", "1", "99999999999"}, 2, "from 1 to 1000000"},
		{nil, append([]string{"next"}, tooManyKeys...), 2, "next takes at most 10000 keys per call, got 10001"},
		{nil, append([]string{"current", "--space", "s"}, tooManyKeys...), 2, "current takes at most 10000 keys per call, got 10001"},
		// At the limits the command calls (and here finds nothing to call).
		{nil, []string{"reserve", "--addr", dead, "--timeout", "300ms", "1", "1000000"}, 1, ""},
		{nil, append([]string{"next", "--addr", dead, "--timeout", "300ms"}, tooManyKeys[1:]...), 1, ""},
		{nil, []string{"space"}, 2, "subcommand"},
		{nil, []string{"next", "--protocol", "carrier-pigeon", "1"}, 2, "protocol"},
		{nil, []string{"next", "--addr", dead, "--timeout", "300ms", "1"}, 1, "unavailable"},
		{nil, []string{"bench", "--concurrency", "0"}, 2, "deprecated"},
	}
	for _, c := range cases {
		_, stderr, code := runCLI(t, c.env, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("seqd %v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	if out, _, code := runCLI(t, nil, "serve", "-h"); code != 0 || !strings.Contains(out, "SEQD_DATA_DIR") {
		t.Errorf("serve -h: exit %d, output %q", code, out)
	}
}

// TestProcessClusterUnderKillAndPause starts three real seqd processes with
// the documented flags, hammers all three nodes, and repeatedly kill -9s the
// leader (then restarts it) and SIGSTOPs it for seconds (then SIGCONTs it).
// Every value is checked for C1 (no repeats), C2 (per-key order) and C3.
func TestProcessClusterUnderKillAndPause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for about a minute")
	}
	ps := proctest.Start(t, 3, "--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms", "--log-level", "info")
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	cl, err := client.New(addrs, client.Options{RetryFor: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	leader := proctest.WaitLeader(t, ps, nil, 30*time.Second)
	if _, err := cl.CreateSpace(context.Background(), "e2e", 50, 8); err != nil {
		t.Fatal(err)
	}
	w := testcluster.StartWorkload(t, "e2e", 24, addrs, 3)
	w.WaitOK(t, 200, 30*time.Second)

	var failovers []time.Duration
	for round := range 3 {
		// kill -9 the leader; measure until a new leader serves a value.
		killed := time.Now()
		leader.Kill9()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := cl.Next(ctx, "default", uint64(round))
			cancel()
			if err == nil {
				break
			}
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("round %d: no value served within 30s of killing %s", round, leader.ID)
			}
		}
		failovers = append(failovers, time.Since(killed))
		next := proctest.WaitLeader(t, ps, leader, 30*time.Second)
		w.WaitOK(t, 100, 30*time.Second)
		leader.Start(t)
		proctest.WaitAdmitted(t, leader, 30*time.Second)
		w.WaitOK(t, 100, 30*time.Second)
		leader = next

		// SIGSTOP the leader for 3s: others elect a new leader; when the old
		// one resumes its lease has long expired.
		leader.Signal(syscall.SIGSTOP)
		next = proctest.WaitLeader(t, ps, leader, 30*time.Second)
		w.WaitOK(t, 100, 30*time.Second)
		time.Sleep(time.Duration(2+round) * time.Second) // a fault window, not a wait for a condition
		leader.Signal(syscall.SIGCONT)
		w.WaitOK(t, 100, 30*time.Second)
		leader = next
	}
	w.Stop()
	w.Check(t)
	t.Logf("kill -9 leader → first value served: %v (lease 500ms, heartbeat/election 300ms)", failovers)
}

// TestProcessBootstrapAtDifferentTimesAndGracefulHandover starts two of three
// nodes, checks that they do not form a cluster on their own, starts the
// third later, and then SIGTERMs the leader: it hands leadership over before
// exiting, and values keep increasing.
func TestProcessBootstrapAtDifferentTimesAndGracefulHandover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ps := proctest.New(t, 3, "--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms")
	ps[2].Start(t)
	ps[0].Start(t)
	cl, err := client.New([]string{ps[0].API, ps[2].API}, client.Options{RetryFor: 200 * time.Millisecond, AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Two of three expected servers: no bootstrap, so no leader, for a while.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		if _, err := cl.Next(context.Background(), "default", 1); err == nil {
			t.Fatal("two of three servers served without the third: they bootstrapped early")
		}
	}
	ps[1].Start(t)
	leader := proctest.WaitLeader(t, ps, nil, 30*time.Second)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	cl, err = client.New(addrs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := cl.Next(ctx, "default", 5)
	if err != nil {
		t.Fatal(err)
	}
	leader.Signal(syscall.SIGTERM)
	<-leader.Done()
	if !strings.Contains(leader.LogText(), "leadership handed over") {
		t.Errorf("the leader did not hand leadership over on SIGTERM; its log:\n%s", leader.LogText())
	}
	next := proctest.WaitLeader(t, ps, leader, 30*time.Second)
	after, err := cl.Next(ctx, "default", 5)
	if err != nil {
		t.Fatal(err)
	}
	if after[0] <= before[0] {
		t.Fatalf("value %d after handover, %d before", after[0], before[0])
	}
	t.Logf("%s handed over to %s; values %d then %d", leader.ID, next.ID, before[0], after[0])
	// The old leader rejoins with the same flags.
	leader.Start(t)
	proctest.WaitHealthy(t, ps, 30*time.Second)
}

// TestMetricsEndpoint scrapes /metrics of a real process after some calls.
func TestMetricsEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real process")
	}
	ps := proctest.Start(t, 1)
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	cl, err := client.New([]string{ps[0].API}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.Next(ctx, "default", 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Reserve(ctx, "default", 9, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Next(ctx, "nope", 1); err == nil {
		t.Fatal("unknown space accepted")
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := cl.NextIds(ctx, "", 7); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + ps[0].API + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`seqd_values_issued_total{call="next"} 3`,
		`seqd_values_issued_total{call="reserve"} 100`,
		`seqd_rpc_requests_total{code="ok",procedure="/seq.v1.SequenceService/Next"} 1`,
		`seqd_rpc_requests_total{code="not_found",procedure="/seq.v1.SequenceService/Next"} 1`,
		`seqd_rpc_duration_seconds_bucket{procedure="/seq.v1.SequenceService/Reserve"`,
		`seqd_raises_total{result="ok"}`,
		`seqd_raise_duration_seconds_count`,
		"seqd_serving 1",
		"seqd_groups 1",
		`seqd_group_serving{group="0"} 1`,
		`seqd_group_preferred_leader{group="0"} 0`, // one group is never balanced
		`seqd_group_raft_open{group="0"} 1`,
		"seqd_lease_renewals_total",
		"seqd_leader_changes_total 1",
		"seqd_last_failover_seconds",
		"seqd_keys_held 4",
		"seqd_raft_commitTime",
		`seqd_flake_ids_issued_total{namespace="default"} 7`,
		`seqd_flake_workers_held{namespace="default"} 1`,
		`seqd_flake_worker_capacity{namespace="default"} 1024`,
		`seqd_flake_range_remaining_seconds{namespace="default"}`,
		`seqd_flake_lifetime_remaining_seconds{namespace="default"}`,
		"seqd_flake_entries_total ",
		"seqd_flake_leader_clock_skew_seconds 0",
		"go_goroutines",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestHealthCommand: `seqd health` exits 0 against a serving node and 1
// against an address where nothing answers (the container health check).
func TestHealthCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real process")
	}
	ps := proctest.Start(t, 1)
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	if out, _, code := runCLI(t, nil, "health", "--addr", ps[0].API); code != 0 || !strings.Contains(out, "SERVING") {
		t.Fatalf("health of a serving node: exit %d, %q", code, out)
	}
	dead := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	if _, _, code := runCLI(t, nil, "health", "--addr", dead, "--timeout", "500ms"); code != 1 {
		t.Fatalf("health of nothing: exit %d, want 1", code)
	}
	// Without --addr it asks the node SEQD_API_ADDR serves (on loopback
	// for an unspecified host), as the image's HEALTHCHECK does.
	_, port, _ := strings.Cut(ps[0].API, ":")
	if out, _, code := runCLI(t, []string{"SEQD_API_ADDR=0.0.0.0:" + port}, "health"); code != 0 || !strings.Contains(out, "SERVING") {
		t.Fatalf("health with SEQD_API_ADDR=0.0.0.0:%s: exit %d, %q", port, code, out)
	}
	if _, _, code := runCLI(t, []string{"SEQD_API_ADDR=" + dead}, "health", "--timeout", "500ms"); code != 1 {
		t.Fatalf("health with SEQD_API_ADDR of nothing: exit %d, want 1", code)
	}
}

// TestStatusPageAndCORS: seqd serve serves the status page at /ui/, and with
// --cors-origin answers browser preflights for that origin only.
func TestStatusPageAndCORS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real process")
	}
	ps := proctest.Start(t, 1, "--cors-origin", "http://app.example.test")
	proctest.WaitLeader(t, ps, nil, 30*time.Second)
	base := "http://" + ps[0].API
	resp, err := http.Get(base + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(strings.ToLower(string(page)), "<html") {
		t.Fatalf("/ui/: HTTP %d %.200s", resp.StatusCode, page)
	}
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, base+"/seq.v1.SequenceService/Next", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,connect-protocol-version")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r
	}
	if r := preflight("http://app.example.test"); r.StatusCode/100 != 2 || r.Header.Get("Access-Control-Allow-Origin") != "http://app.example.test" {
		t.Fatalf("preflight from the allowed origin: HTTP %d, allow-origin %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := preflight("http://evil.example.test"); r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: HTTP %d, allow-origin %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
}
