// Package traffic decides where a raft group's leader should be for the
// calls that cannot choose their server: pure, the standard library only.
//
// The Redis protocol's and Leaf's front ends take every key at the server
// their client reached, which forwards each group's share it does not lead
// to the group's leader: one hop more per call, and on a machine of few
// cores the larger part of a call's cost. When a group's values enter
// mostly at one server, that server is the better leader. (Connect calls
// are not counted: the Go client routes each key to its group's leader
// itself, and the other clients call whichever server they call.)
//
// A Meter counts, per origin (the server the values entered at), the values
// of one group over the last Window, in one-second buckets. Leader decides
// from its rates: when the values enter at Floor a second or more, and one
// eligible server has Take of them, that server should lead; the current
// leader keeps the group while it has Keep of them and they enter at half
// the Floor or more. Otherwise there is no preference from traffic ("") and
// the group's leader stays where spreading the leaders over the servers
// puts it.
//
// A group its leader keeps for its traffic stays there while it is idle:
// while the values its leader hands out (Activity: all of them, counted or
// not) come at less than half the Floor, or their rate is not known (a
// stall, a clock's jump). Moving an idle group gains nothing until traffic
// comes back, and costs a handoff (a moment without a leader, a leader
// whose keys are cold) when it does: a front end's traffic that pauses
// finds its leaders where it left them. The group goes back to its spread
// position once its leader hands out half the Floor a second or more
// (counted or not: the Go client's calls route and are not counted) while
// the counted rates no longer keep it there, or once its leader is drained
// or stops leading it.
//
// The gaps between Take and Keep, and between the Floor and its half, keep
// a leadership from going back and forth (a share or a rate that hovers at
// one threshold does not cross the other). The decision is taken by the
// group's leader alone, and a server that took a group because of its
// traffic has counted its own share since before it led (its values
// entered there and were forwarded), while the forwards of the other
// servers reach its count only from the moment it leads: its share in its
// own count is at least its share in the old leader's, above Take, so
// above Keep. Whether a value counts never depends on who leads (the
// caller decides it where the value enters), so a move changes which
// server's count holds a value, never whether it is counted.
package traffic

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

const (
	// Window is how far back the rates look; buckets is its seconds.
	Window  = buckets * time.Second
	buckets = 5
	// Floor is the rate of values (a second) below which traffic decides
	// nothing.
	Floor = 1000.0
	// Take is the share of the group's values a server must bring for the
	// leadership to move to it; Keep is the share a leader keeps it with.
	Take = 2.0 / 3
	Keep = 1.0 / 2
	// MaxOrigins bounds the origins a second's counts hold: values of
	// further origins in that second are not counted.
	MaxOrigins = 64
)

// bucket is one second's counts.
type bucket struct {
	sec    int64 // Unix second
	counts map[string]uint64
}

// Meter counts one group's values by origin. The zero Meter is ready.
type Meter struct {
	mu sync.Mutex
	b  [buckets + 1]bucket // the window's whole seconds and the current one
}

// Add counts n values of the group that entered at origin at time now.
func (m *Meter) Add(origin string, n int, now time.Time) {
	if n <= 0 || origin == "" {
		return
	}
	sec := now.Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &m.b[slot(sec)]
	if b.sec != sec || b.counts == nil {
		b.sec = sec
		if b.counts == nil {
			b.counts = make(map[string]uint64, 4)
		}
		clear(b.counts)
	}
	if _, ok := b.counts[origin]; ok || len(b.counts) < MaxOrigins {
		b.counts[origin] += uint64(n)
	}
}

// slot is the bucket of second sec.
func slot(sec int64) int {
	const k = buckets + 1
	return int((sec%k + k) % k)
}

// Rates returns, per origin, the values a second over the Window of whole
// seconds before now (the current second is not yet whole).
func (m *Meter) Rates(now time.Time) map[string]float64 {
	sec := now.Unix()
	out := map[string]float64{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.b {
		b := &m.b[i]
		if b.sec >= sec || b.sec < sec-buckets {
			continue
		}
		for o, c := range b.counts {
			out[o] += float64(c) / buckets
		}
	}
	return out
}

// Group is what its leader knows of a group's traffic.
type Group struct {
	// Leader is the server that leads it (the one deciding).
	Leader string
	// Rates are the values a second that entered at each server (Meter).
	Rates map[string]float64
	// Held: the leader kept the group for its traffic when it last
	// decided, in its current term.
	Held bool
	// Served is the values a second the leader hands out, counted or not
	// (Activity); negative when not yet known.
	Served float64
}

// Leader returns the server that should lead g, of those that may
// (eligible: a voter of the group, not drained); "" when traffic decides
// nothing (see the package comment).
func Leader(g Group, eligible func(id string) bool) string {
	if id := byRates(g.Leader, g.Rates, eligible); id != "" {
		return id
	}
	if g.Held && g.Served < Floor/2 && eligible(g.Leader) {
		return g.Leader // idle (or not known: a stall, a clock's jump): kept
	}
	return ""
}

// byRates is the server that should lead a group whose leader is cur by
// the rates at which its values entered at each server, or "".
func byRates(cur string, rates map[string]float64, eligible func(id string) bool) string {
	total := 0.0
	for _, r := range rates {
		total += r
	}
	if total < Floor/2 {
		return ""
	}
	if eligible(cur) && rates[cur] >= Keep*total {
		return cur
	}
	if total < Floor {
		return ""
	}
	ids := make([]string, 0, len(rates))
	for id := range rates {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := cmp.Compare(rates[b], rates[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if best := ids[0]; eligible(best) && rates[best] >= Take*total {
		return best
	}
	return ""
}

// Activity measures the rate of a count that only grows (the values an
// allocator took): the reading of each second, over the Window. The zero
// Activity is ready.
type Activity struct {
	mu sync.Mutex
	r  [buckets + 1]reading
}

type reading struct {
	sec int64
	n   uint64
	set bool
}

// Observe records the count's reading n at now.
func (a *Activity) Observe(n uint64, now time.Time) {
	sec := now.Unix()
	a.mu.Lock()
	a.r[slot(sec)] = reading{sec: sec, n: n, set: true}
	a.mu.Unlock()
}

// Rate returns the count's growth a second between the oldest and the
// newest readings of the Window's whole seconds before now, or -1 while
// they span less than a second (or the count went down: a reading of
// another count). Like the Meter's, the current second is left out: a
// value it counts has been counted by the Meter (whole seconds), so a
// group whose counted traffic starts again is never taken for one that
// serves values of others.
func (a *Activity) Rate(now time.Time) float64 {
	sec := now.Unix()
	a.mu.Lock()
	defer a.mu.Unlock()
	var first, last *reading
	for i := range a.r {
		r := &a.r[i]
		if !r.set || r.sec >= sec || r.sec < sec-buckets {
			continue
		}
		if first == nil || r.sec < first.sec {
			first = r
		}
		if last == nil || r.sec > last.sec {
			last = r
		}
	}
	if first == nil || last.sec == first.sec || last.n < first.n {
		return -1
	}
	return float64(last.n-first.n) / float64(last.sec-first.sec)
}
