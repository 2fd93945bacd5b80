package leasemodel

import (
	"fmt"
	"time"
)

// Raft, simplified (DESIGN.md §8, "The model checker"): an exchange
// (AppendEntries and its answer, RequestVote and its answer, TimeoutNow)
// happens at one instant, or not at all when the link is cut, either side
// is down or paused, or either side's raft gate is closed (not admitted,
// fenced); a request or its answer may be lost (the run's loss rate). So
// no message is delayed or reordered; what remains is what
// the lease rests on: terms, votes, logs, commit by majority, the
// up-to-date check, pre-vote, leader stickiness, step-down without quorum
// contact, and leadership transfer. There are no snapshots and no
// configuration changes.

// reach reports whether a and b can exchange anything (gossip, vouch
// answers): both run unpaused and the link between them is up.
func (m *Model) reach(a, b *server) bool {
	return a != b && a.up && b.up && !a.paused && !b.paused && !m.cut[a.idx][b.idx]
}

// raftReach reports whether a and b can exchange raft messages: reach,
// one group, and both gates open.
func (m *Model) raftReach(a, b *server) bool {
	return m.reach(a, b) && a.c == b.c && a.admitted && b.admitted
}

func (m *Model) majority(s *server) int { return len(m.clusters[s.c].voters)/2 + 1 }

// upToDate reports whether candidate c's log is at least as up to date as v's.
func upToDate(c, v *server) bool {
	ct, vt := c.termAt(c.lastIndex()), v.termAt(v.lastIndex())
	return ct > vt || (ct == vt && c.lastIndex() >= v.lastIndex())
}

// electionTimeout: a follower heard no leader, or a candidate's election
// did not end. It becomes a candidate and campaigns.
func (m *Model) electionTimeout(s *server) {
	if s.role == leader {
		s.t[tElection] = never
		return
	}
	s.role, s.leader = candidate, -1
	m.campaign(s, false)
}

// campaign runs an election; a transfer's target skips pre-vote and is
// not refused for the voters' known leader.
func (m *Model) campaign(s *server, transferred bool) {
	m.resetElection(s)
	voters := m.clusters[s.c].voters
	if !transferred {
		pre := 1
		for _, i := range voters {
			if v := m.servers[i]; m.raftReach(s, v) && m.grants(v, s, s.term+1, false) {
				pre++
			}
		}
		if pre < m.majority(s) {
			return
		}
	}
	s.term++
	s.vote = s.idx
	votes := 1
	for _, i := range voters {
		if v := m.servers[i]; m.raftReach(s, v) && !m.lost() && m.requestVote(v, s, transferred) && !m.lost() {
			votes++ // neither the request nor the answer was lost
		}
		if s.role != candidate {
			return // a voter's higher term made it a follower
		}
	}
	if votes >= m.majority(s) {
		m.becomeLeader(s)
	}
}

// grants reports whether voter v would vote for c in term (pre-vote: v's
// state does not change).
func (m *Model) grants(v, c *server, term uint64, transferred bool) bool {
	if !transferred && v.leader >= 0 && v.leader != c.idx {
		return false // leader stickiness
	}
	return term >= v.term && upToDate(c, v)
}

// requestVote is RequestVote from candidate c to voter v.
func (m *Model) requestVote(v, c *server, transferred bool) bool {
	if !transferred && v.leader >= 0 && v.leader != c.idx {
		return false
	}
	if c.term < v.term {
		m.stepDown(c, v.term)
		return false
	}
	if c.term > v.term {
		m.stepDown(v, c.term)
	}
	if (v.vote >= 0 && v.vote != c.idx) || !upToDate(c, v) {
		return false
	}
	v.vote = c.idx
	m.resetElection(v)
	return true
}

func (m *Model) becomeLeader(s *server) {
	s.role, s.leader = leader, s.idx
	s.t[tElection] = never
	for _, i := range m.clusters[s.c].voters {
		s.match[i], s.acked[i] = 0, m.now
	}
	m.append(s, entry{term: s.term}) // raft's no-op
	s.t[tCheck] = m.now + s.dur(leaderLeaseTime*time.Duration(s.slow))
	s.t[tRecord] = m.now + s.dur(recordInterval)
	m.note(s, fmt.Sprintf("elected leader in term %d", s.term))
	m.stats.add("elections")
	m.hot(s, fStop, fCrash, fTransfer, fIsolate, fPause)
	m.startLead(s)
}

// stepDown makes s a follower, in term if that is higher. A leader
// revokes its lease at once (group.leadership).
func (m *Model) stepDown(s *server, term uint64) {
	if s.role == leader {
		s.contact = m.now // a leader that steps down heard from a leader (itself) until now
	}
	if term > s.term {
		s.term, s.vote = term, -1
	}
	was := s.role == leader
	s.role, s.leader = follower, -1
	s.t[tSend], s.t[tCheck], s.t[tRecord] = never, never, never
	if s.t[tElection] == never {
		m.resetElection(s)
	}
	if was {
		m.note(s, fmt.Sprintf("stepped down (term %d)", s.term))
		m.lostLeadership(s)
	}
}

// append adds an entry to a leader's log and has it sent at once.
func (m *Model) append(s *server, e entry) uint64 {
	s.log = append(s.log, e)
	if e.op == opRenewal {
		s.seen = s.local(m.now)
	}
	s.match[s.idx] = s.lastIndex()
	s.t[tSend] = m.now
	return s.lastIndex()
}

// send replicates a leader's log to every follower it reaches (also its
// heartbeat), and sends TimeoutNow to a transfer's target once it is up
// to date.
func (m *Model) send(s *server) {
	s.t[tSend] = m.now + s.dur(sendInterval*time.Duration(s.slow))
	for _, i := range m.clusters[s.c].voters {
		if f := m.servers[i]; m.raftReach(s, f) && !m.lost() {
			m.appendEntries(s, f)
			if s.role != leader {
				return
			}
		}
	}
	m.advanceCommit(s)
	if s.role == leader && s.move != noMove && !s.moveRelease && !s.transferSent {
		if t := m.servers[s.target]; m.raftReach(s, t) && t.lastIndex() == s.lastIndex() {
			s.transferSent = true
			m.note(s, "sends TimeoutNow to "+t.id)
			m.stats.add("transfers")
			m.hot(s, fCrash, fIsolate, fPause, fStop)
			t.role, t.leader = candidate, -1
			m.campaign(t, true)
		}
	}
}

// appendEntries is AppendEntries from leader l to f, with its answer.
func (m *Model) appendEntries(l, f *server) {
	if f.term > l.term {
		m.stepDown(l, f.term)
		return
	}
	if f.term < l.term || f.role != follower {
		m.stepDown(f, l.term)
	}
	f.leader = l.idx
	f.contact = m.now
	m.resetElection(f)
	// The last index at which the logs agree (log matching: an equal term
	// at an index means equal prefixes); entries after it that differ are
	// replaced, and entries beyond the leader's are kept.
	j := min(f.lastIndex(), l.lastIndex())
	for j > 0 && f.log[j-1].term != l.log[j-1].term {
		j--
	}
	if j < l.lastIndex() {
		f.log = append(f.log[:j], l.log[j:]...)
		for _, e := range l.log[j:] {
			if e.op == opRenewal {
				f.seen = f.local(m.now) // group's diskStore notes a stored renewal
				break
			}
		}
	}
	if c := min(l.commit, l.lastIndex()); c > f.commit {
		f.commit = c
		m.apply(f)
	}
	if !m.lost() { // the answer
		l.match[f.idx], l.acked[f.idx] = l.lastIndex(), m.now
	}
}

// lost reports whether a message is lost (the run's loss rate).
func (m *Model) lost() bool { return m.loss > 0 && m.rng.IntN(1000) < m.loss }

// advanceCommit commits what a majority stores, of the leader's term.
func (m *Model) advanceCommit(s *server) {
	for n := s.lastIndex(); n > s.commit; n-- {
		if s.log[n-1].term != s.term {
			break
		}
		count := 0
		for _, i := range m.clusters[s.c].voters {
			if s.match[i] >= n {
				count++
			}
		}
		if count >= m.majority(s) {
			s.commit = n
			m.apply(s)
			return
		}
	}
}

// apply feeds committed entries, in log order, to the state machine: the
// lease entries to its Handoff, as fsm does.
func (m *Model) apply(s *server) {
	for s.applied < s.commit {
		e := s.log[s.applied]
		s.applied++
		switch e.op {
		case opRenewal:
			s.handoff.Renewal(e.term)
			s.rec, s.recorded = e.rec, true
		case opRelease:
			s.handoff.Release(e.term)
		case opRecord:
			s.records[e.who] = max(s.records[e.who], e.at)
		}
	}
	if s.role == leader {
		m.leadProgress(s)
	}
}

// checkQuorum: a leader that has not heard from a majority within
// LeaderLeaseTimeout steps down.
func (m *Model) checkQuorum(s *server) {
	s.t[tCheck] = m.now + s.dur(leaderLeaseTime*time.Duration(s.slow))
	count := 0
	for _, i := range m.clusters[s.c].voters {
		if i == s.idx || m.now-s.acked[i] <= s.dur(leaderLeaseTime*time.Duration(s.slow)) {
			count++
		}
	}
	if count < m.majority(s) {
		m.stepDown(s, s.term)
	}
}
