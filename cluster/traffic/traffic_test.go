package traffic

import (
	"fmt"
	"maps"
	"testing"
	"time"
)

func TestLeader(t *testing.T) {
	all := func(string) bool { return true }
	not := func(ids ...string) func(string) bool {
		return func(id string) bool {
			for _, x := range ids {
				if x == id {
					return false
				}
			}
			return true
		}
	}
	for _, tc := range []struct {
		name     string
		cur      string
		rates    map[string]float64
		eligible func(string) bool
		want     string
	}{
		{"no traffic", "n1", nil, all, ""},
		{"below the floor, all at one server", "n1", map[string]float64{"n2": Floor - 1}, all, ""},
		{"at the floor, all at another server", "n1", map[string]float64{"n2": Floor}, all, "n2"},
		{"at the floor, all at the leader", "n1", map[string]float64{"n1": Floor}, all, "n1"},
		{"at half the floor, all at the leader: kept", "n1", map[string]float64{"n1": Floor / 2}, all, "n1"},
		{"below half the floor, all at the leader", "n1", map[string]float64{"n1": Floor/2 - 1}, all, ""},
		{"at half the floor, all at another server: not taken", "n1", map[string]float64{"n2": Floor / 2}, all, ""},
		{"spread evenly", "n1", map[string]float64{"n1": 1000, "n2": 1000, "n3": 1000}, all, ""},
		{"another server brings two thirds", "n1", map[string]float64{"n1": 500, "n2": 1000, "n3": 0}, all, "n2"},
		{"another server brings less than two thirds", "n3", map[string]float64{"n1": 600, "n2": 1100}, all, ""},
		{"the leader keeps half", "n1", map[string]float64{"n1": 1000, "n2": 1000}, all, "n1"},
		{"the leader keeps half against a larger share elsewhere", "n1", map[string]float64{"n1": 1000, "n2": 990}, all, "n1"},
		{"the leader with less than half, no one with two thirds", "n1", map[string]float64{"n1": 900, "n2": 1100}, all, ""},
		{"the leader with less than half, another with two thirds", "n1", map[string]float64{"n1": 600, "n2": 1400}, all, "n2"},
		{"the preferred is not eligible (drained)", "n1", map[string]float64{"n2": 5000}, not("n2"), ""},
		{"the leader is not eligible (drained), another brings two thirds", "n1", map[string]float64{"n1": 3000, "n2": 7000}, not("n1"), "n2"},
		{"the leader is not eligible and brings it all", "n1", map[string]float64{"n1": 3000}, not("n1"), ""},
		{"an origin that is not a server of the group", "n1", map[string]float64{"gone": 5000}, not("gone"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rates := maps.Clone(tc.rates)
			if got := Leader(Group{Leader: tc.cur, Rates: tc.rates, Served: -1}, tc.eligible); got != tc.want {
				t.Errorf("Leader(%q, %v) = %q, want %q", tc.cur, tc.rates, got, tc.want)
			}
			if !maps.Equal(rates, tc.rates) {
				t.Errorf("Leader changed its rates: %v", tc.rates)
			}
		})
	}
}

// TestLeaderMovesOnce: after a move to the server that brings Take of the
// values, the new leader's own count (its share over the whole window,
// the others' forwards only since it leads) keeps it there.
func TestLeaderMovesOnce(t *testing.T) {
	all := func(string) bool { return true }
	old := map[string]float64{"n1": 600, "n2": 1400} // at n1, the leader
	if got := Leader(Group{Leader: "n1", Rates: old, Served: 2000}, all); got != "n2" {
		t.Fatalf("the old leader prefers %q, want n2", got)
	}
	// At n2 a second after the move: n1's forwards are one second's.
	now := map[string]float64{"n2": 1400, "n1": 600.0 / buckets}
	if got := Leader(Group{Leader: "n2", Rates: now, Served: 1520}, all); got != "n2" {
		t.Fatalf("the new leader prefers %q, want n2 (itself)", got)
	}
}

// A group its leader kept for its traffic stays while it is idle (its
// leader hands out less than half the floor a second, counted or not); it
// goes back to its spread position once other values come, and traffic
// that enters elsewhere takes it as from any leader.
func TestIdleGroupStaysWhereItsTrafficLeftIt(t *testing.T) {
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name     string
		g        Group
		eligible func(string) bool
		want     string
	}{
		{"held, idle", Group{Leader: "n1", Held: true, Served: 0}, all, "n1"},
		{"held, a trickle below half the floor", Group{Leader: "n1", Held: true, Served: Floor/2 - 1, Rates: map[string]float64{"n1": 3}}, all, "n1"},
		{"held, other values at half the floor", Group{Leader: "n1", Held: true, Served: Floor / 2}, all, ""},
		{"held, other values over the floor", Group{Leader: "n1", Held: true, Served: 5000, Rates: map[string]float64{"n1": 10}}, all, ""},
		{"held, not known (a stall)", Group{Leader: "n1", Held: true, Served: -1}, all, "n1"},
		{"not held, not known", Group{Leader: "n1", Served: -1}, all, ""},
		{"not held, idle: spread", Group{Leader: "n1", Served: 0}, all, ""},
		{"held, idle, the leader drained", Group{Leader: "n1", Held: true, Served: 0}, func(id string) bool { return id != "n1" }, ""},
		{"held, traffic at another server takes it", Group{Leader: "n1", Held: true, Served: 2000, Rates: map[string]float64{"n2": 2000}}, all, "n2"},
		{"held, its traffic back", Group{Leader: "n1", Held: true, Served: 2000, Rates: map[string]float64{"n1": 2000}}, all, "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Leader(tc.g, tc.eligible); got != tc.want {
				t.Errorf("Leader(%+v) = %q, want %q", tc.g, got, tc.want)
			}
		})
	}
}

func TestActivityRateOverTheWindow(t *testing.T) {
	var a Activity
	t0 := time.Unix(1_800_000_000, 0)
	if r := a.Rate(t0); r != -1 {
		t.Fatalf("no reading: rate %v, want -1 (unknown)", r)
	}
	a.Observe(100, t0.Add(200*time.Millisecond))
	a.Observe(150, t0.Add(900*time.Millisecond)) // the second's latest counts
	if r := a.Rate(t0.Add(1200 * time.Millisecond)); r != -1 {
		t.Fatalf("readings of one second: rate %v, want -1 (unknown)", r)
	}
	a.Observe(1150, t0.Add(1100*time.Millisecond))
	if r := a.Rate(t0.Add(1900 * time.Millisecond)); r != -1 {
		t.Fatalf("the current second counted: rate %v, want -1 (unknown)", r)
	}
	if r := a.Rate(t0.Add(2 * time.Second)); r != 1000 {
		t.Fatalf("rate %v, want 1000", r)
	}
	for s := 2; s <= 8; s++ { // idle: the count stays
		a.Observe(1150, t0.Add(time.Duration(s)*time.Second))
	}
	a.Observe(90_000, t0.Add(9*time.Second)) // traffic again, this second
	if r := a.Rate(t0.Add(9*time.Second + 500*time.Millisecond)); r != 0 {
		t.Fatalf("idle over the window's whole seconds: rate %v, want 0", r)
	}
	a.Observe(5, t0.Add(10*time.Second)) // another count: unknown, not negative
	if r := a.Rate(t0.Add(11 * time.Second)); r != -1 {
		t.Fatalf("a count that went down: rate %v, want -1", r)
	}
	if r := a.Rate(t0.Add(time.Minute)); r != -1 {
		t.Fatalf("a minute after the last reading: rate %v, want -1", r)
	}
}

func TestMeterRatesOverWholeSeconds(t *testing.T) {
	var m Meter
	t0 := time.Unix(1_800_000_000, 0)
	for s := range 10 {
		at := t0.Add(time.Duration(s)*time.Second + 300*time.Millisecond)
		m.Add("n1", 100, at)
		m.Add("n2", 10*(s+1), at)
		m.Add("", 1_000_000, at) // no origin: not counted
		m.Add("n3", 0, at)
	}
	// At t0+10s, the whole seconds are t0+5s .. t0+9s.
	got := m.Rates(t0.Add(10 * time.Second))
	want := map[string]float64{"n1": 100, "n2": (60 + 70 + 80 + 90 + 100) / 5.0}
	if !maps.Equal(got, want) {
		t.Errorf("rates %v, want %v", got, want)
	}
	// The current second does not count; nor does anything older than the
	// window.
	got = m.Rates(t0.Add(9*time.Second + 500*time.Millisecond))
	want = map[string]float64{"n1": 100, "n2": (50 + 60 + 70 + 80 + 90) / 5.0}
	if !maps.Equal(got, want) {
		t.Errorf("rates mid-second %v, want %v", got, want)
	}
	if got := m.Rates(t0.Add(time.Minute)); len(got) != 0 {
		t.Errorf("rates a minute later %v, want none", got)
	}
	// A bucket reused a window later starts from zero.
	m.Add("n3", 7, t0.Add(10*time.Second))
	got = m.Rates(t0.Add(11 * time.Second))
	if got["n3"] != 7.0/5 || got["n1"] != 80 {
		t.Errorf("rates after a bucket's reuse %v, want n3 1.4 and n1 80", got)
	}
}

func TestMeterBoundsItsOrigins(t *testing.T) {
	var m Meter
	at := time.Unix(1_800_000_000, 0)
	for i := range 2 * MaxOrigins {
		m.Add(fmt.Sprint("origin-", i), 5, at)
	}
	m.Add("origin-0", 5, at) // a counted origin still counts
	got := m.Rates(at.Add(time.Second))
	if len(got) != MaxOrigins || got["origin-0"] != 10.0/buckets {
		t.Errorf("%d origins counted (origin-0 at %v), want %d (origin-0 at %v)", len(got), got["origin-0"], MaxOrigins, 10.0/buckets)
	}
	// A clock before 1970 counts too.
	var old Meter
	before := time.Unix(-7, 0)
	old.Add("n1", 5, before)
	if r := old.Rates(before.Add(time.Second)); r["n1"] != 1 {
		t.Errorf("before 1970: rates %v, want n1 1", r)
	}
}
