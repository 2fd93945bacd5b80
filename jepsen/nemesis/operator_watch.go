package nemesis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// waitUntil polls cond every 250ms until it holds or timeout passes, and
// returns whether it held and how long it took.
func waitUntil(timeout time.Duration, cond func() bool) (bool, time.Duration) {
	return waitUntilEvery(timeout, 250*time.Millisecond, cond)
}

// waitUntilEvery polls cond every step until it holds or timeout passes,
// and returns whether it held and how long it took.
func waitUntilEvery(timeout, step time.Duration, cond func() bool) (bool, time.Duration) {
	start := time.Now()
	for {
		if cond() {
			return true, time.Since(start)
		}
		if time.Since(start) > timeout {
			return false, time.Since(start)
		}
		time.Sleep(step)
	}
}

// verdictTimeout bounds the wait for a restarted server to say what it is
// (vouched for, or refused): it asks every second or so, and a leader that
// has just been elected waits a lease before it answers with authority.
const verdictTimeout = 20 * time.Second

// seen is what a server started on questionable data showed: the kind of
// its refusal ("" if none: from its status, GroupState.admission, or the
// refusal=<kind> it logged), whether it takes part (a voter following the
// current leader), its standing in the cluster, its admission kinds at the
// last look (Status.Admissions) and how long it took to show either.
type seen struct {
	refused   string
	inService bool
	standing  string
	kinds     string
	took      time.Duration
}

// verdict waits (bounded) until a server started on questionable data
// either refuses or takes part in the cluster, and says which.
func (e *Env) verdict(n *nodes.Node, offset int64) seen {
	var v seen
	_, v.took = waitUntil(verdictTimeout, func() bool {
		if st := e.Cluster.StatusOf(context.Background(), n, time.Second); st.Err == nil {
			v.kinds = st.Admissions()
			if v.refused = statusRefusal(st); v.refused != "" {
				return true
			}
		}
		if v.refused = refusal(n, offset); v.refused != "" {
			return true
		}
		v.inService, v.standing = e.inService(n)
		return v.inService
	})
	if v.refused != "" || v.standing == "" {
		_, v.standing = e.inService(n)
	}
	return v
}

// watcher polls every node while an operator fault is in place and notes
// what one node did: whether it led and served while the other servers
// followed another leader (serving from state the cluster does not share),
// and how many times it became a serving leader.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	alone string // the first time it served alone, described
	leads int    // times seen becoming a serving leader
	// Serving leaders seen anywhere in the cluster, in order (leader/term).
	leaders []string
	// leadAtStart: it was the serving leader at the first look; stepped:
	// how long after the watch began it was first seen not leading then.
	leadAtStart bool
	stepped     time.Duration
	// diskFull: its status said disk-full at some look (seqd status
	// notes disk-full, the metric seqd_disk_full).
	diskFull bool
}

func (e *Env) watch(n *nodes.Node) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		was := false
		start := time.Now()
		for first := true; ctx.Err() == nil; first = false {
			sts := e.Cluster.Statuses(ctx, time.Second)
			me := sts[n.Index]
			lead := me.Err == nil && me.Serving && strings.EqualFold(me.State, "leader")
			w.mu.Lock()
			if first {
				w.leadAtStart = lead
			}
			if !lead && me.Err == nil && w.leadAtStart && w.stepped == 0 {
				w.stepped = time.Since(start)
			}
			if me.Err == nil && me.DiskFull {
				w.diskFull = true
			}
			if lead && !was {
				w.leads++
			}
			for _, s := range sts {
				if s.Err == nil && s.Serving && strings.EqualFold(s.State, "leader") {
					lt := fmt.Sprintf("%s/%d", s.Node.ID, s.Term)
					if len(w.leaders) == 0 || w.leaders[len(w.leaders)-1] != lt {
						w.leaders = append(w.leaders, lt)
					}
				}
			}
			if lead && w.alone == "" {
				for _, s := range sts {
					if s.Node != n && s.Err == nil && s.LeaderID != "" && s.LeaderID != n.ID {
						other := fmt.Sprintf("%s followed %s", s.Node.ID, s.LeaderID)
						if s.LeaderID == s.Node.ID {
							other = s.Node.ID + " led"
						}
						w.alone = fmt.Sprintf("%s SERVED as a leader (term %d) while %s (term %d), at %.1fs",
							n.ID, me.Term, other, s.Term, e.Rec.Now().Seconds())
						break
					}
				}
			}
			w.mu.Unlock()
			was = lead
			sleep(ctx, 250*time.Millisecond)
		}
	}()
	return w
}

// stop ends the watch and returns what it saw.
func (w *watcher) stop() (alone string, leads int) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.alone, w.leads
}

// leaderChanges describes the serving leaders seen (leader/term, in order).
func (w *watcher) leaderChanges() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.leaders) == 0 {
		return "no serving leader seen"
	}
	const show = 8
	l := w.leaders
	more := ""
	if len(l) > show {
		more = fmt.Sprintf(" … (%d in all)", len(l))
		l = l[len(l)-show:]
	}
	return "serving leaders " + strings.Join(l, " → ") + more
}

// inService describes a node's standing in the cluster's configuration,
// and reports whether it is a voter that follows the current leader in its
// term.
func (e *Env) inService(n *nodes.Node) (bool, string) {
	ok, _, standing := e.standing(n)
	return ok, standing
}

// standing is inService, with the node's membership as the cluster lists it.
func (e *Env) standing(n *nodes.Node) (bool, nodes.Member, string) {
	v, err := e.view(context.Background(), 5*time.Second)
	if err != nil {
		return false, nodes.Member{}, "membership unknown: " + err.Error()
	}
	m := v.Members[n.ID]
	ok := m.Voter && m.RaftOpen && m.Term == v.Term && (m.RaftState == "follower" || (m.RaftState == "leader" && v.Leader == n.ID))
	return ok, m, fmt.Sprintf("%s, term %d (leader %s, term %d)", describe(m), m.Term, v.Leader, v.Term)
}
