package leasemodel

import (
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster/admit"
	"github.com/seqd/seqd/lease"
)

// anyRelease is lease.Handoff without the term rule: a release certifies
// whatever its term, and every leader may write one (the fencing issue's
// first bug).
type anyRelease struct{ Real }

func (anyRelease) NewHandoff() Handoff { return &termless{} }

type termless struct{ released bool }

func (h *termless) Renewal(uint64)        { h.released = false }
func (h *termless) Release(uint64)        { h.released = true }
func (h *termless) Released() bool        { return h.released }
func (h *termless) RenewedIn(uint64) bool { return true }

// noFence removes every generation check: Fence never fences, and
// admission ignores generations (a restore's source that runs, a restore
// of this server's cluster): a returning source of a restore takes part
// again.
type noFence struct{ Real }

func (noFence) Fence(seqd.Generation, bool, admit.Learned) admit.Verdict {
	return admit.Verdict{Outcome: admit.Admit}
}

func (noFence) Decide(f admit.Facts) admit.Verdict {
	f.SourceSeen, f.NewerSeen = false, false
	blind := func(g seqd.Generation) seqd.Generation { g.Lineage = ""; return g }
	f.Self.Generation = blind(f.Self.Generation)
	for i := range f.Answers {
		f.Answers[i].Generation = blind(f.Answers[i].Generation)
	}
	for i := range f.Members {
		f.Members[i].Generation = blind(f.Members[i].Generation)
	}
	return admit.Decide(f)
}

// oldAvailability is the rule before issue 25: without a leader, enough
// voters to include every record's holders must answer (N - majority + 1
// others: both others of 3), so a restart that meets a crash of another
// voter, or servers that stop one by one without the last, wait for the
// dead one.
type oldAvailability struct{ Real }

func (oldAvailability) Decide(f admit.Facts) admit.Verdict {
	v := admit.Decide(f)
	n := len(f.Self.Voters)
	if need := n - (n/2 + 1) + 1; (v.Kind == admit.ByWitness || v.Kind == admit.ByAnswers) && v.Answers < need {
		return admit.Verdict{Outcome: admit.Wait, Kind: admit.QuorumWait, Group: f.Group}
	}
	return v
}

// noMargin waits the lease without the margin, which covers the clocks'
// differing rates.
type noMargin struct{ Real }

func (noMargin) Deadline(gained, seen time.Time, l, _ time.Duration, rec lease.Record, recorded, past bool) (time.Time, time.Duration) {
	rec.Margin = 0
	return lease.Deadline(gained, seen, l, 0, rec, recorded, past)
}

// noListen serves without listening first (no listen rule): a source of a
// restore that resumes from a pause serves before gossip tells it of the
// restore.
type noListen struct{ Real }

func (noListen) ListenWindow() time.Duration { return 0 }
