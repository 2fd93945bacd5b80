package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/jepsen/nemesis"
	"github.com/seqd/seqd/jepsen/nodes"
	"github.com/seqd/seqd/jepsen/record"
	"github.com/seqd/seqd/jepsen/workload"
)

// meta describes a test run in results.json.
type meta struct {
	Test    string    `json:"test"`
	Start   time.Time `json:"start"`
	Dir     string    `json:"dir"`
	Command []string  `json:"command"`
	Seed    uint64    `json:"seed"`
	Nodes   int       `json:"nodes"`
	Groups  int       `json:"groups,omitempty"`
	// Space and SectionSize map a key to its group (seqd.GroupOfKey).
	Space       string              `json:"space,omitempty"`
	SectionSize uint64              `json:"section_size,omitempty"`
	Net         string              `json:"net"`
	NetNote     string              `json:"net_note,omitempty"`
	Unsafe      bool                `json:"unsafe_disable_lease"`
	SeqdArgs    []string            `json:"seqd_args"`
	NodeArgs    map[string][]string `json:"node_args,omitempty"`
	NodeCmds    []string            `json:"node_commands"`
	Faults      []string            `json:"faults"`
	Skipped     []string            `json:"faults_skipped,omitempty"`
	Injected    int                 `json:"faults_injected"`
	Schedule    string              `json:"schedule"`
	Workload    string              `json:"workload"`
	TimeLimit   float64             `json:"time_limit_s"`
	Elapsed     float64             `json:"elapsed_s"`
	Errors      []string            `json:"harness_errors,omitempty"`
	Warnings    []string            `json:"warnings,omitempty"`
	Bootstrap   string              `json:"bootstrap,omitempty"`
	SmallDisks  []string            `json:"small_disks,omitempty"`
	Crashes     []string            `json:"node_crashes,omitempty"`
	Panics      []string            `json:"node_panics,omitempty"`
	Interrupt   string              `json:"interrupted,omitempty"`
	FinalReads  string              `json:"final_reads,omitempty"`
	// The flake workload's: its kind, --unsafe-flake-trust-clock, and how
	// many times an embedded generator was closed and recreated.
	WorkloadKind      string `json:"workload_kind,omitempty"`
	TrustClock        bool   `json:"unsafe_flake_trust_clock,omitempty"`
	GeneratorRestarts int64  `json:"generator_restarts,omitempty"`
}

// clients is a running workload.
type clients interface {
	Counts() (ok, fail, info int64)
	Stop()
}

// logger prints progress to the terminal (unless quiet) and to jepsen.log.
type logger struct {
	mu    sync.Mutex
	start time.Time
	file  io.Writer
	quiet bool
}

func (l *logger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := fmt.Sprintf("[%7.2fs] %s\n", time.Since(l.start).Seconds(), fmt.Sprintf(format, args...))
	if l.file != nil {
		io.WriteString(l.file, line)
	}
	if !l.quiet {
		io.WriteString(os.Stderr, line)
	}
}

// lockedWriter writes under the logger's lock, so that slog's lines and the
// logger's do not interleave.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// run runs the test with a network plan made by launch, and returns the exit
// status.
func run(cfg *config, p plan) int {
	startWall := time.Now()
	dir := filepath.Join(cfg.Store, cfg.Test, startWall.Format("20060102T150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		return exitHarness
	}
	for _, link := range []string{filepath.Join(cfg.Store, "latest"), filepath.Join(cfg.Store, cfg.Test, "latest")} {
		target, _ := filepath.Rel(filepath.Dir(link), dir)
		_ = os.Remove(link)
		_ = os.Symlink(target, link)
	}
	logf, err := os.Create(filepath.Join(dir, "jepsen.log"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		return exitHarness
	}
	defer logf.Close()
	log := &logger{start: startWall, file: logf, quiet: cfg.Quiet}
	// The Go client's own logs (an embedded generator's holder: workers
	// acquired, renewals failing) go to jepsen.log, not the terminal: the
	// flake workload gives its clients this logger (client.Options.Logger).
	slog.SetDefault(slog.New(slog.NewTextHandler(&lockedWriter{w: logf, mu: &log.mu}, nil)))

	m := &meta{Test: cfg.Test, Start: startWall, Dir: dir, Command: os.Args, Seed: p.Seed, Nodes: cfg.Nodes,
		Groups: cfg.Groups, Space: cfg.Space, SectionSize: cfg.SectionSize,
		Net: "loopback", NetNote: p.NetNote, Unsafe: cfg.Unsafe, TimeLimit: cfg.TimeLimit.Seconds(),
		WorkloadKind: cfg.Workload, TrustClock: cfg.TrustClock}
	if p.Net != nil {
		m.Net = fmt.Sprintf("netns %s.0/24 (namespaces %s-*)", p.Net.Subnet, p.Net.Prefix)
	}
	faults, skipped, err := nemesis.Parse(cfg.Nemesis, cfg.Nodes, p.Net != nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: --nemesis: %v\n", err)
		return exitUsage
	}
	m.Faults = nemesis.Names(faults)
	m.Skipped = skipped
	if len(skipped) > 0 {
		log.Printf("NOTE: skipping faults that cannot run here: %s", strings.Join(skipped, ", "))
	}
	m.Schedule = fmt.Sprintf("interval %v, duration %s, max faults %d, overlap %v", cfg.Interval, cfg.Duration, cfg.MaxFaults, cfg.Overlap)
	m.Workload = fmt.Sprintf("rate %g/s, %d smart + %d pinned per node, %d keys, mix %s, op timeout %v (smart %v, attempt %v), space %s step %d section %d",
		cfg.Rate, cfg.Smart, cfg.PinnedPerNode, cfg.Keys, cfg.mix, cfg.OpTimeout, cfg.SmartTimeout, cfg.AttemptTimeout, cfg.Space, cfg.Step, cfg.SectionSize)
	switch cfg.Workload {
	case "flake":
		m.Workload = flakeDescription(cfg)
	case "segment":
		m.Workload = segmentDescription(cfg, m.Workload)
	}

	// Interrupts stop the test early, but it is still healed, checked and
	// cleaned up.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	var interrupted atomic.Value
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		interrupted.Store(s.String())
		log.Printf("%v: stopping the test early (it is still healed, checked and cleaned up)", s)
		stop()
	}()

	// The nodes.
	seqdArgs := []string{"--lease", cfg.Lease.String(), "--raft-heartbeat-timeout", cfg.Heartbeat.String(),
		"--raft-election-timeout", cfg.Election.String(), "--raft-leader-lease-timeout", cfg.LeaderLease.String()}
	// Always given: without it seqd runs one group per bootstrap server.
	seqdArgs = append(seqdArgs, "--groups", fmt.Sprint(cfg.Groups))
	if cfg.Unsafe {
		seqdArgs = append(seqdArgs, "--unsafe-disable-lease")
	}
	if cfg.TrustClock {
		seqdArgs = append(seqdArgs, "--unsafe-flake-trust-clock")
	}
	for _, f := range faults {
		if f.NeedsTestHooks() {
			// group-isolation cuts a group through the servers' test hook.
			seqdArgs = append(seqdArgs, "--unsafe-test-hooks")
			break
		}
	}
	seqdArgs = append(seqdArgs, cfg.SeqdArgs...)
	m.SeqdArgs, m.NodeArgs = seqdArgs, cfg.nodeArgs
	dataDir := filepath.Join(dir, "data")
	disk := nodes.DiskSpec{Nodes: cfg.smallDisk, Size: cfg.diskSize, Kind: cfg.SmallDiskFS}
	cl, err := nodes.New(nodes.Spec{N: cfg.Nodes, Bin: p.Bin, DataDir: dataDir, LogDir: dir, Net: p.Net, Args: seqdArgs, NodeArgs: cfg.nodeArgs, Disk: disk, Spare: cfg.spare})
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		return exitHarness
	}
	for _, n := range cl.Nodes {
		m.NodeCmds = append(m.NodeCmds, strings.Join(n.CommandLine(), " "))
		if n.DiskDir != "" {
			m.SmallDisks = append(m.SmallDisks, fmt.Sprintf("%s: %s %s on %s", n.ID, cfg.SmallDiskFS, cfg.SmallDiskSize, n.DiskDir))
		}
	}
	m.Bootstrap = "all"
	if cfg.bootstrapSingle {
		m.Bootstrap = "single: " + strings.Join(cl.Nodes[0].CommandLine(), " ") + " (first start: " +
			strings.Join(nodes.SeedArgs(cl.Nodes[0].Args()), " ") + ")"
	}
	defer func() {
		for _, n := range cl.Extra() {
			_ = n.Stop(10 * time.Second)
		}
		_ = cl.StopAll(10 * time.Second)
		if err := cl.UnmountDisks(); err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: small disks: %v (run `go run . --cleanup` in jepsen/)\n", err)
		}
		if !cfg.KeepData {
			_ = os.RemoveAll(dataDir)
		}
	}()
	if err := cl.MountDisks(); err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		return exitHarness
	}
	rec, err := record.NewRecorder(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		return exitHarness
	}
	defer rec.Close()

	log.Printf("test %s: %d nodes, %s, seed %d, store %s", cfg.Test, cfg.Nodes, m.Net, p.Seed, dir)
	if p.NetNote != "" {
		log.Printf("NOTE: %s", p.NetNote)
	}
	first := cl.Nodes
	if cfg.bootstrapSingle {
		// n1 alone founds the cluster; the others join it once clients have
		// used it (BootstrapSingle, below).
		first = cl.Nodes[:1]
		if err := first[0].StartWith(nodes.SeedArgs(first[0].Args())); err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
			return exitHarness
		}
	} else {
		for _, n := range cl.Nodes {
			if err := n.Start(); err != nil {
				fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
				return exitHarness
			}
		}
	}
	if err := cl.WaitHealthyNodes(ctx, cfg.StartupTimeout, first); err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		for _, n := range cl.Nodes {
			fmt.Fprintf(os.Stderr, "--- %s (%s), last lines:\n%s", n.ID, n.LogPath, tail(n.LogPath, 15))
		}
		return exitHarness
	}
	leader := cl.Leader(ctx)
	log.Printf("cluster up; leader %s", nodeID(leader))

	var targets []workload.Target
	for _, n := range cl.Nodes {
		targets = append(targets, workload.Target{ID: n.ID, API: n.API})
	}
	clientTargets := targets
	if a := cl.SpareAPI(); a != "" {
		// The restored servers of restore-source-returns (r1, r2, ...)
		// run on the spare slot: clients name it from the start, as an
		// operator would point them at the restored cluster; its pinned
		// clients are p-r-*.
		clientTargets = append(clientTargets[:len(clientTargets):len(clientTargets)], workload.Target{ID: "r", API: a})
	}
	admin, err := client.New(cl.APIs(), client.Options{RetryFor: 30 * time.Second})
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		return exitHarness
	}
	var wl clients
	var fwl *workload.FlakeWorkload
	if cfg.Workload == "flake" {
		if err := createNamespaces(ctx, cfg, admin, rec); err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
			return exitHarness
		}
		fwl, err = workload.StartFlake(ctx, workload.FlakeConfig{
			Namespace: cfg.Namespace, Second: cfg.Second, SecondShare: cfg.SecondShare, Rate: cfg.Rate, GeneratorRate: cfg.GeneratorRate,
			PinnedPerNode: cfg.PinnedPerNode, Smart: cfg.Smart, Generators: cfg.Generators, GeneratorLife: cfg.genLife,
			GeneratorMaxWait: cfg.GeneratorMaxWait, MaxCount: cfg.MaxIDs, OpTimeout: cfg.OpTimeout, SmartTimeout: cfg.SmartTimeout,
			AttemptTimeout: cfg.AttemptTimeout, Seed: p.Seed,
		}, clientTargets, rec)
		wl = fwl
	} else {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = admin.CreateSpace(sctx, cfg.Space, cfg.Step, cfg.SectionSize)
		scancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: creating space %q: %v\n", cfg.Space, err)
			return exitHarness
		}
		seq := workload.Config{
			Space: cfg.Space, Keys: cfg.Keys, Rate: cfg.Rate, PinnedPerNode: cfg.PinnedPerNode, Smart: cfg.Smart,
			OpTimeout: cfg.OpTimeout, SmartTimeout: cfg.SmartTimeout, AttemptTimeout: cfg.AttemptTimeout, Mix: cfg.mix, MaxReserve: uint32(cfg.MaxReserve), Seed: p.Seed,
		}
		if cfg.Workload == "segment" {
			wl, err = workload.StartSegments(ctx, cfg.seg.config(cfg, p.Seed), seq, clientTargets, rec)
		} else {
			wl, err = workload.Start(ctx, seq, clientTargets, rec)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		return exitHarness
	}
	log.Printf("workload: %s", m.Workload)
	if len(faults) > 0 {
		log.Printf("nemesis: %s; %s", strings.Join(m.Faults, ", "), m.Schedule)
	} else {
		log.Printf("nemesis: none")
	}

	// The nemesis, until the time limit or its fault count.
	env := &nemesis.Env{Cluster: cl, Net: p.Net, Rec: rec, Loss: cfg.Loss, Logf: log.Printf,
		Dir: filepath.Join(dataDir, "operator"), RunLease: cfg.Lease, AltLease: cfg.LeaseChangeTo,
		HolderPause: cfg.holderPause, HolderPartition: cfg.holderPartition, Groups: cfg.Groups, FailoverTarget: cfg.FailoverTarget}
	if cfg.SlowNode != "" {
		env.Slow, env.SlowTimeout = cl.ByID(cfg.SlowNode), scale(cfg.Heartbeat, cfg.SlowFactor)
	}
	if cfg.bootstrapSingle {
		if err := env.BootstrapSingle(ctx, cl.Nodes[0], cfg.BootstrapAlone); err != nil {
			m.Errors = append(m.Errors, "bootstrap-single: "+err.Error())
			log.Printf("bootstrap-single: %v", err)
		} else {
			log.Printf("cluster grown from %s; leader %s", cl.Nodes[0].ID, nodeID(cl.Leader(ctx)))
		}
	}
	nctx, ncancel := context.WithTimeout(ctx, cfg.TimeLimit)
	defer ncancel()
	nemDone := make(chan int, 1)
	go func() {
		nemDone <- nemesis.Run(nctx, env, nemesis.Schedule{Faults: faults, Interval: cfg.Interval,
			DurMin: cfg.durMin, DurMax: cfg.durMax, Seed: p.Seed, MaxFaults: cfg.MaxFaults, Overlap: cfg.Overlap})
	}()
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	injected := -1
wait:
	for {
		select {
		case injected = <-nemDone:
			if len(faults) == 0 {
				<-nctx.Done() // no faults: run for the time limit
			}
			break wait
		case <-progress.C:
			ok, fail, info := wl.Counts()
			log.Printf("progress: ok %d, fail %d, info %d", ok, fail, info)
		}
	}
	ncancel()
	m.Injected = max(injected, 0)

	// Heal everything, let the cluster recover under load, then read every key.
	if err := nemesis.HealAll(env); err != nil {
		m.Errors = append(m.Errors, "heal-all: "+err.Error())
		log.Printf("heal-all: %v", err)
	}
	log.Printf("healed every fault; recovery period %v", cfg.Recovery)
	rctx, rcancel := context.WithTimeout(ctx, cfg.Recovery)
	<-rctx.Done()
	rcancel()
	wl.Stop()
	ok, fail, info := wl.Counts()
	log.Printf("workload stopped: ok %d, fail %d, info %d", ok, fail, info)
	switch {
	case ctx.Err() != nil:
	case fwl != nil:
		m.GeneratorRestarts = fwl.Restarts()
		log.Printf("embedded generators closed and recreated %d times", m.GeneratorRestarts)
		nss := []string{cfg.Namespace}
		if cfg.Second != "" {
			nss = append(nss, cfg.Second)
		}
		if err := workload.FinalIDs(ctx, nss, targets, rec, cfg.FinalTimeout); err != nil {
			m.FinalReads = err.Error()
			log.Printf("final ids: %v", err)
		} else {
			log.Printf("final ids: every node answered")
		}
	default:
		if _, err := workload.FinalReads(ctx, cfg.Space, cfg.Keys, targets, rec, cfg.FinalTimeout); err != nil {
			m.FinalReads = err.Error()
			log.Printf("final reads: %v", err)
		} else {
			log.Printf("final reads: ok")
		}
	}

	// Stop the nodes gracefully (a leader hands over), and look for crashes.
	// A node that does not stop gracefully is worth knowing (it gets
	// SIGQUIT, so its log has a goroutine dump) but breaks no guarantee.
	if err := cl.StopAll(cfg.StopTimeout); err != nil {
		for _, e := range strings.Split(err.Error(), "\n") {
			m.Warnings = append(m.Warnings, "graceful stop: "+e)
		}
	}
	for _, n := range cl.Extra() {
		if err := n.Stop(cfg.StopTimeout); err != nil {
			m.Warnings = append(m.Warnings, "graceful stop: "+err.Error())
		}
	}
	for _, n := range append(slices.Clone(cl.Nodes), cl.Extra()...) {
		m.Crashes = append(m.Crashes, prefixAll(n.ID+": ", n.Unexpected())...)
		m.Panics = append(m.Panics, prefixAll(n.ID+": ", grepPanics(n.LogPath))...)
	}
	m.Elapsed = time.Since(startWall).Seconds()
	if s, ok := interrupted.Load().(string); ok {
		m.Interrupt = s
	}
	if err := rec.Close(); err != nil {
		m.Errors = append(m.Errors, "writing history: "+err.Error())
	}
	rep := analyzeOps(rec.Ops(), dir, cfg.checkOptions(), m)
	printSummary(os.Stdout, rep)
	return rep.exitCode()
}

func nodeID(n *nodes.Node) string {
	if n == nil {
		return "(none)"
	}
	return n.ID
}

func prefixAll(p string, ss []string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, p+s)
	}
	return out
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// grepPanics finds Go panics and fatal errors in a node log.
func grepPanics(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			out = append(out, line)
		}
	}
	return out
}
