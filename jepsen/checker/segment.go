package checker

import (
	"fmt"
	"slices"

	"github.com/seqd/seqd/jepsen/record"
)

// HasSegments reports whether ops hold values segments handed out (the
// segment workload).
func HasSegments(ops []record.Op) bool {
	for _, o := range ops {
		if o.F == record.Segment {
			return true
		}
	}
	return false
}

// Segments checks a segment run's values:
//
//   - S1: no value twice per key, over every successful call that handed
//     values of the key out: the segments' values, Next's values and
//     Reserve's ranges (a segment's values come from ranges it reserved,
//     so this is C1 across segments and the calls that share their keys);
//   - S2: each segment's values strictly increase, call after call.
//
// Across segments values are only trend-increasing by design, so neither
// C2 nor C3 applies to them (the order checker leaves them out).
func Segments(ops []record.Op, limit int) *Result {
	r := &Result{Valid: Valid, Counts: map[string]int{"S1": 0, "S2": 0}}
	add := func(rule string, key uint64, msg string, os ...record.Op) {
		if r.Counts[rule] < limit {
			r.Anomalies = append(r.Anomalies, Anomaly{Rule: rule, Key: key, Msg: msg, Ops: os})
		}
		r.Counts[rule]++
		r.Valid = Invalid
	}
	type span struct {
		first, last uint64
		op          int // index into ops
	}
	byKey := map[uint64][]span{}
	last := map[string]uint64{} // per segment (client)
	values := 0
	for i, o := range ops {
		if !o.IsCall() || o.Type != record.OK {
			continue
		}
		switch o.F {
		case record.Segment:
			if len(o.Keys) != 1 || len(o.Values) != int(o.Count) {
				add("S2", 0, fmt.Sprintf("a segment call for %d values returned %d", o.Count, len(o.Values)), o)
				continue
			}
			for _, v := range o.Values {
				if v <= last[o.Client] {
					add("S2", o.Keys[0], fmt.Sprintf("segment %s handed out %d after %d", o.Client, v, last[o.Client]), o)
				}
				last[o.Client] = v
				byKey[o.Keys[0]] = append(byKey[o.Keys[0]], span{v, v, i})
				values++
			}
		case record.Next:
			if len(o.Values) == len(o.Keys) {
				for j, k := range o.Keys {
					byKey[k] = append(byKey[k], span{o.Values[j], o.Values[j], i})
				}
			}
		case record.Reserve:
			if len(o.Values) == 2 && len(o.Keys) == 1 {
				byKey[o.Keys[0]] = append(byKey[o.Keys[0]], span{o.Values[0], o.Values[1], i})
			}
		}
	}
	keys := make([]uint64, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		spans := byKey[k]
		slices.SortFunc(spans, func(a, b span) int {
			if a.first != b.first {
				return cmpU(a.first, b.first)
			}
			return cmpU(a.last, b.last)
		})
		reach := spans[0] // the span reaching furthest so far
		for _, s := range spans[1:] {
			if s.first <= reach.last {
				a, b := ops[reach.op], ops[s.op]
				add("S1", k, fmt.Sprintf("key %d: %d..%d (%s, %s) and %d..%d (%s, %s) overlap", k,
					reach.first, reach.last, a.Client, a.F, s.first, s.last, b.Client, b.F), a, b)
			}
			if s.last > reach.last {
				reach = s
			}
		}
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d values from %d segments on %d keys, checked with every Next and Reserve of those keys", values, len(last), len(keys)))
	return r
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
