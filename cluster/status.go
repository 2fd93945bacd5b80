package cluster

import (
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
)

// GroupStatus is one raft group as this node sees it.
type GroupStatus struct {
	Group int
	// State is raft's state in the group; Term and AppliedIndex its term
	// and this node's applied index.
	State        string
	Term         uint64
	AppliedIndex uint64
	// Serving is true while this node leads the group and holds its lease.
	Serving bool
	// LeaderID and LeaderAPIAddr name the group's leader as this node
	// knows it; Voters are the voters of its latest configuration here,
	// and Preferred the voter its leadership is balanced to (on the
	// group's leader, which counts where its calls enter, the traffic's
	// preference: follow.go; "" in a cluster of one group without such
	// traffic, which is not balanced).
	LeaderID, LeaderAPIAddr string
	Voters                  []string
	Preferred               string
	// FirstSlot and EndSlot bound the slots the group owns: [first, end).
	FirstSlot, EndSlot uint32
	// ValuesTaken counts the values this node's allocator of the group took.
	ValuesTaken uint64
	// RaftOpen is false while this node refuses the group's raft traffic
	// (not admitted in the group: see admission.go); Admission is the kind
	// of the last verdict about it (cluster/admit: "leader", "quorum-wait",
	// "stale", ...).
	RaftOpen  bool
	Admission string
	// Protocol is the group's replicated-command protocol on this node
	// (see fsm.FSM.Protocol).
	Protocol uint64
}

// LocalStatus is what this node knows about itself.
type LocalStatus struct {
	ID, APIAddr, RaftAddr, GossipAddr string
	// State is raft's state: "Leader", "Follower", "Candidate" or "Shutdown".
	State string
	// Voter reports whether this node votes in the latest configuration;
	// InConfiguration whether it is in it at all.
	Voter, InConfiguration bool
	// LastContact is the time since this node last heard from a leader (0 on the leader).
	LastContact  time.Duration
	Term         uint64
	AppliedIndex uint64
	// Serving is true while this node is the leader and holds the lease.
	Serving bool
	// LeaderID and LeaderAPIAddr name the leader as this node knows it.
	LeaderID, LeaderAPIAddr string
	// LeaseRemaining is how long the lease still runs (leader only).
	LeaseRemaining time.Duration
	// LastFailover is, for the last time this node became leader, the time
	// from winning the election to serving (Barrier + lease wait + renewal).
	LastFailover time.Duration
	// LeaderChanges counts leadership gains and losses seen by this node.
	LeaderChanges int64
	// Renewals and RenewalErrors count lease renewals (committed no-op
	// entries) and failed attempts.
	Renewals, RenewalErrors int64
	// RaftOpen is false while this server refuses raft traffic: it has not
	// been admitted yet (see admission.go), or never will be (wiped, an
	// older copy, removed, taken for a member of another cluster, fenced;
	// Groups[i].Admission and its log say which).
	RaftOpen bool
	// Generation is the server's generation (seqd.Generation.String); Fenced
	// is true once it is fenced for good, FencedBy naming the generation
	// that replaced it (see fence.go).
	Generation string
	Fenced     bool
	FencedBy   string
	// ClusterID is the cluster's ID ("" until it has one) and Protocol its
	// replicated-command protocol.
	ClusterID string
	Protocol  uint64
	// DiskFull is true while a write found the disk full and none has
	// succeeded since (the server then stands for no election; see
	// disk.go); DiskFullWrites counts the writes that found it full.
	DiskFull       bool
	DiskFullWrites int64
	// LeaseWait is the lease this node last waited out before it served as
	// leader (its lease or the recorded one, plus a margin), counted from
	// its election or from the last renewal it had applied, whichever was
	// earlier (LastFailover is what it actually waited).
	LeaseWait time.Duration
	// RoutingVersion is the routing-table version (Node.RoutingVersion: the
	// one answers carry in Seqd-Routing-Version).
	RoutingVersion uint64
	// ValuesTaken counts the values this node's allocator took as leader
	// (returned, or skipped by calls that failed after taking them).
	ValuesTaken uint64
	// KeysHeld and SectionsHeld describe the allocator's memory.
	KeysHeld     int64
	SectionsHeld int
	// FlakeEntries counts the flake entries this node committed as leader.
	FlakeEntries int64
	// Drained is true while the node is drained (see Node.Drain).
	Drained bool
	// BalanceMoves counts the leadership transfers this node's balancer
	// (and drain) started (see Node.BalanceMoves).
	BalanceMoves int64
	// Groups describes every raft group the node runs; the fields above
	// describe group 0, except ValuesTaken, KeysHeld and SectionsHeld,
	// which count over all groups.
	Groups []GroupStatus
}

// Status reports this node's view of itself and the leader.
func (n *Node) Status() LocalStatus {
	g := n.authority().Status()
	st := LocalStatus{
		ID:             n.cfg.ID,
		APIAddr:        n.cfg.APIAddr,
		RaftAddr:       n.RaftAddr(),
		GossipAddr:     n.cfg.GossipAdvertise,
		State:          g.State,
		LastContact:    g.LastContact,
		Term:           g.Term,
		AppliedIndex:   g.AppliedIndex,
		Serving:        g.Serving,
		LeaseRemaining: g.LeaseRemaining,
		LastFailover:   g.LastFailover,
		LeaderChanges:  g.LeaderChanges,
		Renewals:       g.Renewals,
		RenewalErrors:  g.RenewalErrors,
		KeysHeld:       g.KeysHeld,
		ValuesTaken:    g.ValuesTaken,
		SectionsHeld:   g.SectionsHeld,
		FlakeEntries:   g.FlakeEntries,
		RaftOpen:       n.Admitted(),
		Generation:     n.Generation().String(),
		Fenced:         n.Fenced(),
		FencedBy:       n.FencedBy(),
		ClusterID:      g.ClusterID,
		Protocol:       g.Protocol,
		DiskFull:       n.disk.Full(),
		DiskFullWrites: n.disk.failures.Load(),
		LeaseWait:      g.LeaseWait,
	}
	st.LeaderID, st.LeaderAPIAddr = n.leaderAddr(g.LeaderID)
	if n.gossipAddr != "" {
		st.GossipAddr = n.gossipAddr
	}
	st.RoutingVersion = n.RoutingVersion()
	st.Drained = n.drained.Load()
	st.BalanceMoves = n.BalanceMoves()
	st.ValuesTaken, st.KeysHeld, st.SectionsHeld = 0, 0, 0
	for i, gr := range n.groups {
		gs := gr.Status()
		row := GroupStatus{Group: i, State: gs.State, Term: gs.Term, AppliedIndex: gs.AppliedIndex, Serving: gs.Serving, ValuesTaken: gs.ValuesTaken,
			RaftOpen: n.GroupAdmitted(i), Admission: string(n.Admission(i)), Protocol: gs.Protocol}
		row.LeaderID, row.LeaderAPIAddr = n.leaderAddr(gs.LeaderID)
		row.FirstSlot, row.EndSlot = seqd.SlotRange(i, len(n.groups))
		if gs.Configuration != nil {
			for _, s := range gs.Configuration.Servers {
				if s.Suffrage == raft.Voter {
					row.Voters = append(row.Voters, string(s.ID))
				}
			}
			row.Preferred, _ = n.preferred(i, *gs.Configuration, gr.IsLeader(), time.Now())
		}
		st.Groups = append(st.Groups, row)
		st.ValuesTaken += gs.ValuesTaken
		st.KeysHeld += gs.KeysHeld
		st.SectionsHeld += gs.SectionsHeld
	}
	if g.Configuration != nil {
		for _, s := range g.Configuration.Servers {
			if string(s.ID) == n.cfg.ID {
				st.Voter = s.Suffrage == raft.Voter
				st.InConfiguration = true
			}
		}
	}
	return st
}

// ConfigServer is a server in the raft configuration.
type ConfigServer struct {
	ID, RaftAddr string
	Voter        bool
}

// Configuration returns the latest raft configuration known to this node.
func (n *Node) Configuration() ([]ConfigServer, error) {
	cf := n.authority().Raft().GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, err
	}
	var out []ConfigServer
	for _, s := range cf.Configuration().Servers {
		out = append(out, ConfigServer{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// routingVersion identifies a routing table: the raft term (it changes with
// every leader) in the high 32 bits, and a checksum of the configuration
// (every server's ID, address and vote) in the low 32. hashicorp/raft does
// not expose the configuration's log index, hence the checksum: versions
// change on every leader or membership change, but are not ordered within
// a term.
func routingVersion(term uint64, conf raft.Configuration) uint64 {
	h := crc32.NewIEEE()
	for _, s := range conf.Servers {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", s.ID, s.Address, s.Suffrage)
	}
	return term<<32 | uint64(h.Sum32())
}

// RoutingVersion returns this node's routing-table version as of its last
// reconcile pass (at most about a second old, and refreshed on every
// leadership change).
func (n *Node) RoutingVersion() uint64 { return n.routingVersion.Load() }
