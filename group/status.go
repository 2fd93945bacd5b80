package group

import (
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

// Status is what this server knows about the group.
type Status struct {
	// State is raft's state: "Leader", "Follower", "Candidate" or "Shutdown".
	State string
	// LastContact is the time since this server last heard from a leader
	// (0 on the leader).
	LastContact  time.Duration
	Term         uint64
	AppliedIndex uint64
	// LeaderID names the leader as raft knows it ("" if unknown).
	LeaderID string
	// Serving is true while this server is the leader and holds the lease;
	// LeaseRemaining is how long the lease still runs.
	Serving        bool
	LeaseRemaining time.Duration
	// LastFailover is, for the last time this server became leader, the time
	// from winning the election to serving (barrier + lease wait + renewal),
	// and LeaseWait the lease wait it included.
	LastFailover, LeaseWait time.Duration
	// LeaderChanges counts leadership gains and losses seen here; Renewals
	// and RenewalErrors count lease renewals and failed attempts.
	LeaderChanges, Renewals, RenewalErrors int64
	// ClusterID is the cluster's ID ("" until it has one) and Protocol its
	// replicated-command protocol.
	ClusterID string
	Protocol  uint64
	// Configuration is the latest raft configuration known here (nil if
	// raft could not say).
	Configuration *raft.Configuration
	// ValuesTaken counts the values the allocator took as leader; KeysHeld
	// and SectionsHeld describe its memory.
	ValuesTaken  uint64
	KeysHeld     int64
	SectionsHeld int
	// FlakeEntries counts the flake entries (grants, renewals, releases)
	// this server committed as leader: one per holder per renewal period,
	// whatever the id rate.
	FlakeEntries int64
}

// Status reports this server's view of the group.
func (g *Group) Status() Status {
	_, lid := g.raft.LeaderWithID()
	st := Status{
		FlakeEntries:   g.stats.flakeEntries.Load(),
		State:          g.raft.State().String(),
		Term:           g.raft.CurrentTerm(),
		AppliedIndex:   g.raft.AppliedIndex(),
		LeaderID:       string(lid),
		Serving:        g.alloc.Serving(),
		LeaseRemaining: g.alloc.LeaseRemaining(),
		LastFailover:   time.Duration(g.stats.lastFailoverNs.Load()),
		LeaseWait:      time.Duration(g.stats.lastLeaseWait.Load()),
		LeaderChanges:  g.stats.leaderChanges.Load(),
		Renewals:       g.stats.renewals.Load(),
		RenewalErrors:  g.stats.renewalErrors.Load(),
		ClusterID:      g.fsm.ClusterID(),
		Protocol:       g.fsm.Protocol(),
		ValuesTaken:    g.alloc.ValuesTaken(),
		KeysHeld:       g.alloc.KeysHeld(),
		SectionsHeld:   g.alloc.SectionsHeld(),
	}
	if st.State != raft.Leader.String() {
		if lc := g.raft.LastContact(); !lc.IsZero() {
			st.LastContact = time.Since(lc)
		}
	}
	if cf := g.raft.GetConfiguration(); cf.Error() == nil {
		c := cf.Configuration()
		st.Configuration = &c
	}
	return st
}

// Backup writes a consistent copy of the group's state machine to w,
// recording the cluster's ID and the raft term and index it was taken at
// (see fsm.WriteBackup). Only the leader holding its lease answers, so the
// copy includes every committed mark.
func (g *Group) Backup(w io.Writer) (int64, error) {
	if !g.IsLeader() || !g.alloc.Serving() {
		return 0, seqd.ErrNotLeader
	}
	info := fsm.BackupInfo{ClusterID: g.fsm.ClusterID(), Term: g.raft.CurrentTerm(), Index: g.fsm.AppliedIndex(), Taken: time.Now()}
	return g.fsm.WriteBackup(w, info)
}
