package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/cli"
	"github.com/seqd/seqd/internal/loadgen"
)

// synopsis is the usage line of the command prog (seqbench, or the
// deprecated seqd bench).
func synopsis(prog string) string {
	return prog + " [flags]\n       " + prog + " baseline-server [--listen ADDR] [--compress]"
}

const benchDescription = `Drives a load against a running cluster through the Go client and reports
throughput (calls/s and ids/s) and latency percentiles (HdrHistogram: p50, p90,
p99, p99.9, max), with a progress line every second on stderr.

Closed loop by default: --concurrency callers, each calling again as soon as
its call returns. With --rate, calls start on a fixed schedule (open loop) and
latency counts from each call's scheduled start. The run stops after
--duration (after --warmup) or --count calls. --runs N repeats the run and
reports the median by ids/s.

Operations (--mix): next (Next with --batch keys), reserve (Reserve of --batch
values for one key), current (Current of --batch keys). Keys are drawn from
--keys distinct keys with --dist uniform, zipf (--zipf-s) or sequential.

The client coalesces concurrent Next and Current calls into multi-key requests
unless --coalesce=false. Before and after the run the bench asks the cluster for
the leader's raft applied index and reports raft entries per second next to
ids per second (the allocator raises a section's mark once per step values).

"baseline-server" serves SequenceService from a bare connect-go
handler that only increments a counter (no raft, no allocator, no lease), on
the same HTTP server settings as seqd: run the bench against it to measure the
RPC ceiling of the machine.`

// benchReport is the JSON output of the load tool.
type benchReport struct {
	Target   string            `json:"target"`
	Protocol string            `json:"protocol"`
	Coalesce bool              `json:"coalesce"`
	Mix      string            `json:"mix"`
	Runs     []*loadgen.Result `json:"runs"`
	Median   *loadgen.Result   `json:"median"`
	Raft     *raftReport       `json:"raft,omitempty"`
	// Coalescing counts the client's coalesced calls and requests (warmup
	// and every run included).
	Coalescing *client.BatchStats `json:"coalescing,omitempty"`
	StartedAt  time.Time          `json:"started_at"`
	// Load is the machine's 1-minute load average before and after (Linux).
	Load [2]float64 `json:"load_1m"`
}

type raftReport struct {
	Leader string `json:"leader"`
	// Entries is the growth of the leader's raft applied index over all runs
	// (raises, lease renewals and anything else).
	Entries       uint64  `json:"entries"`
	Seconds       float64 `json:"seconds"`
	EntriesPerSec float64 `json:"entries_per_s"`
	IDsPerEntry   float64 `json:"ids_per_entry"`
	IDsTotal      int64   `json:"ids_total"`
	LeaderChanged bool    `json:"leader_changed,omitempty"`
}

// Run runs the load tool, or with "baseline-server" first the baseline
// server, with its command-line arguments; prog names the command in usage
// texts and errors (seqbench, or seqd bench).
func Run(prog string, args []string) error {
	if len(args) > 0 && args[0] == "baseline-server" {
		return baselineServer(prog, args[1:])
	}
	fs := cli.NewFlagSet(prog, synopsis(prog), benchDescription)
	var (
		addr        = fs.String("addr", "127.0.0.1:7700", "comma-separated API addresses of cluster nodes")
		protocol    = fs.String("protocol", "connect", "wire protocol: connect, grpc or grpcweb")
		space       = fs.String("space", seqd.DefaultSpaceName, "space to use (created with --step and --section-size if missing)")
		step        = fs.Uint64("step", 0, "step of a space created by the bench (0: server default)")
		sectionSize = fs.Uint64("section-size", 0, "section size of a space created by the bench (0: server default)")
		conc        = fs.Int("concurrency", 16, "concurrent callers")
		duration    = fs.Duration("duration", 10*time.Second, "how long to measure, after the warmup")
		count       = fs.Int64("count", 0, "stop after this many measured calls (0: use --duration)")
		warmup      = fs.Duration("warmup", time.Second, "load before measuring (not counted)")
		rate        = fs.Float64("rate", 0, "target calls/s over all callers (0: closed loop, as fast as possible)")
		keys        = fs.Uint64("keys", 1000000, "distinct keys")
		keyOffset   = fs.Uint64("key-offset", 0, "first key")
		dist        = fs.String("dist", "uniform", "key distribution: uniform, zipf or sequential")
		zipfS       = fs.Float64("zipf-s", 1.1, "zipf exponent (> 1)")
		mix         = fs.String("mix", "next=100", "operation mix, e.g. next=90,current=10, reserve=1, ids=1 (flake NextIds of the default namespace), runs=1 (the same as runs of consecutive ids: NextIdRuns) or embedded=1 (an embedded flake generator per client)")
		batch       = fs.Int("batch", 1, "keys per Next/Current call, values per Reserve call")
		coalesce    = fs.Bool("coalesce", true, "let the client coalesce concurrent calls into multi-key requests")
		stream      = fs.String("stream", "framed", "how coalesced Next requests travel: framed (NextStream messages on an upgraded HTTP/1.1 connection, the client's default), connect (NextStream over Connect and h2c, the client's way with a given HTTP client) or false (unary calls)")
		inFlight    = fs.Int("max-in-flight", client.DefaultMaxInFlight, "coalesced requests in flight per space and call kind")
		batchKeys   = fs.Int("max-batch-keys", client.DefaultMaxBatchKeys, "keys per coalesced request")
		batchWait   = fs.Duration("max-batch-wait", client.DefaultMaxBatchWait, "longest wait of a call for a free request slot")
		clients     = fs.Int("clients", 1, "independent clients (each with its own connections); callers are spread over them")
		callTimeout = fs.Duration("timeout", 10*time.Second, "bound on one call, retries included")
		runs        = fs.Int("runs", 1, "repeat the run this many times and report the median (by ids/s)")
		pause       = fs.Duration("pause", 2*time.Second, "pause between runs")
		jsonOut     = fs.Bool("json", false, "print the report as JSON on stdout (progress stays on stderr)")
		progress    = fs.Duration("progress", time.Second, "progress line interval on stderr (0: none)")
		timeline    = fs.Duration("timeline", 0, "sample throughput every interval into the JSON timeline (e.g. 100ms)")
		leaderFirst = fs.Bool("leader-first", true, "ask the cluster for the leader and send to it first")
		noRaft      = fs.Bool("no-raft-stats", false, "do not ask the cluster for raft statistics (for servers without AdminService)")
		http2       = fs.Bool("http2", false, "use h2c for the Connect and gRPC-Web protocols too (the client's default is HTTP/1.1 for them, h2c for gRPC)")
		cpuProfile  = fs.String("cpuprofile", "", "write a CPU profile of the bench process (the load generator and client) to this file")
		cpuPIDs     = fs.String("cpu-pids", "", "comma-separated IDs of server processes whose CPU time over the measured run is reported with this process's own (Linux)")
	)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return cli.Usagef("%s takes no arguments, got %q", prog, ops)
	}
	m, err := loadgen.ParseMix(*mix)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	switch {
	case *conc < 1:
		return cli.Usagef("--concurrency must be at least 1")
	case *batch < 1:
		return cli.Usagef("--batch must be at least 1")
	case *runs < 1:
		return cli.Usagef("--runs must be at least 1")
	case *clients < 1:
		return cli.Usagef("--clients must be at least 1")
	case *keys < 1:
		return cli.Usagef("--keys must be at least 1")
	case *duration <= 0 && *count <= 0:
		return cli.Usagef("give a positive --duration or --count")
	}
	switch *dist {
	case "uniform", "sequential":
	case "zipf":
		if *zipfS <= 1 {
			return cli.Usagef("--zipf-s must be above 1")
		}
	default:
		return cli.Usagef("--dist must be uniform, zipf or sequential, got %q", *dist)
	}
	addrs := splitAddrs(*addr)
	if len(addrs) == 0 {
		return cli.Usagef("--addr is empty")
	}
	opts := client.Options{
		Protocol: client.Protocol(*protocol), RetryFor: *callTimeout,
		DisableCoalescing: !*coalesce, MaxInFlight: *inFlight, MaxBatchKeys: *batchKeys, MaxBatchWait: *batchWait,
		HTTP2: *http2,
	}
	switch *stream {
	case "framed", "true":
	case "connect":
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		opts.HTTPClient = &http.Client{Transport: &http.Transport{Protocols: &p, MaxIdleConnsPerHost: 64}}
	case "false", "off", "unary":
		opts.DisableStreaming = true
	default:
		return cli.Usagef("--stream %q: want framed, connect or false", *stream)
	}
	if _, err := client.New(addrs, opts); err != nil {
		return cli.Usagef("%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	admin, _ := client.New(addrs, client.Options{Protocol: opts.Protocol, RetryFor: 5 * time.Second, DisableCoalescing: true})
	if *leaderFirst && !*noRaft {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if st, err := admin.ClusterStatus(sctx); err == nil && st.GetLeaderApiAddr() != "" {
			l := st.GetLeaderApiAddr()
			addrs = append([]string{l}, slices.DeleteFunc(addrs, func(a string) bool { return a == l })...)
		}
		cancel()
	}
	if *space != seqd.DefaultSpaceName && !*noRaft {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := admin.CreateSpace(sctx, *space, *step, *sectionSize)
		cancel()
		if err != nil && connect.CodeOf(err) != connect.CodeAlreadyExists {
			return fmt.Errorf("creating space %s: %w", *space, cli.CallError(err))
		}
	}
	cls := make([]*client.Client, *clients)
	for i := range cls {
		if cls[i], err = client.New(addrs, opts); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	for _, mx := range m {
		switch {
		case mx.Kind == loadgen.Reserve && *batch > seqd.MaxReserveCount:
			return cli.Usagef("--batch %d: Reserve takes at most %d values per call", *batch, seqd.MaxReserveCount)
		case mx.Kind != loadgen.Reserve && *batch > seqd.MaxKeys:
			return cli.Usagef("--batch %d: Next and Current take at most %d keys per call, NextIds %d ids", *batch, seqd.MaxKeys, seqd.MaxKeys)
		}
	}
	// A call the cluster refuses for what it is (unknown space, malformed,
	// not allowed) would fail the same way every time: stop at the first.
	runCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	var next atomic.Uint64
	// Embedded flake generators: one per client, on the default namespace.
	gens := make([]*client.Generator, len(cls))
	for i, c := range cls {
		gens[i] = c.NewGenerator("", client.GeneratorOptions{Label: fmt.Sprintf("seqbench-%d", i)})
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		for _, g := range gens {
			_ = g.Close(cctx)
		}
	}()
	target := loadgen.TargetFunc(func(ctx context.Context, op *loadgen.Op) error {
		// Callers are spread over the clients round-robin per call.
		ci := uint64(0)
		if len(cls) > 1 {
			ci = next.Add(1) % uint64(len(cls))
		}
		c := cls[ci]
		var err error
		switch op.Kind {
		case loadgen.Next:
			_, err = c.Next(ctx, *space, op.Keys...)
		case loadgen.Current:
			_, err = c.Current(ctx, *space, op.Keys...)
		case loadgen.Reserve:
			_, err = c.Reserve(ctx, *space, op.Keys[0], op.Count)
		case loadgen.IDs:
			_, err = c.NextIds(ctx, "", op.Count)
		case loadgen.Embedded:
			_, err = gens[ci].NextN(ctx, int(op.Count))
		case loadgen.Runs:
			_, err = c.NextIdRuns(ctx, "", op.Count)
		}
		switch connect.CodeOf(err) {
		case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeUnauthenticated,
			connect.CodePermissionDenied, connect.CodeUnimplemented:
			abort(err)
		}
		return err
	})
	cfg := loadgen.Config{
		Concurrency: *conc, Duration: *duration, Count: *count, Warmup: *warmup, Rate: *rate,
		Keys: *keys, KeyOffset: *keyOffset, Dist: *dist, ZipfS: *zipfS, Mix: m, Batch: *batch,
		Timeline: *timeline, Classify: classifyErr,
	}
	if cfg.CPUPIDs, err = loadgen.ParsePIDs(*cpuPIDs); err != nil {
		return cli.Usagef("--cpu-pids: %v", err)
	}
	if *progress > 0 {
		cfg.Progress, cfg.ProgressEvery = os.Stderr, *progress
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	rep := &benchReport{Target: strings.Join(addrs, ","), Protocol: *protocol, Coalesce: *coalesce, Mix: *mix, StartedAt: time.Now()}
	rep.Load[0] = loadgen.LoadAvg()
	var before *seqv1.Node
	var beforeAt time.Time
	if !*noRaft {
		before, beforeAt = leaderNode(ctx, admin)
	}
	out := os.Stdout
	if *jsonOut {
		out = os.Stderr
	}
	for i := range *runs {
		if i > 0 && !sleepCtx(ctx, *pause) {
			break
		}
		if *runs > 1 {
			fmt.Fprintf(out, "run %d of %d\n", i+1, *runs)
		}
		res, err := loadgen.Run(runCtx, target, cfg)
		if err != nil {
			return cli.Usagef("%v", err)
		}
		if cause := context.Cause(runCtx); cause != nil && ctx.Err() == nil {
			return fmt.Errorf("stopped: the cluster refuses the calls: %w", cli.CallError(cause))
		}
		rep.Runs = append(rep.Runs, res)
		fmt.Fprint(out, res.Summary())
		if ctx.Err() != nil {
			break
		}
	}
	if len(rep.Runs) == 0 {
		return errors.New("interrupted before the first run")
	}
	var okCalls int64
	for _, r := range rep.Runs {
		okCalls += r.Calls - r.Errors
	}
	rep.Median = loadgen.MedianByIDs(rep.Runs)
	rep.Load[1] = loadgen.LoadAvg()
	if before != nil {
		after, afterAt := leaderNode(context.Background(), admin)
		if after != nil {
			var ids int64
			for _, r := range rep.Runs {
				ids += r.IDs
			}
			rr := &raftReport{Leader: after.GetId(), Seconds: afterAt.Sub(beforeAt).Seconds(), IDsTotal: ids}
			if after.GetId() == before.GetId() && after.GetAppliedIndex() >= before.GetAppliedIndex() {
				rr.Entries = after.GetAppliedIndex() - before.GetAppliedIndex()
			} else {
				rr.LeaderChanged = true
			}
			if rr.Seconds > 0 {
				rr.EntriesPerSec = float64(rr.Entries) / rr.Seconds
			}
			if rr.Entries > 0 {
				rr.IDsPerEntry = float64(ids) / float64(rr.Entries)
			}
			rep.Raft = rr
			if !rr.LeaderChanged {
				fmt.Fprintf(out, "raft        %d entries in %.1fs on leader %s (%.1f/s, %.0f ids per entry; lease renewals included)\n",
					rr.Entries, rr.Seconds, rr.Leader, rr.EntriesPerSec, rr.IDsPerEntry)
			} else {
				fmt.Fprintf(out, "raft        the leader changed during the run (%s → %s)\n", before.GetId(), after.GetId())
			}
		}
	}
	var st client.BatchStats
	for _, c := range cls {
		s := c.BatchStats()
		st.Calls += s.Calls
		st.Requests += s.Requests
		st.Keys += s.Keys
		st.Streamed += s.Streamed
	}
	if st.Requests > 0 {
		rep.Coalescing = &st
		fmt.Fprintf(out, "coalescing  %d calls in %d requests (%.1f calls, %.1f keys per request; %d as stream messages; warmup included)\n",
			st.Calls, st.Requests, float64(st.Calls)/float64(st.Requests), float64(st.Keys)/float64(st.Requests), st.Streamed)
	}
	if *runs > 1 {
		r := rep.Median
		fmt.Fprintf(out, "median of %d runs: %.0f calls/s  %.0f ids/s  p50 %.3fms  p99 %.3fms  p99.9 %.3fms\n",
			len(rep.Runs), r.CallsPerSec, r.IDsPerSec, r.Latency.P50, r.Latency.P99, r.Latency.P999)
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	if okCalls == 0 {
		return errors.New("no call succeeded (is the cluster up at --addr?)")
	}
	return nil
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// leaderNode returns the leader's entry of ClusterStatus, or nil.
func leaderNode(ctx context.Context, c *client.Client) (*seqv1.Node, time.Time) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		return nil, time.Time{}
	}
	for _, n := range st.GetNodes() {
		if n.GetId() == st.GetLeaderId() {
			return n, time.Now()
		}
	}
	return nil, time.Time{}
}

func classifyErr(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code().String()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline_exceeded"
	}
	return "other: " + err.Error()
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
