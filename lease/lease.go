package lease

import "time"

// Record is the lease length and margin a renewal entry carries: the
// granting leader's --lease and --lease-margin.
type Record struct {
	Lease, Margin time.Duration
}

// FirstReleaseLease is the first release's default lease. Before a group
// records lease lengths (protocol 1) renewals carry none, and a leader of
// the first release (in a cluster being upgraded from it) may hold a lease
// that long whatever this server's own lease, so a new leader with a past
// waits at least that long.
const FirstReleaseLease = 2 * time.Second

// Deadline is when a leader elected at gained may serve, and the wait it
// counts. seen is when it last stored a renewal in its log (or installed a
// snapshot) since its process started, zero for never; lease and margin are
// its own; rec is the last renewal's record, recorded false when the group
// has none (protocol 1); past is whether the server has a past (raft state
// when it started, a renewal or snapshot stored since, or an applied
// command), so that a first-release leader may have led.
//
// The wait is the longer of its own lease and the recorded one, plus the
// larger margin, counted from the election or from seen if that is
// earlier. Why seen may count: the renewal the latest lease rests on
// committed, so it is in this leader's log (raft elects only a server
// holding every committed entry), and its clock reading was taken before
// the entry was sent, so before this server stored it; the last store of
// any renewal is no earlier. Why the last record suffices: its leader
// waited out every earlier lease before its first renewal (this rule,
// inductively). Without a record the wait counts from the election only
// (renewals then carry no length), and with a past it is at least
// FirstReleaseLease plus the margin.
func Deadline(gained, seen time.Time, lease, margin time.Duration, rec Record, recorded, past bool) (end time.Time, wait time.Duration) {
	if !recorded {
		wait = lease + margin
		if past {
			wait = max(lease, FirstReleaseLease) + margin
		}
		return gained.Add(wait), wait
	}
	wait = max(lease, rec.Lease) + max(margin, rec.Margin)
	end = gained.Add(wait)
	if !seen.IsZero() && seen.Add(wait).Before(end) {
		end = seen.Add(wait)
	}
	return end, wait
}

// Handoff follows the lease entries of a group's log, in log order, and
// says whether the last one is a release that certifies that no lease is
// running. The zero value has seen nothing (a release then certifies
// nothing).
//
// What a release certifies: a leader writes its first renewal of a term
// only after waiting out every earlier lease (Deadline, or a certified
// release before it), and writes a release only after it stopped serving
// (group's Withhold). So a release of term T that follows a renewal of the
// same term T ends every lease up to it: the earlier ones by the wait
// before that renewal, and the term-T leader's own by its stop. A release
// of a term with no renewal of its own (a leader elected while an earlier
// one, cut off, still holds its lease, and stopped before serving)
// certifies nothing: the earlier lease may still run. Any renewal after a
// release voids it: a leader holds a lease again.
//
// Every path that releases (a graceful stop, a transfer, a drain, a
// rebalance, a server leaving group 0's configuration) inherits this,
// since the rule is applied to the log by whoever reads it, not by the
// writer. The terms are raft's entry terms, the same on every replica, so
// every replica reaches the same verdict.
type Handoff struct {
	renewalTerm uint64
	released    bool
}

// Renewal notes a renewal entry of term term.
func (h *Handoff) Renewal(term uint64) {
	h.renewalTerm = term
	h.released = false
}

// Release notes a release entry of term term: it counts only if a renewal
// of the same term precedes it.
func (h *Handoff) Release(term uint64) {
	h.released = term != 0 && term == h.renewalTerm
}

// Released reports whether the last lease entry is a certified release:
// no lease is running, and a new leader may serve without a wait.
func (h Handoff) Released() bool { return h.released }

// RenewedIn reports whether the last renewal noted is of term term: a
// leader of that term has waited out every earlier lease, so a release it
// writes now (after it stopped serving) certifies.
func (h Handoff) RenewedIn(term uint64) bool { return term != 0 && h.renewalTerm == term }

// The listen rule. A leader serves only once its server has listened to
// its cluster's gossip for ListenWindow: since the server started, and
// since its lease lapsed (its process was paused, or its followers out of
// reach). A restored cluster's servers knock on the gossip addresses of
// their --join list every KnockInterval; so a server of the cluster that
// the restore replaced, coming back from a stop or a pause, hears of the
// restore, and is fenced, before it could serve beside it.
const (
	KnockInterval = time.Second
	ListenWindow  = 2*KnockInterval + 500*time.Millisecond
)
