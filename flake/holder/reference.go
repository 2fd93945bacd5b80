package holder

import "time"

// Reference is a holder's estimate of the cluster's time, in Unix
// milliseconds. It starts from the leader's time carried in a grant and
// advances on a clock that does not step (a monotonic or boot-time reading),
// so the holder's own wall clock stepping back or forward never moves it.
// It never goes back: a later grant that carries an earlier time is ignored
// until the estimate catches up. It is not safe for concurrent use.
type Reference struct {
	clock  func() time.Duration
	base   time.Duration // a reading of clock
	baseMs int64         // the estimate at base
	set    bool
}

// NewReference returns a reference that advances on clock, whose readings
// must never decrease. It has no estimate until the first Observe.
func NewReference(clock func() time.Duration) *Reference { return &Reference{clock: clock} }

// Observe takes the leader's time leaderMs from a grant whose answer
// arrived at clock reading at. The leader read its clock before it
// answered, so taking leaderMs as the time at at makes the estimate lag the
// leader by at most one round trip, never lead it. (Taking it as the time
// the request was sent would make the estimate lead the leader by as long
// as the request took: seconds for one retried through a failover.)
func (r *Reference) Observe(leaderMs int64, at time.Duration) {
	if r.set && r.baseMs+(at-r.base).Milliseconds() >= leaderMs {
		return
	}
	r.base, r.baseMs, r.set = at, leaderMs, true
}

// NowMs is the current estimate, and false before the first Observe.
func (r *Reference) NowMs() (int64, bool) {
	if !r.set {
		return 0, false
	}
	return r.baseMs + (r.clock() - r.base).Milliseconds(), true
}
