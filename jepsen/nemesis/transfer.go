package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// Planned leadership moves (seqd node drain), for --lease-handoff: a drained
// server withholds serving, commits a lease release and transfers each
// group it leads; the new leader serves at once. The checker proves that no
// two leaders served a key at once.

// stormDrainDeadline bounds each drain of transfer-storm: a short deadline,
// so that a drain that cannot complete is abandoned (and undone) quickly.
const stormDrainDeadline = 250 * time.Millisecond

// markDrained records that n is (or may be) drained, so that HealAll undoes it.
func (e *Env) markDrained(n *nodes.Node, on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.drained == nil {
		e.drained = map[string]bool{}
	}
	if on {
		e.drained[n.ID] = true
	} else {
		delete(e.drained, n.ID)
	}
}

func (e *Env) drainedNodes() []*nodes.Node {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if e.drained[n.ID] {
			out = append(out, n)
		}
	}
	return out
}

// undrain undoes n's drain, retrying for up to timeout (n may just have
// been resumed, or be electing).
func (e *Env) undrain(ctx context.Context, n *nodes.Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := e.Cluster.Drain(cctx, n, true)
		cancel()
		if err == nil {
			e.markDrained(n, false)
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("undo the drain of %s: %w", n.ID, err)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// undrainAll undoes every drain the nemesis left (HealAll).
func (e *Env) undrainAll() ([]string, error) {
	var touched []string
	var errs []error
	for _, n := range e.drainedNodes() {
		touched = append(touched, n.ID+" (drain undone)")
		errs = append(errs, e.undrain(context.Background(), n, 10*time.Second))
	}
	return touched, errors.Join(errs...)
}

func running(ns []*nodes.Node) []*nodes.Node {
	var out []*nodes.Node
	for _, n := range ns {
		if n.State() == nodes.Running {
			out = append(out, n)
		}
	}
	return out
}

// transferStorm drains a random running node (with a short deadline) and
// undoes the drain, every 200-500 ms, until healed: leaderships move away
// and, balanced back to their preferred voters, return, many times.
func transferStorm(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	sctx, stop := context.WithCancel(context.Background())
	r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	var (
		wg                           sync.WaitGroup
		drains, undos, timeouts, bad int
		perNode                      = map[string]int{}
		errs                         []string
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := time.Now()
		for sctx.Err() == nil {
			// Drains start every 200-500 ms (a slow drain and undo delay
			// the next one).
			next = next.Add(200*time.Millisecond + time.Duration(r.Int64N(int64(300*time.Millisecond)+1)))
			if !sleep(sctx, time.Until(next)) {
				return
			}
			next = time.Now()
			run := running(e.Cluster.Nodes)
			if len(run) == 0 {
				continue
			}
			n := run[r.IntN(len(run))]
			e.markDrained(n, true)
			dctx, cancel := context.WithTimeout(sctx, stormDrainDeadline)
			led, err := e.Cluster.Drain(dctx, n, false)
			cancel()
			drains++
			perNode[n.ID]++
			switch {
			case err != nil && dctx.Err() != nil:
				timeouts++
			case err != nil:
				bad++
				if len(errs) < 5 {
					errs = append(errs, fmt.Sprintf("drain %s: %v", n.ID, err))
				}
			case led > 0:
				timeouts++ // still leading at the deadline (ErrDrainIncomplete answers with the count)
			}
			// Not sctx: a heal arriving now must not leave this drain for
			// heal-all.
			if err := e.undrain(context.Background(), n, 5*time.Second); err == nil {
				undos++
			} else if len(errs) < 5 {
				errs = append(errs, err.Error())
			}
		}
	}()
	targets := []string{fmt.Sprintf("every 200-500ms: drain a random running node (deadline %v), then undo", stormDrainDeadline)}
	return targets, func() ([]string, error) {
		stop()
		wg.Wait()
		var ids []string
		for id, k := range perNode {
			ids = append(ids, fmt.Sprintf("%s %d", id, k))
		}
		sort.Strings(ids)
		out := []string{fmt.Sprintf("%d drains (%v), %d undone, %d not complete within %v, %d errors", drains, ids, undos, timeouts, stormDrainDeadline, bad)}
		out = append(out, errs...)
		_, err := e.undrainAll()
		return out, err
	}, nil
}

// pauseMidTransfer drains the node of a random group's leader and SIGSTOPs
// it 0-30 ms later, in the middle of its handoffs (withhold, release,
// transfer); heal: SIGCONT, then undo the drain.
func pauseMidTransfer(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	var l *nodes.Node
	var note string
	if e.Groups > 1 {
		var g int
		l, g, note = e.groupLeader(ctx, rng)
		if note == "" {
			note = fmt.Sprintf(" (group %d leader)", g)
		}
	} else {
		l, note = e.leader(ctx, rng)
	}
	delay := time.Duration(rng.Int64N(int64(30*time.Millisecond) + 1))
	e.markDrained(l, true)
	type result struct {
		led uint32
		err error
		at  time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		led, err := e.Cluster.Drain(dctx, l, false)
		done <- result{led, err, time.Since(start)}
	}()
	time.Sleep(delay)
	err := l.Pause()
	paused := time.Since(start)
	targets := []string{l.ID + note, fmt.Sprintf("SIGSTOP %v after the drain began (drawn %v)", paused.Round(100*time.Microsecond), delay.Round(100*time.Microsecond))}
	return targets, func() ([]string, error) {
		var out []string
		rerr := l.Resume()
		r := <-done
		switch {
		case r.err != nil:
			out = append(out, fmt.Sprintf("drain: %v after %v", r.err, r.at.Round(time.Millisecond)))
		default:
			out = append(out, fmt.Sprintf("drain: answered after %v, %d groups still led", r.at.Round(time.Millisecond), r.led))
		}
		uerr := e.undrain(context.Background(), l, 10*time.Second)
		if uerr == nil {
			out = append(out, "drain undone")
		}
		return out, errors.Join(rerr, uerr)
	}, err
}
