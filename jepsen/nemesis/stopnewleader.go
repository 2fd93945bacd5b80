package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// stop-new-leader is the rolling-restart step of issue 24: a group's
// serving leader L is cut off from the other servers (clients still reach
// it, and it serves them while its lease runs); a new leader M is elected
// and waits out L's lease; M is stopped gracefully (SIGTERM: it hands its
// groups over, which releases their leases) before it served. A release
// certifies only a lease its own term held, so the next leader T must
// still wait out L's lease: the checkers see a value T hands out below one
// L handed out, or after it, and the fault itself watches the servers'
// own word (ClusterStatus serving) for L and T serving the group at once.
// With --slow-node (raft timeouts longer on one server, so its raft
// notices late that it lost its followers) group 0's leadership is first
// steered to that server half the time. It is meant for a lease longer
// than an election (e.g. --lease 3s): with a short one, M may serve at
// once, which the outcome says (the window was missed). Heal: start M
// again, heal the partition.

// stopNewLeaderTimeout bounds the wait for a new leader after the cut.
const stopNewLeaderTimeout = 15 * time.Second

// servingRound is one look at every server: when it began and ended, and
// which servers said they lead the group and serve it (with their term).
type servingRound struct {
	from, to time.Duration
	serving  map[string]uint64
	leading  map[string]bool // raft leader of the group, serving or not
}

// servingWatch looks at every server's view of one group every 20 ms.
type servingWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	rounds []servingRound
}

func (e *Env) watchServing(g int) *servingWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &servingWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			r := servingRound{from: e.Rec.Now(), serving: map[string]uint64{}, leading: map[string]bool{}}
			for _, s := range e.Cluster.Statuses(ctx, 500*time.Millisecond) {
				if s.Err != nil {
					continue
				}
				gs, ok := s.Groups[g]
				if !ok && g == 0 {
					gs, ok = nodes.GroupState{State: s.State, Serving: s.Serving, Term: s.Term}, true
				}
				if ok && strings.EqualFold(gs.State, "leader") {
					r.leading[s.Node.ID] = true
					if gs.Serving {
						r.serving[s.Node.ID] = gs.Term
					}
				}
			}
			r.to = e.Rec.Now()
			w.mu.Lock()
			w.rounds = append(w.rounds, r)
			w.mu.Unlock()
			sleep(ctx, 20*time.Millisecond)
		}
	}()
	return w
}

// newLeader returns the first server other than l seen leading the group
// since round i (nil if none yet), and whether it served then.
func (w *servingWatch) newLeader(l *nodes.Node, c *nodes.Cluster, i int) (*nodes.Node, bool, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ; i < len(w.rounds); i++ {
		for id := range w.rounds[i].leading {
			if id != l.ID {
				_, serving := w.rounds[i].serving[id]
				return c.ByID(id), serving, i
			}
		}
	}
	return nil, false, i
}

func (w *servingWatch) stop() []servingRound {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds
}

// overlap finds three consecutive rounds in which l and another server
// (in one term) both said they serve the group: the other server then
// served throughout the middle round, in which l served too, so their
// leases overlapped. It returns the other server and the middle round
// ("" if none).
func overlap(rounds []servingRound, l string) (string, servingRound) {
	for i := 1; i+1 < len(rounds); i++ {
		if _, ok := rounds[i].serving[l]; !ok {
			continue
		}
		for id, term := range rounds[i].serving {
			if id == l {
				continue
			}
			if rounds[i-1].serving[id] == term && rounds[i+1].serving[id] == term {
				return id, rounds[i]
			}
		}
	}
	return "", servingRound{}
}

// firstLast returns when id was first and last seen serving (-1: never).
func firstLast(rounds []servingRound, id string, after time.Duration) (first, last time.Duration) {
	first, last = -1, -1
	for _, r := range rounds {
		if _, ok := r.serving[id]; ok && r.from >= after {
			if first < 0 {
				first = r.from
			}
			last = r.to
		}
	}
	return first, last
}

func stopNewLeader(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() ([]string, error), error) {
	g := 0
	if e.Groups > 1 && rng.IntN(2) == 0 {
		g = rng.IntN(e.Groups)
	}
	var targets []string
	if e.Slow != nil && g == 0 && rng.IntN(2) == 0 {
		if err := e.steer(ctx, e.Slow); err != nil {
			return []string{e.Slow.ID + " (not leader)"}, nil, err
		}
		targets = append(targets, "leadership steered to "+e.Slow.ID+" (slow raft timers)")
	}
	l := e.Cluster.WaitGroupLeader(ctx, g, 5*time.Second)
	if l == nil {
		return append(targets, fmt.Sprintf("group %d: no serving leader", g)), nil, fmt.Errorf("group %d has no serving leader to cut off", g)
	}
	w := e.watchServing(g)
	var rest []int
	for i := range e.Cluster.Nodes {
		if i != l.Index {
			rest = append(rest, i)
		}
	}
	cutHeal, err := e.partition(Complete([]int{l.Index}, rest))
	cut := e.Rec.Now()
	targets = append(targets, fmt.Sprintf("%s (group %d leader) cut off from %s", l.ID, g, strings.Join(componentsDesc(e, rest), "")))
	errs := []error{err}
	var m *nodes.Node
	var served bool
	i := 0
	ok, took := waitUntilEvery(stopNewLeaderTimeout, 10*time.Millisecond, func() bool {
		m, served, i = w.newLeader(l, e.Cluster, i)
		return m != nil
	})
	var stopped *nodes.Node
	var stopErr chan error
	var stopTook time.Duration
	switch {
	case !ok:
		targets = append(targets, fmt.Sprintf("no new leader within %v", stopNewLeaderTimeout))
	default:
		state := "before it served"
		if served {
			state = "ALREADY SERVING (the window was missed)"
		}
		// The stop runs on: a graceful stop may take 15 s (seqd bounds
		// raft's shutdown so), as raft's shutdown waits for replication
		// to the cut-off leader, whose dials time out after 10 s.
		stopped, stopErr = m, make(chan error, 1)
		t := time.Now()
		go func() {
			err := m.Stop(30 * time.Second)
			stopTook = time.Since(t)
			stopErr <- err
		}()
		targets = append(targets, fmt.Sprintf("%s elected %v after the cut; SIGTERM %s", m.ID, took.Round(time.Millisecond), state))
	}
	heal := func() ([]string, error) {
		var errs []error
		var out []string
		if stopped != nil {
			errs = append(errs, <-stopErr)
			out = append(out, fmt.Sprintf("%s stopped %v after its SIGTERM", stopped.ID, stopTook.Round(100*time.Millisecond)))
		}
		rounds := w.stop()
		if first, last := firstLast(rounds, l.ID, cut); last >= 0 {
			out = append(out, fmt.Sprintf("%s (cut off) last seen serving %v after the cut (first %v)", l.ID, (last-cut).Round(time.Millisecond), (first-cut).Round(time.Millisecond)))
		} else {
			out = append(out, l.ID+" (cut off) not seen serving after the cut")
		}
		for _, n := range e.Cluster.Nodes {
			if n == l {
				continue
			}
			if first, _ := firstLast(rounds, n.ID, cut); first >= 0 {
				out = append(out, fmt.Sprintf("%s first seen serving %v after the cut", n.ID, (first-cut).Round(time.Millisecond)))
			}
		}
		if id, r := overlap(rounds, l.ID); id != "" {
			msg := fmt.Sprintf("%s (cut off) and %s both said they serve group %d from %.3fs to %.3fs, and %s in the looks before and after: their leases overlapped",
				l.ID, id, g, r.from.Seconds(), r.to.Seconds(), id)
			e.finding(ctx, "lease-overlap", r.from, r.to, []string{l.ID, id}, msg)
			out = append(out, msg)
		}
		if stopped != nil {
			errs = append(errs, stopped.Start())
		}
		errs = append(errs, cutHeal())
		return out, errors.Join(errs...)
	}
	return targets, heal, errors.Join(errs...)
}
