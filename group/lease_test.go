package group

import (
	"testing"
	"time"

	"github.com/seqd/seqd/fsm"
)

// The wait a new leader counts, and from when (see lead): from the last
// renewal it stored when that is earlier than its election and a lease is
// recorded; from its election otherwise; and on protocol 1 (no record), for
// a server with a past, at least the first release's lease, whatever the
// server's own --lease (an upgrade from the first release mixes them).
func TestLeaseDeadline(t *testing.T) {
	gained := time.Unix(1000, 0)
	seen := gained.Add(-700 * time.Millisecond)
	rec := fsm.LeaseRecord{Lease: time.Second, Margin: 100 * time.Millisecond}
	for _, c := range []struct {
		name           string
		seen           time.Time
		lease, margin  time.Duration
		rec            fsm.LeaseRecord
		recorded, past bool
		wantWait       time.Duration
		wantEnd        time.Time
	}{
		{"recorded, renewal stored before the election", seen, time.Second, 100 * time.Millisecond, rec, true, true,
			1100 * time.Millisecond, seen.Add(1100 * time.Millisecond)},
		{"recorded, nothing stored since start", time.Time{}, time.Second, 100 * time.Millisecond, rec, true, true,
			1100 * time.Millisecond, gained.Add(1100 * time.Millisecond)},
		{"recorded, stored after the election (in the barrier)", gained.Add(time.Second), time.Second, 100 * time.Millisecond, rec, true, true,
			1100 * time.Millisecond, gained.Add(1100 * time.Millisecond)},
		{"a longer recorded lease and margin win", seen, 500 * time.Millisecond, 50 * time.Millisecond, fsm.LeaseRecord{Lease: 3 * time.Second, Margin: 300 * time.Millisecond}, true, true,
			3300 * time.Millisecond, seen.Add(3300 * time.Millisecond)},
		{"protocol 1 with a past: the first release's 2s, from the election", seen, time.Second, 100 * time.Millisecond, fsm.LeaseRecord{}, false, true,
			2100 * time.Millisecond, gained.Add(2100 * time.Millisecond)},
		{"protocol 1 with a past and a longer own lease", seen, 3 * time.Second, 300 * time.Millisecond, fsm.LeaseRecord{}, false, true,
			3300 * time.Millisecond, gained.Add(3300 * time.Millisecond)},
		{"a new cluster's first leader", time.Time{}, time.Second, 100 * time.Millisecond, fsm.LeaseRecord{}, false, false,
			1100 * time.Millisecond, gained.Add(1100 * time.Millisecond)},
	} {
		end, wait := leaseDeadline(gained, c.seen, c.lease, c.margin, c.rec, c.recorded, c.past)
		if wait != c.wantWait || !end.Equal(c.wantEnd) {
			t.Errorf("%s: serves at election%+v after a wait of %v, want election%+v after %v",
				c.name, end.Sub(gained), wait, c.wantEnd.Sub(gained), c.wantWait)
		}
	}
}

// The noted time of the last stored renewal never goes back.
func TestNoteLeaseNeverGoesBack(t *testing.T) {
	g := &Group{origin: time.Now()}
	g.noteLease()
	first := g.leaseSeen.Load()
	g.leaseSeen.Store(first + int64(time.Hour)) // a later note, as a racing writer would leave it
	g.noteLease()
	if got := g.leaseSeen.Load(); got != first+int64(time.Hour) {
		t.Fatalf("noteLease moved the note back from %d to %d", first+int64(time.Hour), got)
	}
}
