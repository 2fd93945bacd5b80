package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// Clock faults step nodes' wall clocks through their offset files (seqd
// serve --unsafe-clock-offset-file, which every node runs with; see
// nodes.Node.SetClockOffset), and holder faults stop or cut off a node
// that holds flake workers, for longer than its worker lease or range.
// They matter to the flake workload: a seqd leader stamps grants with its
// wall clock, and a holder (a node in service mode) must stop issuing
// when its lease or range ends.

// Clock steps.
const (
	hour       = time.Hour
	smallStep  = 10 * time.Second
	clockClass = "clock"
)

// Default durations of the holder faults: a pause past the flake worker
// lease (10 s), a partition past the range a grant reaches (3 leases,
// 30 s past the leader's time).
var (
	DefaultHolderPause     = [2]time.Duration{12 * time.Second, 15 * time.Second}
	DefaultHolderPartition = [2]time.Duration{32 * time.Second, 36 * time.Second}
)

// durKey carries a fault's duration in the context its inject gets.
type durKey struct{}

// faultDuration is how long the fault being injected will last (0 if
// unknown).
func faultDuration(ctx context.Context) time.Duration {
	d, _ := ctx.Value(durKey{}).(time.Duration)
	return d
}

// holderDuration is the duration range of a holder fault (nil: the
// schedule's).
func (f Fault) holderDuration(e *Env) *[2]time.Duration {
	var d [2]time.Duration
	switch f.Name {
	case "pause-holder":
		d = e.HolderPause
		if d[1] == 0 {
			d = DefaultHolderPause
		}
	case "partition-holder":
		d = e.HolderPartition
		if d[1] == 0 {
			d = DefaultHolderPartition
		}
	default:
		return nil
	}
	return &d
}

// follower picks a running node that is not the leader (a node whose
// flake holder is not the one deciding grants); with no leader known, any
// running node.
func (e *Env) follower(ctx context.Context, rng *rand.Rand) (*nodes.Node, string) {
	l := e.Cluster.WaitLeader(ctx, 5*time.Second)
	var cands []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if n != l && n.State() == nodes.Running {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return e.randomNodes(rng, 1)[0], " (no follower running; random node)"
	}
	note := ""
	if l == nil {
		note = " (no leader found)"
	}
	return cands[rng.IntN(len(cands))], note
}

func offsetString(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// setClocks sets the offset of every node in ns, and returns the healing
// that puts them back to 0.
func setClocks(ns []*nodes.Node, d time.Duration) (func() error, error) {
	var errs []error
	for _, n := range ns {
		errs = append(errs, n.SetClockOffset(d))
	}
	return func() error {
		var errs []error
		for _, n := range ns {
			errs = append(errs, n.SetClockOffset(0))
		}
		return errors.Join(errs...)
	}, errors.Join(errs...)
}

// clockHolder steps a follower's clock back an hour, half-way through the
// fault forward an hour, and back to 0 when healed.
func clockHolder(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	n, note := e.follower(ctx, rng)
	heal, err := setClocks([]*nodes.Node{n}, -hour)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if d := faultDuration(ctx); d > 0 && err == nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTimer(d / 2)
			defer t.Stop()
			select {
			case <-stop:
			case <-ctx.Done():
			case <-t.C:
				if err := n.SetClockOffset(hour); err != nil {
					e.logf("nemesis: clock-holder: %v", err)
				} else {
					e.logf("nemesis: clock-holder %s: clock %s", n.ID, offsetString(hour))
				}
			}
		}()
	}
	return []string{fmt.Sprintf("%s -1h then +1h%s", n.ID, note)}, func() error {
		close(stop)
		wg.Wait()
		return heal()
	}, err
}

// clockLeader steps the leader's clock back 10 s or forward an hour.
func clockLeader(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	l, note := e.leader(ctx, rng)
	d := -smallStep
	if rng.IntN(2) == 0 {
		d = hour
	}
	heal, err := setClocks([]*nodes.Node{l}, d)
	return []string{l.ID + " " + offsetString(d) + note}, heal, err
}

// clockAll steps every node's clock back 10 s at once, as a bad NTP step
// over the whole cluster would: the clocks still agree, so the leader's
// skew check cannot see it.
func clockAll(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	heal, err := setClocks(e.Cluster.Nodes, -smallStep)
	return []string{"every node " + offsetString(-smallStep)}, heal, err
}

// clockRestart kills a follower and starts it again with its clock an hour
// behind, as if restarted on another machine; healing sets the clock right
// (the process keeps running).
func clockRestart(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	n, note := e.follower(ctx, rng)
	target := []string{n.ID + " killed, restarted -1h" + note}
	if err := n.Kill(); err != nil {
		return target, nil, err
	}
	heal, err := setClocks([]*nodes.Node{n}, -hour)
	if serr := n.Start(); serr != nil {
		err = errors.Join(err, serr)
	}
	return target, heal, err
}

// pauseHolder SIGSTOPs a follower (a flake holder in service mode) for
// longer than its worker lease (see holderDuration).
func pauseHolder(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	n, note := e.follower(ctx, rng)
	heal, err := pause([]*nodes.Node{n})
	return []string{n.ID + note}, heal, err
}

// partitionHolder cuts a follower off from every other node for longer
// than its worker's range (clients still reach it).
func partitionHolder(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	n, note := e.follower(ctx, rng)
	return e.isolate(n, note)
}

// resetClocks sets every node's clock offset back to 0 (HealAll).
func (e *Env) resetClocks() ([]string, error) {
	var touched []string
	var errs []error
	for _, n := range e.Cluster.Nodes {
		if n.ClockOffset() != 0 {
			touched = append(touched, n.ID+" (clock)")
			errs = append(errs, n.SetClockOffset(0))
		}
	}
	return touched, errors.Join(errs...)
}
