package flake

import (
	"errors"
	"fmt"
)

// The reasons a Generator issues fewer ids than asked.
var (
	// ErrRangeEnd means the next id would need a time unit above the
	// range's Hi: the holder must extend its range (a committed entry)
	// before it issues more.
	ErrRangeEnd = errors.New("worker's time range used up")
	// ErrAhead means the next id would run more than the lead ahead of the
	// reference time: the holder waits for its reference to advance.
	ErrAhead = errors.New("ids would run too far ahead of the clock")
	// ErrLifetime means the next id would need a time unit past the
	// layout's last: the namespace has ended (ResourceExhausted).
	ErrLifetime = errors.New("id layout's lifetime is over")
)

// Generator issues the ids of one worker from one granted time range. It
// is not safe for concurrent use.
//
// Every id it issues has a time unit T with Lo < T ≤ Hi, and its ids
// strictly increase: within one unit the sequence counts up, and when it
// overflows the generator borrows the next unit (T+1, sequence 0), as
// Seata's IdWorker does. T is the larger of the reference time the caller
// passes and the last T issued, so a reference that goes back never lowers
// an id. Borrowing is bounded hard by Hi (ErrRangeEnd) and softly by the
// lead (ErrAhead): T never runs more than lead units ahead of the reference.
//
// A Generator is never persisted or shared: the range it was made from
// belongs to it alone (see the package documentation).
type Generator struct {
	l      Layout
	worker uint64
	lo, hi uint64 // the range: units (lo, hi]
	lead   uint64
	t, seq uint64 // the last id's unit and sequence; t == 0 before the first
}

// NewGenerator returns a generator for worker w of layout l over the time
// units (lo, hi], which may borrow up to lead units ahead of the reference.
// hi is capped at the layout's last unit.
func NewGenerator(l Layout, w uint64, lo, hi, lead uint64) (*Generator, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if w >= l.Workers() {
		return nil, fmt.Errorf("%w: worker %d of %d", ErrInvalidLayout, w, l.Workers())
	}
	if hi < lo {
		return nil, fmt.Errorf("%w: range (%d, %d]", ErrInvalidLayout, lo, hi)
	}
	return &Generator{l: l, worker: w, lo: lo, hi: min(hi, l.MaxUnit()), lead: lead}, nil
}

// Worker is the generator's worker.
func (g *Generator) Worker() uint64 { return g.worker }

// Hi is the last time unit the generator may issue ids in.
func (g *Generator) Hi() uint64 { return g.hi }

// Last is the time unit of the last id issued (Lo if none yet).
func (g *Generator) Last() uint64 { return max(g.t, g.lo) }

// Extend raises the range's end to hi (a committed extension of the same
// grant). A lower hi changes nothing.
func (g *Generator) Extend(hi uint64) { g.hi = max(g.hi, min(hi, g.l.MaxUnit())) }

// Run is Count consecutive ids: First, First+1, ..., First+Count-1. The
// ids of one time unit of one worker are consecutive integers, so a call's
// ids are a few runs however many they are.
type Run struct {
	First int64
	Count int
}

// Last is the run's last id.
func (r Run) Last() int64 { return r.First + int64(r.Count) - 1 }

// AppendIDs appends every id of runs, in order, to dst and returns it.
func AppendIDs(dst []int64, runs ...Run) []int64 {
	for _, r := range runs {
		for i := range int64(r.Count) {
			dst = append(dst, r.First+i)
		}
	}
	return dst
}

// NextRun issues up to n ids as one run of consecutive ids, with the
// reference time now (in units since the layout's epoch) and shard 0 (see
// NextShardRun).
func (g *Generator) NextRun(n int, now uint64) (Run, error) { return g.NextShardRun(n, now, 0) }

// NextShardRun issues up to n ids as one run of consecutive ids, with the
// reference time now (in units since the layout's epoch) and the shard
// value sh in the layout's shard field (which the caller checked with
// Layout.CheckShard): the next ids of the current time unit, or of the
// next one when the sequence overflowed, as many as are left in that unit
// (one at a time when the layout's ids are not consecutive, see
// Layout.Consecutive). It issues fewer than n when the unit has fewer left
// (call it again for the rest), and none when the next id would break a
// bound: then it also returns why (ErrRangeEnd, ErrAhead or ErrLifetime).
// Issued ids are never taken back. The shard only adds bits: the unit and
// sequence advance alike whatever it is, so ids stay unique across shards.
func (g *Generator) NextShardRun(n int, now, sh uint64) (Run, error) {
	if n < 1 {
		return Run{}, nil
	}
	maxSeq := g.l.MaxSequence()
	t, seq := max(now, g.lo+1), uint64(0)
	if t <= g.t {
		t, seq = g.t, g.seq+1
		if seq > maxSeq {
			t, seq = g.t+1, 0 // borrow the next unit
		}
	}
	switch {
	case t > g.l.MaxUnit():
		return Run{}, ErrLifetime
	case t > g.hi:
		return Run{}, ErrRangeEnd
	case t > now && t-now > g.lead:
		return Run{}, ErrAhead
	}
	c := min(uint64(n), maxSeq-seq+1)
	if !g.l.Consecutive() {
		c = 1
	}
	g.t, g.seq = t, seq+c-1
	return Run{First: g.l.ComposeShard(t, sh, g.worker, seq), Count: int(c)}, nil
}

// Next appends up to n ids to dst, with the reference time now, and
// returns dst: the ids of NextRun's runs until it has n or a bound stops
// it, when it also returns why. Issued ids are never taken back: those
// appended count as issued even with an error.
func (g *Generator) Next(dst []int64, n int, now uint64) ([]int64, error) {
	for n > 0 {
		r, err := g.NextRun(n, now)
		dst = AppendIDs(dst, r)
		if err != nil {
			return dst, err
		}
		n -= r.Count
	}
	return dst, nil
}

// Lead is how far the last id ran ahead of the reference time now, in
// units: 0 when it did not.
func (g *Generator) Lead(now uint64) uint64 {
	if g.t > now {
		return g.t - now
	}
	return 0
}
