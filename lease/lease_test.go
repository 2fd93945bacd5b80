package lease

import (
	"testing"
	"time"
)

// A release certifies only a lease its own term renewed: the table covers
// every order of renewals and releases of one or two terms.
func TestReleaseCertifiesOnlyItsOwnTerm(t *testing.T) {
	type entry struct {
		release bool
		term    uint64
	}
	renew := func(term uint64) entry { return entry{false, term} }
	release := func(term uint64) entry { return entry{true, term} }
	cases := []struct {
		name    string
		log     []entry
		want    bool
		renewed uint64 // a term RenewedIn must report true for (0: none)
	}{
		{"nothing seen", nil, false, 0},
		{"a renewal only", []entry{renew(5)}, false, 5},
		{"a release after a renewal of its own term", []entry{renew(5), release(5)}, true, 5},
		{"a release by a leader that never renewed in its term", []entry{renew(5), release(6)}, false, 5},
		{"a release with no renewal before it at all", []entry{release(3)}, false, 0},
		{"a renewal after a release voids it", []entry{renew(5), release(5), renew(6)}, false, 6},
		{"a new term renews after a certified release, then releases", []entry{renew(5), release(5), renew(6), release(6)}, true, 6},
		{"an uncertified release after a certified one", []entry{renew(5), release(5), release(6)}, false, 5},
		{"the same term releases twice", []entry{renew(5), release(5), release(5)}, true, 5},
		{"a renewal of an older term committed late", []entry{renew(6), renew(5), release(6)}, false, 5},
		{"term zero never certifies", []entry{renew(0), release(0)}, false, 0},
	}
	for _, c := range cases {
		var h Handoff
		for _, e := range c.log {
			if e.release {
				h.Release(e.term)
			} else {
				h.Renewal(e.term)
			}
		}
		if got := h.Released(); got != c.want {
			t.Errorf("%s: Released() = %v, want %v", c.name, got, c.want)
		}
		if c.renewed != 0 && !h.RenewedIn(c.renewed) {
			t.Errorf("%s: RenewedIn(%d) = false", c.name, c.renewed)
		}
		if h.RenewedIn(c.renewed + 100) {
			t.Errorf("%s: RenewedIn(%d) = true for a term never renewed", c.name, c.renewed+100)
		}
	}
}

func TestDeadline(t *testing.T) {
	gained := time.Unix(1000, 0)
	seen := gained.Add(-700 * time.Millisecond)
	rec := Record{Lease: time.Second, Margin: 100 * time.Millisecond}
	cases := []struct {
		name           string
		seen           time.Time
		lease, margin  time.Duration
		rec            Record
		recorded, past bool
		wantEnd        time.Time
		wantWait       time.Duration
	}{
		{"counted from the last stored renewal", seen, time.Second, 100 * time.Millisecond, rec, true, true,
			seen.Add(1100 * time.Millisecond), 1100 * time.Millisecond},
		{"no renewal stored since the start: from the election", time.Time{}, time.Second, 100 * time.Millisecond, rec, true, true,
			gained.Add(1100 * time.Millisecond), 1100 * time.Millisecond},
		{"a renewal stored after the election counts from the election", gained.Add(time.Second), time.Second, 100 * time.Millisecond, rec, true, true,
			gained.Add(1100 * time.Millisecond), 1100 * time.Millisecond},
		{"a longer recorded lease and margin win", seen, 500 * time.Millisecond, 50 * time.Millisecond, Record{Lease: 3 * time.Second, Margin: 300 * time.Millisecond}, true, true,
			seen.Add(3300 * time.Millisecond), 3300 * time.Millisecond},
		{"protocol 1 with a past: the first release's 2s, from the election", seen, time.Second, 100 * time.Millisecond, Record{}, false, true,
			gained.Add(2100 * time.Millisecond), 2100 * time.Millisecond},
		{"protocol 1 with a past and a longer own lease", seen, 3 * time.Second, 300 * time.Millisecond, Record{}, false, true,
			gained.Add(3300 * time.Millisecond), 3300 * time.Millisecond},
		{"a new cluster's first leader", time.Time{}, time.Second, 100 * time.Millisecond, Record{}, false, false,
			gained.Add(1100 * time.Millisecond), 1100 * time.Millisecond},
	}
	for _, c := range cases {
		end, wait := Deadline(gained, c.seen, c.lease, c.margin, c.rec, c.recorded, c.past)
		if !end.Equal(c.wantEnd) || wait != c.wantWait {
			t.Errorf("%s: got end %v wait %v, want %v and %v", c.name, end.Sub(gained), wait, c.wantEnd.Sub(gained), c.wantWait)
		}
	}
}
