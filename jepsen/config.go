package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/jepsen/checker"
	"github.com/seqd/seqd/jepsen/nemesis"
	"github.com/seqd/seqd/jepsen/workload"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// config is the command line.
type config struct {
	Nodes     int
	Groups    int
	TimeLimit time.Duration
	Test      string
	Store     string

	Nemesis   string
	Interval  time.Duration
	Duration  string
	durMin    time.Duration
	durMax    time.Duration
	MaxFaults int
	Overlap   bool
	Loss      float64
	Seed      uint64

	Workload string

	Rate           float64
	PinnedPerNode  int
	Smart          int
	OpTimeout      time.Duration
	SmartTimeout   time.Duration
	AttemptTimeout time.Duration
	Keys           uint64
	Mix            string
	mix            workload.Mix
	MaxReserve     uint
	Space          string
	Step           uint64
	SectionSize    uint64

	// The segment workload (--workload segment; segment.go).
	seg segmentFlags

	// The flake workload (--workload flake).
	Namespace        string
	Second           string
	SecondShare      float64
	WorkerBits       uint
	SequenceBits     uint
	Generators       int
	GeneratorRate    float64
	GeneratorLife    string
	genLife          [2]time.Duration
	GeneratorMaxWait time.Duration
	MaxIDs           int
	HolderPause      string
	holderPause      [2]time.Duration
	HolderPartition  string
	holderPartition  [2]time.Duration
	TrustClock       bool

	Recovery       time.Duration
	FinalTimeout   time.Duration
	StartupTimeout time.Duration
	StopTimeout    time.Duration

	Net         string
	SeqdBin     string
	Lease       time.Duration
	Heartbeat   time.Duration
	Election    time.Duration
	LeaderLease time.Duration
	Unsafe      bool
	SeqdArgs    stringList
	NodeArgs    stringList
	nodeArgs    map[string][]string
	SlowNode    string
	SlowFactor  float64
	KeepData    bool

	Bootstrap       string
	bootstrapSingle bool
	BootstrapAlone  time.Duration
	SmallDisk       string
	smallDisk       map[string]bool
	SmallDiskSize   string
	diskSize        int64
	SmallDiskFS     string
	LeaseChangeTo   time.Duration
	FailoverTarget  time.Duration
	// spare: a fault starts a server that is not one of the nodes
	// (restore-source-returns): one more network slot is laid out.
	spare bool

	Limit         int
	LinearTimeout time.Duration
	LinearBudget  time.Duration
	Cleanup       bool
	Force         bool
	Analyze       string
	Quiet         bool
}

func newFlags(cfg *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&cfg.Nodes, "nodes", 3, "number of seqd nodes (3 or 5 are typical)")
	fs.IntVar(&cfg.Groups, "groups", 1, "raft groups per cluster (seqd serve --groups N): every key belongs to one group with its own leader and lease; with more than 1 the leader-targeting faults pick one group's leader at random, and the report gives each group's outage windows")
	fs.DurationVar(&cfg.TimeLimit, "time-limit", 60*time.Second, "how long the workload runs under faults (before healing, recovery and final reads)")
	fs.StringVar(&cfg.Test, "test", "", "test name for the store directory (default: from --nemesis, with -unsafe when --unsafe-disable-lease)")
	fs.StringVar(&cfg.Store, "store", "store", "directory for results (store/<test>/<time>/)")

	fs.StringVar(&cfg.Nemesis, "nemesis", "kill-leader,pause-leader,partition-leader", "faults to inject, comma-separated (see the list above)")
	fs.DurationVar(&cfg.Interval, "nemesis-interval", 5*time.Second, "quiet time before each fault")
	fs.StringVar(&cfg.Duration, "nemesis-duration", "5s", "how long each fault lasts: D, or a range D1..D2 drawn at random")
	fs.IntVar(&cfg.MaxFaults, "nemesis-faults", 0, "stop after this many faults (0: until --time-limit); the time limit still applies")
	fs.BoolVar(&cfg.Overlap, "nemesis-overlap", false, "run process faults (kill, pause) and network faults (partition, loss) on two independent schedules, so they overlap")
	fs.Float64Var(&cfg.Loss, "loss", 0.3, "packet drop probability for the loss faults")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "random seed for the nemesis and the clients (0: random; printed and stored)")

	fs.StringVar(&cfg.Workload, "workload", "sequence", "sequence (Next, Reserve, Current of a space; checks C1-C3), segment (client.Segments on a few keys next to the sequence clients; checks C1-C3 and segments, see below) or flake (flake ids from nodes, the Go client and embedded generators; checks G1-G3, see below)")
	addSegmentFlags(fs, &cfg.seg)
	fs.Float64Var(&cfg.Rate, "rate", 500, "target rate of client calls per second, all clients together (0: as fast as possible)")
	fs.IntVar(&cfg.PinnedPerNode, "pinned-per-node", 2, "clients pinned to each node (one node each, no retries; 16 by default with --groups above 1)")
	fs.IntVar(&cfg.Smart, "smart-clients", 4, "clients using the Go client (all nodes, leader tracking, retries; 128 by default with --groups above 1, so that callers waiting on a faulted group do not starve the others: clients are closed loops)")
	fs.DurationVar(&cfg.OpTimeout, "op-timeout", time.Second, "timeout of one call of a pinned client")
	fs.DurationVar(&cfg.AttemptTimeout, "attempt-timeout", 500*time.Millisecond, "timeout of one attempt (on one node) of a smart client's call")
	fs.DurationVar(&cfg.SmartTimeout, "smart-timeout", 5*time.Second, "timeout of one call of a smart client, retries included")
	fs.Uint64Var(&cfg.Keys, "keys", 32, "number of keys (0..keys-1), chosen uniformly")
	fs.StringVar(&cfg.Mix, "mix", "next=40,multi=15,reserve=15,current=30", "operation weights: next (one key), multi (Next of 3 keys, one listed twice), reserve, current")
	fs.UintVar(&cfg.MaxReserve, "max-reserve", 20, "Reserve asks for 1..max-reserve values")
	fs.StringVar(&cfg.Space, "space", "jepsen", "space created at the start and used by every call")
	fs.Uint64Var(&cfg.Step, "step", 50, "the space's step (small: frequent raises of the high-water mark)")
	fs.Uint64Var(&cfg.SectionSize, "section-size", 8, "the space's section size (keys per high-water mark; with --groups above 1 the default is 2, so that the 32 keys' sections spread over 6 groups)")

	fs.StringVar(&cfg.Namespace, "namespace", "jepsen-ids", "flake: the namespace created at the start with a small worker field (--worker-bits) in 1 ms units")
	fs.StringVar(&cfg.Second, "second-namespace", "jepsen-ids-default", "flake: a second namespace, with the default (snowflake) layout, that gets --second-share of the calls (\"\": none)")
	fs.Float64Var(&cfg.SecondShare, "second-share", 0.2, "flake: share of calls (and of generator incarnations) that use --second-namespace")
	fs.UintVar(&cfg.WorkerBits, "worker-bits", 3, "flake: worker bits of --namespace: few workers, so new holders reuse workers that others released or lost")
	fs.UintVar(&cfg.SequenceBits, "sequence-bits", 4, "flake: sequence bits of --namespace: few ids per ms, so holders borrow later units")
	fs.IntVar(&cfg.Generators, "generators", 3, "flake: embedded generators (client.NewGenerator) in the client process; all but the first are closed and recreated after --generator-life")
	fs.Float64Var(&cfg.GeneratorRate, "generator-rate", 50, "flake: calls per second of each embedded generator (Next or NextN; not counted in --rate)")
	fs.StringVar(&cfg.GeneratorLife, "generator-life", "2s..8s", "flake: how long a generator issues ids before it is closed (releasing its worker) and recreated: D or D1..D2")
	fs.DurationVar(&cfg.GeneratorMaxWait, "generator-max-wait", 45*time.Second, "flake: a generator that issued nothing for this long is recreated anyway")
	fs.IntVar(&cfg.MaxIDs, "max-ids", 20, "flake: each call asks for 1..max-ids ids")
	fs.StringVar(&cfg.HolderPause, "holder-pause", "12s..15s", "pause-holder's duration (past the 10s flake worker lease): D or D1..D2")
	fs.StringVar(&cfg.HolderPartition, "holder-partition", "32s..36s", "partition-holder's duration (past the 30s range of a grant): D or D1..D2")
	fs.BoolVar(&cfg.TrustClock, "unsafe-flake-trust-clock", false, "pass --unsafe-flake-trust-clock to every seqd (testing the harness): a naive Snowflake; with clock faults (clock-all, clock-leader) and reused workers, duplicate ids (G1) are expected")

	fs.DurationVar(&cfg.Recovery, "recovery", 10*time.Second, "after healing every fault, how long the workload keeps running before the final reads")
	fs.DurationVar(&cfg.FinalTimeout, "final-timeout", 30*time.Second, "how long the final reads may retry")
	fs.DurationVar(&cfg.StopTimeout, "stop-timeout", 15*time.Second, "at the end, how long each node may take to stop after SIGTERM before it gets SIGQUIT (goroutine dump into its log) and SIGKILL")
	fs.DurationVar(&cfg.StartupTimeout, "startup-timeout", 60*time.Second, "how long the cluster may take to elect a serving leader at the start")

	fs.StringVar(&cfg.Net, "net", "auto", "network: netns (namespaces and iptables; needs root), loopback (127.0.0.1, process faults only), or auto (netns when possible)")
	fs.StringVar(&cfg.SeqdBin, "seqd-bin", "", "seqd binary to test (default: go build ./cmd/seqd from this repository)")
	fs.DurationVar(&cfg.Lease, "lease", 500*time.Millisecond, "seqd --lease")
	fs.DurationVar(&cfg.Heartbeat, "raft-heartbeat-timeout", 300*time.Millisecond, "seqd --raft-heartbeat-timeout")
	fs.DurationVar(&cfg.Election, "raft-election-timeout", 300*time.Millisecond, "seqd --raft-election-timeout")
	fs.DurationVar(&cfg.LeaderLease, "raft-leader-lease-timeout", 150*time.Millisecond, "seqd --raft-leader-lease-timeout (at most the heartbeat timeout)")
	fs.BoolVar(&cfg.Unsafe, "unsafe-disable-lease", false, "pass --unsafe-disable-lease to every seqd (testing the harness): order violations (C2/C3) are expected when a cut-off leader keeps believing it leads, as with partition-slow-leader")
	fs.Var(&cfg.SeqdArgs, "seqd-arg", "extra flag for every `seqd serve` (repeatable), e.g. --seqd-arg=--log-level=debug")
	fs.Var(&cfg.NodeArgs, "node-arg", "extra flag for one node, ID=FLAG (repeatable), e.g. --node-arg n1=--log-level=debug")
	fs.StringVar(&cfg.SlowNode, "slow-node", "", "give this node (e.g. n1) raft timeouts --slow-factor times longer than the others' (heartbeat, election, and leader lease = its heartbeat timeout): raft's own leader lease then no longer keeps a cut-off leader from serving; see the partition-slow-leader fault")
	fs.Float64Var(&cfg.SlowFactor, "slow-factor", 5, "with --slow-node: how much longer its raft timeouts are")
	fs.BoolVar(&cfg.KeepData, "keep-data", false, "keep the nodes' data directories (store/.../data) after the test")
	fs.StringVar(&cfg.Bootstrap, "bootstrap", "auto", "how the cluster forms: all (every node with --bootstrap-expect N), single (n1 alone with --bootstrap-expect 1 and no --join, serving clients; its data directory is copied while it is the only voter, for stale-copy; then the others join it and n1 is restarted with the usual flags), auto (single when stale-copy is among the faults)")
	fs.DurationVar(&cfg.BootstrapAlone, "bootstrap-alone", 3*time.Second, "with --bootstrap single: how long n1 serves clients alone before its data directory is copied and the others join (long enough for a raft snapshot, with --seqd-arg=--snapshot-interval, to make the seed's snapshot older than the others' membership records)")
	fs.StringVar(&cfg.SmallDisk, "small-disk", "auto", "nodes whose data directory gets a small file system of its own (for disk-full): comma-separated IDs, all, none, or auto (all when disk-full is among the faults)")
	fs.StringVar(&cfg.SmallDiskSize, "small-disk-size", "32m", "size of each small disk (k, m, g suffixes)")
	fs.StringVar(&cfg.SmallDiskFS, "small-disk-fs", "tmpfs", "small disk file system: tmpfs (size-limited), or ext4 (an image mounted through a loop device); needs root")
	fs.DurationVar(&cfg.LeaseChangeTo, "lease-change-to", 3*time.Second, "lease-change moves nodes between --lease and this lease")
	fs.DurationVar(&cfg.FailoverTarget, "failover-target", nemesis.DefaultFailoverTarget, "restart-then-crash: the longest a raft group may go without a serving leader while a majority of the nodes runs and no network fault is in place; longer is a finding (an anomaly)")

	fs.IntVar(&cfg.Limit, "anomaly-limit", 10, "example anomalies kept per rule (all are counted)")
	fs.DurationVar(&cfg.LinearTimeout, "linear-timeout", checker.DefaultSegmentTimeout, "linear: how long porcupine may search one segment of a key's history (between instants with no call in flight); a segment it does not decide in time is decided by the forced order (checker/linear_order.go)")
	fs.DurationVar(&cfg.LinearBudget, "linear-budget", checker.DefaultLinearBudget, "linear: how long the whole linearizability check may take; segments not reached within it are unknown")
	fs.BoolVar(&cfg.Cleanup, "cleanup", false, "remove namespaces (sqj-*) and their processes left by earlier runs, then exit")
	fs.BoolVar(&cfg.Force, "force", false, "with --cleanup: also remove namespaces of runs whose harness is still alive")
	fs.StringVar(&cfg.Analyze, "analyze", "", "re-check a stored test directory (its history.jsonl) and rewrite its results, plots and timelines, then exit")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "print only the summary (not the nemesis actions and progress)")
	fs.Usage = func() {
		fmt.Fprint(out, usageHead)
		for _, f := range nemesis.All {
			fmt.Fprintf(out, "  %-17s %s\n", f.Name, f.Help)
		}
		fmt.Fprintf(out, "\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(out, usageTail)
	}
	return fs
}

func parse(args []string, out io.Writer) (*config, error) {
	cfg := &config{}
	fs := newFlags(cfg, out)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.Cleanup || cfg.Analyze != "" {
		return cfg, nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Groups > 1 && !set["section-size"] {
		// Keys map to groups by their section: 32 keys in sections of 8
		// reach only 3 of 6 groups.
		cfg.SectionSize = 2
	}
	if cfg.Groups > 1 && !set["smart-clients"] {
		// Clients are closed loops: a few dozen would all be waiting on a
		// faulted group within 100 ms, and every group would look out.
		cfg.Smart = 128
	}
	if cfg.Groups > 1 && !set["pinned-per-node"] {
		cfg.PinnedPerNode = 16
	}
	var err error
	if cfg.durMin, cfg.durMax, err = parseRange(cfg.Duration); err != nil {
		return nil, fmt.Errorf("--nemesis-duration: %w", err)
	}
	if cfg.mix, err = workload.ParseMix(cfg.Mix); err != nil {
		return nil, fmt.Errorf("--mix: %w", err)
	}
	for _, r := range []struct {
		flag, spec string
		out        *[2]time.Duration
	}{{"--generator-life", cfg.GeneratorLife, &cfg.genLife}, {"--holder-pause", cfg.HolderPause, &cfg.holderPause}, {"--holder-partition", cfg.HolderPartition, &cfg.holderPartition}} {
		if r.out[0], r.out[1], err = parseRange(r.spec); err != nil {
			return nil, fmt.Errorf("%s: %w", r.flag, err)
		}
	}
	switch cfg.Workload {
	case "sequence", "segment", "flake":
	default:
		return nil, fmt.Errorf("--workload must be sequence, segment or flake, got %q", cfg.Workload)
	}
	if err := checkSegment(cfg, set); err != nil {
		return nil, err
	}
	switch {
	case cfg.Nodes < 1 || cfg.Nodes > 9:
		return nil, errors.New("--nodes must be 1 to 9")
	case cfg.Groups < 1 || seqd.ValidGroups(cfg.Groups) != nil:
		return nil, fmt.Errorf("--groups must be 1 to %d", seqd.MaxGroups)
	case cfg.TimeLimit <= 0:
		return nil, errors.New("--time-limit must be positive")
	case cfg.LinearTimeout <= 0 || cfg.LinearBudget <= 0:
		return nil, errors.New("--linear-timeout and --linear-budget must be positive")
	case cfg.FailoverTarget <= 0:
		return nil, errors.New("--failover-target must be positive")
	case cfg.Keys == 0:
		return nil, errors.New("--keys must be at least 1")
	case cfg.PinnedPerNode < 0 || cfg.Smart < 0 || (cfg.Workload != "flake" && cfg.PinnedPerNode+cfg.Smart == 0):
		return nil, errors.New("need at least one client (--pinned-per-node, --smart-clients)")
	case cfg.Rate < 0:
		return nil, errors.New("--rate must be 0 or more")
	case cfg.Loss <= 0 || cfg.Loss > 1:
		return nil, errors.New("--loss must be in (0, 1]")
	case cfg.OpTimeout <= 0 || cfg.SmartTimeout <= 0 || cfg.AttemptTimeout <= 0:
		return nil, errors.New("timeouts must be positive")
	case cfg.Interval < 0:
		return nil, errors.New("--nemesis-interval must not be negative")
	case cfg.MaxReserve < 1 || cfg.MaxReserve > 1_000_000:
		return nil, errors.New("--max-reserve must be 1 to 1000000")
	case cfg.Step == 0 || cfg.SectionSize == 0:
		return nil, errors.New("--step and --section-size must be at least 1")
	case cfg.Workload == "flake" && cfg.PinnedPerNode+cfg.Smart+cfg.Generators == 0,
		cfg.Generators < 0:
		return nil, errors.New("need at least one client (--pinned-per-node, --smart-clients, --generators)")
	case cfg.MaxIDs < 1 || cfg.MaxIDs > 10_000:
		return nil, errors.New("--max-ids must be 1 to 10000")
	case cfg.SecondShare < 0 || cfg.SecondShare > 1:
		return nil, errors.New("--second-share must be in [0, 1]")
	case cfg.GeneratorRate <= 0:
		return nil, errors.New("--generator-rate must be positive")
	case cfg.WorkerBits < 1 || cfg.WorkerBits > 24 || cfg.SequenceBits < 1 || cfg.SequenceBits > 24 || 41+cfg.WorkerBits+cfg.SequenceBits > 63:
		return nil, errors.New("--worker-bits and --sequence-bits must be 1 to 24 each, and 41 time bits plus both at most 63")
	case cfg.Second != "" && cfg.Second == cfg.Namespace:
		return nil, errors.New("--second-namespace must differ from --namespace")
	}
	switch cfg.Net {
	case "auto", "netns", "loopback":
	default:
		return nil, fmt.Errorf("--net must be auto, netns or loopback, got %q", cfg.Net)
	}
	cfg.nodeArgs = map[string][]string{}
	for _, na := range cfg.NodeArgs {
		id, flagArg, ok := strings.Cut(na, "=")
		if !ok || !strings.HasPrefix(flagArg, "-") {
			return nil, fmt.Errorf("--node-arg %q: want ID=FLAG, e.g. n1=--log-level=debug", na)
		}
		cfg.nodeArgs[id] = append(cfg.nodeArgs[id], flagArg)
	}
	if cfg.SlowNode != "" {
		if !validNodeID(cfg.SlowNode, cfg.Nodes) {
			return nil, fmt.Errorf("--slow-node %q: want n1..n%d", cfg.SlowNode, cfg.Nodes)
		}
		if cfg.SlowFactor < 1 {
			return nil, errors.New("--slow-factor must be at least 1")
		}
		hb := scale(cfg.Heartbeat, cfg.SlowFactor)
		cfg.nodeArgs[cfg.SlowNode] = append(cfg.nodeArgs[cfg.SlowNode],
			"--raft-heartbeat-timeout="+hb.String(),
			"--raft-election-timeout="+scale(cfg.Election, cfg.SlowFactor).String(),
			"--raft-leader-lease-timeout="+hb.String())
	}
	for id := range cfg.nodeArgs {
		if !validNodeID(id, cfg.Nodes) {
			return nil, fmt.Errorf("--node-arg: no node %q (want n1..n%d)", id, cfg.Nodes)
		}
	}
	// Validate the fault list now (with the network assumed available).
	faults, _, err := nemesis.Parse(cfg.Nemesis, cfg.Nodes, true)
	if err != nil {
		return nil, fmt.Errorf("--nemesis: %w", err)
	}
	has := map[string]bool{}
	for _, f := range faults {
		has[f.Name] = true
		if f.NeedsSlowNode() && cfg.SlowNode == "" {
			return nil, fmt.Errorf("--nemesis %s needs --slow-node", f.Name)
		}
		cfg.spare = cfg.spare || f.NeedsSpare()
		if f.NeedsHandoff() && !flagOn(cfg.SeqdArgs, "--lease-handoff", true) {
			return nil, fmt.Errorf("--nemesis %s tests planned leadership moves with the lease handoff, which --seqd-arg=--lease-handoff=false turns off", f.Name)
		}
	}
	switch cfg.Bootstrap {
	case "auto":
		cfg.bootstrapSingle = has["stale-copy"] && cfg.Nodes > 1
	case "single":
		if cfg.Nodes < 2 {
			return nil, errors.New("--bootstrap single needs at least 2 nodes")
		}
		cfg.bootstrapSingle = true
	case "all":
	default:
		return nil, fmt.Errorf("--bootstrap must be auto, all or single, got %q", cfg.Bootstrap)
	}
	if cfg.BootstrapAlone < 0 {
		return nil, errors.New("--bootstrap-alone must not be negative")
	}
	if cfg.smallDisk, err = parseSmallDisk(cfg.SmallDisk, cfg.Nodes, has["disk-full"]); err != nil {
		return nil, fmt.Errorf("--small-disk: %w", err)
	}
	if cfg.diskSize, err = parseSize(cfg.SmallDiskSize); err != nil || cfg.diskSize < 1<<20 {
		return nil, fmt.Errorf("--small-disk-size %q: want a size of at least 1m, e.g. 32m", cfg.SmallDiskSize)
	}
	switch cfg.SmallDiskFS {
	case "tmpfs", "ext4":
	default:
		return nil, fmt.Errorf("--small-disk-fs must be tmpfs or ext4, got %q", cfg.SmallDiskFS)
	}
	if has["lease-change"] && (cfg.LeaseChangeTo <= 0 || cfg.LeaseChangeTo == cfg.Lease) {
		return nil, errors.New("--lease-change-to must be positive and differ from --lease")
	}
	if cfg.Test == "" {
		cfg.Test = strings.NewReplacer(",", "+", " ", "", "*", "x").Replace(cfg.Nemesis)
		if cfg.Test == "" {
			cfg.Test = "none"
		}
		if cfg.Unsafe {
			cfg.Test += "-unsafe"
		}
		if cfg.Workload == "flake" {
			cfg.Test = "flake-" + cfg.Test
		}
		if cfg.TrustClock {
			cfg.Test += "-trust-clock"
		}
	}
	return cfg, nil
}

func validNodeID(id string, n int) bool {
	for i := 1; i <= n; i++ {
		if id == fmt.Sprintf("n%d", i) {
			return true
		}
	}
	return false
}

func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f).Round(time.Millisecond)
}

// parseSmallDisk resolves --small-disk for n nodes: IDs, "all", "none", or
// "auto" (every node when the disk-full fault runs).
func parseSmallDisk(spec string, n int, diskFull bool) (map[string]bool, error) {
	out := map[string]bool{}
	all := func() {
		for i := 1; i <= n; i++ {
			out[fmt.Sprintf("n%d", i)] = true
		}
	}
	switch spec {
	case "auto":
		if diskFull {
			all()
		}
		return out, nil
	case "all":
		all()
		return out, nil
	case "none", "":
		return out, nil
	}
	for _, id := range strings.Split(spec, ",") {
		id = strings.TrimSpace(id)
		if !validNodeID(id, n) {
			return nil, fmt.Errorf("no node %q (want n1..n%d, all, none or auto)", id, n)
		}
		out[id] = true
	}
	return out, nil
}

// parseSize parses a size in bytes with an optional k, m or g suffix
// (powers of 1024).
func parseSize(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, strings.TrimSuffix(s, "m")
	case strings.HasSuffix(s, "g"):
		mult, s = 1<<30, strings.TrimSuffix(s, "g")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}

// parseRange parses "D" or "D1..D2".
func parseRange(s string) (time.Duration, time.Duration, error) {
	a, b, isRange := strings.Cut(s, "..")
	lo, err := time.ParseDuration(strings.TrimSpace(a))
	if err != nil {
		return 0, 0, err
	}
	hi := lo
	if isRange {
		if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
			return 0, 0, err
		}
	}
	if lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("bad range %q", s)
	}
	return lo, hi, nil
}

// flagOn reports whether the boolean flag name is on in args (--x, -x,
// --x=true turn it on; --x=false, --x=0 off; the last one counts), or def
// when args do not set it.
func flagOn(args []string, name string, def bool) bool {
	on := def
	bare := strings.TrimLeft(name, "-")
	for _, a := range args {
		k, v, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if k != bare {
			continue
		}
		on = !ok || v == "true" || v == "1"
	}
	return on
}

// checkOptions are the checkers' options from the command line.
func (cfg *config) checkOptions() checker.Options {
	return checker.Options{Limit: cfg.Limit, Linear: checker.LinearOptions{SegmentTimeout: cfg.LinearTimeout, Budget: cfg.LinearBudget}}
}
