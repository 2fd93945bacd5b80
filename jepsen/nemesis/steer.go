package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
	"github.com/seqd/seqd/jepsen/record"
)

// partitionSlowLeader steers leadership to the slow node, then cuts it off.
// With uniform timing hashicorp/raft's own leader lease (LeaderLeaseTimeout
// <= HeartbeatTimeout, checked against the last quorum contact) plus
// pre-vote make a partitioned leader step down before the others can elect a
// new one; a leader whose raft timeouts are longer than the other nodes'
// does not, so for a while two nodes believe they lead. seqd's own lease
// must keep order even then (DESIGN.md §4: safety does not rest on raft's
// timeouts).
func partitionSlowLeader(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	if e.Slow == nil {
		return nil, nil, errors.New("partition-slow-leader needs --slow-node")
	}
	if err := e.steer(ctx, e.Slow); err != nil {
		return []string{e.Slow.ID + " (not leader)"}, nil, err
	}
	var rest []int
	for i := range e.Cluster.Nodes {
		if i != e.Slow.Index {
			rest = append(rest, i)
		}
	}
	heal, err := e.partition(Complete([]int{e.Slow.Index}, rest))
	d := componentsDesc(e, []int{e.Slow.Index}, rest)
	return []string{d[0], "|" + d[1]}, heal, err
}

// steer makes target the leader, recorded as a nemesis action
// ("steer-leader"). The other followers are paused so that their logs fall
// behind the target's, the leader is cut off, and all but enough of them to
// keep them from electing one of themselves are resumed: once the target's
// heartbeat timeout runs out, it is the only node they can elect. Bounded: a
// few attempts, each bounded in time.
func (e *Env) steer(ctx context.Context, target *nodes.Node) error {
	n := len(e.Cluster.Nodes)
	majority := n/2 + 1
	keepPaused := n - 1 - majority // stale followers must stay below a majority
	for attempt := 1; attempt <= 4 && ctx.Err() == nil; attempt++ {
		l := e.Cluster.WaitLeader(ctx, 15*time.Second)
		if l == nil {
			continue
		}
		if l == target {
			return nil
		}
		id := int(e.nextID.Add(1))
		t0 := e.Rec.Now()
		var fast []*nodes.Node
		for _, x := range e.Cluster.Nodes {
			if x != l && x != target && x.State() == nodes.Running {
				fast = append(fast, x)
			}
		}
		var errs []error
		for _, x := range fast {
			errs = append(errs, x.Pause())
		}
		sleep(ctx, 300*time.Millisecond) // the leader keeps appending to the target's log
		var rest []int
		for i := range e.Cluster.Nodes {
			if i != l.Index {
				rest = append(rest, i)
			}
		}
		_, err := e.partition(Complete([]int{l.Index}, rest))
		errs = append(errs, err)
		for i, x := range fast {
			if i >= keepPaused {
				errs = append(errs, x.Resume())
			}
		}
		e.Rec.Add(record.Op{Client: record.NemesisClient, F: record.FaultStart, Fault: "steer-leader", FaultID: id, Class: Network,
			Targets: []string{"to " + target.ID, "cut " + l.ID}, Invoke: t0, Complete: e.Rec.Now(), Type: record.Info, Error: errString(errors.Join(errs...))})
		e.logf("nemesis: steer-leader    to %s: paused %s, cut off %s (attempt %d)", target.ID, ids(fast), l.ID, attempt)
		// The target times out after up to twice its heartbeat timeout, then
		// wins an election.
		var got *nodes.Node
		deadline := time.Now().Add(6*e.SlowTimeout + 5*time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if got = e.Cluster.Leader(ctx); got == target {
				break
			}
			sleep(ctx, 100*time.Millisecond)
		}
		t1 := e.Rec.Now()
		errs = errs[:0]
		for _, x := range fast {
			errs = append(errs, x.Resume())
		}
		errs = append(errs, e.Net.HealAll())
		e.Rec.Add(record.Op{Client: record.NemesisClient, F: record.FaultHeal, Fault: "steer-leader", FaultID: id, Class: Network,
			Targets: []string{"to " + target.ID, "cut " + l.ID}, Invoke: t1, Complete: e.Rec.Now(), Type: record.Info, Error: errString(errors.Join(errs...))})
		if got == target {
			e.logf("nemesis: steer-leader    %s leads", target.ID)
			// Let the healed node rejoin as a follower before the real fault.
			sleep(ctx, time.Second)
			if e.Cluster.Leader(ctx) == target {
				return nil
			}
		}
	}
	return fmt.Errorf("could not make %s the leader", target.ID)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
