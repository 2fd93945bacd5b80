package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// restart-then-crash is the everyday double fault of issue 25: one server
// restarts (kill -9 or SIGTERM, then started again), and another one, a
// group's serving leader or a random server, is killed (kill -9) at a
// seeded instant: counted from the restarted server's start (before it can
// have been admitted: 0, 20, 50, 100 or 500 ms), or from the moment it is
// admitted in every group (0, 20, 50, 100 or 500 ms after). A majority
// (the restarted server and the others) still runs, so every group must
// elect a serving leader within the failover target; a group that goes
// without one for longer while a majority runs (and no network fault is in
// place) is a finding. Heal: wait (bounded by the target) until every
// group serves, then start the killed server again.

// crashDelays are the instants of the second fault, after its anchor.
var crashDelays = []time.Duration{0, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond}

// admitTimeout bounds the wait for the restarted server's admission.
const admitTimeout = 20 * time.Second

func restartThenCrash(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	var run []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if n.State() == nodes.Running && !e.busy(n) {
			run = append(run, n)
		}
	}
	if len(run) < 3 || len(run) < len(e.Cluster.Nodes) {
		return nil, nil, fmt.Errorf("%d of %d servers run: restart-then-crash needs them all", len(run), len(e.Cluster.Nodes))
	}
	// The server to kill: a group's serving leader three times in four
	// (group 0's, or with several groups one drawn at random), else a
	// random one; the server to restart: another one.
	var y *nodes.Node
	what := "random"
	if rng.IntN(4) != 0 {
		g := 0
		if e.Groups > 1 && rng.IntN(2) == 0 {
			g = rng.IntN(e.Groups)
		}
		if l := e.Cluster.WaitGroupLeader(ctx, g, 5*time.Second); l != nil {
			y, what = l, fmt.Sprintf("group %d leader", g)
		}
	}
	if y == nil {
		y = run[rng.IntN(len(run))]
	}
	var others []*nodes.Node
	for _, n := range run {
		if n != y {
			others = append(others, n)
		}
	}
	x := others[rng.IntN(len(others))]
	how := "kill -9"
	if rng.IntN(2) == 0 {
		how = "SIGTERM"
	}
	anchor := "start"
	if rng.IntN(2) == 0 {
		anchor = "admission"
	}
	delay := crashDelays[rng.IntN(len(crashDelays))]

	w := e.watchFailover()
	var errs []error
	if how == "SIGTERM" {
		errs = append(errs, x.Stop(10*time.Second))
	} else {
		errs = append(errs, x.Kill())
	}
	offset := x.LogSize()
	started := time.Now()
	errs = append(errs, x.Start())
	at := started
	note := ""
	if anchor == "admission" {
		if ok, took := waitUntilEvery(admitTimeout, 5*time.Millisecond, func() bool { return admittedEverywhere(x, offset, max(e.Groups, 1)) }); ok {
			at = started.Add(took)
			note = fmt.Sprintf("%s admitted %v after its start", x.ID, took.Round(time.Millisecond))
		} else {
			note = fmt.Sprintf("%s NOT admitted within %v of its start", x.ID, admitTimeout)
		}
	}
	if d := time.Until(at.Add(delay)); d > 0 {
		time.Sleep(d) // a seeded instant, not a wait for a condition
	}
	errs = append(errs, y.Kill())
	killed := time.Since(started)
	admittedThen := admittedEverywhere(x, offset, max(e.Groups, 1))
	targets := []string{
		fmt.Sprintf("%s restarted (%s)", x.ID, how),
		fmt.Sprintf("%s (%s) killed %v after %s's %s (%v after its start; %s admitted then: %v)", y.ID, what, delay, x.ID, anchor, killed.Round(time.Millisecond), x.ID, admittedThen),
	}
	if note != "" {
		targets = append(targets, note)
	}
	heal := func() ([]string, error) {
		// Every group must serve again without Y: its return would end
		// any outage, so the watch ends (waiting up to the target for
		// every group to serve) before Y is started again.
		out := w.stop(ctx, e)
		return out, y.Start()
	}
	return targets, heal, errors.Join(errs...)
}

// admittedEverywhere reports whether node n logged, since offset, a verdict
// that opened the gate of each of its groups (one verdict naming no group
// is about its only group).
func admittedEverywhere(n *nodes.Node, offset int64, groups int) bool {
	vs, _ := verdicts(n.LogSince(offset))
	open := map[int]bool{}
	for _, v := range vs {
		if v.Admitted() {
			open[v.Group] = true
		}
	}
	if open[-1] {
		return true
	}
	for g := range groups {
		if !open[g] {
			return false
		}
	}
	return true
}
