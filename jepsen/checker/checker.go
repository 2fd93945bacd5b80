package checker

import (
	"fmt"
	"sort"

	"github.com/seqd/seqd/internal/history"
	"github.com/seqd/seqd/jepsen/record"
)

// Validity is a verdict: true, false or unknown (JSON true, false, "unknown").
type Validity string

// Verdicts.
const (
	Valid   Validity = "true"
	Invalid Validity = "false"
	Unknown Validity = "unknown"
)

// MarshalJSON writes true, false or "unknown".
func (v Validity) MarshalJSON() ([]byte, error) {
	switch v {
	case Valid:
		return []byte("true"), nil
	case Invalid:
		return []byte("false"), nil
	}
	return []byte(`"unknown"`), nil
}

// UnmarshalJSON reads true, false or "unknown".
func (v *Validity) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*v = Valid
	case "false":
		*v = Invalid
	default:
		*v = Unknown
	}
	return nil
}

// Merge combines verdicts: any false is false, else any unknown is unknown.
func Merge(vs ...Validity) Validity {
	out := Valid
	for _, v := range vs {
		switch {
		case v == Invalid:
			return Invalid
		case v != Valid:
			out = Unknown
		}
	}
	return out
}

// Anomaly is one violation, with the history records involved.
type Anomaly struct {
	Rule string      `json:"rule"`
	Key  uint64      `json:"key"`
	Msg  string      `json:"msg"`
	Ops  []record.Op `json:"ops"`
	// HTML is the porcupine timeline of the key around the anomaly, if one
	// was rendered (relative to the store directory).
	HTML string `json:"html,omitempty"`
}

// Result is one checker's verdict.
type Result struct {
	Valid     Validity       `json:"valid"`
	Counts    map[string]int `json:"counts,omitempty"` // anomalies by rule (all of them)
	Anomalies []Anomaly      `json:"anomalies,omitempty"`
	Notes     []string       `json:"notes,omitempty"`
}

// Options tunes the checkers.
type Options struct {
	// Limit is the number of example anomalies kept per rule (default 10).
	Limit int
	// Grants are the worker grants the holders of a flake run logged (nil:
	// not checked); TrustClock says the run had --unsafe-flake-trust-clock,
	// whose ranges may overlap.
	Grants     []Grant
	TrustClock bool
	// Linear bounds the linearizability check of a sequence run.
	Linear LinearOptions
}

// Results is every checker's result.
type Results struct {
	Valid        Validity           `json:"valid"`
	Ops          Counts             `json:"ops"`
	Checkers     map[string]*Result `json:"checkers"`
	Availability Availability       `json:"availability"`
	// Flake describes the ids of a flake run (nil for a sequence run).
	Flake *FlakeStats `json:"flake,omitempty"`
}

// Counts counts client calls by outcome (and by operation).
type Counts struct {
	Total int                       `json:"total"`
	OK    int                       `json:"ok"`
	Fail  int                       `json:"fail"`
	Info  int                       `json:"info"`
	ByF   map[string]map[string]int `json:"by_f"`
}

// Check runs every checker over ops.
func Check(ops []record.Op, opt Options) *Results {
	if opt.Limit <= 0 {
		opt.Limit = 10
	}
	end := record.End(ops)
	windows := record.Windows(ops, end)
	r := &Results{Checkers: map[string]*Result{}}
	r.Ops = CountOps(ops)
	if HasIDs(ops) {
		r.Checkers["G1"] = Unique(ops, opt.Limit)
		r.Checkers["G2"] = WorkerOrder(ops, opt.Limit)
		r.Checkers["G3"] = IDTime(ops, windows, opt.Limit)
		r.Checkers["final-ids"] = FinalIDs(ops)
		if opt.Grants != nil {
			r.Checkers["grants"] = Grants(opt.Grants, opt.TrustClock, opt.Limit)
		}
		r.Flake = Flake(ops)
	} else {
		r.Checkers["order"] = Order(ops, opt.Limit)
		r.Checkers["linear"] = Linear(ops, opt.Linear, opt.Limit)
		r.Checkers["shape"] = Shape(ops, opt.Limit)
		r.Checkers["restart"] = Restart(ops, windows, opt.Limit)
		r.Checkers["final-reads"] = FinalReads(ops)
		if HasSegments(ops) {
			r.Checkers["segments"] = Segments(ops, opt.Limit)
		}
	}
	r.Checkers["findings"] = Findings(ops, opt.Limit)
	r.Availability = Avail(ops, windows)
	var vs []Validity
	for _, c := range r.Checkers {
		vs = append(vs, c.Valid)
	}
	if r.Ops.OK == 0 {
		vs = append(vs, Unknown)
	}
	r.Valid = Merge(vs...)
	return r
}

// CountOps counts client calls (not nemesis actions, not final reads).
func CountOps(ops []record.Op) Counts {
	c := Counts{ByF: map[string]map[string]int{}}
	for _, o := range ops {
		if !o.IsCall() || isFinal(o) {
			continue
		}
		c.Total++
		switch o.Type {
		case record.OK:
			c.OK++
		case record.Fail:
			c.Fail++
		default:
			c.Info++
		}
		f := o.F
		if o.F == record.Next && len(o.Keys) > 1 {
			f = "next-multi"
		}
		if c.ByF[f] == nil {
			c.ByF[f] = map[string]int{}
		}
		c.ByF[f][o.Type]++
	}
	return c
}

func isFinal(o record.Op) bool {
	return len(o.Client) >= 5 && o.Client[:5] == "final"
}

// Order checks C1, C2 and C3 over every successful call.
func Order(ops []record.Op, limit int) *Result {
	byIndex := map[int64]record.Op{}
	for _, o := range ops {
		byIndex[o.Index] = o
	}
	as, counts := history.CheckCounts(record.ToHistory(ops), limit)
	r := &Result{Valid: Valid, Counts: map[string]int{"C1": counts["C1"], "C2": counts["C2"], "C3": counts["C3"]}}
	for _, a := range as {
		x := Anomaly{Rule: a.Rule, Msg: a.Msg}
		for _, o := range a.Ops {
			x.Key = o.Key
			x.Ops = append(x.Ops, byIndex[o.Ref])
		}
		r.Anomalies = append(r.Anomalies, x)
	}
	if counts["C1"]+counts["C2"]+counts["C3"] > 0 {
		r.Valid = Invalid
	}
	return r
}

// Shape checks that every successful call returned what it asked for.
func Shape(ops []record.Op, limit int) *Result {
	r := &Result{Valid: Valid, Counts: map[string]int{"shape": 0, "repeat-order": 0}}
	add := func(rule string, key uint64, msg string, o record.Op) {
		if r.Counts[rule] < limit {
			r.Anomalies = append(r.Anomalies, Anomaly{Rule: rule, Key: key, Msg: msg, Ops: []record.Op{o}})
		}
		r.Counts[rule]++
		r.Valid = Invalid
	}
	for _, o := range ops {
		if o.IsNemesis() || o.Type != record.OK {
			continue
		}
		switch o.F {
		case record.Next, record.Current:
			if len(o.Values) != len(o.Keys) {
				add("shape", 0, fmt.Sprintf("%s of %d keys returned %d values", o.F, len(o.Keys), len(o.Values)), o)
				continue
			}
			if o.F == record.Current {
				continue
			}
			last := map[uint64]uint64{}
			for i, k := range o.Keys {
				v := o.Values[i]
				if v == 0 {
					add("shape", k, fmt.Sprintf("key %d: next returned 0 (values start at 1)", k), o)
				}
				if p, seen := last[k]; seen && v <= p {
					add("repeat-order", k, fmt.Sprintf("key %d listed twice in one call got %d then %d", k, p, v), o)
				}
				last[k] = v
			}
		case record.Reserve:
			if len(o.Values) != 2 || len(o.Keys) != 1 {
				add("shape", 0, "malformed reserve record", o)
				continue
			}
			if o.Values[0] == 0 {
				add("shape", o.Keys[0], fmt.Sprintf("key %d: reserve returned first value 0", o.Keys[0]), o)
			}
			if o.Values[1]-o.Values[0]+1 != uint64(o.Count) {
				add("shape", o.Keys[0], fmt.Sprintf("key %d: reserve of %d returned %d..%d", o.Keys[0], o.Count, o.Values[0], o.Values[1]), o)
			}
		}
	}
	return r
}

// FullRestart reports whether a fault stops and restarts every node: kill-all,
// and the operator's wipe-restart.
func FullRestart(fault string) bool { return fault == "kill-all" || fault == "wipe-restart" }

// Restart checks, for every full-cluster restart (kill-all, wipe-restart), that
// every value returned by a call that began after the restart is above every
// value returned by a call that completed before the cluster was killed, for
// the same key (and that Current is at least that).
func Restart(ops []record.Op, windows []record.Window, limit int) *Result {
	r := &Result{Valid: Valid, Counts: map[string]int{"R1": 0}}
	hops := record.ToHistory(ops)
	byIndex := map[int64]record.Op{}
	for _, o := range ops {
		byIndex[o.Index] = o
	}
	restarts := 0
	for _, w := range windows {
		if !FullRestart(w.Fault) {
			continue
		}
		restarts++
		before := map[uint64]history.Op{}
		for _, o := range hops {
			if o.Kind == history.Take && o.End < w.Start {
				if b, ok := before[o.Key]; !ok || o.Last > b.Last {
					before[o.Key] = o
				}
			}
		}
		for _, o := range hops {
			if o.Start <= w.End {
				continue
			}
			b, ok := before[o.Key]
			if !ok {
				continue
			}
			bad := (o.Kind == history.Take && o.First <= b.Last) || (o.Kind == history.Read && o.Last < b.Last)
			if !bad {
				continue
			}
			if r.Counts["R1"] < limit {
				what := "got"
				if o.Kind == history.Read {
					what = "current"
				}
				r.Anomalies = append(r.Anomalies, Anomaly{Rule: "R1", Key: o.Key,
					Msg: fmt.Sprintf("key %d: %s %d after the full restart at %.3fs, but %d was returned before the cluster went down",
						o.Key, what, o.First, w.End.Seconds(), b.Last),
					Ops: []record.Op{byIndex[b.Ref], byIndex[o.Ref]}})
			}
			r.Counts["R1"]++
			r.Valid = Invalid
		}
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d full-cluster restarts checked", restarts))
	return r
}

// FinalReads checks that the final reads (after every fault was healed)
// succeeded. Without any, the verdict is unknown.
func FinalReads(ops []record.Op) *Result {
	r := &Result{Valid: Unknown}
	attempts := 0
	for _, o := range ops {
		if o.Client != "final" {
			continue
		}
		attempts++
		if o.Type == record.OK {
			r.Valid = Valid
			r.Notes = append(r.Notes, fmt.Sprintf("Current of %d keys succeeded at %.3fs", len(o.Keys), o.Complete.Seconds()))
		}
	}
	switch {
	case r.Valid == Valid:
	case attempts == 0:
		r.Notes = append(r.Notes, "no final reads (the run was interrupted or stopped before them)")
	default:
		r.Notes = append(r.Notes, fmt.Sprintf("no successful final read in %d attempts: the cluster did not recover after every fault was healed", attempts))
	}
	for _, o := range ops {
		if isFinal(o) && o.Client != "final" && o.Type != record.OK {
			r.Notes = append(r.Notes, fmt.Sprintf("final read through %s: %s %s", o.Node, o.Type, o.Error))
		}
	}
	return r
}

// KeysOf returns the sorted distinct keys of the anomalies.
func KeysOf(as []Anomaly) []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	for _, a := range as {
		if !seen[a.Key] {
			seen[a.Key] = true
			out = append(out, a.Key)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
