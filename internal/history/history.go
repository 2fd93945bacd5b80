// Package history records operations against a sequence service and checks
// them against seqd's contract (DESIGN.md §2):
//
//   - C1: no value is returned twice for the same key;
//   - C2: an operation that began after another completed returns a larger
//     value for the same key (real-time order);
//   - C3: Current returns at least every value returned by operations that
//     completed before it began, and less than every value returned by
//     operations that began after it completed.
//
// Only successful operations constrain the checks: an operation that failed
// or timed out may or may not have taken values, and taking values that are
// never returned only leaves gaps, which the contract allows.
//
// The checks are exact and run in O(n log n) per key.
package history

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// Kind is an operation kind.
type Kind uint8

// Operation kinds.
const (
	// Take is Next or Reserve: it returned the values First..Last for Key.
	Take Kind = iota
	// Read is Current: it returned Last for Key.
	Read
)

// Op is one completed operation on one key. A call on several keys is
// recorded as one Op per key, all with the call's times.
type Op struct {
	Kind        Kind
	Key         uint64
	First, Last uint64 // for Read, First == Last == the value read
	Start, End  time.Duration
	Client      string
	// Ref is the caller's own reference to the operation (for example an
	// index into a richer history); Check ignores it and copies it into
	// the Ops of the anomalies it reports.
	Ref int64
}

func (o Op) String() string {
	k := "take"
	if o.Kind == Read {
		k = "read"
	}
	return fmt.Sprintf("%s key=%d [%d..%d] start=%v end=%v client=%s", k, o.Key, o.First, o.Last, o.Start, o.End, o.Client)
}

// Recorder collects operations from many goroutines, timed by one monotonic clock.
type Recorder struct {
	origin time.Time
	mu     sync.Mutex
	ops    []Op
}

// NewRecorder returns a recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{origin: time.Now()} }

// Now returns the time on the recorder's clock.
func (r *Recorder) Now() time.Duration { return time.Since(r.origin) }

// Add records an operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of the recorded operations.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Anomaly is a violation found by Check.
type Anomaly struct {
	Rule string // "C1", "C2" or "C3"
	Msg  string
	Ops  []Op
}

func (a Anomaly) String() string { return a.Rule + ": " + a.Msg }

// Check returns every anomaly in ops (at most limit per rule; limit <= 0
// means 10).
func Check(ops []Op, limit int) []Anomaly {
	out, _ := CheckCounts(ops, limit)
	return out
}

// CheckCounts is Check that also returns how many anomalies of each rule
// ("C1", "C2", "C3") there are in total, including those beyond limit.
func CheckCounts(ops []Op, limit int) ([]Anomaly, map[string]int) {
	if limit <= 0 {
		limit = 10
	}
	byKey := map[uint64][]Op{}
	for _, o := range ops {
		byKey[o.Key] = append(byKey[o.Key], o)
	}
	keys := make([]uint64, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []Anomaly
	count := map[string]int{}
	add := func(a Anomaly) {
		if count[a.Rule] < limit {
			out = append(out, a)
		}
		count[a.Rule]++
	}
	for _, k := range keys {
		checkKey(byKey[k], add)
	}
	return out, count
}

func checkKey(ops []Op, add func(Anomaly)) {
	var takes []Op
	for _, o := range ops {
		if o.Kind == Take {
			takes = append(takes, o)
		}
	}
	// C1: ranges of takes never overlap.
	sorted := slices.Clone(takes)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].First < sorted[j].First })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].First <= sorted[i-1].Last {
			add(Anomaly{Rule: "C1", Msg: fmt.Sprintf("key %d: value %d returned twice", sorted[i].Key, sorted[i].First), Ops: []Op{sorted[i-1], sorted[i]}})
		}
	}

	// Sweep in time order: ops by end, and queries by start.
	byEnd := slices.Clone(ops)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].End < byEnd[j].End })
	byStart := slices.Clone(ops)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].Start < byStart[j].Start })

	// C2 and C3 (lower bound): for each op, the largest value returned by a
	// take that completed before it began.
	var maxDone uint64
	var maxOp Op
	e := 0
	for _, o := range byStart {
		for e < len(byEnd) && byEnd[e].End < o.Start {
			if d := byEnd[e]; d.Kind == Take && d.Last > maxDone {
				maxDone, maxOp = d.Last, d
			}
			e++
		}
		if maxDone == 0 {
			continue
		}
		switch o.Kind {
		case Take:
			if o.First <= maxDone {
				add(Anomaly{Rule: "C2", Msg: fmt.Sprintf("key %d: got %d after %d had been returned", o.Key, o.First, maxDone), Ops: []Op{maxOp, o}})
			}
		case Read:
			if o.Last < maxDone {
				add(Anomaly{Rule: "C3", Msg: fmt.Sprintf("key %d: current %d below %d, returned before it began", o.Key, o.Last, maxDone), Ops: []Op{maxOp, o}})
			}
		}
	}

	// C3 (upper bound): a read is below every value returned by a take that
	// began after the read completed. Sweep backwards: smallest First of
	// takes that started after each read ended.
	minLater := uint64(0)
	var minOp Op
	s := len(byStart) - 1
	for i := len(byEnd) - 1; i >= 0; i-- {
		o := byEnd[i]
		for s >= 0 && byStart[s].Start > o.End {
			if d := byStart[s]; d.Kind == Take && (minLater == 0 || d.First < minLater) {
				minLater, minOp = d.First, d
			}
			s--
		}
		if o.Kind == Read && minLater != 0 && o.Last >= minLater {
			add(Anomaly{Rule: "C3", Msg: fmt.Sprintf("key %d: current %d not below %d, returned by a later call", o.Key, o.Last, minLater), Ops: []Op{o, minOp}})
		}
	}
}
