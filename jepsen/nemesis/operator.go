package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
	"github.com/seqd/seqd/jepsen/record"
)

// Operator faults are what an operator does to a cluster, right or wrong,
// with the tools an operator has: the seqd binary (`seqd node remove`,
// `seqd backup`, `seqd restore`), stopping and starting servers with their
// usual flags (SIGTERM or kill -9), and copying or deleting data
// directories while a server is stopped. seqd's promise holds whatever an
// operator does: a mistake may be refused (a clear error, a non-zero exit,
// a server that logs why and stays out of service), never answered with a
// repeated value or one that goes backwards; the checkers see to the
// latter. Each fault's healing reports what the cluster did (the outcome in
// the history and in results.json), and leaves a node it broke repaired by
// README's procedure: `seqd node remove`, stop, delete the data directory,
// start.

// Log lines of seqd that show documented refusals and events (README,
// Operations: "Which servers may take part (vouching)" and "A full disk").
const (
	staleRefusal   = "its data directory is an older copy"
	foreignRefusal = "but this server's data belongs to cluster" // another cluster lists it (a restore into a member)
	gateOpen       = "raft gate open"                            // vouched for: it takes part in raft from now on
	passedGate     = "listed_as_voter=true"                      // "joining as a new server" while the cluster lists it as a voter
	quorumWait     = "waiting for ["                             // no leader answers and it waits for these voters' answers
	noStateWait    = "no serving leader answers yet"             // a server without state waits for a leader to vouch for it
	diskFullLog    = "the disk is full"                          // ...: this server stops standing for election
	becameLeader   = "became raft leader"
	lostLeader     = "lost raft leadership"
	servedLog      = "serving as leader" // it holds the lease and answers as leader
)

// refusals are the log lines of a server that refuses to take part, by
// the name the outcomes use.
var refusals = []struct{ name, line string }{
	{"older copy", staleRefusal},
	{"taken for another cluster's member", foreignRefusal},
	{"wiped", wipedRefusal},
	{"removed", "does not list it in the raft configuration"},
}

// refusal returns the name of the refusal the node logged since offset, or
// "".
func refusal(n *nodes.Node, offset int64) string {
	log := n.LogSince(offset)
	for _, r := range refusals {
		if strings.Contains(log, r.line) {
			return r.name
		}
	}
	return ""
}

// afterRefusal reports what a node that logged a refusal since offset
// logged after it: that its raft gate opened (vouched for after all: the
// refusal is not final) and that it served as leader, or "".
func afterRefusal(n *nodes.Node, offset int64) string {
	log := n.LogSince(offset)
	first := -1
	for _, r := range refusals {
		if i := strings.Index(log, r.line); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first < 0 {
		return ""
	}
	rest := log[first:]
	if !strings.Contains(rest, gateOpen) {
		return ""
	}
	d := "THEN its raft gate OPENED in the same process (vouched for after refusing)"
	if c := strings.Count(rest, servedLog); c > 0 {
		d += fmt.Sprintf(" and it logged %q %d times", servedLog, c)
	}
	return d
}

// served describes how often a node logged that it served as leader since
// offset ("" if never).
func served(n *nodes.Node, offset int64) string {
	if c := n.LogCount(offset, servedLog); c > 0 {
		return fmt.Sprintf("%s logged %q %d times on this data", n.ID, servedLog, c)
	}
	return ""
}

// waitUntil polls cond every 250ms until it holds or timeout passes, and
// returns whether it held and how long it took.
func waitUntil(timeout time.Duration, cond func() bool) (bool, time.Duration) {
	start := time.Now()
	for {
		if cond() {
			return true, time.Since(start)
		}
		if time.Since(start) > timeout {
			return false, time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// verdictTimeout bounds the wait for a restarted server to say what it is
// (vouched for, or refused): it asks every second or so, and a leader that
// has just been elected waits a lease before it answers with authority.
const verdictTimeout = 20 * time.Second

// verdict waits (bounded) until a server started on questionable data
// either logs a refusal or takes part in the cluster (a voter that is
// vouched for and follows the current leader), and says which.
func (e *Env) verdict(n *nodes.Node, offset int64) (refused string, inService bool, standing string, took time.Duration) {
	_, took = waitUntil(verdictTimeout, func() bool {
		if refused = refusal(n, offset); refused != "" {
			return true
		}
		inService, standing = e.inService(n)
		return inService
	})
	if refused != "" || standing == "" {
		_, standing = e.inService(n)
	}
	return refused, inService, standing, took
}

// opState is the operator faults' memory between faults.
type opState struct {
	mu      sync.Mutex
	seq     int
	copies  []*dirCopy
	backups []*backupFile
	broken  map[string]bool          // nodes to repair (remove, stop, wipe, start)
	leases  map[string]time.Duration // nodes whose --lease is not the run's
	filled  map[string]bool          // nodes whose small disk holds a filler
	help    string                   // `seqd restore --help`
	helpOK  bool
	// seed is the node a --bootstrap single cluster grew from, until the
	// first wipe-restart (see wipeRestart).
	seed *nodes.Node
}

// dirCopy is a copy of a node's data directory taken while it was stopped.
type dirCopy struct {
	node  *nodes.Node
	path  string
	taken time.Time
	note  string
}

// backupFile is a `seqd backup` of the cluster.
type backupFile struct {
	path  string
	taken time.Time
}

func (e *Env) path(prefix string) (string, error) {
	e.op.mu.Lock()
	e.op.seq++
	seq := e.op.seq
	e.op.mu.Unlock()
	dir := e.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d", prefix, seq)), nil
}

func (e *Env) setBroken(n *nodes.Node, b bool) {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	if e.op.broken == nil {
		e.op.broken = map[string]bool{}
	}
	if b {
		e.op.broken[n.ID] = true
	} else {
		delete(e.op.broken, n.ID)
	}
}

func (e *Env) isBroken(n *nodes.Node) bool {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	return e.op.broken[n.ID]
}

func (e *Env) brokenNodes() []*nodes.Node {
	var out []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if e.isBroken(n) {
			out = append(out, n)
		}
	}
	return out
}

// stopNode stops a node as the seed says: SIGTERM (a leader hands
// leadership over first) or kill -9. It returns which.
func (e *Env) stopNode(n *nodes.Node, rng *rand.Rand) (string, error) {
	if rng.IntN(2) == 0 {
		return "SIGTERM", n.Stop(10 * time.Second)
	}
	return "kill -9", n.Kill()
}

// repair is README's procedure for a server that must not take part with
// its data: `seqd node remove` it, stop it, delete its data directory,
// start it with its usual flags; it joins as a new server and is promoted.
func (e *Env) repair(n *nodes.Node) error {
	e.logf("nemesis:   repairing %s: seqd node remove, stop, wipe, start", n.ID)
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout+10*time.Second)
	rerr := e.nodeRemove(ctx, n)
	cancel()
	if err := errors.Join(n.Stop(10*time.Second), n.Wipe()); err != nil {
		return errors.Join(rerr, err)
	}
	err := e.rejoin([]*nodes.Node{n})
	if err == nil {
		e.setBroken(n, false)
	}
	return errors.Join(rerr, err)
}

// watcher polls every node while an operator fault is in place and notes
// what one node did: whether it led and served while the other servers
// followed another leader (serving from state the cluster does not share),
// and how many times it became a serving leader.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	alone string // the first time it served alone, described
	leads int    // times seen becoming a serving leader
	// Serving leaders seen anywhere in the cluster, in order (leader/term).
	leaders []string
	// leadAtStart: it was the serving leader at the first look; stepped:
	// how long after the watch began it was first seen not leading then.
	leadAtStart bool
	stepped     time.Duration
	// diskFull: its status said disk-full at some look (seqd status
	// notes disk-full, the metric seqd_disk_full).
	diskFull bool
}

func (e *Env) watch(n *nodes.Node) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		was := false
		start := time.Now()
		for first := true; ctx.Err() == nil; first = false {
			sts := e.Cluster.Statuses(ctx, time.Second)
			me := sts[n.Index]
			lead := me.Err == nil && me.Serving && strings.EqualFold(me.State, "leader")
			w.mu.Lock()
			if first {
				w.leadAtStart = lead
			}
			if !lead && me.Err == nil && w.leadAtStart && w.stepped == 0 {
				w.stepped = time.Since(start)
			}
			if me.Err == nil && me.DiskFull {
				w.diskFull = true
			}
			if lead && !was {
				w.leads++
			}
			for _, s := range sts {
				if s.Err == nil && s.Serving && strings.EqualFold(s.State, "leader") {
					lt := fmt.Sprintf("%s/%d", s.Node.ID, s.Term)
					if len(w.leaders) == 0 || w.leaders[len(w.leaders)-1] != lt {
						w.leaders = append(w.leaders, lt)
					}
				}
			}
			if lead && w.alone == "" {
				for _, s := range sts {
					if s.Node != n && s.Err == nil && s.LeaderID != "" && s.LeaderID != n.ID {
						other := fmt.Sprintf("%s followed %s", s.Node.ID, s.LeaderID)
						if s.LeaderID == s.Node.ID {
							other = s.Node.ID + " led"
						}
						w.alone = fmt.Sprintf("%s SERVED as a leader (term %d) while %s (term %d), at %.1fs",
							n.ID, me.Term, other, s.Term, e.Rec.Now().Seconds())
						break
					}
				}
			}
			w.mu.Unlock()
			was = lead
			sleep(ctx, 250*time.Millisecond)
		}
	}()
	return w
}

// stop ends the watch and returns what it saw.
func (w *watcher) stop() (alone string, leads int) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.alone, w.leads
}

// leaderChanges describes the serving leaders seen (leader/term, in order).
func (w *watcher) leaderChanges() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.leaders) == 0 {
		return "no serving leader seen"
	}
	const show = 8
	l := w.leaders
	more := ""
	if len(l) > show {
		more = fmt.Sprintf(" … (%d in all)", len(l))
		l = l[len(l)-show:]
	}
	return "serving leaders " + strings.Join(l, " → ") + more
}

// inService describes a node's standing in the cluster's configuration,
// and reports whether it is a voter that follows the current leader in its
// term.
func (e *Env) inService(n *nodes.Node) (bool, string) {
	ok, _, standing := e.standing(n)
	return ok, standing
}

// standing is inService, with the node's membership as the cluster lists it.
func (e *Env) standing(n *nodes.Node) (bool, nodes.Member, string) {
	v, err := e.view(context.Background(), 5*time.Second)
	if err != nil {
		return false, nodes.Member{}, "membership unknown: " + err.Error()
	}
	m := v.Members[n.ID]
	ok := m.Voter && m.RaftOpen && m.Term == v.Term && (m.RaftState == "follower" || (m.RaftState == "leader" && v.Leader == n.ID))
	return ok, m, fmt.Sprintf("%s, term %d (leader %s, term %d)", describe(m), m.Term, v.Leader, v.Term)
}

// ---- stale-copy ----

func (e *Env) addCopy(c *dirCopy) {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	// One copy per node: a newer one replaces the older.
	e.op.copies = slices.DeleteFunc(e.op.copies, func(x *dirCopy) bool {
		if x.node == c.node {
			_ = os.RemoveAll(x.path)
			return true
		}
		return false
	})
	e.op.copies = append(e.op.copies, c)
}

// pendingCopy picks a copy to put back: a copy taken while its node was the
// only voter first, otherwise one at random three times in four; nil: take
// a new copy instead.
func (e *Env) pendingCopy(rng *rand.Rand) *dirCopy {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	if len(e.op.copies) == 0 {
		return nil
	}
	pick := -1
	for i, c := range e.op.copies {
		if strings.Contains(c.note, "only voter") {
			pick = i
			break
		}
	}
	if pick < 0 && rng.IntN(4) != 0 {
		pick = rng.IntN(len(e.op.copies))
	}
	if pick < 0 {
		return nil
	}
	c := e.op.copies[pick]
	e.op.copies = slices.Delete(e.op.copies, pick, pick+1)
	return c
}

func staleCopy(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	if c := e.pendingCopy(rng); c != nil {
		return e.putBack(ctx, rng, c, nil)
	}
	return e.takeCopy(ctx, rng)
}

// takeCopy stops a voter, copies its data directory aside and starts it
// again. On 5 nodes, one time in two, another voter is removed first and
// re-added after the copy, so that the copy's raft configuration is older
// than the cluster's. One time in three the copy is put back at once (a
// copy a few seconds old, which seqd's record of each server's log may not
// tell apart).
func (e *Env) takeCopy(ctx context.Context, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	picked, v, err := e.pickVoters(ctx, rng, 1)
	if err != nil {
		return nil, nil, err
	}
	x := picked[0]
	var errs []error
	var targets []string
	// A voter to remove meanwhile (5+ nodes: 4+ running voters).
	var y *nodes.Node
	voters := 0
	var others []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if m := v.Members[n.ID]; m.Voter && n.State() == nodes.Running && !e.busy(n) {
			voters++
			if n != x && n.ID != v.Leader {
				others = append(others, n)
			}
		}
	}
	if voters >= 4 && len(others) > 0 && rng.IntN(2) == 0 {
		y = others[rng.IntN(len(others))]
		e.markDirty(y, true)
		if err := e.nodeRemove(ctx, y); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, y.Stop(10*time.Second), y.Wipe())
		targets = append(targets, y.ID+" removed while the copy is taken")
	}
	note := ""
	if x.ID == v.Leader {
		note = " (leader)"
	}
	how, err := e.stopNode(x, rng)
	errs = append(errs, err)
	path, err := e.path("copy-" + x.ID)
	if err == nil {
		err = x.CopyData(path)
	}
	errs = append(errs, err, x.Start())
	c := &dirCopy{node: x, path: path, taken: time.Now(), note: fmt.Sprintf("taken at %.1fs", e.Rec.Now().Seconds())}
	if y != nil {
		c.note += ", without " + y.ID + " in its configuration"
	}
	targets = append([]string{fmt.Sprintf("%s%s copied aside (stopped by %s)", x.ID, note, how)}, targets...)
	if y != nil {
		errs = append(errs, e.rejoin([]*nodes.Node{y}))
		targets = append(targets, y.ID+" re-added")
	}
	errs = append(errs, e.waitVoters([]*nodes.Node{x}, rejoinTimeout))
	if err := errors.Join(errs...); err != nil {
		_ = os.RemoveAll(path)
		return targets, nil, err
	}
	if rng.IntN(3) == 0 {
		// Put it back within seconds.
		sleep(ctx, time.Second+time.Duration(rng.IntN(8))*250*time.Millisecond)
		return e.putBack(ctx, rng, c, targets)
	}
	e.addCopy(c)
	return targets, nil, nil
}

// putBack stops the copy's node, replaces its data directory by the copy and
// starts it with its usual flags. It must refuse (log that its data
// directory is an older copy and stay out) or rejoin without any anomaly;
// healing repairs it unless it rejoined.
func (e *Env) putBack(ctx context.Context, rng *rand.Rand, c *dirCopy, targets []string) ([]string, func() ([]string, error), error) {
	x := c.node
	e.setBroken(x, true)
	offset := x.LogSize()
	how, err := e.stopNode(x, rng)
	errs := []error{err}
	if err := x.ReplaceData(c.path); err != nil {
		errs = append(errs, err)
	}
	_ = os.RemoveAll(c.path)
	errs = append(errs, x.Start())
	w := e.watch(x)
	age := time.Since(c.taken).Round(100 * time.Millisecond)
	targets = append(targets, fmt.Sprintf("%s back on its copy from %v ago (%s; stopped by %s)", x.ID, age, c.note, how))
	heal := func() ([]string, error) {
		// It must say what it is: refused (an older copy), or vouched
		// for and following the leader (a copy too recent to tell apart).
		refused, ok, standing, took := e.verdict(x, offset)
		alone, leads := w.stop()
		var out []string
		if alone != "" {
			out = append(out, alone)
		}
		gate := x.LogContains(offset, gateOpen)
		switch {
		case refused != "":
			out = append(out, fmt.Sprintf("%s refused (logged: %s) %v after the heal began", x.ID, refused, took.Round(100*time.Millisecond)))
			if a := afterRefusal(x, offset); a != "" {
				out = append(out, a)
			} else if gate {
				out = append(out, x.ID+" ALSO logged that its raft gate opened (before the refusal)")
			}
		case ok && alone == "":
			out = append(out, x.ID+" rejoined with the copy (vouched for, no refusal: a copy too recent to tell apart)")
		default:
			out = append(out, fmt.Sprintf("%s out of service without a refusal logged within %v (raft gate opened: %v)", x.ID, verdictTimeout, gate))
		}
		if d := served(x, offset); d != "" {
			out = append(out, d)
		}
		out = append(out, fmt.Sprintf("became serving leader %d times; %s", leads, standing))
		if ok && refused == "" && alone == "" {
			e.setBroken(x, false)
			return out, nil
		}
		start := time.Now()
		err := e.repair(x)
		if err == nil {
			out = append(out, fmt.Sprintf("repaired (remove, wipe, start): a voter again after %v", time.Since(start).Round(100*time.Millisecond)))
		}
		return out, err
	}
	return targets, heal, errors.Join(errs...)
}

// BootstrapSingle grows the cluster from its first node, started alone
// (--bootstrap single: no --join, --bootstrap-expect 1) and serving: after
// settle it stops the seed, copies its data directory aside (a copy whose
// raft configuration has the seed as its only voter, kept for stale-copy),
// starts it alone again, starts the other nodes (they join it as README's
// "Grow" says and are promoted), and finally restarts the seed with the
// cluster's usual flags (--join of every node). Recorded as a window
// "bootstrap-single".
func (e *Env) BootstrapSingle(ctx context.Context, seed *nodes.Node, settle time.Duration) error {
	id := int(e.nextID.Add(1))
	t0 := e.Rec.Now()
	var others []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if n != seed {
			others = append(others, n)
		}
	}
	targets := []string{seed.ID + " alone (no --join, --bootstrap-expect 1), copied", strings.Join(ids(others), "+") + " joined", seed.ID + " restarted with the usual flags"}
	e.Rec.Add(record.Op{Client: record.NemesisClient, F: record.FaultStart, Fault: "bootstrap-single", FaultID: id, Class: Operator,
		Targets: targets, Invoke: t0, Complete: e.Rec.Now(), Type: record.Info})
	e.logf("nemesis: bootstrap-single %v", targets)
	var errs []error
	sleep(ctx, settle)
	errs = append(errs, seed.Stop(10*time.Second))
	path, err := e.path("copy-" + seed.ID)
	if err == nil {
		err = seed.CopyData(path)
	}
	if err == nil {
		e.addCopy(&dirCopy{node: seed, path: path, taken: time.Now(), note: fmt.Sprintf("taken at %.1fs while it was the only voter", e.Rec.Now().Seconds())})
		e.logf("nemesis:   %s copied aside while it is the only voter", seed.ID)
	}
	errs = append(errs, err, seed.StartWith(nodes.SeedArgs(seed.Args())))
	errs = append(errs, e.Cluster.WaitHealthyNodes(ctx, 30*time.Second, []*nodes.Node{seed}))
	for _, n := range others {
		errs = append(errs, n.Start())
	}
	errs = append(errs, e.waitVoters(others, 90*time.Second))
	errs = append(errs, seed.Stop(10*time.Second), seed.Start(), e.waitVoters([]*nodes.Node{seed}, rejoinTimeout))
	err = errors.Join(errs...)
	e.op.mu.Lock()
	e.op.seed = seed
	e.op.mu.Unlock()
	rec := record.Op{Client: record.NemesisClient, F: record.FaultHeal, Fault: "bootstrap-single", FaultID: id, Class: Operator,
		Targets: targets, Invoke: e.Rec.Now(), Complete: e.Rec.Now(), Type: record.Info}
	if err != nil {
		rec.Error = err.Error()
	}
	e.Rec.Add(rec)
	e.logf("nemesis: heal bootstrap-single%s", errSuffix(err))
	return err
}

// ---- wipe-restart ----

// startStep is one step of a full-cluster restart: nodes started together,
// then a pause.
type startStep struct {
	IDs   []string
	Pause time.Duration
}

// planRestart orders a full-cluster restart. With laggers (nodes paused
// before the stop so that their logs fell behind), the laggers and the
// wiped node start first, together, and the others a few seconds later:
// if the wiped node took part, the laggers and it would be a majority
// without the entries the others committed. Otherwise the nodes start one
// at a time in a seeded order with the wiped one first, last or in between,
// with seeded pauses of 0-3 s between starts.
func planRestart(rng *rand.Rand, all []string, wiped string, laggers []string) []startStep {
	var rest []string
	for _, id := range all {
		if id != wiped && !slices.Contains(laggers, id) {
			rest = append(rest, id)
		}
	}
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	pause := func(maxQuarters int) time.Duration {
		return time.Duration(rng.IntN(maxQuarters+1)) * 250 * time.Millisecond
	}
	var steps []startStep
	if len(laggers) > 0 {
		first := append(slices.Clone(laggers), wiped)
		rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
		steps = append(steps, startStep{IDs: first, Pause: 2*time.Second + pause(8)})
		for _, id := range rest {
			steps = append(steps, startStep{IDs: []string{id}, Pause: pause(8)})
		}
	} else {
		order := slices.Clone(rest)
		switch rng.IntN(3) {
		case 0:
			order = append([]string{wiped}, order...)
		case 1:
			order = append(order, wiped)
		default:
			i := rng.IntN(len(order) + 1)
			order = slices.Insert(order, i, wiped)
		}
		for _, id := range order {
			steps = append(steps, startStep{IDs: []string{id}, Pause: pause(12)})
		}
	}
	steps[len(steps)-1].Pause = 0
	return steps
}

func describePlan(steps []startStep) string {
	var parts []string
	for _, s := range steps {
		p := strings.Join(s.IDs, "+")
		if s.Pause > 0 {
			p += fmt.Sprintf(" (%v)", s.Pause)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// wipeRestart is a full-cluster restart during which one voter's data
// directory is wiped. With no leader, the survivors vouch for each other
// only with the answers of N - majority + 1 other voters: on 5 voters they
// elect a leader without the wiped one; on 3 they wait for it, and README's
// procedure (vouching: "waiting for voters") is to restart them with
// --assume-gone ID. The wiped voter must then refuse to vote or serve until
// an operator runs `seqd node remove` (README: "Replace a dead server, same
// ID, new disk"). Healing does all that, each step waiting for its
// condition, and waits until the wiped server is a voter again.
func wipeRestart(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	v, err := e.view(ctx, 10*time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("membership unknown: %w", err)
	}
	var voters, candidates []*nodes.Node
	var leader *nodes.Node
	for _, n := range e.Cluster.Nodes {
		if m := v.Members[n.ID]; m.Voter && n.State() == nodes.Running && !e.busy(n) {
			voters = append(voters, n)
			if n.ID == v.Leader {
				leader = n
			}
		}
	}
	if len(voters) < 3 {
		return nil, nil, fmt.Errorf("only %d running voters: no full restart", len(voters))
	}
	w := voters[rng.IntN(len(voters))]
	if leader != nil && rng.IntN(leaderShare) == 0 {
		w = leader
	}
	// The first wipe-restart after a cluster grew from a seed (--bootstrap
	// single) wipes a server that joined it and makes the seed lag: the
	// seed's raft snapshot (taken while it was alone, with a short
	// --snapshot-interval) may predate the cluster's record that the
	// joined server held state, and a restart rolls the seed's FSM back to
	// that snapshot until a leader commits again.
	e.op.mu.Lock()
	seed := e.op.seed
	e.op.seed = nil
	e.op.mu.Unlock()
	seeded := seed != nil && slices.Contains(voters, seed) && seed != leader
	if seeded {
		var joined []*nodes.Node
		for _, n := range voters {
			if n != seed && n != leader {
				joined = append(joined, n)
			}
		}
		if len(joined) == 0 {
			joined = []*nodes.Node{leader}
		}
		w = joined[rng.IntN(len(joined))]
	}
	for _, n := range voters {
		if n != w && n != leader {
			candidates = append(candidates, n)
		}
	}
	var laggers []*nodes.Node
	switch {
	case seeded:
		laggers = []*nodes.Node{seed}
	case rng.IntN(2) == 0 && len(candidates) > 0:
		rng.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
		laggers = candidates[:min(minority(len(e.Cluster.Nodes)), len(candidates))]
	}
	e.setBroken(w, true)
	var targets []string
	note := ""
	if w == leader {
		note = " (leader)"
	}
	targets = append(targets, w.ID+note+" wiped")
	if seeded {
		targets = append(targets, "the cluster grew from "+seed.ID)
	}
	var errs []error
	how := "SIGTERM"
	if len(laggers) > 0 {
		// The laggers miss a few seconds of entries.
		lag := 1500*time.Millisecond + time.Duration(rng.IntN(7))*250*time.Millisecond
		for _, n := range laggers {
			errs = append(errs, n.Pause())
		}
		sleep(ctx, lag)
		targets = append(targets, fmt.Sprintf("%s paused %v first (lagging)", strings.Join(ids(laggers), "+"), lag))
		how = "kill -9"
	} else if rng.IntN(2) == 0 {
		how = "kill -9"
	}
	if how == "kill -9" {
		errs = append(errs, e.Cluster.KillAll())
	} else {
		errs = append(errs, e.Cluster.StopAll(10*time.Second))
	}
	errs = append(errs, w.Wipe())
	var all, lagIDs []string
	for _, n := range e.Cluster.Nodes {
		all = append(all, n.ID)
	}
	for _, n := range laggers {
		lagIDs = append(lagIDs, n.ID)
	}
	plan := planRestart(rng, all, w.ID, lagIDs)
	targets = append(targets, how+" all", "start "+describePlan(plan))
	offset := w.LogSize()
	offsets := logOffsets(e.Cluster)
	var survivors []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if n != w {
			survivors = append(survivors, n)
		}
	}
	nv := 0 // voters in the configuration, the wiped one included
	for _, m := range v.Members {
		if m.Voter {
			nv++
		}
	}
	watch := e.watch(w)
	for _, s := range plan {
		for _, id := range s.IDs {
			errs = append(errs, e.Cluster.ByID(id).Start())
		}
		sleep(ctx, s.Pause)
	}
	heal := func() ([]string, error) {
		var out []string
		// The survivors cannot know whether the wiped voter held a
		// committed record of one of them: without a leader, each needs
		// the answers of N - majority + 1 other voters (both others of 3,
		// three of the other four of 5). On 5 voters the three other
		// survivors suffice and they elect a leader; on 3 they wait for
		// the wiped voter, which has nothing to answer with, and say so
		// ("waiting for [ID]"): README's procedure is then to restart the
		// survivors with --assume-gone ID.
		mustWait := nv-2 < nv-nv/2
		lead, waited, took := e.leaderOrWait(survivors, offsets, w.ID, recoverTimeout)
		switch {
		case lead != nil && mustWait:
			out = append(out, fmt.Sprintf("UNEXPECTED: the survivors elected %s without %s's answer (%d voters: vouching without a leader needs both others of 3), %v after the heal began",
				lead.ID, w.ID, nv, took.Round(100*time.Millisecond)))
		case lead != nil:
			out = append(out, fmt.Sprintf("the survivors elected %s without %s (%d voters: the %d others with state answered), %v after the heal began",
				lead.ID, w.ID, nv, nv-2, took.Round(100*time.Millisecond)))
		default:
			if len(waited) > 0 {
				out = append(out, fmt.Sprintf("no leader: %s logged waiting for [%s] (no leader answers; %d voters)", strings.Join(waited, ","), w.ID, nv))
			} else {
				out = append(out, fmt.Sprintf("no leader within %v, and no survivor logged that it waits for %s", recoverTimeout, w.ID))
			}
			if !mustWait {
				out = append(out, fmt.Sprintf("UNEXPECTED on %d voters: the other survivors' answers should have sufficed", nv))
			}
			l, d, err := e.assumeGone(survivors, w)
			if l == nil {
				out = append(out, fmt.Sprintf("restarted %s with --assume-gone %s: NO leader within %v (%v)", strings.Join(ids(survivors), ","), w.ID, d.Round(100*time.Millisecond), err))
			} else {
				out = append(out, fmt.Sprintf("restarted %s with --assume-gone %s: %s leads %v later", strings.Join(ids(survivors), ","), w.ID, l.ID, d.Round(100*time.Millisecond)))
			}
		}
		// With a leader, the wiped voter is told what it is: refused, as
		// its data directory has none.
		refused, _, standing, rtook := e.verdict(w, offset)
		alone, _ := watch.stop()
		if alone != "" {
			out = append(out, alone)
		}
		passed := w.LogContains(offset, passedGate)
		gate := w.LogContains(offset, gateOpen)
		switch {
		case passed:
			out = append(out, w.ID+" PASSED the gate: joined while listed as a voter, with an empty data directory (it may vote again in a term it voted in)")
		case gate:
			out = append(out, w.ID+" PASSED the gate: its raft gate opened with an empty data directory while it was listed as a voter, before any removal")
		case refused == "wiped":
			out = append(out, fmt.Sprintf("%s refused (logged: wiped, refuses to vote or serve) %v after that", w.ID, rtook.Round(100*time.Millisecond)))
		case refused != "":
			out = append(out, fmt.Sprintf("%s refused (logged: %s)", w.ID, refused))
		case w.LogContains(offset, noStateWait):
			out = append(out, w.ID+" waited for a leader to vouch for it (logged), no refusal logged within "+verdictTimeout.String())
		default:
			out = append(out, w.ID+" no refusal logged")
		}
		if d := served(w, offset); d != "" {
			out = append(out, d)
		}
		out = append(out, standing)
		var err error
		start := time.Now()
		if passed || gate || alone != "" {
			// It holds state now: the general procedure.
			err = e.repair(w)
		} else {
			// README: `seqd node remove` it; it then joins by itself.
			rctx, cancel := context.WithTimeout(context.Background(), removeTimeout+10*time.Second)
			err = e.nodeRemove(rctx, w)
			cancel()
			if err == nil {
				err = e.waitVoters([]*nodes.Node{w}, rejoinTimeout)
			}
			if err != nil {
				out = append(out, "did not rejoin after seqd node remove: "+err.Error())
				err = e.repair(w)
			}
		}
		if err == nil {
			e.setBroken(w, false)
			out = append(out, fmt.Sprintf("a voter again %v after seqd node remove", time.Since(start).Round(100*time.Millisecond)))
		}
		return out, err
	}
	return targets, heal, errors.Join(errs...)
}

// recoverTimeout bounds the wait, after a full-cluster restart, for a
// serving leader or for every survivor to say which voters it waits for.
const recoverTimeout = 20 * time.Second

// waitsFor reports whether node n logged, since offset, that it waits for
// voter id's answer (no leader answers: "... waiting for [n1 n3]").
func waitsFor(n *nodes.Node, offset int64, id string) bool {
	for _, line := range strings.Split(n.LogSince(offset), "\n") {
		_, rest, ok := strings.Cut(line, quorumWait)
		if !ok {
			continue
		}
		list, _, _ := strings.Cut(rest, "]")
		if slices.Contains(strings.Fields(list), id) {
			return true
		}
	}
	return false
}

// leaderOrWait waits (bounded) after a full-cluster restart until a leader
// serves, or until every running survivor has refused raft traffic for
// stuckFor having logged that it waits for voter id (seqd logs that once
// per process, so the log alone does not say it still waits; its status
// does: raft_open false). It returns the leader (nil if none), the
// survivors that wait, and how long it waited.
func (e *Env) leaderOrWait(survivors []*nodes.Node, offsets map[string]int64, id string, timeout time.Duration) (*nodes.Node, []string, time.Duration) {
	const stuckFor = 3 * time.Second
	var lead *nodes.Node
	var waited []string
	var since time.Time
	_, took := waitUntil(timeout, func() bool {
		if lead = e.Cluster.Leader(context.Background()); lead != nil {
			return true
		}
		waited = nil
		running := 0
		for _, n := range survivors {
			if n.State() != nodes.Running {
				continue
			}
			running++
			st := e.Cluster.StatusOf(context.Background(), n, time.Second)
			if st.Err == nil && !st.RaftOpen && waitsFor(n, offsets[n.ID], id) {
				waited = append(waited, n.ID)
			}
		}
		if running == 0 || len(waited) < running {
			since = time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= stuckFor
	})
	return lead, waited, took
}

// assumeGone is README's procedure for a full-cluster restart in which a
// voter does not come back (gone for good: its disk lost or wiped): restart
// the survivors with --assume-gone ID, so that they count it as having
// answered and elect a leader. The flag is for this start only: every
// later start of a survivor uses its usual flags (README: remove the flag
// again at the next restart; it matters only while no leader answers). It
// returns the serving leader (nil if none came) and how long it took.
func (e *Env) assumeGone(survivors []*nodes.Node, gone *nodes.Node) (*nodes.Node, time.Duration, error) {
	start := time.Now()
	e.logf("nemesis:   restarting %s with --assume-gone %s", strings.Join(ids(survivors), ","), gone.ID)
	errs := make([]error, len(survivors))
	var wg sync.WaitGroup
	for i, n := range survivors {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.Stop(10 * time.Second) }()
	}
	wg.Wait()
	for _, n := range survivors {
		errs = append(errs, n.StartWith(nodes.SetFlag(n.Args(), "assume-gone", gone.ID)))
	}
	l := e.Cluster.WaitLeader(context.Background(), 30*time.Second)
	if l == nil {
		errs = append(errs, errors.New("no serving leader"))
	}
	return l, time.Since(start), errors.Join(errs...)
}

// ---- restore-mistake ----

// restoreMargin is the margin of the restore-mistake fault: generous, as
// README says (far above what any section hands out during a run).
const restoreMargin = 1_000_000_000

// Bounds passed to `seqd restore` by restore-mistake (when its --help
// lists them): far above what a run hands out or elects after a backup (a
// few hundred thousand values in all, a few dozen terms), and their minimum
// margin (V + T × (1,000,000 + 2 × S), S the largest step in the backup:
// 112,000,000 with the 10,000 of seqd's default space) stays below
// restoreMargin, so the command accepts them: the mistake is where the
// restore goes, not its numbers.
const (
	restoreValuesSince = 10_000_000
	restoreTermsSince  = 100
)

// restoreArgs is the `seqd restore` command line of the restore-mistake
// fault: `seqd restore --margin N --id ID --data-dir D --raft-addr A FILE`,
// plus --values-since and --terms-since (required since seqd computes the
// minimum margin) when `seqd restore --help` (help) lists them.
func restoreArgs(help, id, dataDir, raftAddr, file string) []string {
	args := []string{"restore", "--margin", fmt.Sprint(restoreMargin), "--id", id, "--data-dir", dataDir, "--raft-addr", raftAddr}
	if strings.Contains(help, "values-since") {
		args = append(args, "--values-since", fmt.Sprint(restoreValuesSince))
	}
	if strings.Contains(help, "terms-since") {
		args = append(args, "--terms-since", fmt.Sprint(restoreTermsSince))
	}
	return append(args, file)
}

// restoreHelp returns `seqd restore --help` (once).
func (e *Env) restoreHelp(ctx context.Context) string {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	if !e.op.helpOK {
		out, _ := e.Cluster.Seqd(ctx, 10*time.Second, "restore", "--help")
		e.op.help, e.op.helpOK = out, true
	}
	return e.op.help
}

func (e *Env) runningAPIs() string {
	var out []string
	for _, n := range e.Cluster.Nodes {
		if n.State() == nodes.Running && !e.isBroken(n) {
			out = append(out, n.API)
		}
	}
	return strings.Join(out, ",")
}

// restoreMistake: with no backup older than a few seconds, it takes one
// (`seqd backup --addr A FILE`); otherwise it restores the oldest into one
// member's stopped, wiped data directory with `seqd restore` and starts the
// member with its usual flags while the cluster keeps running: the restore
// is for a new cluster's first node, so the member must be refused (by the
// command or by the cluster) or stay out of service. Healing: README's
// procedure (node remove, wipe, start).
func restoreMistake(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	e.op.mu.Lock()
	var b *backupFile
	if len(e.op.backups) > 0 && time.Since(e.op.backups[0].taken) > 3*time.Second {
		b = e.op.backups[0]
		e.op.backups = e.op.backups[1:]
	}
	e.op.mu.Unlock()
	if b == nil {
		path, err := e.path("backup")
		if err != nil {
			return nil, nil, err
		}
		path += ".db"
		args := []string{"backup", "--addr", e.runningAPIs(), "--timeout", "20s", path}
		out, err := e.Cluster.Seqd(ctx, 30*time.Second, args...)
		e.logf("nemesis:   seqd %s → %s%s", strings.Join(args, " "), oneLine(out), errSuffix(err))
		if err != nil {
			return []string{"backup failed"}, nil, fmt.Errorf("seqd backup: %v: %s", err, oneLine(out))
		}
		e.op.mu.Lock()
		e.op.backups = append(e.op.backups, &backupFile{path: path, taken: time.Now()})
		e.op.mu.Unlock()
		return []string{"seqd backup: " + oneLine(out)}, nil, nil
	}
	defer os.Remove(b.path)
	picked, v, err := e.pickVoters(ctx, rng, 1)
	if err != nil {
		return nil, nil, err
	}
	x := picked[0]
	note := ""
	if x.ID == v.Leader {
		note = " (leader)"
	}
	e.setBroken(x, true)
	offset := x.LogSize()
	how, err := e.stopNode(x, rng)
	errs := []error{err, x.Wipe()}
	args := restoreArgs(e.restoreHelp(ctx), x.ID, x.DataDir, x.Raft, b.path)
	out, rerr := e.Cluster.Seqd(ctx, time.Minute, args...)
	e.logf("nemesis:   seqd %s → %s%s", strings.Join(args, " "), oneLine(out), errSuffix(rerr))
	restored := "seqd restore: " + oneLine(out)
	if rerr != nil {
		restored = fmt.Sprintf("seqd restore REFUSED (%v): %s", rerr, oneLine(out))
	}
	errs = append(errs, x.Start())
	w := e.watch(x)
	targets := []string{fmt.Sprintf("%s%s restored from a backup of %v ago (stopped by %s)", x.ID, note, time.Since(b.taken).Round(100*time.Millisecond), how), restored}
	heal := func() ([]string, error) {
		// The restored member belongs to a new cluster: it must refuse
		// (another cluster, the one it was taken from, lists it), or, if
		// the command refused, start empty and refuse as wiped.
		refused, ok, standing, took := e.verdict(x, offset)
		alone, leads := w.stop()
		var out []string
		if alone != "" {
			out = append(out, alone)
		}
		if rerr != nil {
			out = append(out, "the restore command refused")
		}
		switch {
		case refused != "":
			out = append(out, fmt.Sprintf("%s refused (logged: %s) %v after the heal began", x.ID, refused, took.Round(100*time.Millisecond)))
			if a := afterRefusal(x, offset); a != "" {
				out = append(out, a)
			}
		case ok:
			out = append(out, x.ID+" TOOK PART in the cluster with the restored data (no refusal)")
		default:
			out = append(out, fmt.Sprintf("%s out of service without a refusal logged within %v (raft gate opened: %v)", x.ID, verdictTimeout, x.LogContains(offset, gateOpen)))
		}
		if d := served(x, offset); d != "" {
			out = append(out, d)
		}
		out = append(out, fmt.Sprintf("became serving leader %d times; %s", leads, standing))
		start := time.Now()
		err := e.repair(x)
		if err == nil {
			out = append(out, fmt.Sprintf("repaired (remove, wipe, start): a voter again after %v", time.Since(start).Round(100*time.Millisecond)))
		}
		return out, err
	}
	return targets, heal, errors.Join(errs...)
}

// ---- lease-change ----

func (e *Env) leaseOf(n *nodes.Node) time.Duration {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	if l, ok := e.op.leases[n.ID]; ok {
		return l
	}
	return e.RunLease
}

// setLease restarts a node with another --lease (README's rolling restart:
// SIGTERM, start with the changed flags, wait until it is a voter again).
func (e *Env) setLease(n *nodes.Node, l time.Duration) error {
	err := n.Stop(10 * time.Second)
	n.SetFlag("lease", l.String())
	e.op.mu.Lock()
	if e.op.leases == nil {
		e.op.leases = map[string]time.Duration{}
	}
	if l == e.RunLease {
		delete(e.op.leases, n.ID)
	} else {
		e.op.leases[n.ID] = l
	}
	e.op.mu.Unlock()
	return errors.Join(err, n.Start(), e.waitVoters([]*nodes.Node{n}, rejoinTimeout))
}

// leaseAssignment draws a mixed assignment of leases (at least one node on
// each) different from the current one.
func leaseAssignment(rng *rand.Rand, current []time.Duration, short, long time.Duration) []time.Duration {
	n := len(current)
	for range 16 {
		out := make([]time.Duration, n)
		longs := 0
		for i := range out {
			out[i] = short
			if rng.IntN(2) == 0 {
				out[i] = long
				longs++
			}
		}
		if longs > 0 && longs < n && !slices.Equal(out, current) {
			return out
		}
	}
	// Flip one node of the current assignment (still mixed on 3+ nodes
	// unless it was not).
	out := slices.Clone(current)
	i := rng.IntN(n)
	if out[i] == long {
		out[i] = short
	} else {
		out[i] = long
	}
	return out
}

// leaseChange is a rolling restart that moves nodes between the run's lease
// and AltLease, leaving the leases mixed, with the leader SIGSTOPped at a
// seeded moment when it holds the long lease and a short-lease node can
// take over: a new leader waits only its own lease (plus margin) before
// serving, while the old one may believe in its long lease when it
// resumes.
func leaseChange(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	short, long := min(e.RunLease, e.AltLease), max(e.RunLease, e.AltLease)
	if short == long {
		return nil, nil, errors.New("lease-change needs --lease-change-to different from --lease")
	}
	ns := e.Cluster.Nodes
	cur := make([]time.Duration, len(ns))
	for i, n := range ns {
		cur[i] = e.leaseOf(n)
	}
	want := leaseAssignment(rng, cur, short, long)
	var changes []int
	for i := range ns {
		if want[i] != cur[i] {
			changes = append(changes, i)
		}
	}
	rng.Shuffle(len(changes), func(i, j int) { changes[i], changes[j] = changes[j], changes[i] })
	pauseAt := rng.IntN(len(changes) + 1)
	// Long enough for a new leader to be elected and to serve (election +
	// the short lease + margin), short enough that the long lease, renewed
	// every long/3, has not run out when it resumes.
	pauseFor := min(1200*time.Millisecond+time.Duration(rng.IntN(5))*200*time.Millisecond, long*3/5)
	// Cutting the paused leader off uses iptables: not while partitions run
	// on their own lane (healing the cut would heal theirs).
	// The cut is what lets the old leader believe it still leads after it
	// resumes: the new leader's messages were dropped, not queued, and its
	// replication to the old leader backs off, while the old leader's own
	// heartbeats get answers once the cut heals (hashicorp/raft#108).
	cut := e.Net != nil && !e.overlap.Load() && rng.IntN(4) != 0
	var assign []string
	for i, n := range ns {
		assign = append(assign, fmt.Sprintf("%s %v", n.ID, want[i]))
	}
	var order []string
	for _, i := range changes {
		order = append(order, ns[i].ID)
	}
	targets := []string{"leases " + strings.Join(assign, ", "), "restart " + strings.Join(order, ",")}
	var errs []error
	var paused string
	for step := 0; step <= len(changes) && ctx.Err() == nil; step++ {
		if step == pauseAt {
			paused = e.pauseLongLeader(ctx, rng, pauseFor, cut, long)
		}
		if step < len(changes) {
			n := ns[changes[step]]
			e.logf("nemesis:   %s: --lease %v → %v (SIGTERM, start, wait until voter)", n.ID, e.leaseOf(n), want[changes[step]])
			errs = append(errs, e.setLease(n, want[changes[step]]))
		}
	}
	targets = append(targets, paused)
	// The leases stay mixed until the next lease-change, or heal-all.
	heal := func() ([]string, error) { return []string{paused}, nil }
	return targets, heal, errors.Join(errs...)
}

// pauseLongLeader SIGSTOPs the leader for d if it holds the long lease and a
// running node holds a short one; if it does not, it first moves
// leadership (restarting the leader with its flags unchanged, at most
// three times). With cut, the paused leader is also cut off from the other nodes
// (clients still reach it) and resumed before it is reconnected, so that
// no message from the new leader tells it that it was deposed. It returns a
// description.
func (e *Env) pauseLongLeader(ctx context.Context, rng *rand.Rand, d time.Duration, cut bool, long time.Duration) string {
	short := func() bool {
		for _, n := range e.Cluster.Nodes {
			if n.State() == nodes.Running && e.leaseOf(n) < long {
				return true
			}
		}
		return false
	}
	moves := 0
	var l *nodes.Node
	for {
		l = e.Cluster.WaitLeader(ctx, 10*time.Second)
		if l == nil {
			return "no leader to pause"
		}
		if e.leaseOf(l) == long && short() {
			break
		}
		if moves == 3 || !short() {
			return fmt.Sprintf("no long-lease leader to pause (leader %s, lease %v)", l.ID, e.leaseOf(l))
		}
		moves++
		e.logf("nemesis:   %s leads on lease %v: restarting it to move leadership", l.ID, e.leaseOf(l))
		_ = errors.Join(l.Stop(10*time.Second), l.Start(), e.waitVoters([]*nodes.Node{l}, rejoinTimeout))
	}
	t0 := e.Rec.Now()
	if err := l.Pause(); err != nil {
		return "pause failed: " + err.Error()
	}
	var rest []int
	for i := range e.Cluster.Nodes {
		if i != l.Index {
			rest = append(rest, i)
		}
	}
	if cut {
		_, _ = e.partition(Complete([]int{l.Index}, rest))
	}
	sleep(ctx, d)
	nl := e.Cluster.Leader(ctx)
	_ = l.Resume()
	if cut {
		sleep(ctx, 500*time.Millisecond)
		_ = e.Net.HealAll()
	}
	desc := fmt.Sprintf("paused leader %s (lease %v) for %v at %.1fs", l.ID, long, d, t0.Seconds())
	if cut {
		desc += ", cut off from the other nodes until 0.5s after it resumed"
	}
	if nl != nil && nl != l {
		desc += fmt.Sprintf("; %s (lease %v) served meanwhile", nl.ID, e.leaseOf(nl))
	} else {
		desc += "; no other leader served meanwhile"
	}
	if moves > 0 {
		desc += fmt.Sprintf(" (after %d restarts to move leadership)", moves)
	}
	e.logf("nemesis:   %s", desc)
	return desc
}

// resetLeases puts every node back on the run's lease (a rolling restart).
func (e *Env) resetLeases() ([]string, error) {
	var touched []string
	var errs []error
	for _, n := range e.Cluster.Nodes {
		if l := e.leaseOf(n); l != e.RunLease {
			touched = append(touched, fmt.Sprintf("%s (--lease %v → %v)", n.ID, l, e.RunLease))
			errs = append(errs, e.setLease(n, e.RunLease))
		}
	}
	return touched, errors.Join(errs...)
}

// ---- disk-full ----

// supervisor restarts a node whose process exits on its own, after a
// second, as systemd's Restart=always would (at most maxRestarts times), so
// that a node that cannot run on a full disk shows as a crash loop.
type supervisor struct {
	cancel   context.CancelFunc
	done     chan struct{}
	restarts int
}

const maxRestarts = 10

func superviseNode(n *nodes.Node) *supervisor {
	ctx, cancel := context.WithCancel(context.Background())
	s := &supervisor{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil && s.restarts < maxRestarts {
			if n.State() == nodes.Down {
				if !sleep(ctx, time.Second) {
					return
				}
				if n.Start() == nil {
					s.restarts++
				}
				continue
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}()
	return s
}

func (s *supervisor) stop() int {
	s.cancel()
	<-s.done
	return s.restarts
}

func (e *Env) setFilled(n *nodes.Node, f bool) {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	if e.op.filled == nil {
		e.op.filled = map[string]bool{}
	}
	if f {
		e.op.filled[n.ID] = true
	} else {
		delete(e.op.filled, n.ID)
	}
}

func (e *Env) filledNodes() []*nodes.Node {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	var out []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if e.op.filled[n.ID] {
			out = append(out, n)
		}
	}
	return out
}

func (e *Env) unfill(n *nodes.Node) error {
	err := n.Unfill()
	if err == nil {
		e.setFilled(n, false)
	}
	return err
}

// diskFull fills a node's small disk (the leader's one time in two, else a
// follower's) until ENOSPC and holds it full for the fault's duration. The
// node must stop serving cleanly while the cluster carries on without it;
// a process that exits is restarted after a second, as a supervisor would
// (so a crash loop shows). Healing deletes the filler, starts the node if
// its process is down, and waits until it is a voter again. Exits, panics,
// refused writes and leadership changes are reported (the crash checker
// fails the run for an exit).
func diskFull(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	var withDisk []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if n.DiskDir != "" && n.State() == nodes.Running && !e.busy(n) {
			withDisk = append(withDisk, n)
		}
	}
	if len(withDisk) == 0 {
		return nil, nil, errors.New("no running node has a small disk (--small-disk)")
	}
	l := e.Cluster.WaitLeader(ctx, 5*time.Second)
	var x *nodes.Node
	role := "follower"
	if rng.IntN(2) == 0 && l != nil && l.DiskDir != "" && slices.Contains(withDisk, l) {
		x, role = l, "leader"
	} else {
		var fs []*nodes.Node
		for _, n := range withDisk {
			if n != l {
				fs = append(fs, n)
			}
		}
		if len(fs) == 0 {
			fs = withDisk
		}
		x = fs[rng.IntN(len(fs))]
		if x == l {
			role = "leader"
		}
	}
	offset := x.LogSize()
	crashes := len(x.Unexpected())
	filled, err := x.Fill()
	e.setFilled(x, true)
	free, _ := x.DiskFree()
	w := e.watch(x)
	sup := superviseNode(x)
	start := time.Now()
	targets := []string{fmt.Sprintf("%s (%s) disk full: filler %.1f MiB, %d bytes left", x.ID, role, float64(filled)/(1<<20), free)}
	heal := func() ([]string, error) {
		restarts := sup.stop()
		_, leads := w.stop()
		held := time.Since(start).Round(100 * time.Millisecond)
		full := x.LogSince(offset) // its log while the disk was full
		count := func(s string) int { return strings.Count(full, s) }
		var out []string
		exits := x.Unexpected()[crashes:]
		if len(exits) > 0 {
			out = append(out, fmt.Sprintf("%s EXITED %d times while its disk was full (restarted %d times after 1s, as a supervisor would): %s",
				x.ID, len(exits), restarts, strings.Join(exits, "; ")))
		} else {
			out = append(out, fmt.Sprintf("%s kept running for the %v its disk was full", x.ID, held))
		}
		if p := x.LogLines(offset, "panic: ", "fatal error: "); len(p) > 0 {
			out = append(out, fmt.Sprintf("%d panics, first: %s", len(p), oneLine(p[0])))
		}
		w.mu.Lock()
		leadAtStart, stepped, seenFull := w.leadAtStart, w.stepped, w.diskFull
		w.mu.Unlock()
		won := leads
		if leadAtStart {
			won-- // the lead it held when the disk filled
			if stepped > 0 {
				out = append(out, fmt.Sprintf("it led when its disk filled; not leading %v later", stepped.Round(100*time.Millisecond)))
			} else {
				out = append(out, "it led when its disk filled and was never seen not leading while full")
			}
		}
		out = append(out, fmt.Sprintf("while full: logged the disk full %d times (stands for no election), status disk-full seen %v, %d writes refused (no space), %d raft commits failed, lost leadership %d times, WON %d elections (became raft leader), became serving leader %d times",
			count(diskFullLog), seenFull, count("no space left"), count("failed to commit logs"), count(lostLeader), count(becameLeader), max(won, 0)),
			w.leaderChanges())
		errs := []error{e.unfill(x)}
		if st := x.State(); st == nodes.Down || st == nodes.Killed {
			out = append(out, "started again with its usual flags")
			errs = append(errs, x.Start())
		}
		// It stands again once a write succeeds (an entry from the
		// leader, or its probe every 2s): disk-full clears, then it is a
		// voter that takes part.
		back := time.Now()
		cleared, ctook := waitUntil(rejoinTimeout, func() bool {
			st := e.Cluster.StatusOf(context.Background(), x, time.Second)
			return st.Err == nil && !st.DiskFull
		})
		if cleared {
			out = append(out, fmt.Sprintf("disk-full cleared %v after space was back", ctook.Round(100*time.Millisecond)))
		} else {
			out = append(out, fmt.Sprintf("disk-full NOT cleared within %v of space being back", rejoinTimeout))
		}
		if err := e.waitVoters([]*nodes.Node{x}, rejoinTimeout); err != nil {
			out = append(out, x.ID+" did NOT rejoin once space was back: "+err.Error())
			e.setBroken(x, true)
			errs = append(errs, err, e.repair(x))
		} else {
			out = append(out, fmt.Sprintf("a voter again %v after space was back", time.Since(back).Round(100*time.Millisecond)))
		}
		return out, errors.Join(errs...)
	}
	return targets, heal, err
}
