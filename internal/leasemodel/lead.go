package leasemodel

import (
	"fmt"
	"time"

	"github.com/seqd/seqd/lease"
)

// The lease loop of a leader (group.lead) and the planned moves
// (group.TransferLeadership, group.Handover), step by step.

// startLead starts the lease loop on a new leader: wait until admitted,
// barrier, wait out earlier leases unless a certified release is the last
// lease entry, then renew.
func (m *Model) startLead(s *server) {
	s.grant, s.served, s.pending = 0, false, false
	s.phase = admitWait
	s.gained = s.local(m.now)
	m.leadProgress(s)
}

// lostLeadership revokes the lease and stops the lease loop; a move in
// progress ends (a transfer that made this server lose leadership
// succeeded; a graceful stop exits).
func (m *Model) lostLeadership(s *server) {
	s.grant, s.phase, s.pending = 0, idle, false
	s.t[tLead] = never
	switch s.move {
	case handover:
		m.exit(s)
	case transfer:
		m.endMove(s)
	}
}

// leadProgress moves the lease loop and a move on after entries applied.
func (m *Model) leadProgress(s *server) {
	if s.move != noMove {
		if s.moveRelease && s.applied >= s.releaseIdx {
			s.moveRelease = false
			m.beginTransfer(s)
		}
		return
	}
	switch s.phase {
	case admitWait:
		if !s.admitted {
			return
		}
		s.barrierIdx = m.append(s, entry{term: s.term})
		s.phase = barrier
		m.advanceCommit(s) // the only voter commits alone
	case barrier:
		if s.applied < s.barrierIdx {
			return
		}
		if s.handoff.Released() {
			m.note(s, "finds a certified release: serves without a wait")
			m.stats.add("served after a certified release")
			m.renewOrListen(s)
			return
		}
		var seen time.Time
		if s.seen != 0 {
			seen = time.Unix(0, s.seen)
		}
		end, wait := m.rules.Deadline(time.Unix(0, s.gained), seen, s.lease, s.marg, s.rec, s.recorded, true)
		s.phase = waiting
		s.t[tLead] = s.realAt(end.UnixNano())
		m.note(s, fmt.Sprintf("barrier done; waits %v (until %s)", wait, fmtTime(s.t[tLead])))
		m.hot(s, fStop, fTransfer, fIsolate, fCrash)
	case renewing:
		if !s.pending || s.applied < s.renewIdx {
			return
		}
		s.pending = false
		if s.stalledAt > s.renewT {
			// group.lead: a stall between listening and the grant grants
			// nothing; the leader listens again.
			s.listenSince = s.stalledAt
			m.note(s, "stalled while renewing: listens before serving")
			m.stats.add("listened after a stall")
			s.phase = listening
			s.t[tLead] = s.realAt(s.listenSince + int64(m.rules.ListenWindow()))
			return
		}
		lapsed := s.grant <= s.renewT
		if exp := s.renewT + int64(s.lease); exp > s.grant {
			s.grant = exp
		}
		if !s.served || lapsed {
			if !s.served {
				m.stats.add("leaderships that served")
			}
			s.served = true
			m.note(s, fmt.Sprintf("serves: lease until %s", fmtTime(s.realAt(s.grant))))
			m.hot(s, fIsolate, fPause, fCrash, fTransfer)
		}
		s.t[tLead] = max(s.nextRenew, m.now)
	}
}

// leadTimer: the wait ended, the listening ended, or the next renewal is
// due.
func (m *Model) leadTimer(s *server) {
	s.t[tLead] = never
	switch s.phase {
	case waiting, listening:
		m.renewOrListen(s)
	case renewing:
		if !s.pending {
			m.renewOrListen(s)
		}
	}
}

// renewOrListen renews, unless the listen rule holds the leader back:
// before its first grant of the leadership, and when its lease lapsed
// (group.lead's check at the top of each round), it listens to gossip for
// the listen window first, since its start or the lapse.
func (m *Model) renewOrListen(s *server) {
	now := s.local(m.now)
	if s.served && s.phase == renewing && now >= s.grant {
		s.listenSince = now
		m.note(s, "the lease lapsed: listens before serving again")
		m.stats.add("listened after a lapse")
	}
	if s.phase == renewing && s.served && now < s.grant {
		m.renew(s)
		return
	}
	if end := max(s.listenSince, s.stalledAt) + int64(m.rules.ListenWindow()); now < end {
		s.phase = listening
		s.t[tLead] = s.realAt(end)
		return
	}
	s.phase = renewing
	m.renew(s)
}

// renew submits a renewal, with a clock reading taken before; the lease
// it grants (that reading plus the lease) starts once it committed.
func (m *Model) renew(s *server) {
	s.renewT = s.local(m.now)
	s.nextRenew = m.now + s.dur(s.lease/3)
	s.renewIdx = m.append(s, entry{term: s.term, op: opRenewal, rec: leaseRecord(s)})
	s.pending = true
	m.advanceCommit(s)
}

// record has the leader record how far each server's log reaches (its
// applied index), as cluster's recordProgress does every few seconds.
func (m *Model) record(s *server) {
	s.t[tRecord] = m.now + s.dur(recordInterval)
	if s.phase != renewing {
		return
	}
	for _, i := range m.clusters[s.c].voters {
		v := m.servers[i]
		if (v == s || m.raftReach(s, v)) && v.applied > s.records[i] {
			m.append(s, entry{term: s.term, op: opRecord, who: i, at: v.applied})
		}
	}
	m.advanceCommit(s)
}

// startTransfer is TransferLeadership to target (group.TransferLeadership
// with the lease handoff): stop serving (Withhold), commit a release if
// this leader renewed in its term, then transfer.
func (m *Model) startTransfer(s *server, target int) {
	s.grant, s.phase, s.pending = 0, idle, false // Withhold
	s.t[tLead] = never
	s.move, s.target = transfer, target
	m.note(s, "transfers leadership to "+m.servers[target].id+": withholds")
	m.release(s)
}

// startHandover is Handover, the first step of a graceful stop: revoke,
// release if renewed in the term, transfer, then the process exits.
func (m *Model) startHandover(s *server) {
	s.grant, s.phase, s.pending = 0, idle, false
	s.t[tLead] = never
	if len(m.clusters[s.c].voters) == 1 {
		m.exit(s)
		return
	}
	s.move, s.target = handover, m.mostUpToDate(s)
	m.note(s, "hands over before stopping: revokes")
	m.release(s)
}

// release commits a release only if this leader renewed in its term (the
// writer's check; the readers' Handoff applies the same rule).
func (m *Model) release(s *server) {
	if !s.handoff.RenewedIn(s.term) {
		m.note(s, "writes no release: not renewed in its term")
		m.stats.add("releases not written")
		m.beginTransfer(s)
		return
	}
	s.releaseIdx = m.append(s, entry{term: s.term, op: opRelease})
	s.moveRelease = true
	s.t[tMove] = m.now + s.dur(applyTimeout)
	m.note(s, fmt.Sprintf("appends a release at %d", s.releaseIdx))
	m.stats.add("releases written")
	m.hot(s, fCrash, fStop, fIsolate, fPause)
	m.advanceCommit(s)
}

// beginTransfer starts raft's leadership transfer: it fails if the target
// has not won within an election timeout.
func (m *Model) beginTransfer(s *server) {
	s.transferSent = false
	s.t[tMove] = m.now + s.dur(heartbeatTimeout*time.Duration(s.slow))
	s.t[tSend] = m.now
}

// moveTimer: the release or the transfer timed out.
func (m *Model) moveTimer(s *server) {
	s.t[tMove] = never
	if s.moveRelease && s.move == handover {
		s.moveRelease = false // Handover goes on: the next leader waits the lease out
		m.beginTransfer(s)
		return
	}
	m.note(s, "the move timed out")
	if s.move == handover {
		m.exit(s)
		return
	}
	m.endMove(s)
}

// endMove ends a transfer: ResumeLead if this server still leads (a full
// lease procedure, its wait counted from now), then a stop that waited.
func (m *Model) endMove(s *server) {
	s.move, s.moveRelease, s.transferSent = noMove, false, false
	s.t[tMove] = never
	if s.role == leader {
		m.note(s, "resumes the lease loop")
		m.stats.add("resumed after a failed transfer")
		s.seen = s.local(m.now)
		s.phase, s.gained = admitWait, s.local(m.now)
		m.leadProgress(s)
	}
	if s.stopAfter {
		m.stop(s)
	}
}

// stop is a graceful stop (SIGTERM): a leader hands over first; a stop
// waits for a move in progress.
func (m *Model) stop(s *server) {
	s.stopping = true
	m.condDirty = true
	switch {
	case s.move != noMove:
		s.stopAfter = true
	case s.role == leader:
		m.startHandover(s)
	default:
		m.exit(s)
	}
}

// exit ends a graceful stop: the server leaves gossip, during which its
// raft still answers, and then stops.
func (m *Model) exit(s *server) {
	s.move, s.moveRelease = noMove, false
	s.t[tMove] = never
	s.t[tExit] = m.now + s.dur(time.Duration(m.rng.Int64N(int64(leaveTime))))
}

// mostUpToDate is the voter raft's LeadershipTransfer picks.
func (m *Model) mostUpToDate(s *server) int {
	best := -1
	for _, i := range m.clusters[s.c].voters {
		if i != s.idx && (best < 0 || s.match[i] > s.match[best]) {
			best = i
		}
	}
	return best
}

// leaseRecord is what a renewal carries: the writer's lease and margin.
func leaseRecord(s *server) lease.Record { return lease.Record{Lease: s.lease, Margin: s.marg} }
