package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

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
