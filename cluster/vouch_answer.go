package cluster

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/fsm"
)

// ErrNoSuchGroup means a question named a raft group this server does not
// run.
var ErrNoSuchGroup = errors.New("no such raft group")

// Vouch answers another server's question about one group. The answer is
// authoritative on the group's serving leader; elsewhere it is built from
// everything this server stored of the group and names the group's leader
// it knows. The question carries the asker's generation, which this server
// learns of (see fence.go).
func (n *Node) Vouch(req VouchRequest) (VouchAnswer, error) {
	i := req.Group
	if i < 0 || i >= len(n.groups) {
		return VouchAnswer{}, fmt.Errorf("%w: %d (this server runs %d)", ErrNoSuchGroup, i, len(n.groups))
	}
	n.learn(admit.Learned{Generation: req.Generation, From: req.ID})
	g := n.groups[i]
	r := g.Raft()
	a := VouchAnswer{Generation: n.Generation(), Admitted: n.GroupAdmitted(i), ContactMs: n.contactMs(i), Group: i, NodeID: n.cfg.ID, LastIndex: r.LastIndex(), Protocol: n.authority().FSM().Protocol()}
	a.LeaderID, a.LeaderAPIAddr = n.GroupLeader(i)
	a.Authoritative = g.IsLeader() && g.Allocator().Serving()
	if cf := r.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				a.Voters = append(a.Voters, string(s.ID))
			}
			if string(s.ID) == req.ID {
				a.InConfiguration, a.Voter = true, s.Suffrage == raft.Voter
			}
		}
	}
	a.Seen, a.RecordedIndex = g.FSM().ServerSeen(req.ID)
	if !a.Authoritative {
		if seen, idx := n.seenInLog(i, req.ID); seen {
			a.Seen, a.RecordedIndex = true, max(a.RecordedIndex, idx)
		}
	}
	if a.Seen {
		a.RecordedTerm = termAt(g.LogStore(), a.RecordedIndex)
	}
	return a, nil
}

// maxLogScan bounds how many unapplied log entries seenInLog reads.
const maxLogScan = 1 << 17

// seenInLog returns the highest raft index recorded for server id by a
// KindServerSeen entry in this server's log of group i after what its state
// machine applied (those entries may be committed, or not yet known to be: either
// way they are what a leader observed). Entries are read once and
// remembered (logScan), so repeated questions read only new entries.
func (n *Node) seenInLog(i int, id string) (bool, uint64) {
	g := n.groups[i]
	ls := &n.gates[i].scan
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.max == nil {
		ls.max = map[string]uint64{}
	}
	last := g.Raft().LastIndex()
	if last < ls.to {
		ls.to = 0 // the log was cut back (a new leader's entries replace ours): read again
	}
	first := max(ls.to+1, g.FSM().AppliedIndex()+1)
	if fi, err := g.LogStore().FirstIndex(); err == nil && fi > first {
		first = fi
	}
	if last >= first && last-first > maxLogScan {
		first = last - maxLogScan
	}
	var l raft.Log
	for idx := first; idx <= last && idx != 0; idx++ {
		if err := g.LogStore().GetLog(idx, &l); err != nil || l.Type != raft.LogCommand ||
			len(l.Data) == 0 || fsm.Kind(l.Data[0]) != fsm.KindServerSeen {
			continue
		}
		if c, err := fsm.Decode(l.Data); err == nil {
			ls.max[c.Server] = max(ls.max[c.Server], c.Index)
		}
	}
	ls.to = max(ls.to, last)
	idx, seen := ls.max[id]
	return seen, idx
}

// logScan remembers what seenInLog read.
type logScan struct {
	mu  sync.Mutex
	to  uint64            // read through this index
	max map[string]uint64 // highest index recorded per server
}

// termAt returns the term of the entry of log at index, or 0 if it does
// not have it (compacted into a snapshot, or beyond its end).
func termAt(log raft.LogStore, index uint64) uint64 {
	var l raft.Log
	if index == 0 || log.GetLog(index, &l) != nil {
		return 0
	}
	return l.Term
}
