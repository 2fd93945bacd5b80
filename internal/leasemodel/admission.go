package leasemodel

import (
	"fmt"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster/admit"
)

// Admission (cluster's vouching) and fencing by generation, with facts
// built from the model's state.

// ask is a server's admission pass: it asks every server it reaches,
// learns their generations (Fence), and applies admit.Decide's verdict.
func (m *Model) ask(s *server) {
	s.t[tAsk] = never
	if s.admitted || s.refused || s.fenced {
		return
	}
	c := m.clusters[s.c]
	f := admit.Facts{Joined: true, CanAsk: true, SinceGossip: time.Duration(s.local(m.now) - s.startLocal)}
	f.Self = admit.Self{ID: s.id, Generation: c.gen, HasState: true, LastIndex: s.lastIndex(), ConfigKnown: true, ContactMs: s.recContact / 1e6}
	for _, i := range c.voters {
		f.Self.Voters = append(f.Self.Voters, m.servers[i].id)
	}
	for _, o := range m.servers {
		if !m.reach(s, o) {
			continue
		}
		f.Members = append(f.Members, admit.Member{ID: o.id, Alive: true, HasState: true, Generation: m.clusters[o.c].gen, Admitted: o.admitted})
		f.Answers = append(f.Answers, m.answer(o, s))
	}
	for _, a := range f.Answers {
		m.learn(s, admit.Learned{Generation: a.Generation, Served: a.Admitted, From: a.By})
		if s.fenced {
			return
		}
		if a.Admitted && c.gen.Supersedes(a.Generation) {
			s.sourceSeen = m.now // cluster's noteSource
		}
		if a.Generation.Supersedes(c.gen) {
			s.newerSeen = m.now
		}
	}
	if s.sourceSeen != 0 {
		f.SourceSeen, f.SinceSource = true, time.Duration(m.now-s.sourceSeen)
	}
	if s.newerSeen != 0 {
		f.NewerSeen, f.SinceNewer = true, time.Duration(m.now-s.newerSeen)
	}
	v := m.rules.Decide(f)
	switch v.Outcome {
	case admit.Admit:
		s.admitted = true
		m.condDirty = true
		m.note(s, fmt.Sprintf("admitted (%s, %d answers)", v.Kind, v.Answers))
		m.stats.add("admitted by " + string(v.Kind))
		m.hot(s, fCrash, fStop)
		if s.role == leader {
			m.leadProgress(s)
		}
	case admit.Refuse:
		// cluster's admission decides again on every pass: a refusal
		// holds only while its cause does (the source that runs, the
		// sibling that is seen), except a fence, which is for good.
		if v.Kind != s.waiting {
			s.waiting = v.Kind
			m.note(s, "refused: "+string(v.Kind))
			m.stats.add("refused " + string(v.Kind))
		}
		if v.Kind == admit.Superseded {
			s.refused = true
			m.condDirty = true
			return
		}
		s.t[tAsk] = m.now + s.dur(askInterval)
	default:
		if v.Kind != s.waiting {
			s.waiting = v.Kind
			m.note(s, fmt.Sprintf("not admitted yet: %s (%d servers reached)", v.Kind, len(f.Answers)))
		}
		s.t[tAsk] = m.now + s.dur(askInterval)
	}
}

// answer is o's vouch answer to s (cluster's Node.Vouch).
func (m *Model) answer(o, s *server) admit.Answer {
	c := m.clusters[o.c]
	a := admit.Answer{By: o.id, Generation: c.gen, Admitted: o.admitted, ContactMs: m.contactOf(o) / 1e6, LastIndex: o.lastIndex()}
	a.Authoritative = o.role == leader && m.holds(o) && !o.paused
	for _, i := range c.voters {
		a.Voters = append(a.Voters, m.servers[i].id)
		if i == s.idx {
			a.InConfiguration, a.Voter = true, true
		}
	}
	if o.c != s.c {
		return a
	}
	rec, seen := o.records[s.idx]
	if !a.Authoritative {
		// Records in its log beyond what it applied count too.
		for _, e := range o.log[o.applied:] {
			if e.op == opRecord && e.who == s.idx {
				rec, seen = max(rec, e.at), true
			}
		}
	}
	if seen {
		a.Seen, a.RecordedIndex = true, rec
		a.RecordedTerm, a.TermHere = o.termAt(rec), s.termAt(rec)
	}
	return a
}

// learn applies admit.Fence to a generation s learned of.
func (m *Model) learn(s *server, l admit.Learned) {
	if s.fenced || !l.Generation.Known() {
		return
	}
	mine := m.clusters[s.c].gen
	if l.Generation.Supersedes(mine) && l.Served && !s.learnedNewer {
		s.learnedNewer = true
		m.note(s, "learns of "+l.Generation.String()+" from "+l.From)
	}
	if v := m.rules.Fence(mine, s.admitted, l); v.Outcome == admit.Refuse {
		m.note(s, "fenced for good by "+l.Generation.String()+" (from "+l.From+")")
		m.stats.add("fenced")
		s.fenced, s.fencedBy = true, l
		s.fencedBy.From = s.id
		s.admitted, s.refused = false, true
		s.grant, s.phase, s.pending = 0, idle, false
		s.t[tLead], s.t[tAsk] = never, never
		m.condDirty = true
		if s.move == handover {
			m.exit(s) // its gate closed: the stop goes on without a transfer
		}
		s.move, s.moveRelease = noMove, false
	}
}

// gossip is a gossip round: s and every server it reaches learn what the
// other publishes (its generation and whether it is admitted, and what
// fenced it).
func (m *Model) gossip(s *server) {
	s.t[tGossip] = m.now + s.dur(gossipInterval)
	for _, o := range m.servers {
		if m.reach(s, o) {
			m.exchange(s, o)
			m.exchange(o, s)
		}
	}
}

// exchange: s learns what o publishes.
func (m *Model) exchange(s, o *server) {
	m.learn(s, m.learnedOf(o))
	if o.fenced {
		m.learn(s, o.fencedBy)
	}
}

// restore makes a new cluster from a backup of cluster c: one new server,
// the next generation of the lineage, started at once.
func (m *Model) restore(c int) *server {
	src := m.clusters[c]
	n := len(m.clusters)
	m.clusters = append(m.clusters, cluster{gen: seqd.Generation{Lineage: src.gen.Lineage, Number: src.gen.Number + 1, Cluster: fmt.Sprintf("R%d", n)}})
	m.lastServed = append(m.lastServed, m.now)
	m.condSince = append(m.condSince, never)
	m.cond = append(m.cond, false)
	r := m.addServer(fmt.Sprintf("r%d", n), n, m.rng)
	from := m.servers[src.voters[0]]
	r.rec, r.recorded = from.rec, from.recorded
	m.note(r, "restored from "+src.gen.String()+" as "+m.clusters[n].gen.String())
	m.stats.add("restores")
	return r
}
