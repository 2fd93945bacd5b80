package leasemodel

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Faults are what the environment does to the servers: crashes and
// restarts, graceful stops, pauses, cut and healed links, planned
// transfers, site outages and restores. They come at random times, and
// more often right after the protocol's delicate moments (an election,
// the start of a wait, a release, a transfer, a restart, an admission):
// hot marks a server and schedules a fault soon, aimed at it half the
// time.

type faultKind uint8

const (
	fCrash faultKind = iota
	fRestart
	fStop
	fPause
	fResume
	fCut
	fHeal
	fIsolate
	fHealAll
	fTransfer
	fOutage
	fRestore
	numFaults
)

var faultNames = [numFaults]string{"crash", "restart", "stop", "pause", "resume", "cut", "heal", "isolate", "heal all", "transfer", "site outage", "restore"}

// weights of the fault kinds when one is drawn.
var faultWeights = [numFaults]int{fCrash: 3, fRestart: 6, fStop: 3, fPause: 2, fResume: 6, fCut: 2, fHeal: 3, fIsolate: 3, fHealAll: 1, fTransfer: 3, fOutage: 1, fRestore: 6}

// fault is one fault, at real time at, on servers a and b (or cluster a).
type fault struct {
	at   int64
	kind faultKind
	a, b int
}

func (f fault) String(m *Model) string {
	name := func(i int) string {
		if i >= 0 && i < len(m.servers) {
			return m.servers[i].id
		}
		return fmt.Sprint(i)
	}
	switch f.kind {
	case fCut, fHeal:
		return fmt.Sprintf("%s %s-%s", faultNames[f.kind], name(f.a), name(f.b))
	case fTransfer:
		return fmt.Sprintf("transfer %s -> %s", name(f.a), name(f.b))
	case fOutage, fRestore:
		return fmt.Sprintf("%s of %s", faultNames[f.kind], m.clusters[f.a].gen.String())
	case fHealAll:
		return "heal all"
	}
	return faultNames[f.kind] + " " + name(f.a)
}

// faultGen draws faults (exploring) or replays a script (shrinking).
type faultGen struct {
	rng      *rand.Rand
	next     int64 // the next regular fault
	soon     int64 // a fault after a hot moment
	hotIdx   int
	hotKinds []faultKind
	gap      int64   // the run's mean time between faults: calm runs let outages show
	script   []fault // replayed when non-nil
	pos      int
	done     []fault // what was applied, in order
	restores int
}

const maxRestores = 2

func (g *faultGen) at() int64 {
	if g.script != nil {
		if g.pos < len(g.script) {
			return g.script[g.pos].at
		}
		return never
	}
	return min(g.next, g.soon)
}

// hot notes a delicate moment of server s: half the time a fault of one
// of kinds follows soon, aimed at s or at another server that believes it
// leads the same cluster (an earlier leader, cut off: the pattern of the
// fencing issue; or the leader a restarted server needs).
func (m *Model) hot(s *server, kinds ...faultKind) {
	g := m.faults
	if g == nil || g.script != nil || g.rng.IntN(2) == 0 {
		return
	}
	at := m.now + g.rng.Int64N(int64(300*time.Millisecond))
	if at < g.soon || g.soon <= m.now {
		g.soon, g.hotIdx, g.hotKinds = at, s.idx, kinds
	}
}

// injectFault applies the fault due now.
func (m *Model) injectFault() {
	g := m.faults
	if g.script != nil {
		f := g.script[g.pos]
		g.pos++
		if m.applicable(f) {
			m.applyFault(f)
		}
		return
	}
	hot := -1
	if m.now >= g.soon {
		hot, g.soon = g.hotIdx, never
	} else {
		g.next = m.now + g.rng.Int64N(2*g.gap)
	}
	for range 20 {
		f := m.drawFault(hot)
		if m.applicable(f) {
			m.applyFault(f)
			return
		}
	}
}

// drawFault draws a fault, aimed at server hot (or the cluster's leader)
// when hot >= 0.
func (m *Model) drawFault(hot int) fault {
	g := m.faults
	total := 0
	for _, w := range faultWeights {
		total += w
	}
	r := g.rng.IntN(total)
	kind := faultKind(0)
	for k, w := range faultWeights {
		if r < w {
			kind = faultKind(k)
			break
		}
		r -= w
	}
	n := len(m.servers)
	if hot >= 0 && g.rng.IntN(3) > 0 {
		kind = g.hotKinds[g.rng.IntN(len(g.hotKinds))]
	}
	f := fault{at: m.now, kind: kind, a: g.rng.IntN(n), b: g.rng.IntN(n)}
	if hot >= 0 && g.rng.IntN(4) > 0 {
		f.a = hot
		if g.rng.IntN(2) == 0 {
			if l := m.leaderOf(m.servers[hot].c, hot); l >= 0 {
				f.a = l
			}
		}
	}
	switch kind {
	case fOutage:
		f.a, f.b = m.servers[f.a].c, g.rng.IntN(2) // b: 1 stops gracefully, 0 crashes
	case fRestore:
		f.a = m.servers[f.a].c
	case fTransfer:
		f.b = -1
	}
	return f
}

// leaderOf is a server of cluster c other than not that believes it leads.
func (m *Model) leaderOf(c, not int) int {
	for _, s := range m.servers {
		if s.c == c && s.idx != not && s.up && s.role == leader {
			return s.idx
		}
	}
	return -1
}

func (m *Model) applicable(f fault) bool {
	switch f.kind {
	case fOutage, fRestore:
		if f.a >= len(m.clusters) {
			return false // a replay without the restore that made it
		}
	case fHealAll:
	default:
		if f.a < 0 || f.a >= len(m.servers) {
			return false
		}
	}
	switch f.kind {
	case fCrash, fPause:
		return m.servers[f.a].up && !m.servers[f.a].paused
	case fStop:
		return m.servers[f.a].up && !m.servers[f.a].paused && !m.servers[f.a].stopping
	case fRestart:
		return !m.servers[f.a].up
	case fResume:
		return m.servers[f.a].paused
	case fCut, fHeal:
		// Links inside one cluster only: the clusters of a lineage keep in
		// gossip contact (see DESIGN.md §8).
		if f.b < 0 || f.b >= len(m.servers) || f.a == f.b || m.servers[f.a].c != m.servers[f.b].c {
			return false
		}
		return m.cut[f.a][f.b] == (f.kind == fHeal)
	case fIsolate:
		return len(m.clusters[m.servers[f.a].c].voters) > 1
	case fTransfer:
		s := m.servers[f.a]
		return s.up && !s.paused && s.role == leader && s.move == noMove && !s.stopping && len(m.clusters[s.c].voters) > 1
	case fOutage:
		up := 0
		for _, i := range m.clusters[f.a].voters {
			if m.servers[i].up {
				up++
			}
		}
		return up >= 2
	case fRestore:
		// The newest generation only: two restores of one backup (siblings)
		// that never meet both serve, whatever a server can check (the
		// clients' generation check is their fence), so they are not
		// modelled.
		if m.faults.restores >= maxRestores || len(m.servers) >= maxServers || !m.required(f.a) {
			return false
		}
		for _, i := range m.clusters[f.a].voters {
			if s := m.servers[i]; s.up && !s.paused {
				return false // the operator restores only while the source is down
			}
		}
		return true
	}
	return true
}

func (m *Model) applyFault(f fault) {
	f.at = m.now
	m.condDirty = true
	var s *server
	if f.a >= 0 && f.a < len(m.servers) {
		s = m.servers[f.a]
	}
	switch f.kind {
	case fCrash:
		m.down(s)
	case fRestart:
		m.start(s)
		m.hot(s, fCrash, fStop, fPause)
	case fStop:
		m.stop(s)
	case fPause:
		s.paused = true
	case fResume:
		s.paused = false
		s.stalledAt = s.local(m.now)
	case fCut, fHeal:
		m.cut[f.a][f.b] = f.kind == fCut
		m.cut[f.b][f.a] = f.kind == fCut
	case fIsolate:
		for _, i := range m.clusters[s.c].voters {
			m.cut[f.a][i], m.cut[i][f.a] = i != f.a, i != f.a
		}
	case fHealAll:
		m.cut = [maxServers][maxServers]bool{}
	case fTransfer:
		if f.b < 0 {
			f.b = m.mostUpToDate(s)
		}
		m.startTransfer(s, f.b)
	case fOutage:
		stop := f.b == 1
		for _, i := range m.clusters[f.a].voters {
			if v := m.servers[i]; v.up {
				if stop {
					m.stop(v)
				} else {
					m.down(v)
				}
			}
		}
	case fRestore:
		m.faults.restores++
		m.restore(f.a)
	}
	m.faults.done = append(m.faults.done, f)
	m.noteFault(f)
}
