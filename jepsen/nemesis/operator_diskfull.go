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
