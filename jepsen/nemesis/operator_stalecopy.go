package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/jepsen/nodes"
	"github.com/seqd/seqd/jepsen/record"
)

// dirCopy is a copy of a node's data directory taken while it was stopped.
type dirCopy struct {
	node  *nodes.Node
	path  string
	taken time.Time
	note  string
}

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
// starts it with its usual flags. It must refuse (refusal=stale: its log
// is older than a record of it) or rejoin without any anomaly; healing
// repairs it unless it rejoined.
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
		// It must say what it is: refused (stale: an older copy), or
		// admitted and following the leader (a copy too recent to tell
		// apart).
		v := e.verdict(x, offset)
		alone, leads := w.stop()
		var out []string
		if alone != "" {
			out = append(out, alone)
		}
		gate := gateOpened(x, offset)
		switch {
		case v.refused != "":
			out = append(out, fmt.Sprintf("%s refused (refusal=%s) %v after the heal began", x.ID, v.refused, v.took.Round(100*time.Millisecond)))
			if v.refused != string(admit.Stale) {
				out = append(out, fmt.Sprintf("UNEXPECTED refusal %s for an older copy (stale expected)", v.refused))
			}
			if a := afterRefusal(x, offset); a != "" {
				out = append(out, a)
			} else if gateOpenedBefore(x, offset) {
				out = append(out, x.ID+" ALSO logged that its raft gate opened (before the refusal)")
			} else if gate != "" {
				out = append(out, x.ID+" was let into other raft groups (each group is judged on its own: the copy is older than only some groups' records)")
			}
		case v.inService && alone == "":
			out = append(out, fmt.Sprintf("%s rejoined with the copy (admission=%s, no refusal: a copy too recent to tell apart)", x.ID, v.kinds))
		default:
			out = append(out, fmt.Sprintf("%s out of service without a refusal within %v (admission: %s; a gate opened: %v)", x.ID, verdictTimeout, v.kinds, gate != ""))
		}
		if d := served(x, offset); d != "" {
			out = append(out, d)
		}
		out = append(out, fmt.Sprintf("became serving leader %d times; %s", leads, v.standing))
		if v.inService && v.refused == "" && alone == "" {
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
