package cluster

import (
	"sync"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
)

// Vouch answers another server's question. The answer is authoritative on
// the serving leader; elsewhere it is built from everything this server
// stored and names the leader it knows.
func (n *Node) Vouch(req VouchRequest) VouchAnswer {
	a := VouchAnswer{ClusterID: n.fsm.ClusterID(), NodeID: n.cfg.ID, LastIndex: n.raft.LastIndex(), Protocol: n.fsm.Protocol()}
	a.LeaderID, a.LeaderAPIAddr = n.Leader()
	a.Authoritative = n.IsLeader() && n.alloc.Serving()
	if cf := n.raft.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				a.Voters = append(a.Voters, string(s.ID))
			}
			if string(s.ID) == req.ID {
				a.InConfiguration, a.Voter = true, s.Suffrage == raft.Voter
			}
		}
	}
	a.Seen, a.RecordedIndex = n.fsm.ServerSeen(req.ID)
	if !a.Authoritative {
		if seen, idx := n.seenInLog(req.ID); seen {
			a.Seen, a.RecordedIndex = true, max(a.RecordedIndex, idx)
		}
	}
	if a.Seen {
		a.RecordedTerm = n.termAt(a.RecordedIndex)
	}
	return a
}

// maxLogScan bounds how many unapplied log entries seenInLog reads.
const maxLogScan = 1 << 17

// seenInLog returns the highest raft index recorded for server id by a
// KindServerSeen entry in this server's log after what its state machine
// applied (those entries may be committed, or not yet known to be: either
// way they are what a leader observed). Entries are read once and
// remembered (logScan), so repeated questions read only new entries.
func (n *Node) seenInLog(id string) (bool, uint64) {
	ls := &n.logScan
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.max == nil {
		ls.max = map[string]uint64{}
	}
	last := n.raft.LastIndex()
	if last < ls.to {
		ls.to = 0 // the log was cut back (a new leader's entries replace ours): read again
	}
	first := max(ls.to+1, n.fsm.AppliedIndex()+1)
	if fi, err := n.logStore.FirstIndex(); err == nil && fi > first {
		first = fi
	}
	if last >= first && last-first > maxLogScan {
		first = last - maxLogScan
	}
	var l raft.Log
	for i := first; i <= last && i != 0; i++ {
		if err := n.logStore.GetLog(i, &l); err != nil || l.Type != raft.LogCommand ||
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

// termAt returns the term of this server's log entry at index, or 0 if it
// does not have it (compacted into a snapshot, or beyond its log).
func (n *Node) termAt(index uint64) uint64 {
	var l raft.Log
	if index == 0 || n.logStore.GetLog(index, &l) != nil {
		return 0
	}
	return l.Term
}
