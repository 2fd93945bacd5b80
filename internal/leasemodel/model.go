package leasemodel

import (
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/lease"
)

// The model's timings: seqd's defaults (server.DefaultConfig, cluster,
// group), in each server's own clock.
const (
	heartbeatTimeout = 500 * time.Millisecond // raft's HeartbeatTimeout and ElectionTimeout
	leaderLeaseTime  = 500 * time.Millisecond // raft's LeaderLeaseTimeout
	sendInterval     = heartbeatTimeout / 10  // raft's heartbeats
	applyTimeout     = 5 * time.Second        // a release's bound (group.applyTimeout)
	askInterval      = time.Second            // the vouch ticker: a server not yet admitted asks again
	gossipInterval   = time.Second            // gossip carries each server's published generation
	leaveTime        = time.Second            // a stopping server leaves gossip (cluster's Shutdown) before raft stops
	recordInterval   = 5 * time.Second        // a leader records how far each server's log reaches
	driftPerMille    = 40                     // clock rates lie in 1 ± 4%: the margin (L/10) covers 1 ± 4.76%
)

// never is a timer that is not set.
const never = math.MaxInt64

type op uint8

const (
	opOther   op = iota // the bootstrap configuration, raft's no-op, a barrier
	opRenewal           // a lease renewal, with the writer's lease and margin
	opRelease           // a lease release
	opRecord            // a progress record (KindServerSeen): server who applied through at
)

type entry struct {
	term uint64
	op   op
	rec  lease.Record
	who  int
	at   uint64
}

type role uint8

const (
	follower role = iota
	candidate
	leader
)

// phase is where a leader's lease loop (group.lead) is.
type phase uint8

const (
	idle      phase = iota // not leading, or stopped (Withhold, Revoke)
	listening              // the listen rule: before the first grant of a leadership, and after a lapse
	admitWait              // WaitAdmitted
	barrier                // Barrier
	waiting                // the lease wait (lease.Deadline)
	renewing               // renewing every L/3; serving from the first committed renewal
)

// move is a planned leadership move in progress (group.TransferLeadership,
// group.Handover).
type move uint8

const (
	noMove   move = iota
	transfer      // TransferLeadership: withhold, release, transfer; resume on failure
	handover      // Handover (a graceful stop): revoke, release, transfer, then exit
)

// timer kinds, in the order ties fire.
const (
	tElection = iota // follower's heartbeat timeout, candidate's election timeout
	tSend            // leader: replicate (heartbeats, new entries)
	tCheck           // leader: step down without quorum contact (LeaderLeaseTimeout)
	tLead            // lease loop: end of the wait, next renewal
	tMove            // a move's timeout
	tAsk             // admission: ask again
	tGossip          // gossip round
	tRecord          // leader: record progress
	tExit            // a graceful stop's end: raft runs on until gossip's leave is done
	numTimers
)

type cluster struct {
	gen    seqd.Generation
	voters []int
}

type server struct {
	id    string
	idx   int
	c     int // cluster index
	rate  int64
	off   int64
	lease time.Duration
	marg  time.Duration
	slow  int64 // raft timers run this many times slower (the raft flags allow it)

	up, paused, stopping bool
	startLocal           int64
	// listenSince (local) is when the server began listening to gossip
	// (its start), or when its lease lapsed, whichever is later (the listen
	// rule: lease.ListenWindow).
	listenSince int64
	// stalledAt (local) is when the server last resumed from a pause (the
	// host's stall watch, cluster/stall.go; 0: never): listening counts
	// only time after it.
	stalledAt int64

	// Kept across restarts: raft's log, term and vote; the fence and the
	// state machine's file (lease record, progress records).
	term     uint64
	vote     int
	log      []entry
	fenced   bool
	fencedBy admit.Learned
	rec      lease.Record
	recorded bool
	records  map[int]uint64
	// recContact is the real time the server last heard from a leader (or
	// led), as its contact record kept it when it last stopped (cluster's
	// contact.go; 0: none). Wall clocks are taken to agree here; the
	// decision allows admit.ContactSlack for them.
	recContact int64
	// learnedNewer: the server has heard of a generation superseding its
	// own that has served (ground truth for property (b), whatever Fence
	// says).
	learnedNewer bool

	// Lost on a crash.
	role              role
	leader            int
	commit, applied   uint64
	match             [maxServers]uint64
	acked             [maxServers]int64
	handoff           Handoff
	admitted, refused bool
	waiting           admit.Kind // the last wait's kind (the trace says each once)
	contact           int64      // real time it last heard from a leader (0: never since it started)
	sourceSeen        int64      // real time it last saw an admitted server of an older generation (0: never since it started)
	newerSeen         int64      // real time it last saw a server of a newer generation (0: never since it started)
	seen              int64      // local time it last stored a renewal since it started (0: never)

	phase        phase
	gained       int64 // local
	barrierIdx   uint64
	renewIdx     uint64
	renewT       int64 // local clock reading taken before submitting the renewal
	pending      bool  // a renewal is submitted and not applied yet
	nextRenew    int64 // real
	grant        int64 // lease expiry, local (0: none)
	served       bool  // served in this leadership (for the trace)
	move         move
	moveRelease  bool // the move waits for its release to commit
	releaseIdx   uint64
	target       int
	transferSent bool
	stopAfter    bool

	t [numTimers]int64
}

// local is the server's clock at real time t (ns).
func (s *server) local(t int64) int64 { return s.off + t*s.rate/1000 }

// realAt is the first real time at which the server's clock reads l.
func (s *server) realAt(l int64) int64 {
	d := l - s.off
	if d <= 0 {
		return 0
	}
	return (d*1000 + s.rate - 1) / s.rate
}

// dur is how much real time d of the server's clock takes.
func (s *server) dur(d time.Duration) int64 { return (int64(d)*1000 + s.rate - 1) / s.rate }

func (s *server) lastIndex() uint64 { return uint64(len(s.log)) }

func (s *server) termAt(i uint64) uint64 {
	if i == 0 || i > uint64(len(s.log)) {
		return 0
	}
	return s.log[i-1].term
}

// Model is one run: one lineage, its clusters (the first bootstrapped,
// the others restored) and their servers, a network, and real time.
type Model struct {
	rules    Rules
	now      int64
	servers  []*server
	clusters []cluster
	cut      [maxServers][maxServers]bool
	rng      *rand.Rand // the protocol's randomness (timer jitter, lost messages)
	loss     int        // per mille of raft messages lost
	faults   *faultGen
	steps    int
	end      int64

	// checking
	lastServed []int64
	condSince  []int64
	condDirty  bool
	cond       []bool
	violation  *Violation

	trace *strings.Builder
	stats Stats
}

// Stats counts what the runs went through, so that a test can tell that
// the exploration reached the protocol's corners.
type Stats map[string]int

func (s Stats) add(what string) { s[what]++ }

const maxServers = 8

// newModel builds a run: n servers of a just-bootstrapped cluster,
// each with its clock rate and offset, lease and margin, and raft timer
// speed drawn from setup.
func newModel(rules Rules, n int, setup *rand.Rand) *Model {
	m := &Model{rules: rules, rng: setup, stats: Stats{}}
	m.loss = []int{0, 0, 2, 10}[setup.IntN(4)] // up to 1%: four lost elections in a row stay out of reach of the availability bound
	m.clusters = []cluster{{gen: seqd.Generation{Lineage: "L", Number: 0, Cluster: "S"}}}
	for i := range n {
		s := m.addServer("n"+string(rune('1'+i)), 0, setup)
		s.admitted = true // bootstrapped together (admit.ByBootstrap)
	}
	m.lastServed = []int64{0}
	m.condSince = []int64{never}
	m.cond = []bool{false}
	m.condDirty = true
	return m
}

// addServer adds a running server of cluster c with a bootstrapped log.
func (m *Model) addServer(id string, c int, setup *rand.Rand) *server {
	s := &server{id: id, idx: len(m.servers), c: c, vote: -1, records: map[int]uint64{}}
	s.rate = 1000 + int64(setup.IntN(3)-1)*driftPerMille
	s.off = int64(1+setup.IntN(1000)) * int64(time.Second)
	s.lease = []time.Duration{800 * time.Millisecond, time.Second, 1200 * time.Millisecond}[setup.IntN(3)]
	s.marg = s.lease / 10
	s.slow = 1
	if setup.IntN(4) == 0 {
		s.slow = 2
	}
	s.term = 1
	s.log = []entry{{term: 1}}
	m.servers = append(m.servers, s)
	m.clusters[c].voters = append(m.clusters[c].voters, s.idx)
	m.start(s)
	return s
}

// start runs a server's process: raft comes up as a follower, the host
// asks to be admitted and joins gossip.
func (m *Model) start(s *server) {
	s.up, s.paused, s.stopping = true, false, false
	s.startLocal = s.local(m.now)
	s.listenSince = s.startLocal
	s.role, s.leader, s.commit, s.applied = follower, -1, 0, 0
	s.match, s.acked = [maxServers]uint64{}, [maxServers]int64{}
	s.handoff = m.rules.NewHandoff()
	s.admitted, s.refused, s.seen, s.waiting, s.contact, s.sourceSeen, s.newerSeen = false, false, 0, "", 0, 0, 0
	s.phase, s.pending, s.grant, s.served = idle, false, 0, false
	s.move, s.stopAfter = noMove, false
	for i := range s.t {
		s.t[i] = never
	}
	m.resetElection(s)
	if !s.fenced {
		// The first gossip pass that asks (cluster's checkGate runs on each).
		s.t[tAsk] = m.now + s.dur(askInterval/10+time.Duration(m.rng.Int64N(int64(askInterval*9/10))))
	}
	s.t[tGossip] = m.now
	m.condDirty = true
}

// down ends a server's process (a crash, or the end of a graceful stop).
func (m *Model) down(s *server) {
	if s.admitted {
		// cluster's contact record, written while admitted (a shut gate
		// leaves the last one standing).
		s.recContact = m.contactOf(s)
	}
	s.up, s.paused, s.stopping = false, false, false
	s.grant, s.phase, s.role, s.admitted = 0, idle, follower, false
	for i := range s.t {
		s.t[i] = never
	}
	m.condDirty = true
}

func (m *Model) resetElection(s *server) {
	d := heartbeatTimeout + time.Duration(m.rng.Int64N(int64(heartbeatTimeout)))
	s.t[tElection] = m.now + s.dur(d*time.Duration(s.slow))
}

// contactOf is when s last heard from a leader, as its vouch answer says
// (cluster's Node.contactMs): now while it leads, its last leader contact
// while admitted, its record otherwise.
func (m *Model) contactOf(s *server) int64 {
	switch {
	case !s.admitted:
		return s.recContact
	case s.role == leader:
		return m.now
	case s.contact != 0:
		return s.contact
	}
	return s.recContact
}

// holds reports whether s holds a lease now: its process runs (paused
// or not) and its clock has not reached the expiry of its grant.
func (m *Model) holds(s *server) bool {
	return s.up && s.grant != 0 && s.local(m.now) < s.grant
}

// learnedOf is what s publishes (gossip, vouch answers): its generation
// and whether it is admitted (a fenced server also publishes what fenced
// it: see exchange).
func (m *Model) learnedOf(s *server) admit.Learned {
	return admit.Learned{Generation: m.clusters[s.c].gen, Served: s.admitted, From: s.id}
}
