package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/jepsen/nodes"
)

// restore-source-returns is a site outage and a restore: the operator
// takes a backup of the cluster, the whole cluster goes down with its disks
// intact (kill -9, or SIGSTOP), the operator restores the backup onto a new
// server elsewhere (README's restore procedure: a new ID, an empty data
// directory, its own addresses, and a --join naming the old servers'
// gossip addresses) and clients use it; then the old site comes back with
// its data (started again, or SIGCONT). The old servers are an older
// generation of the restored cluster's lineage, which has served: each
// must learn of it and be fenced for good (status fenced, refusal=
// superseded), and no value may repeat or go backwards across the two
// clusters (the checkers see every value of both).
//
// Healing ends the run's detour and gives the harness its N servers back,
// by the documented procedures: every old server is stopped, wiped and
// started empty with a --join that also names the restored server (this
// start only), so it joins the restored cluster as a new server; once all
// are in its configuration, `seqd node remove` removes the restored
// server, which is stopped. The cluster under test is then the restored
// cluster (a newer generation) on the usual servers.

// fenceTimeout bounds the wait, after the old servers are back, for each
// to be fenced: the restored server joins the --join addresses that gossip
// does not show alive every 2 s, and one exchange tells them.
const fenceTimeout = 30 * time.Second

// restoredServeTimeout bounds the wait for the restored server to serve: a
// lone voter admits itself once it has seen no server of its cluster for
// 5 s, but its gossip joins the --join addresses first, one after the
// other, and each that does not answer (a SIGSTOPped server, as a machine
// that is off) costs memberlist's 10 s TCP timeout.
const restoredServeTimeout = 90 * time.Second

// restoreRun is a restore-source-returns in progress: the restored server
// serving while the old ones are down, until healed.
type restoreRun struct {
	r       *nodes.Node
	sources []*nodes.Node
	how     string // how the old servers were stopped: "kill -9" or "SIGSTOP"
	// served: the restored server was seen serving (the old servers are
	// then to be fenced when they return).
	served bool
	// ctx names the fault for findings made while healing.
	ctx context.Context
}

func (e *Env) setRestore(run *restoreRun) {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	e.op.restore = run
}

func (e *Env) currentRestore() *restoreRun {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	return e.op.restore
}

func restoreSourceReturns(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	src := e.Cluster.Nodes
	for _, n := range src {
		if n.State() != nodes.Running || e.busy(n) {
			return nil, nil, fmt.Errorf("%s is %s: a site outage needs every server running first", n.ID, n.State())
		}
	}
	path, out, err := e.backup(ctx)
	if err != nil {
		return []string{"backup failed"}, nil, err
	}
	targets := []string{"seqd backup: " + oneLine(out)}
	// The old cluster goes on handing out values the backup does not hold.
	gap := 500*time.Millisecond + time.Duration(rng.IntN(16))*500*time.Millisecond
	sleep(ctx, gap)
	run := &restoreRun{sources: src, how: "kill -9", ctx: context.WithoutCancel(ctx)}
	if rng.IntN(2) == 0 {
		run.how = "SIGSTOP"
	}
	var errs []error
	for _, n := range src {
		if run.how == "kill -9" {
			errs = append(errs, n.Kill())
		} else {
			errs = append(errs, n.Pause())
		}
	}
	targets = append(targets, fmt.Sprintf("%s every server (%s) %v after the backup", run.how, strings.Join(ids(src), ","), gap))
	// Copies and backups of the old generation are moot now.
	e.op.mu.Lock()
	e.op.restores++
	id := fmt.Sprintf("r%d", e.op.restores)
	e.op.seed = nil
	for _, c := range e.op.copies {
		_ = os.RemoveAll(c.path)
	}
	e.op.copies, e.op.backups = nil, nil
	e.op.mu.Unlock()
	var joins []string
	for _, n := range src {
		joins = append(joins, n.Gossip)
	}
	r, err := e.Cluster.Spare(id, "--join", strings.Join(joins, ","))
	if err != nil {
		return targets, func() ([]string, error) { return e.sourcesBack(run) }, errors.Join(append(errs, err)...)
	}
	run.r = r
	// The old servers are down: the procedure goes to its end even if the
	// run's time limit passes meanwhile (each step is bounded).
	ctx = context.WithoutCancel(ctx)
	args := restoreArgs(e.restoreHelp(ctx), id, r.DataDir, r.Raft, path)
	out, rerr := e.Cluster.Seqd(ctx, time.Minute, args...)
	e.logf("nemesis:   seqd %s → %s%s", strings.Join(args, " "), oneLine(out), errSuffix(rerr))
	if rerr != nil {
		targets = append(targets, fmt.Sprintf("seqd restore REFUSED (%v): %s", rerr, oneLine(out)))
		return targets, func() ([]string, error) { return e.sourcesBack(run) }, errors.Join(append(errs, rerr)...)
	}
	_ = os.Remove(path)
	targets = append(targets, fmt.Sprintf("restored into %s (%s, --join %s): %s", id, r.API, strings.Join(joins, ","), oneLine(out)))
	e.setRestore(run)
	start := time.Now()
	errs = append(errs, r.Start())
	if err := e.Cluster.WaitHealthyNodes(ctx, restoredServeTimeout, []*nodes.Node{r}); err != nil {
		errs = append(errs, err)
		targets = append(targets, fmt.Sprintf("%s did NOT serve within %v", id, restoredServeTimeout))
	} else {
		run.served = true
		targets = append(targets, fmt.Sprintf("%s serves %v after its start", id, time.Since(start).Round(100*time.Millisecond)))
	}
	heal := func() ([]string, error) {
		out, err := e.sourcesBack(run)
		o2, err2 := e.endRestore(run)
		return append(out, o2...), errors.Join(err, err2)
	}
	return targets, heal, errors.Join(errs...)
}

// sourcesBack brings the old servers back with their data (started again,
// or SIGCONT) and, if a restored server runs, waits (bounded) until each is
// fenced, watching meanwhile whether any served. It describes what
// happened; an old server not fenced in time, or one that served while
// fenced, is a finding.
func (e *Env) sourcesBack(run *restoreRun) ([]string, error) {
	offsets := logOffsets(e.Cluster)
	t0 := e.Rec.Now()
	var errs []error
	for _, n := range run.sources {
		if run.how == "kill -9" {
			errs = append(errs, n.Start())
		} else {
			errs = append(errs, n.Resume())
		}
	}
	back := "started again"
	if run.how == "SIGSTOP" {
		back = "SIGCONT"
	}
	out := []string{fmt.Sprintf("%s %s at %.1fs", strings.Join(ids(run.sources), ","), back, t0.Seconds())}
	if run.r == nil || run.r.State() != nodes.Running {
		return out, errors.Join(errs...)
	}
	fw := e.watchFence(run.sources, t0)
	// The watch's own looks decide, so that what it reports per server
	// and the wait agree.
	ok, took := waitUntilEvery(fenceTimeout, 50*time.Millisecond, fw.allFenced)
	seen := fw.stop()
	for _, n := range run.sources {
		f := seen[n.ID]
		d := n.ID
		switch {
		case f.fencedAt > 0:
			d += fmt.Sprintf(" fenced %v after it was back (by %s; refusal=%s logged: %v)", (f.fencedAt - t0).Round(10*time.Millisecond), f.by,
				admit.Superseded, refusal(n, offsets[n.ID]) == string(admit.Superseded))
		case run.served:
			d += fmt.Sprintf(" NOT fenced within %v", fenceTimeout)
			e.finding(run.ctx, "not-fenced", t0, e.Rec.Now(), []string{n.ID},
				fmt.Sprintf("%s, a server of the generation %s replaced (and %s served), was not fenced within %v of its return", n.ID, run.r.ID, run.r.ID, fenceTimeout))
		default:
			d += fmt.Sprintf(" not fenced within %v (%s was not seen serving)", fenceTimeout, run.r.ID)
		}
		if f.servedFrom > 0 {
			d += fmt.Sprintf("; it SERVED as a leader after its return (first seen %v after it, last %v after it)",
				(f.servedFrom - t0).Round(10*time.Millisecond), (f.servedTo - t0).Round(10*time.Millisecond))
		}
		if f.servedFenced {
			d += "; it SERVED WHILE FENCED"
			e.finding(run.ctx, "fenced-serves", t0, e.Rec.Now(), []string{n.ID}, n.ID+" reported serving as leader while its status said fenced, in two looks in a row")
		}
		if c := n.LogCount(offsets[n.ID], servedLog); c > 0 {
			d += fmt.Sprintf("; logged %q %d times", servedLog, c)
		}
		out = append(out, d)
	}
	if ok {
		out = append(out, fmt.Sprintf("every old server fenced %v after the return", took.Round(10*time.Millisecond)))
	}
	return out, errors.Join(errs...)
}

// fenceSeen is what watchFence saw of one old server.
type fenceSeen struct {
	fencedAt             time.Duration // first seen fenced (0: never)
	by                   string
	servedFrom, servedTo time.Duration // seen serving as a leader (0: never)
	// servedFenced: seen serving while fenced in two looks in a row (a
	// server that fences itself says fenced a moment before its leases
	// stop; its API refuses values from the first).
	servedFenced  bool
	fencedServing int // looks in a row serving while fenced
}

type fenceWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	ids    []string
	mu     sync.Mutex
	seen   map[string]fenceSeen
}

// watchFence polls the old servers every 50 ms from their return (t0):
// when each is first seen fenced, and whether and when it served.
func (e *Env) watchFence(ns []*nodes.Node, t0 time.Duration) *fenceWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &fenceWatch{cancel: cancel, done: make(chan struct{}), ids: ids(ns), seen: map[string]fenceSeen{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			for _, st := range e.Cluster.Statuses(ctx, time.Second) {
				if st.Err != nil {
					continue
				}
				at := e.Rec.Now()
				serving := st.Serving && strings.EqualFold(st.State, "leader")
				for _, g := range st.Groups {
					serving = serving || (g.Serving && strings.EqualFold(g.State, "leader"))
				}
				w.mu.Lock()
				f := w.seen[st.Node.ID]
				if st.Fenced && f.fencedAt == 0 {
					f.fencedAt, f.by = at, st.FencedBy
				}
				if serving {
					if f.servedFrom == 0 {
						f.servedFrom = at
					}
					f.servedTo = at
				}
				if serving && st.Fenced {
					f.fencedServing++
				} else {
					f.fencedServing = 0
				}
				f.servedFenced = f.servedFenced || f.fencedServing >= 2
				w.seen[st.Node.ID] = f
				w.mu.Unlock()
			}
			sleep(ctx, 50*time.Millisecond)
		}
	}()
	return w
}

// allFenced reports whether every watched server has been seen fenced.
func (w *fenceWatch) allFenced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range w.ids {
		if w.seen[id].fencedAt == 0 {
			return false
		}
	}
	return true
}

func (w *fenceWatch) stop() map[string]fenceSeen {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// endRestore returns the harness to its N servers: the old servers join
// the restored cluster as new servers (stop, wipe, start empty with a
// --join that also names the restored server, this start only), then the
// restored server is removed (`seqd node remove`) and stopped.
func (e *Env) endRestore(run *restoreRun) ([]string, error) {
	if run.r == nil {
		return nil, nil
	}
	defer e.setRestore(nil)
	r := run.r
	fenced := false
	for _, st := range e.Cluster.Statuses(context.Background(), time.Second) {
		fenced = fenced || (st.Err == nil && st.Fenced)
	}
	if !fenced {
		// No old server learned of the restore: they keep their data,
		// and the restored server goes.
		err := errors.Join(r.Stop(10*time.Second), os.RemoveAll(r.DataDir))
		return []string{"no old server fenced: " + r.ID + " stopped and deleted, the old servers keep their data"}, err
	}
	if r.State() != nodes.Running {
		return []string{"old servers fenced, but " + r.ID + " does not run: nothing to join"}, errors.New(r.ID + " does not run")
	}
	var errs []error
	for _, n := range run.sources {
		errs = append(errs, n.Stop(10*time.Second), n.Wipe())
	}
	for _, n := range run.sources {
		join, _ := nodes.FlagValue(n.Args(), "join")
		errs = append(errs, n.StartWith(nodes.SetFlag(n.Args(), "join", r.Gossip+","+join)))
	}
	start := time.Now()
	if err := e.waitJoined(run.sources, r, 2*rejoinTimeout); err != nil {
		return []string{"the old servers did NOT join " + r.ID + "'s cluster: " + err.Error()}, errors.Join(append(errs, err)...)
	}
	out := []string{fmt.Sprintf("%s wiped and joined %s's cluster in %v", strings.Join(ids(run.sources), ","), r.ID, time.Since(start).Round(100*time.Millisecond))}
	var addrs []string
	for _, n := range run.sources {
		addrs = append(addrs, n.API)
	}
	args := []string{"node", "remove", "--addr", strings.Join(addrs, ","), "--timeout", removeTimeout.String(), r.ID}
	o, err := e.Cluster.Seqd(context.Background(), removeTimeout+5*time.Second, args...)
	e.logf("nemesis:   seqd %s → %s%s", strings.Join(args, " "), oneLine(o), errSuffix(err))
	if err != nil {
		errs = append(errs, fmt.Errorf("seqd node remove %s: %v: %s", r.ID, err, oneLine(o)))
	}
	errs = append(errs, r.Stop(10*time.Second), os.RemoveAll(r.DataDir))
	if err := e.waitVoters(run.sources, rejoinTimeout); err != nil {
		errs = append(errs, err)
	} else {
		out = append(out, fmt.Sprintf("%s removed; %s voters of the restored cluster %v after the old servers were wiped",
			r.ID, strings.Join(ids(run.sources), ","), time.Since(start).Round(100*time.Millisecond)))
	}
	return out, errors.Join(errs...)
}

// waitJoined waits (bounded) until every node of ns is in r's cluster's
// configuration and admitted, and as many of them are voters as the
// cluster promotes besides r (--max-voters, 5 by default, less r): then r
// can be removed and the rest promoted.
func (e *Env) waitJoined(ns []*nodes.Node, r *nodes.Node, timeout time.Duration) error {
	maxVoters := 5
	if v, ok := nodes.FlagValue(r.Args(), "max-voters"); ok {
		fmt.Sscan(v, &maxVoters)
	}
	want := min(len(ns), maxVoters-1)
	ask := append(append([]*nodes.Node(nil), ns...), r)
	last := ""
	ok, took := waitUntil(timeout, func() bool {
		v, err := e.Cluster.MembersFrom(context.Background(), ask, 3*time.Second)
		if err != nil || v.Leader == "" {
			last = fmt.Sprintf("no leader answered (%v)", err)
			return false
		}
		voters := 0
		var missing []string
		for _, n := range ns {
			m := v.Members[n.ID]
			if !m.InConfig || !m.RaftOpen {
				missing = append(missing, n.ID+": "+describe(m))
			}
			if m.Voter {
				voters++
			}
		}
		last = fmt.Sprintf("%d of %d voters; %s", voters, want, strings.Join(missing, ", "))
		return len(missing) == 0 && voters >= want
	})
	if !ok {
		return fmt.Errorf("not joined within %v: %s", timeout, last)
	}
	e.logf("nemesis:   %s joined %s's cluster (%d voters) after %v", strings.Join(ids(ns), "+"), r.ID, want, took.Round(10*time.Millisecond))
	return nil
}
