package leasemodel

import (
	"strings"
	"testing"
	"time"
)

// The issues' cases, step by step: each runs the model without random
// faults, applies the case's faults at its moments, and checks the
// properties after every step, with the real rules and with the mutant
// that reverts the rule the case is about.

// scenario is a run of 3 servers from seed with no random faults, traced.
func scenario(rules Rules, seed uint64) *Model {
	return scenarioWith(Config{Rules: rules}, seed)
}

func scenarioWith(cfg Config, seed uint64) *Model {
	cfg.RunLength = time.Minute
	m := newRun(cfg, seed&^1, []fault{})
	m.trace = &strings.Builder{}
	m.describe()
	return m
}

func (m *Model) at(d time.Duration) { m.runUntil(int64(d)) }

// serving is the server of cluster c that holds a lease, or nil.
func (m *Model) serving(c int) *server {
	for _, s := range m.servers {
		if s.c == c && m.holds(s) {
			return s
		}
	}
	return nil
}

// servingAt runs until d and returns the server of the first cluster
// that holds a lease then.
func (m *Model) servingAt(t *testing.T, d time.Duration) *server {
	t.Helper()
	m.at(d)
	s := m.serving(0)
	if s == nil {
		t.Fatalf("nobody serves at %v\n%s", d, m.trace)
	}
	return s
}

// until takes steps until cond holds (at most a minute of real time).
func (m *Model) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for m.now < int64(time.Minute) && m.violation == nil && !cond() {
		m.runUntil(m.now + int64(time.Millisecond))
	}
	if !cond() {
		t.Fatalf("never %s (%v)\n%s", what, m.violation, m.trace)
	}
}

// withMutant is a scenario's two runs: the real rules keep every
// property, and mutant breaks want.
func withMutant(mutant Rules, want string) []struct {
	rules Rules
	want  string
} {
	return []struct {
		rules Rules
		want  string
	}{{Real{}, ""}, {mutant, want}}
}

func (m *Model) fault(kind faultKind, a, b int) { m.applyFault(fault{kind: kind, a: a, b: b}) }

// The fencing issue's first case: the leader is cut off and its raft
// notices late (slower raft timers); a new leader is elected and, before
// it served, stops gracefully (a rolling restart): it releases and
// transfers, and the next leader must not take the release as the end of
// the cut-off leader's lease.
func TestScenarioStopOfLeaderThatNeverServed(t *testing.T) {
	for _, c := range withMutant(anyRelease{}, Overlap) {
		m := scenario(c.rules, 2)
		old := m.servingAt(t, 4*time.Second)
		for _, s := range m.servers {
			if s.slow = 1; s != old {
				m.resetElection(s)
			}
		}
		old.slow = 6 // its raft notices the cut late
		m.fault(fIsolate, old.idx, 0)
		m.until(t, "a new leader", func() bool { return m.leaderOf(0, old.idx) >= 0 })
		m.fault(fStop, m.leaderOf(0, old.idx), 0)
		m.at(10 * time.Second)
		checkScenario(t, m, c.want)
	}
}

// The admission issue's outage: a server restarts, and the leader crashes
// before the restarted server asked anyone. The two that run are a
// majority and must serve again within the bound.
func TestScenarioRestartMeetsCrash(t *testing.T) {
	for _, c := range withMutant(oldAvailability{}, Unavailable) {
		m := scenario(c.rules, 4)
		l := m.servingAt(t, 4*time.Second)
		other := m.servers[(l.idx+1)%3]
		m.fault(fCrash, other.idx, 0)
		m.at(5 * time.Second)
		m.fault(fRestart, other.idx, 0)
		m.fault(fCrash, l.idx, 0)
		m.at(30 * time.Second)
		if c.want == "" && m.serving(0) == nil {
			t.Errorf("nobody serves at 30s\n%s", m.trace)
		}
		checkScenario(t, m, c.want)
	}
}

// The fencing issue's second case: the site goes down, the operator
// restores its backup on a new server, which serves; the site's servers
// come back with their data and must never serve again.
func TestScenarioRestoredSourceReturns(t *testing.T) {
	for _, c := range withMutant(noFence{}, Fenced) {
		m := scenario(c.rules, 6)
		m.at(4 * time.Second)
		m.fault(fOutage, 0, 0)
		m.at(5 * time.Second)
		m.fault(fRestore, 0, 0)
		m.until(t, "the restore serves", func() bool { return m.serving(1) != nil })
		for _, i := range m.clusters[0].voters {
			m.fault(fRestart, i, 0)
		}
		m.at(30 * time.Second)
		if c.want == "" {
			for _, i := range m.clusters[0].voters {
				if !m.servers[i].fenced {
					t.Errorf("%s is not fenced\n%s", m.servers[i].id, m.trace)
				}
			}
		}
		checkScenario(t, m, c.want)
	}
}

// A restore while the source's servers are paused (a frozen site, a VM
// snapshot) rather than down: they resume with a quorum, and their lease
// loop may act before gossip tells them of the restore (their next gossip
// round comes 100 ms after they resume). The listen rule holds their leader
// back (its lease lapsed while it was paused), gossip reaches them, and
// they are fenced. Without it (no listen window) the checker found, with
// the real rules otherwise:
//
//	 2.622073s  n1  serves: lease until 3.622073s
//	 4.000000s  FAULT pause n1, n2, n3
//	 5.000000s  r1  restored from L/0/S as L/1/R1
//	10.327149s  r1  admitted (solo, 0 answers)
//	10.327149s  r1  serves: lease until 11.096380s
//	10.328000s  FAULT resume n1, n2, n3 (their next gossip round at 10.428s)
//	10.328000s  n1  serves: lease until 11.328000s
//	VIOLATION overlap at 10.328000s: n1 (L/0/S, term 2) until 11.328000s and
//	          r1 (L/1/R1, term 2) until 11.096380s hold leases at once
func TestScenarioRestoreWhileSourcePaused(t *testing.T) {
	run := func(rules Rules) *Model {
		m := scenarioWith(Config{Rules: rules}, 6)
		m.at(4 * time.Second)
		for _, i := range m.clusters[0].voters {
			m.fault(fPause, i, 0)
		}
		m.at(5 * time.Second)
		m.fault(fRestore, 0, 0)
		m.until(t, "the restore serves", func() bool { return m.serving(1) != nil })
		for _, i := range m.clusters[0].voters {
			m.servers[i].t[tGossip] = m.now + int64(100*time.Millisecond) // the next gossip round
			m.fault(fResume, i, 0)
		}
		m.at(30 * time.Second)
		return m
	}
	checkScenario(t, run(Real{}), "")
	checkScenario(t, run(noListen{}), Overlap)
}

func checkScenario(t *testing.T, m *Model, want string) {
	t.Helper()
	switch {
	case want == "" && m.violation != nil:
		t.Errorf("%v\n%s", m.violation, m.trace)
	case want != "" && (m.violation == nil || m.violation.Property != want):
		t.Errorf("%T: got %v, want %s\n%s", m.rules, m.violation, want, m.trace)
	default:
		t.Logf("%T: %v\n%s", m.rules, m.violation, m.trace)
	}
}
