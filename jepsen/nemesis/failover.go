package nemesis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// DefaultFailoverTarget is how long a raft group may be without a serving
// leader while a majority of its voters runs and no network fault is in
// place (restart-then-crash checks it; --failover-target). The normal
// failover on the harness's timing is about 1.5 s (heartbeat timeout 300
// ms, an election, the new leader's wait of lease + margin 550 ms: a
// median outage of 1.1-1.5 s per killed leader in RESULTS.md), and a
// restarted server's admission adds at most a gossip pass and one round
// of questions (bounded by 2 s); the issue measured 2-3 s for a crash that
// meets a restart with the availability rule in place. 10 s is three times
// that, leaving room for a loaded 2-core machine (RESULTS.md's runs saw
// load averages of 8-30 and single outages of 3-5 s without any rule at
// fault), and far below the 30 s and more that the old rule cost.
const DefaultFailoverTarget = 10 * time.Second

// leaderless is a stretch of one group without a serving leader.
type leaderless struct {
	group    int
	from, to time.Duration // on the recorder's clock; to 0: not over yet
}

// failoverClock measures, from samples, how long each raft group goes
// without a serving leader, counting only the time during which it should
// have one (the condition: a majority of the servers runs and no network
// fault is in place). It is pure: the watch feeds it.
type failoverClock struct {
	target  time.Duration
	groups  int
	started bool
	last    time.Duration
	// since is when each group's stretch without a serving leader began
	// (moved forward by the time the condition did not hold); longest is
	// its longest stretch and longestFrom where that began; over lists the
	// stretches longer than the target.
	since, longest, longestFrom map[int]time.Duration
	over                        []leaderless
}

func newFailoverClock(target time.Duration, groups int) *failoverClock {
	return &failoverClock{target: target, groups: max(groups, 1), since: map[int]time.Duration{}, longest: map[int]time.Duration{},
		longestFrom: map[int]time.Duration{}}
}

// observe takes one sample at now: whether the condition holds, and which
// groups have a serving leader.
func (c *failoverClock) observe(now time.Duration, counts bool, serving func(g int) bool) {
	if !c.started {
		c.started, c.last = true, now
		for g := range c.groups {
			c.since[g] = now
		}
	}
	for g := range c.groups {
		open := len(c.over) > 0 && c.openOver(g) >= 0
		if serving(g) {
			if open {
				c.over[c.openOver(g)].to = now
			}
			c.since[g] = now
			continue
		}
		if !counts {
			// The clock stops while the condition does not hold.
			c.since[g] += now - c.last
			continue
		}
		if d := now - c.since[g]; d > c.longest[g] {
			c.longest[g], c.longestFrom[g] = d, c.since[g]
		}
		if now-c.since[g] > c.target && !open {
			c.over = append(c.over, leaderless{group: g, from: c.since[g]})
		}
	}
	c.last = now
}

// openOver returns the index of group g's stretch over the target that is
// not over yet, or -1.
func (c *failoverClock) openOver(g int) int {
	for i, l := range c.over {
		if l.group == g && l.to == 0 {
			return i
		}
	}
	return -1
}

// end closes the stretches still open at now.
func (c *failoverClock) end(now time.Duration) {
	for i := range c.over {
		if c.over[i].to == 0 {
			c.over[i].to = now
		}
	}
}

// failoverWatch samples every node's status every 100 ms into a
// failoverClock.
type failoverWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	clock  *failoverClock
}

func (e *Env) watchFailover() *failoverWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &failoverWatch{cancel: cancel, done: make(chan struct{}), clock: newFailoverClock(e.failoverTarget(), e.Groups)}
	n := len(e.Cluster.Nodes)
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			sts := e.Cluster.Statuses(ctx, time.Second)
			running := 0
			for _, x := range e.Cluster.Nodes {
				if x.State() == nodes.Running {
					running++
				}
			}
			w.mu.Lock()
			w.clock.observe(e.Rec.Now(), running >= n/2+1 && e.netFaults.Load() == 0, func(g int) bool { return servingLeader(sts, g) })
			w.mu.Unlock()
			sleep(ctx, 100*time.Millisecond)
		}
		w.mu.Lock()
		w.clock.end(e.Rec.Now())
		w.mu.Unlock()
	}()
	return w
}

// servingLeader reports whether some node says it leads group g and
// serves it.
func servingLeader(sts []nodes.Status, g int) bool {
	for _, s := range sts {
		if s.Err != nil {
			continue
		}
		gs, ok := s.Groups[g]
		if !ok && g == 0 {
			gs, ok = nodes.GroupState{State: s.State, Serving: s.Serving}, true
		}
		if ok && gs.Serving && strings.EqualFold(gs.State, "leader") {
			return true
		}
	}
	return false
}

// stop ends the watch (after waiting, bounded by the target and 2 s more,
// until every group serves again) and reports: a finding per stretch
// longer than the target, and a description of each group's longest
// stretch.
func (w *failoverWatch) stop(ctx context.Context, e *Env) []string {
	waitUntil(w.clock.target+2*time.Second, func() bool {
		sts := e.Cluster.Statuses(context.Background(), time.Second)
		for g := range w.clock.groups {
			if !servingLeader(sts, g) {
				return false
			}
		}
		return true
	})
	w.cancel()
	<-w.done
	c := w.clock
	var parts []string
	for g := range c.groups {
		parts = append(parts, fmt.Sprintf("%d: %v", g, c.longest[g].Round(10*time.Millisecond)))
	}
	out := []string{"longest time without a serving leader while a majority ran, per group: " + strings.Join(parts, ", ")}
	for _, l := range c.over {
		msg := fmt.Sprintf("group %d had no serving leader for %v (%.1fs to %.1fs) while a majority of its voters ran, above the failover target of %v",
			l.group, (l.to - l.from).Round(10*time.Millisecond), l.from.Seconds(), l.to.Seconds(), c.target)
		e.finding(ctx, "failover", l.from, l.to, []string{fmt.Sprintf("group %d", l.group)}, msg)
		out = append(out, msg)
	}
	return out
}

func (e *Env) failoverTarget() time.Duration {
	if e.FailoverTarget > 0 {
		return e.FailoverTarget
	}
	return DefaultFailoverTarget
}
