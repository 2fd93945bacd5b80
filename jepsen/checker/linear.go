package checker

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/seqd/seqd/internal/history"
	"github.com/seqd/seqd/jepsen/record"
)

// Linearizability of each key's history, checked by an independent
// checker (porcupine, a Wing & Gong search) against CounterModel, next to
// Order's pairwise rules. The two answer different questions: Order looks
// at pairs of calls one of which completed before the other began;
// porcupine looks for one total order of every successful call of a key
// that respects real time and the model, so it also sees what only a chain
// of concurrent calls shows (two Currents, 7 then 3, while takes of 5 and
// 10 are in flight: every pair is fine, no order is).
//
// The search is exponential in the worst case, so its cost is bounded:
//
//   - Each key is checked on its own (linearizability is compositional).
//   - A key's history is cut at every quiescent point (an instant where
//     every call invoked so far has completed and none is in flight): the
//     model's state there is the same whatever order linearized the calls
//     before it (Last is the largest value taken, since takes increase;
//     Bound the largest value read), so each segment is checked on its own
//     from that state, and a run's cost grows with its length, not faster.
//   - Each segment has a time limit, and the whole check a budget. A
//     segment porcupine does not decide within its limit is decided by the
//     forced order (linear_order.go), an exact O(n log n) decision for
//     this model; the limit (1 s) is short because the segments porcupine
//     does not decide in a second are the exponential ones (a pause piles
//     up dozens of Currents), which it would not decide in ten either: a
//     run of the chaos test spent 40 of its 58 s of checking in four of
//     them. A segment the budget does not reach is reported as unknown
//     (the checker's verdict is then unknown, never valid), with its key,
//     span and size.

// LinearOptions bound the linearizability check.
type LinearOptions struct {
	// SegmentTimeout bounds porcupine's search of one segment (default
	// DefaultSegmentTimeout).
	SegmentTimeout time.Duration
	// Budget bounds the whole check (default DefaultLinearBudget):
	// segments not reached within it are unknown.
	Budget time.Duration
}

// Defaults of LinearOptions.
const (
	DefaultSegmentTimeout = time.Second
	DefaultLinearBudget   = 2 * time.Minute
)

// segment is a stretch of one key's history between quiescent points, and
// the model's state before it.
type segment struct {
	key  uint64
	ops  []history.Op
	init counterState
}

// segments cuts one key's operations (any order) at quiescent points.
func segments(key uint64, ops []history.Op) []segment {
	ops = slices.Clone(ops)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start < ops[j].Start })
	var out []segment
	var state counterState
	var cur []history.Op
	var reach time.Duration // the latest completion among cur
	for _, o := range ops {
		// Intervals are closed: a call that begins at the instant another
		// completes is concurrent with it.
		if len(cur) > 0 && o.Start > reach {
			out = append(out, segment{key: key, ops: cur, init: state})
			state = advance(state, cur)
			cur = nil
		}
		cur = append(cur, o)
		reach = max(reach, o.End)
	}
	if len(cur) > 0 {
		out = append(out, segment{key: key, ops: cur, init: state})
	}
	return out
}

// advance is the model's state after the operations of a linearizable
// segment, whatever order linearized them.
func advance(s counterState, ops []history.Op) counterState {
	for _, o := range ops {
		if o.Kind == history.Take {
			s.Last = max(s.Last, o.Last)
		} else {
			s.Bound = max(s.Bound, o.Last)
		}
	}
	return s
}

// porcupineOps turns one key's operations into porcupine's, with a client
// number per client name (for timelines) and the records they came from.
func porcupineOps(ops []history.Op, byIndex map[int64]record.Op) []porcupine.Operation {
	clients := map[string]int{}
	var names []string
	for _, o := range ops {
		if _, ok := clients[o.Client]; !ok {
			clients[o.Client] = 0
			names = append(names, o.Client)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		clients[n] = i
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		rec := byIndex[o.Ref]
		out = append(out, porcupine.Operation{
			ClientId: clients[o.Client],
			Input:    counterInput{Kind: o.Kind, Rec: rec},
			Call:     int64(o.Start),
			Output:   [2]uint64{o.First, o.Last},
			Return:   int64(o.End),
			Metadata: fmt.Sprintf("client %s node %s invoke %.6fs complete %.6fs", rec.Client, rec.Node, o.Start.Seconds(), o.End.Seconds()),
		})
	}
	return out
}

// Linear checks that every key's successful calls are linearizable under
// CounterModel. Its counts: "L" segments found not linearizable (each an
// anomaly, up to limit), "unknown" segments not decided within the bounds.
// Its notes say how many keys and segments were checked and, for every
// undecided segment, which (the verdict is then unknown). A segment
// porcupine does not decide in time is decided by the forced order
// (linear_order.go; counted as "decided by order"), which must agree with
// porcupine wherever porcupine decides.
func Linear(ops []record.Op, opt LinearOptions, limit int) *Result {
	if opt.SegmentTimeout <= 0 {
		opt.SegmentTimeout = DefaultSegmentTimeout
	}
	if opt.Budget <= 0 {
		opt.Budget = DefaultLinearBudget
	}
	byIndex := map[int64]record.Op{}
	for _, o := range ops {
		byIndex[o.Index] = o
	}
	byKey := map[uint64][]history.Op{}
	for _, o := range record.ToHistory(ops) {
		byKey[o.Key] = append(byKey[o.Key], o)
	}
	keys := make([]uint64, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	r := &Result{Valid: Valid, Counts: map[string]int{"L": 0, "unknown": 0, "decided by order": 0}}
	start := time.Now()
	nseg, largest := 0, 0
	var slowest time.Duration
	unknownKeys, badKeys := map[uint64]bool{}, map[uint64]bool{}
	for _, k := range keys {
		for _, s := range segments(k, byKey[k]) {
			nseg++
			largest = max(largest, len(s.ops))
			left := opt.Budget - time.Since(start)
			if left <= 0 {
				r.Counts["unknown"]++
				unknownKeys[k] = true
				continue
			}
			t0 := time.Now()
			res, info := porcupine.CheckOperationsVerbose(CounterModel(s.init), porcupineOps(s.ops, byIndex), min(opt.SegmentTimeout, left))
			slowest = max(slowest, time.Since(t0))
			// The exact check of the forced order (linear_order.go)
			// decides what porcupine's search could not in time, and
			// must agree with it where it did.
			fast, fi, fj := forcedOrder(s)
			switch {
			case res == porcupine.Unknown && fast:
				res = porcupine.Ok
				r.Counts["decided by order"]++
			case res == porcupine.Unknown:
				res = porcupine.Illegal
				r.Counts["decided by order"]++
				badKeys[k] = true
				if r.Counts["L"] < limit {
					r.Anomalies = append(r.Anomalies, orderAnomaly(s, fi, fj, byIndex))
				}
				r.Counts["L"]++
				continue
			case (res == porcupine.Ok) != fast:
				unknownKeys[k] = true
				r.Counts["unknown"]++
				r.Notes = append(r.Notes, fmt.Sprintf("key %d: the two checks disagree on a segment of %d calls (%.3fs .. %.3fs): porcupine %v, the forced order %v",
					k, len(s.ops), s.ops[0].Start.Seconds(), segEnd(s).Seconds(), res, fast))
				continue
			}
			switch res {
			case porcupine.Ok:
			case porcupine.Illegal:
				badKeys[k] = true
				if r.Counts["L"] < limit {
					r.Anomalies = append(r.Anomalies, illegal(s, info, byIndex))
				}
				r.Counts["L"]++
			default:
				unknownKeys[k] = true
				r.Counts["unknown"]++
				if r.Counts["unknown"] <= limit {
					r.Notes = append(r.Notes, fmt.Sprintf("key %d: UNKNOWN: a segment of %d calls (%.3fs .. %.3fs) not decided within %v",
						k, len(s.ops), s.ops[0].Start.Seconds(), segEnd(s).Seconds(), min(opt.SegmentTimeout, left).Round(time.Millisecond)))
				}
			}
		}
	}
	r.Notes = append([]string{fmt.Sprintf("%d keys in %d segments (the largest %d calls), checked in %v (the slowest segment %v): %d linearizable, %d not, %d unknown",
		len(keys), nseg, largest, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond),
		len(keys)-len(badKeys)-len(unknownKeys), len(badKeys), len(unknownKeys))}, r.Notes...)
	if r.Counts["unknown"] > 0 && time.Since(start) >= opt.Budget {
		r.Notes = append(r.Notes, fmt.Sprintf("the check's budget of %v ran out", opt.Budget))
	}
	switch {
	case r.Counts["L"] > 0:
		r.Valid = Invalid
	case r.Counts["unknown"] > 0:
		r.Valid = Unknown
	}
	return r
}

// orderAnomaly describes a segment the forced order found not
// linearizable: the call that fits nowhere (i == j), or call i that
// completed before call j began but must come after it.
func orderAnomaly(s segment, i, j int, byIndex map[int64]record.Op) Anomaly {
	a := Anomaly{Rule: "L", Key: s.key, Ops: []record.Op{byIndex[s.ops[i].Ref]}}
	what := describeHistoryOp(s.ops[i]) + " fits nowhere"
	if i != j {
		a.Ops = append(a.Ops, byIndex[s.ops[j].Ref])
		what = fmt.Sprintf("%s completed before %s began, but must come after it", describeHistoryOp(s.ops[i]), describeHistoryOp(s.ops[j]))
	}
	a.Msg = fmt.Sprintf("key %d: the %d calls from %.3fs to %.3fs (before them: last %d, read %d) are not linearizable: %s",
		s.key, len(s.ops), s.ops[0].Start.Seconds(), segEnd(s).Seconds(), s.init.Last, s.init.Bound, what)
	return a
}

func segEnd(s segment) time.Duration {
	var end time.Duration
	for _, o := range s.ops {
		end = max(end, o.End)
	}
	return end
}

// illegal describes a segment porcupine found not linearizable: its span,
// and the calls where the search got stuck (the last call of the longest
// order it found, and the earliest-completing call it could not place
// after it).
func illegal(s segment, info porcupine.LinearizationInfo, byIndex map[int64]record.Op) Anomaly {
	a := Anomaly{Rule: "L", Key: s.key}
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	placed := map[int]bool{}
	for _, id := range longest {
		placed[id] = true
	}
	stuck := -1
	for i, o := range s.ops {
		if !placed[i] && (stuck < 0 || o.End < s.ops[stuck].End) {
			stuck = i
		}
	}
	what := "no call could be placed first"
	if len(longest) > 0 {
		last := s.ops[longest[len(longest)-1]]
		a.Ops = append(a.Ops, byIndex[last.Ref])
		what = fmt.Sprintf("the longest order places %d calls, the last %s", len(longest), describeHistoryOp(last))
	}
	if stuck >= 0 {
		a.Ops = append(a.Ops, byIndex[s.ops[stuck].Ref])
		what += fmt.Sprintf("; then %s fits nowhere", describeHistoryOp(s.ops[stuck]))
	}
	a.Msg = fmt.Sprintf("key %d: the %d calls from %.3fs to %.3fs (before them: last %d, read %d) are not linearizable: %s",
		s.key, len(s.ops), s.ops[0].Start.Seconds(), segEnd(s).Seconds(), s.init.Last, s.init.Bound, what)
	return a
}

func describeHistoryOp(o history.Op) string {
	v := fmt.Sprint(o.First)
	if o.Last != o.First {
		v = fmt.Sprintf("%d..%d", o.First, o.Last)
	}
	what := "take"
	if o.Kind == history.Read {
		what = "current"
	}
	return fmt.Sprintf("%s → %s by %s [%.4fs .. %.4fs]", what, v, o.Client, o.Start.Seconds(), o.End.Seconds())
}
