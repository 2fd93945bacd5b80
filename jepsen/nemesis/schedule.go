package nemesis

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
	"github.com/seqd/seqd/jepsen/record"
)

// Schedule is when faults happen.
type Schedule struct {
	Faults         []Fault
	Interval       time.Duration // quiet time before each fault
	DurMin, DurMax time.Duration // how long each fault lasts
	Seed           uint64
	MaxFaults      int  // stop after this many faults (0: until ctx ends)
	Overlap        bool // process and network faults on independent lanes
}

// Run injects faults until ctx ends or MaxFaults have been injected, and
// heals the fault in progress before returning. It returns the number of
// faults injected.
func Run(ctx context.Context, e *Env, s Schedule) int {
	if len(s.Faults) == 0 {
		return 0
	}
	e.overlap.Store(s.Overlap)
	lanes := [][]Fault{s.Faults}
	if s.Overlap {
		var proc, netw []Fault
		for _, f := range s.Faults {
			if f.Class == Network {
				netw = append(netw, f)
			} else {
				proc = append(proc, f)
			}
		}
		lanes = nil
		for _, l := range [][]Fault{proc, netw} {
			if len(l) > 0 {
				lanes = append(lanes, l)
			}
		}
	}
	var count atomic.Int64
	var wg sync.WaitGroup
	for li, faults := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s.Seed, uint64(li)+1))
			// Lanes start staggered so that their faults do not always coincide.
			first := true
			for ctx.Err() == nil {
				wait := s.Interval
				if first && li > 0 {
					wait += time.Duration(rng.Int64N(int64(s.Interval + s.DurMax + 1)))
				}
				first = false
				if !sleep(ctx, wait) {
					return
				}
				if s.MaxFaults > 0 && count.Add(1) > int64(s.MaxFaults) {
					return
				}
				if s.MaxFaults == 0 {
					count.Add(1)
				}
				f := faults[rng.IntN(len(faults))]
				d := s.DurMin
				if s.DurMax > s.DurMin {
					d += time.Duration(rng.Int64N(int64(s.DurMax - s.DurMin + 1)))
				}
				if hd := f.holderDuration(e); hd != nil {
					d = hd[0]
					if hd[1] > hd[0] {
						d += time.Duration(rng.Int64N(int64(hd[1] - hd[0] + 1)))
					}
				}
				e.once(ctx, f, rng, d)
			}
		}()
	}
	wg.Wait()
	n := int(count.Load())
	if s.MaxFaults > 0 {
		n = min(n, s.MaxFaults)
	}
	return n
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// once injects f, waits d (or until ctx ends) and heals it, recording both.
func (e *Env) once(ctx context.Context, f Fault, rng *rand.Rand, d time.Duration) {
	id := int(e.nextID.Add(1))
	ctx = context.WithValue(ctx, durKey{}, d)
	ctx = context.WithValue(ctx, faultKey{}, faultRef{id: id, name: f.Name, class: f.Class})
	t0 := e.Rec.Now()
	var targets []string
	var heal func() ([]string, error)
	var err error
	if f.Class == Network {
		e.netFaults.Add(1)
		defer e.netFaults.Add(-1)
	}
	if f.op != nil {
		targets, heal, err = f.op(ctx, e, rng)
	} else {
		var h func() error
		targets, h, err = f.inject(ctx, e, rng)
		if h != nil {
			heal = func() ([]string, error) { return nil, h() }
		}
	}
	rec := record.Op{Client: record.NemesisClient, F: record.FaultStart, Fault: f.Name, FaultID: id, Class: f.Class,
		Targets: targets, Invoke: t0, Complete: e.Rec.Now(), Type: record.Info}
	if err != nil {
		rec.Error = err.Error()
	}
	e.Rec.Add(rec)
	e.logf("nemesis: %-16s %v%s", f.Name, targets, errSuffix(err))
	sleep(ctx, d) // a fault window, not a wait for a condition
	t1 := e.Rec.Now()
	var herr error
	var outcome []string
	if heal != nil {
		outcome, herr = heal()
	}
	rec = record.Op{Client: record.NemesisClient, F: record.FaultHeal, Fault: f.Name, FaultID: id, Class: f.Class,
		Targets: targets, Invoke: t1, Complete: e.Rec.Now(), Type: record.Info, Outcome: outcome}
	if herr != nil {
		rec.Error = herr.Error()
	}
	e.Rec.Add(rec)
	e.logf("nemesis: heal %-11s %v%s", f.Name, targets, errSuffix(herr))
	if len(outcome) > 0 {
		e.logf("nemesis:   outcome: %s", strings.Join(outcome, "; "))
	}
}

// faultKey carries the fault in the context its inject gets (see finding).
type faultKey struct{}

type faultRef struct {
	id          int
	name, class string
}

// finding records something a fault saw break that no checker of the
// history can see (record.Finding), over [from, to] on the recorder's
// clock; the findings checker counts it as an anomaly.
func (e *Env) finding(ctx context.Context, rule string, from, to time.Duration, targets []string, msg string) {
	f, _ := ctx.Value(faultKey{}).(faultRef)
	e.Rec.Add(record.Op{Client: record.NemesisClient, F: record.Finding, Fault: f.name, FaultID: f.id, Class: f.class,
		Rule: rule, Targets: targets, Error: msg, Invoke: from, Complete: to, Type: record.Info})
	e.logf("nemesis:   FINDING %s: %s", rule, msg)
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (error: " + err.Error() + ")"
}

// HealAll ends every fault: removes every iptables rule, sets every
// node's clock offset back to 0, deletes filler
// files, resumes paused nodes, restarts nodes that are not running, brings
// back as voters the nodes whose membership change or operator fault did
// not complete (remove, stop, wipe, start), and puts every node back on the
// run's --lease (a rolling restart). It is recorded as a nemesis action
// (fault "heal-all").
func HealAll(e *Env) error {
	t0 := e.Rec.Now()
	var errs []error
	var touched []string
	if e.Net != nil {
		errs = append(errs, e.Net.HealAll())
	}
	if t, err := e.resetClocks(); len(t) > 0 || err != nil {
		touched = append(touched, t...)
		errs = append(errs, err)
	}
	for _, n := range e.filledNodes() {
		touched = append(touched, n.ID+" (filler deleted)")
		errs = append(errs, e.unfill(n))
	}
	if run := e.currentRestore(); run != nil {
		// A restore-source-returns not healed: the old servers back, then
		// into the restored cluster.
		touched = append(touched, "restore "+run.r.ID)
		for _, n := range run.sources {
			if n.State() != nodes.Running {
				_, err := e.sourcesBack(run)
				errs = append(errs, err)
				break
			}
		}
		_, err := e.endRestore(run)
		errs = append(errs, err)
	}
	for _, n := range e.Cluster.Nodes {
		switch n.State() {
		case nodes.Paused:
			touched = append(touched, n.ID)
			errs = append(errs, n.Resume())
		case nodes.Killed, nodes.Down:
			touched = append(touched, n.ID)
			errs = append(errs, n.Start())
		}
	}
	if t, err := e.uncutAll(); len(t) > 0 || err != nil {
		touched = append(touched, t...)
		errs = append(errs, err)
	}
	if t, err := e.undrainAll(); len(t) > 0 || err != nil {
		touched = append(touched, t...)
		errs = append(errs, err)
	}
	for _, n := range e.dirtyNodes() {
		touched = append(touched, n.ID+" (membership)")
		errs = append(errs, e.restore(n))
	}
	for _, n := range e.brokenNodes() {
		touched = append(touched, n.ID+" (operator: remove, wipe, start)")
		errs = append(errs, e.repair(n))
	}
	if t, err := e.resetLeases(); len(t) > 0 || err != nil {
		touched = append(touched, t...)
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	rec := record.Op{Client: record.NemesisClient, F: record.FaultHeal, Fault: "heal-all", Targets: touched,
		Invoke: t0, Complete: e.Rec.Now(), Type: record.Info}
	if err != nil {
		rec.Error = err.Error()
	}
	e.Rec.Add(rec)
	return err
}
