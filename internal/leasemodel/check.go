package leasemodel

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/seqd/seqd/cluster/admit"
)

// The properties, checked after every step.
const (
	// Overlap: two servers of one lineage hold a lease at the same real
	// instant (each lease counted through its server's clock rate).
	Overlap = "overlap"
	// Fenced: a server that learned of a generation superseding its own
	// holds a lease.
	Fenced = "fenced-serves"
	// Unavailable: a majority of a current cluster's voters ran, unpaused,
	// mutually connected, on their own data, for longer than the bound
	// without any server of the cluster holding a lease.
	Unavailable = "unavailable"
)

// Violation is a property broken at real time At.
type Violation struct {
	Property string
	At       int64
	Detail   string
}

func (v *Violation) String() string {
	return fmt.Sprintf("%s at %s: %s", v.Property, fmtTime(v.At), v.Detail)
}

// maxLease is the longest lease a server is given (see addServer); maxSlow
// the slowest raft timers.
const (
	maxLease = 1200 * time.Millisecond
	maxSlow  = 2
)

// availabilityBound is how long a cluster may go without a lease while a
// majority of its voters can serve. Once such a majority Q holds: a
// member not yet admitted asks again within askInterval and is admitted
// by Q's answers; a leader outside Q stops being heard within a
// heartbeat timeout, and the most up-to-date member of Q (Q holds every
// committed entry) campaigns within two, slowed timers counted: four of
// those leave room for a vote lost to a concurrent candidate, a transfer
// that timed out, or a leader whose quorum check runs late; then the
// barrier commits within a heartbeat and the lease wait is at most the
// longest lease plus its margin, and one more second covers the
// renewal's commit. Every duration is counted on a clock that may run
// 4% slow. The only voter of a restored cluster first waits
// admit.SoloWait.
func availabilityBound(voters int) int64 {
	b := askInterval + 4*2*heartbeatTimeout*maxSlow + maxLease + maxLease/10 + time.Second
	if voters == 1 {
		b += admit.SoloWait
	}
	return int64(b) * 1000 / (1000 - driftPerMille)
}

// check checks every property now; it records the first violation.
func (m *Model) check() {
	var holders []*server
	for _, s := range m.servers {
		if m.holds(s) {
			holders = append(holders, s)
			if s.learnedNewer {
				m.violate(Fenced, fmt.Sprintf("%s (%s) holds a lease until %s after it learned of a newer generation",
					s.id, m.clusters[s.c].gen, fmtTime(s.realAt(s.grant))))
			}
		}
		if s.up && s.grant != 0 {
			m.lastServed[s.c] = max(m.lastServed[s.c], min(m.now, s.realAt(s.grant)))
		}
	}
	for i, a := range holders {
		for _, b := range holders[i+1:] {
			// A paused server's lease counts against its own cluster
			// only: it answers nothing while paused, and no server of
			// another generation can hear of it then (DESIGN §8; the
			// clients' generation fence orders the two).
			if a.c != b.c && (a.paused || b.paused) {
				continue
			}
			m.violate(Overlap, fmt.Sprintf("%s and %s hold leases at once", m.leaseOf(a), m.leaseOf(b)))
		}
	}
	if m.condDirty {
		m.condDirty = false
		for c := range m.clusters {
			m.cond[c] = m.required(c) && m.majorityCanServe(c)
		}
	}
	for c := range m.clusters {
		switch {
		case !m.cond[c]:
			m.condSince[c] = never
		case m.condSince[c] == never:
			m.condSince[c] = m.now
		case m.now-max(m.condSince[c], m.lastServed[c]) > availabilityBound(len(m.clusters[c].voters)):
			m.violate(Unavailable, fmt.Sprintf("a majority of %s's voters could serve since %s, and no server held a lease since %s",
				m.clusters[c].gen, fmtTime(m.condSince[c]), fmtTime(max(m.condSince[c], m.lastServed[c]))))
		}
	}
}

func (m *Model) leaseOf(s *server) string {
	return fmt.Sprintf("%s (%s, term %d) until %s", s.id, m.clusters[s.c].gen, s.term, fmtTime(s.realAt(s.grant)))
}

// required reports whether cluster c must be available: no other cluster
// of the lineage has its generation number or a higher one (a newer
// generation supersedes it, and of two siblings either may be refused),
// and no server of an older generation runs unfenced (the restore's
// procedure stops them first; while one runs, a restore refuses:
// source-running).
func (m *Model) required(c int) bool {
	for o := range m.clusters {
		if o != c && m.clusters[o].gen.Number >= m.clusters[c].gen.Number {
			return false
		}
	}
	for _, s := range m.servers {
		if m.clusters[s.c].gen.Number < m.clusters[c].gen.Number && s.up && !s.fenced {
			return false
		}
	}
	return true
}

// majorityCanServe reports whether a majority of c's voters run unpaused,
// not stopping, not fenced, and reach each other: raft's own condition for
// electing a leader, which admission must keep (issue 25's availability
// rule). Admission without a leader needs answers from voters making a
// majority with the asker, which such a majority gives every member; so
// the checker finds any rule that needs more (the old rule's mutant) and a
// loss of liveness after admission. The only voter of its configuration
// (a restored cluster's first server) is counted once admitted: before,
// it waits by the restore's own rules (admit.SoloWait, and
// admit.SourceQuiet after it saw the cluster it replaces), not raft's.
func (m *Model) majorityCanServe(c int) bool {
	voters := m.clusters[c].voters
	var ok []*server
	for _, i := range voters {
		if s := m.servers[i]; s.up && !s.paused && !s.stopping && !s.fenced && (len(voters) > 1 || s.admitted) {
			ok = append(ok, s)
		}
	}
	need := len(voters)/2 + 1
	for set := uint(0); set < 1<<len(ok); set++ {
		if bits.OnesCount(set) < need {
			continue
		}
		connected := true
		for i := 0; i < len(ok) && connected; i++ {
			for j := i + 1; j < len(ok) && connected; j++ {
				if set&(1<<i) != 0 && set&(1<<j) != 0 && m.cut[ok[i].idx][ok[j].idx] {
					connected = false
				}
			}
		}
		if connected {
			return true
		}
	}
	return false
}

func (m *Model) violate(property, detail string) {
	if m.violation == nil {
		m.violation = &Violation{Property: property, At: m.now, Detail: detail}
	}
}

// fmtTime formats a real time (ns) as seconds.
func fmtTime(t int64) string {
	if t == never {
		return "never"
	}
	return fmt.Sprintf("%.6fs", float64(t)/1e9)
}
