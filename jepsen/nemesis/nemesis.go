// Package nemesis injects faults into a running seqd cluster on a schedule:
// kill -9, SIGSTOP/SIGCONT, network partitions (isolate the leader, random
// halves, majorities ring, bridge), packet loss and membership changes
// (remove a voter and add it back, a removed server returning with its
// data, a server whose data directory was wiped), each healed after its
// duration; and heals everything at the end.
//
// A schedule repeats: wait Interval, pick a fault at random (seeded), inject
// it, wait a duration drawn from [DurMin, DurMax], heal it. With Overlap,
// process and membership faults (kill, pause, member-*) and network faults
// (partition, loss) run on two independent lanes, so a partition can
// coincide with a kill, a pause or a membership change; without it, one
// fault at a time.
package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/jepsen/netns"
	"github.com/seqd/seqd/jepsen/nodes"
	"github.com/seqd/seqd/jepsen/record"
)

// Fault classes.
const (
	Process    = "process"
	Network    = "network"
	Membership = "membership"
	Operator   = "operator"
)

// Env is what faults act on.
type Env struct {
	Cluster *nodes.Cluster
	Net     *netns.Net // nil on loopback: network faults are unavailable
	Rec     *record.Recorder
	Loss    float64 // packet loss probability for the loss faults
	Logf    func(format string, args ...any)
	// Slow is the node with longer raft timeouts (--slow-node), or nil;
	// SlowTimeout is its raft heartbeat timeout.
	Slow        *nodes.Node
	SlowTimeout time.Duration
	// Operator faults (operator.go): Dir holds copies of data directories
	// and backups; RunLease is the run's --lease, AltLease the other lease
	// of lease-change.
	Dir      string
	RunLease time.Duration
	AltLease time.Duration
	// HolderPause and HolderPartition are the duration ranges of
	// pause-holder and partition-holder (zero: DefaultHolderPause,
	// DefaultHolderPartition); they override the schedule's.
	HolderPause, HolderPartition [2]time.Duration
	// Groups is the cluster's raft group count (--groups); with more than
	// one, the faults that target "the leader" target the leader of one
	// group drawn at random.
	Groups int
	// FailoverTarget bounds how long restart-then-crash lets a group go
	// without a serving leader while a majority runs (zero:
	// DefaultFailoverTarget).
	FailoverTarget time.Duration

	nextID    atomic.Int64
	op        opState
	overlap   atomic.Bool  // network faults run on their own lane
	netFaults atomic.Int32 // network faults in place (injected, not healed yet)

	mu      sync.Mutex
	dirty   map[string]bool   // nodes whose membership change is not complete
	drained map[string]bool   // nodes drained (seqd node drain) and not undone yet
	cuts    map[groupCut]bool // raft groups cut on a node (group-isolation) and not restored yet
}

func (e *Env) logf(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
	}
}

// Fault is one kind of fault.
type Fault struct {
	Name     string
	Class    string
	MinNodes int
	Help     string
	// inject applies the fault and returns its targets and how to heal it.
	// nil: not implemented yet (listed so that the list shows the plan).
	inject func(ctx context.Context, e *Env, rng *rand.Rand) (targets []string, heal func() error, err error)
	// op is inject for faults whose healing also reports what the cluster
	// did (the operator faults: refused, served, exited, rejoined...).
	op func(ctx context.Context, e *Env, rng *rand.Rand) (targets []string, heal func() (outcome []string, err error), err error)
}

// Implemented reports whether the fault can be injected.
func (f Fault) Implemented() bool { return f.inject != nil || f.op != nil }

// All lists every fault, in the order of the help text.
var All = []Fault{
	{Name: "kill-leader", Class: Process, MinNodes: 3, Help: "kill -9 the leader; heal: restart it", inject: killLeader},
	{Name: "kill-random", Class: Process, MinNodes: 3, Help: "kill -9 a random node; heal: restart it", inject: killRandom},
	{Name: "kill-minority", Class: Process, MinNodes: 3, Help: "kill -9 a random minority ((n-1)/2 nodes); heal: restart them", inject: killMinority},
	{Name: "kill-all", Class: Process, MinNodes: 1, Help: "kill -9 every node at once; heal: restart them all (a full-cluster restart)", inject: killAll},
	{Name: "pause-leader", Class: Process, MinNodes: 3, Help: "SIGSTOP the leader; heal: SIGCONT", inject: pauseLeader},
	{Name: "pause-minority", Class: Process, MinNodes: 3, Help: "SIGSTOP a random minority; heal: SIGCONT", inject: pauseMinority},
	{Name: "partition-leader", Class: Network, MinNodes: 3, Help: "cut the leader off from every other node (clients still reach it)", inject: partitionLeader},
	{Name: "partition-halves", Class: Network, MinNodes: 3, Help: "cut the nodes into a random minority and majority", inject: partitionHalves},
	{Name: "partition-ring", Class: Network, MinNodes: 5, Help: "majorities ring: every node sees a majority, no two the same one (Jepsen's partition-majorities-ring)", inject: partitionRing},
	{Name: "partition-bridge", Class: Network, MinNodes: 3, Help: "two halves joined only through one bridge node (Jepsen's bridge)", inject: partitionBridge},
	{Name: "partition-slow-leader", Class: Network, MinNodes: 3, Help: "make the --slow-node leader (pause the other followers so their logs fall behind, cut the leader off, resume them), then cut it off from every other node", inject: partitionSlowLeader},
	{Name: "loss-leader", Class: Network, MinNodes: 1, Help: "drop a random share (--loss) of the leader's packets, both ways", inject: lossLeader},
	{Name: "loss-random", Class: Network, MinNodes: 1, Help: "drop a random share (--loss) of a random node's packets, both ways", inject: lossRandom},
	// Membership changes, by the operator procedures of README's Operations
	// section (see membership.go).
	{Name: "member-remove", Class: Membership, MinNodes: 3, Help: "shrink: `seqd node remove` a voter (on 5+ nodes a minority that leaves 3; 1 in 4 times the leader), stop it, wipe its data; heal: grow back: start it empty with the same ID, wait until it is promoted to voter", inject: memberRemove},
	{Name: "member-return", Class: Membership, MinNodes: 3, Help: "kill -9 a voter, `seqd node remove` it while down, restart it with its old data (a removed server that missed its removal comes back, hashicorp/raft#524: it must stay out and not disturb the leader); heal: stop, wipe, start, wait until it is a voter", inject: memberReturn},
	{Name: "member-wipe", Class: Membership, MinNodes: 3, Help: "kill -9 a voter, wipe its data, start it (it must refuse to vote or serve); heal: `seqd node remove` it as its log says, wait until it rejoins as a voter", inject: memberWipe},
	// Operator mistakes and procedures (see operator.go).
	{Name: "stale-copy", Class: Operator, MinNodes: 3, Help: "stop a voter (SIGTERM or kill -9), copy its data directory aside, start it; a later stale-copy (or at once, 1 in 3) stops it, puts the old copy back and starts it with its usual flags (--bootstrap single also copies n1 while it is the only voter); it must refuse (refusal=stale, in its log and status) or, a copy too recent to tell apart, rejoin cleanly; heal: wait for either (bounded), then seqd node remove, wipe, start unless it rejoined", op: staleCopy},
	{Name: "wipe-restart", Class: Operator, MinNodes: 3, Help: "stop every node (SIGTERM, or kill -9 after pausing a minority so it lags), wipe one voter, restart in a seeded order (the wiped one first, last or between, pauses between starts; after --bootstrap single the first one wipes a server that joined n1 and makes n1 lag); heal: wait for the survivors to elect a leader (a majority on their own data; were they to wait, admission quorum-wait, restart them with --assume-gone ID, this start only, and report it), wait for the wiped voter's refusal, `seqd node remove` it, wait until it is a voter", op: wipeRestart},
	{Name: "restore-mistake", Class: Operator, MinNodes: 3, Help: "`seqd backup` the cluster; a later restore-mistake stops a voter, wipes it, runs `seqd restore` from the backup into its data directory (as its --help says: --margin and the counts only for builds that need them) and starts it with its usual flags while the cluster runs; it must be refused (refusal=source-running, or foreign), and the running cluster must go on serving, none of its servers fenced (a restore that never served fences nobody; a fenced one is a finding); heal: wait for the refusal (bounded), seqd node remove, wipe, start", op: restoreMistake},
	{Name: "lease-change", Class: Operator, MinNodes: 3, Help: "rolling restart (SIGTERM one node at a time, wait until it is a voter) that moves nodes between the run's --lease and --lease-change-to (mixed leases), SIGSTOPping a long-lease leader for 1.2-2s at a seeded moment so a short-lease leader takes over (3 times in 4, without --nemesis-overlap, also cut off from the other nodes until 0.5s after it resumes); leases stay mixed until the next lease-change; heal-all puts every node back on the run's lease", op: leaseChange},
	// Fencing and admission (issues 24 and 25): a new leader stopped before
	// it serves, a restored cluster's source returning, a crash that meets
	// a restart.
	{Name: "stop-new-leader", Class: Network, MinNodes: 3, Help: "cut a group's serving leader L (group 0's, or with --groups a random group's; with --slow-node, half the time group 0's leadership is first steered to the slow node) off from the other nodes (clients still reach it), wait (polling every 20ms, up to 15s) until another node M is raft leader of the group, and SIGTERM M (a graceful stop that hands its groups over and releases their leases) before it serves; the next leader must still wait out L's lease (meant for a lease longer than an election, e.g. --lease 3s: the outcome says when M served before it could be stopped); L and another node both saying they serve the group in three looks in a row is a finding (lease-overlap); heal: start M again, heal the partition", op: stopNewLeader},
	{Name: "restore-source-returns", Class: Operator, MinNodes: 3, Help: "`seqd backup` the cluster, let it serve 0.5-8s more, stop every node (kill -9, or SIGSTOP), `seqd restore` the backup onto a new server r1, r2, ... (a new ID and data directory, its own namespace and addresses; clients name its address from the start) started with --join naming the old nodes, wait until it serves (clients use it for the fault's duration); heal: bring the old nodes back with their data (start, or SIGCONT): each must be fenced (status fenced, refusal=superseded) within 30s, or it is a finding (not-fenced; also fenced-serves), and the outcome says whether one served before it was fenced; then every old node is stopped, wiped and started with a --join that also names the restored server (this start only), joins its cluster, and the restored server is removed (seqd node remove) and stopped: the run goes on with the restored cluster on the usual nodes", op: restoreSourceReturns},
	{Name: "restart-then-crash", Class: Operator, MinNodes: 3, Help: "restart one node X (kill -9 or SIGTERM, then start) and kill -9 another Y (a group's serving leader 3 times in 4, else a random node) 0, 20, 50, 100 or 500ms after X's start (before X is admitted) or after X is admitted in every group (admission=<kind> in its log); while a majority runs and no network fault is in place, every group must have a serving leader again within --failover-target (10s), or it is a finding (failover; the outcome gives each group's longest time without one); heal: wait (up to the target and 2s) until every group serves without Y, then start Y again", op: restartThenCrash},
	// Planned leadership moves, for --lease-handoff (see transfer.go).
	{Name: "transfer-storm", Class: Process, MinNodes: 2, Help: "for the fault's duration, every 200-500ms `seqd node drain` a random running node (AdminService.DrainNode, 250ms deadline) and undo it, so leaderships move away and back many times; needs the lease handoff (seqd's default; refused with --seqd-arg=--lease-handoff=false); heal: stop, undo every drain", op: transferStorm},
	{Name: "pause-mid-transfer", Class: Process, MinNodes: 2, Help: "drain the node of a random group's leader and SIGSTOP it 0-30ms later, in the middle of its lease handoffs; needs the lease handoff (seqd's default); heal: SIGCONT, undo the drain", op: pauseMidTransfer},
	{Name: "group-isolation", Class: GroupClass, MinNodes: 3, Help: "cut one raft group's traffic (a random group) on the node that leads it, for that group only, through the servers' test hook (the harness adds --unsafe-test-hooks); the group elects another leader, the node's other groups keep working; heal: restore it", inject: groupIsolation},
	// Clock and holder faults, for the flake workload (see clock.go).
	{Name: "clock-holder", Class: clockClass, MinNodes: 2, Help: "step a follower's wall clock (--unsafe-clock-offset-file) back 1h, half-way through the fault forward 1h; heal: back to 0", inject: clockHolder},
	{Name: "clock-leader", Class: clockClass, MinNodes: 1, Help: "step the leader's wall clock back 10s or forward 1h; heal: back to 0", inject: clockLeader},
	{Name: "clock-all", Class: clockClass, MinNodes: 1, Help: "step every node's wall clock back 10s at once (a bad NTP step cluster-wide, which the leader's skew check cannot see); heal: back to 0", inject: clockAll},
	{Name: "clock-restart", Class: clockClass, MinNodes: 2, Help: "kill -9 a follower and start it again with its wall clock 1h behind (restarted elsewhere); heal: its clock back to 0", inject: clockRestart},
	{Name: "pause-holder", Class: Process, MinNodes: 2, Help: "SIGSTOP a follower (a flake worker holder) past its worker lease, for --holder-pause (12-15s); heal: SIGCONT", inject: pauseHolder},
	{Name: "partition-holder", Class: Network, MinNodes: 2, Help: "cut a follower (a flake worker holder) off from every other node past its range, for --holder-partition (32-36s; clients still reach it)", inject: partitionHolder},
	{Name: "disk-full", Class: Operator, MinNodes: 3, Help: "fill the small disk (--small-disk) of the leader or of a follower with a filler file until ENOSPC, hold it full (a process that exits is restarted after 1s, as a supervisor would); it must stop standing for election (a leader steps down) and keep running; heal: delete the filler, start the node if it exited, wait until disk-full clears and it is a voter (exits, panics and elections won while full are reported)", op: diskFull},
}

// Groups name sets of faults.
var Groups = map[string][]string{
	"kill":      {"kill-leader", "kill-random", "kill-minority"},
	"pause":     {"pause-leader", "pause-minority"},
	"partition": {"partition-leader", "partition-halves", "partition-ring", "partition-bridge"},
	"loss":      {"loss-leader", "loss-random"},
	// membership is not part of all (whose runs are recorded in RESULTS.md).
	"membership": {"member-remove", "member-return", "member-wipe"},
	"all":        {"kill-leader", "kill-random", "kill-minority", "pause-leader", "pause-minority", "partition-leader", "partition-halves", "partition-ring", "partition-bridge", "loss-leader", "loss-random"},
	// operator is not part of all either.
	"operator": {"stale-copy", "wipe-restart", "restore-mistake", "lease-change", "disk-full"},
	// clock and holder are for the flake workload; not part of all.
	"clock":  {"clock-holder", "clock-leader", "clock-all", "clock-restart"},
	"holder": {"pause-holder", "partition-holder"},
	// transfer is for runs with the lease handoff (the default); not part of all.
	"transfer": {"transfer-storm", "pause-mid-transfer"},
	// fencing: the faults of fencing by generations and admission by
	// majority (issues 24 and 25); not part of all.
	"fencing": {"stop-new-leader", "restore-source-returns", "restart-then-crash"},
}

func byName(name string) (Fault, bool) {
	for _, f := range All {
		if f.Name == name {
			return f, true
		}
	}
	return Fault{}, false
}

// NeedsSlowNode reports whether a fault needs --slow-node.
func (f Fault) NeedsSlowNode() bool { return f.Name == "partition-slow-leader" }

// NeedsTestHooks reports whether a fault needs the servers' test hooks
// (--unsafe-test-hooks).
func (f Fault) NeedsTestHooks() bool { return f.Name == "group-isolation" }

// NeedsSpare reports whether a fault starts a server that is not one of
// the cluster's nodes (the harness then lays out one more network slot,
// and clients name its address from the start).
func (f Fault) NeedsSpare() bool { return f.Name == "restore-source-returns" }

// NeedsHandoff reports whether a fault is meant for servers run with
// --lease-handoff (planned leadership moves).
func (f Fault) NeedsHandoff() bool {
	return f.Name == "transfer-storm" || f.Name == "pause-mid-transfer"
}

// maxWeight bounds a fault's weight (NAME*W).
const maxWeight = 20

// Parse resolves a comma-separated list of faults and groups ("none" for no
// faults) for n nodes. An item may carry a weight, NAME*W (a fault or a
// group; W from 1 to 20): the fault is listed W times, so that its lane
// picks it W times as often as a fault of weight 1. Faults that cannot run
// here (network faults without namespaces, ring on fewer than 5 nodes when
// it came from a group) are returned in skipped with the reason; naming one
// explicitly that can never run with n nodes, or an unimplemented one, is
// an error. A fault named twice keeps its first weight.
func Parse(spec string, n int, network bool) (faults []Fault, skipped []string, err error) {
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" || item == "none" {
			continue
		}
		weight := 1
		if name, w, ok := strings.Cut(item, "*"); ok {
			if _, err := fmt.Sscanf(w, "%d", &weight); err != nil || fmt.Sprint(weight) != w || weight < 1 || weight > maxWeight {
				return nil, nil, fmt.Errorf("bad weight in %q: want NAME*W with W from 1 to %d", item, maxWeight)
			}
			item = strings.TrimSpace(name)
		}
		names, group := Groups[item]
		if !group {
			names = []string{item}
		}
		for _, name := range names {
			f, ok := byName(name)
			if !ok {
				return nil, nil, fmt.Errorf("unknown fault %q (see --help for the list)", name)
			}
			if !f.Implemented() {
				return nil, nil, fmt.Errorf("fault %q is not implemented yet", name)
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			switch {
			case n < f.MinNodes && group:
				skipped = append(skipped, fmt.Sprintf("%s (needs %d nodes)", name, f.MinNodes))
				continue
			case n < f.MinNodes:
				return nil, nil, fmt.Errorf("fault %q needs at least %d nodes, the test has %d", name, f.MinNodes, n)
			case f.Class == Network && !network:
				skipped = append(skipped, name+" (network faults need root, ip and iptables)")
				continue
			}
			for range weight {
				faults = append(faults, f)
			}
		}
	}
	return faults, skipped, nil
}

// Names lists the faults once each, in order, with their weight when it is
// not 1 (NAME*W).
func Names(faults []Fault) []string {
	count := map[string]int{}
	var order []string
	for _, f := range faults {
		if count[f.Name] == 0 {
			order = append(order, f.Name)
		}
		count[f.Name]++
	}
	var out []string
	for _, name := range order {
		if c := count[name]; c > 1 {
			name = fmt.Sprintf("%s*%d", name, c)
		}
		out = append(out, name)
	}
	return out
}

// leader finds the serving leader (waiting up to 5s); without one it falls
// back to a random running node. With several raft groups it is the leader
// of a group drawn at random, named in the note ("(group G leader)").
func (e *Env) leader(ctx context.Context, rng *rand.Rand) (*nodes.Node, string) {
	if e.Groups > 1 {
		n, g, note := e.groupLeader(ctx, rng)
		if note == "" {
			note = fmt.Sprintf(" (group %d leader)", g)
		}
		return n, note
	}
	if l := e.Cluster.WaitLeader(ctx, 5*time.Second); l != nil {
		return l, ""
	}
	n := e.randomNodes(rng, 1)[0]
	return n, " (no leader found; random node)"
}

// groupLeader draws a group at random and finds its serving leader
// (waiting up to 5s); without one it falls back to a random running node
// and says so in note.
func (e *Env) groupLeader(ctx context.Context, rng *rand.Rand) (n *nodes.Node, g int, note string) {
	g = rng.IntN(max(e.Groups, 1))
	if l := e.Cluster.WaitGroupLeader(ctx, g, 5*time.Second); l != nil {
		return l, g, ""
	}
	return e.randomNodes(rng, 1)[0], g, fmt.Sprintf(" (group %d: no leader found; random node)", g)
}

// randomNodes picks k distinct nodes, running ones first.
func (e *Env) randomNodes(rng *rand.Rand, k int) []*nodes.Node {
	var run, other []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if n.State() == nodes.Running {
			run = append(run, n)
		} else {
			other = append(other, n)
		}
	}
	rng.Shuffle(len(run), func(i, j int) { run[i], run[j] = run[j], run[i] })
	rng.Shuffle(len(other), func(i, j int) { other[i], other[j] = other[j], other[i] })
	all := append(run, other...)
	return all[:min(k, len(all))]
}

func minority(n int) int { return max(1, (n-1)/2) }

func ids(ns []*nodes.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	sort.Strings(out)
	return out
}
