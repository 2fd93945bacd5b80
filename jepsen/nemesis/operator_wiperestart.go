package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/jepsen/nodes"
)

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
// directory is wiped. With no leader, the survivors let each other in on
// the answers of voters that make a majority with them: on 3 voters as on
// 5 they elect a leader without the wiped one (were they to wait, README's
// procedure is to restart them with --assume-gone ID, which healing then
// tries, reporting it). The wiped voter must then refuse to vote or serve until
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
		// Without a leader, each survivor is let in on the answers of
		// voters that make a majority with it (as raft's election needs),
		// none of which recorded its log beyond what it holds: the
		// survivors are a majority on their own data, and elect a leader
		// without the wiped voter's answer, on 3 voters as on 5. A wait
		// (admission=quorum-wait) would be an outage raft alone would not
		// have; README's --assume-gone procedure is then tried.
		mustWait := nv-2 < nv/2
		lead, waited, took := e.leaderOrWait(survivors, recoverTimeout)
		switch {
		case lead != nil && mustWait:
			out = append(out, fmt.Sprintf("UNEXPECTED: the survivors elected %s without %s's answer (%d voters: too few others with state to make a majority), %v after the heal began",
				lead.ID, w.ID, nv, took.Round(100*time.Millisecond)))
		case lead != nil:
			out = append(out, fmt.Sprintf("the survivors elected %s without %s (%d voters: the %d others with state answered), %v after the heal began",
				lead.ID, w.ID, nv, nv-2, took.Round(100*time.Millisecond)))
		default:
			if len(waited) > 0 {
				out = append(out, fmt.Sprintf("no leader: %s wait (admission=quorum-wait) for %s's answer (no leader answers; %d voters)", strings.Join(waited, ","), w.ID, nv))
			} else {
				out = append(out, fmt.Sprintf("no leader within %v, and not every survivor waits (quorum-wait) for %s", recoverTimeout, w.ID))
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
		v := e.verdict(w, offset)
		alone, _ := watch.stop()
		if alone != "" {
			out = append(out, alone)
		}
		gate := gateOpened(w, offset)
		switch {
		case gate != "":
			out = append(out, fmt.Sprintf("%s PASSED the gate: admission=%s opened its raft gate with an empty data directory while it was listed as a voter, before any removal (it may vote again in a term it voted in)", w.ID, gate))
		case v.refused == string(admit.Wiped):
			out = append(out, fmt.Sprintf("%s refused (refusal=wiped: refuses to vote or serve) %v after that", w.ID, v.took.Round(100*time.Millisecond)))
		case v.refused != "":
			out = append(out, fmt.Sprintf("%s refused (refusal=%s; wiped expected)", w.ID, v.refused))
		default:
			out = append(out, fmt.Sprintf("%s no refusal within %v (admission: %s)", w.ID, verdictTimeout, v.kinds))
		}
		if d := served(w, offset); d != "" {
			out = append(out, d)
		}
		out = append(out, v.standing)
		var err error
		start := time.Now()
		if gate != "" || alone != "" {
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

// leaderOrWait waits (bounded) after a full-cluster restart until a leader
// serves, or until every running survivor has refused raft traffic for
// stuckFor while its status says it waits for more voters' answers
// (quorum-wait: no leader answers, and too few voters answered; seqd's
// log names the voters, the status only the kind). It returns the leader
// (nil if none), the survivors that wait, and how long it waited.
func (e *Env) leaderOrWait(survivors []*nodes.Node, timeout time.Duration) (*nodes.Node, []string, time.Duration) {
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
			if st.Err == nil && !st.RaftOpen && waiting(st, admit.QuorumWait) {
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
