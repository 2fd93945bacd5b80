package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/jepsen/record"
)

// The flake workload's checkers (README "Flake ids", guarantees G1-G3),
// over every successful ids call, final calls included:
//
//   - G1: no id is returned twice in a namespace;
//   - G2: for one worker of a namespace, an id returned by a call that
//     completed before another call began is smaller than that call's ids,
//     and the ids of one response strictly increase;
//   - G3: an id's decoded time lies within a second of its call (from the
//     harness's wall clock at invocation less a second to its completion
//     plus a second), checked only when the run had no clock faults;
//   - final-ids: after every fault was healed, ids calls on every node
//     succeeded.
//
// G2 and G3 decode the ids with the namespace's layout (recorded at the
// start of the history), and are skipped for obfuscated namespaces, whose
// ids are unordered by design.

// TimeSlack is G3's tolerance on each side of a call.
const TimeSlack = time.Second

// FlakeStats describe the ids a flake run returned.
type FlakeStats struct {
	// Calls counts ids calls (final ones included), OKCalls the successful
	// ones, IDs the ids they returned.
	Calls, OKCalls, IDs int
	Namespaces          []NamespaceStats `json:"namespaces"`
}

// NamespaceStats describe one namespace's ids and the use of its workers.
type NamespaceStats struct {
	Name        string        `json:"name"`
	Layout      string        `json:"layout"`
	Obfuscation string        `json:"obfuscation,omitempty"`
	IDs         int           `json:"ids"`
	Workers     []WorkerStats `json:"workers,omitempty"`
}

// WorkerStats describe the ids of one worker: how many, in how many calls,
// the holders that issued them (a node's service-mode holder, an embedded
// generator's incarnation; "?" for calls whose holder the client cannot
// tell), and the span of their decoded times.
type WorkerStats struct {
	Worker  uint64   `json:"worker"`
	IDs     int      `json:"ids"`
	Calls   int      `json:"calls"`
	Holders int      `json:"holders"`
	Sample  []string `json:"holders_sample,omitempty"`
	FirstMs int64    `json:"first_unix_ms"`
	LastMs  int64    `json:"last_unix_ms"`
}

// HasIDs reports whether ops are a flake workload's history.
func HasIDs(ops []record.Op) bool {
	for _, o := range ops {
		if o.F == record.IDs || o.F == record.NamespaceInfo {
			return true
		}
	}
	return false
}

// nsInfo is a namespace as recorded at the start of the history.
type nsInfo struct {
	layout      flake.Layout
	obfuscation string
}

// Namespaces returns the namespaces recorded in ops, by name.
func Namespaces(ops []record.Op) map[string]nsInfo {
	out := map[string]nsInfo{}
	for _, o := range ops {
		if o.F == record.NamespaceInfo && o.Layout != nil {
			out[o.Namespace] = nsInfo{layout: *o.Layout, obfuscation: o.Obfuscation}
		}
	}
	return out
}

// idOps returns the successful ids calls.
func idOps(ops []record.Op) []record.Op {
	var out []record.Op
	for _, o := range ops {
		if o.IsCall() && o.F == record.IDs && o.Type == record.OK {
			out = append(out, o)
		}
	}
	return out
}

// anomalies collects one rule's anomalies, keeping limit examples.
type anomalies struct {
	r     *Result
	limit int
}

func newAnomalies(limit int, rules ...string) anomalies {
	r := &Result{Valid: Valid, Counts: map[string]int{}}
	for _, rule := range rules {
		r.Counts[rule] = 0
	}
	return anomalies{r: r, limit: limit}
}

func (a anomalies) add(rule string, key uint64, msg string, ops ...record.Op) {
	if a.r.Counts[rule] < a.limit {
		a.r.Anomalies = append(a.r.Anomalies, Anomaly{Rule: rule, Key: key, Msg: msg, Ops: ops})
	}
	a.r.Counts[rule]++
	a.r.Valid = Invalid
}

// Unique checks G1: no id returned twice in a namespace (Key is the id).
func Unique(ops []record.Op, limit int) *Result {
	a := newAnomalies(limit, "G1")
	// Where each id was first seen: the call (an index into calls) and
	// the position in its response.
	type seen struct{ call, pos int32 }
	calls := idOps(ops)
	first := map[string]map[uint64]seen{}
	ids := 0
	for c, o := range calls {
		m := first[o.Namespace]
		if m == nil {
			m = map[uint64]seen{}
			first[o.Namespace] = m
		}
		for i, id := range o.Values {
			ids++
			if s, dup := m[id]; dup {
				prev := calls[s.call]
				where := "another call"
				if prev.Index == o.Index {
					where = "the same call"
				}
				a.add("G1", id, fmt.Sprintf("namespace %q: id %d returned twice (by %s %s at position %d, and by %s %s at position %d: %s)",
					o.Namespace, id, prev.Client, holderOf(prev), s.pos, o.Client, holderOf(o), i, where), prev, o)
				continue
			}
			m[id] = seen{call: int32(c), pos: int32(i)}
		}
	}
	a.r.Notes = append(a.r.Notes, fmt.Sprintf("%d ids in %d namespaces", ids, len(first)))
	return a.r
}

func holderOf(o record.Op) string {
	switch {
	case o.Holder != "":
		return "holder " + o.Holder
	case o.Node != "":
		return "via " + o.Node
	}
	return "(holder unknown)"
}

// span is one call's ids of one worker.
type span struct {
	op       record.Op
	min, max uint64
}

// WorkerOrder checks G2 per namespace and worker: ids of a call that
// completed before another began are smaller than the other's, and one
// response's ids strictly increase (Key is the worker).
func WorkerOrder(ops []record.Op, limit int) *Result {
	a := newAnomalies(limit, "G2", "G2-response")
	nss := Namespaces(ops)
	spans := map[workerKey][]span{}
	skipped := map[string]string{}
	for _, o := range idOps(ops) {
		info, ok := nss[o.Namespace]
		switch {
		case !ok:
			skipped[o.Namespace] = "its layout is not in the history"
			continue
		case info.obfuscation != "":
			skipped[o.Namespace] = "obfuscated (" + info.obfuscation + ")"
			continue
		}
		for i := 1; i < len(o.Values); i++ {
			if o.Values[i] <= o.Values[i-1] {
				a.add("G2-response", 0, fmt.Sprintf("namespace %q: the ids of one response do not strictly increase: %d then %d at position %d",
					o.Namespace, o.Values[i-1], o.Values[i], i), o)
				break
			}
		}
		byWorker := map[uint64]*span{}
		var order []uint64
		for _, id := range o.Values {
			d, err := info.layout.Decode(int64(id))
			if err != nil {
				a.add("G2-response", 0, fmt.Sprintf("namespace %q: %v", o.Namespace, err), o)
				continue
			}
			s := byWorker[d.Worker]
			if s == nil {
				s = &span{op: o, min: id, max: id}
				byWorker[d.Worker] = s
				order = append(order, d.Worker)
			}
			s.min, s.max = min(s.min, id), max(s.max, id)
		}
		for _, w := range order {
			k := workerKey{o.Namespace, w}
			spans[k] = append(spans[k], *byWorker[w])
		}
	}
	for _, k := range sortedKeys(spans) {
		for _, v := range realTimeViolations(spans[k]) {
			a.add("G2", k.worker, fmt.Sprintf("namespace %q worker %d: id %d from a call that completed at %.3fs is not below id %d from a call that began at %.3fs",
				k.ns, k.worker, v[0].max, v[0].op.Complete.Seconds(), v[1].min, v[1].op.Invoke.Seconds()), v[0].op, v[1].op)
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(skipped)) {
		a.r.Notes = append(a.r.Notes, fmt.Sprintf("namespace %q not checked: %s", ns, skipped[ns]))
	}
	return a.r
}

// workerKey names one worker of one namespace.
type workerKey struct {
	ns     string
	worker uint64
}

// sortedKeys returns the workers of m by namespace, then worker.
func sortedKeys[V any](m map[workerKey]V) []workerKey {
	keys := make([]workerKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ns != keys[j].ns {
			return keys[i].ns < keys[j].ns
		}
		return keys[i].worker < keys[j].worker
	})
	return keys
}

// realTimeViolations finds, for every span b, the largest id of the spans
// that completed before b was invoked; if it is not below b's smallest id,
// the pair (that span, b) violates real-time order.
func realTimeViolations(spans []span) [][2]span {
	byEnd := slices.Clone(spans)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].op.Complete < byEnd[j].op.Complete })
	byStart := slices.Clone(spans)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].op.Invoke < byStart[j].op.Invoke })
	var out [][2]span
	var best *span
	j := 0
	for _, b := range byStart {
		for ; j < len(byEnd) && byEnd[j].op.Complete < b.op.Invoke; j++ {
			if best == nil || byEnd[j].max > best.max {
				best = &byEnd[j]
			}
		}
		if best != nil && best.max >= b.min {
			out = append(out, [2]span{*best, b})
		}
	}
	return out
}

// ClockFaults lists the clock faults among the windows (faults named
// clock-*), once each.
func ClockFaults(windows []record.Window) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range windows {
		if strings.HasPrefix(w.Fault, "clock-") && !seen[w.Fault] {
			seen[w.Fault] = true
			out = append(out, w.Fault)
		}
	}
	sort.Strings(out)
	return out
}

// IDTime checks G3: every id's decoded time lies between its call's
// invocation less TimeSlack (and less one time unit, the id's time being
// the start of its unit) and its completion plus TimeSlack, on the
// harness's wall clock (Key is the id). Runs with clock faults are not
// checked (the verdict is valid, with notes saying so and how many calls
// would have failed the check, and by how much at worst).
func IDTime(ops []record.Op, windows []record.Window, limit int) *Result {
	a := newAnomalies(limit, "G3")
	cf := ClockFaults(windows)
	if len(cf) > 0 {
		// Measured for the report, never a verdict: a stepped leader
		// clock legitimately moves the ids' times.
		a = newAnomalies(0, "G3")
	}
	nss := Namespaces(ops)
	checked := 0
	var worst time.Duration
	for _, o := range idOps(ops) {
		info, ok := nss[o.Namespace]
		if !ok || info.obfuscation != "" || o.WallMs == 0 {
			continue
		}
		lo := o.WallMs - TimeSlack.Milliseconds() - int64(info.layout.UnitMs)
		hi := o.WallMs + o.Latency().Milliseconds() + TimeSlack.Milliseconds()
		for _, id := range o.Values {
			d, err := info.layout.Decode(int64(id))
			if err != nil {
				continue // G2-response reports it
			}
			checked++
			off := time.Duration(0)
			switch {
			case d.UnixMs < lo:
				off = time.Duration(d.UnixMs-o.WallMs) * time.Millisecond
			case d.UnixMs > hi:
				off = time.Duration(d.UnixMs-o.WallMs-o.Latency().Milliseconds()) * time.Millisecond
			default:
				continue
			}
			if off.Abs() > worst.Abs() {
				worst = off
			}
			a.add("G3", id, fmt.Sprintf("namespace %q: id %d decodes to %s, %v from its call (invoked at %s, took %v; allowed ±%v)",
				o.Namespace, id, time.UnixMilli(d.UnixMs).UTC().Format("15:04:05.000"), off, time.UnixMilli(o.WallMs).UTC().Format("15:04:05.000"),
				o.Latency().Round(time.Millisecond), TimeSlack), o)
			break // one anomaly per call
		}
	}
	if len(cf) > 0 {
		r := &Result{Valid: Valid, Counts: map[string]int{"G3": 0}}
		r.Notes = append(r.Notes, "not checked: the run had clock faults ("+strings.Join(cf, ", ")+")",
			fmt.Sprintf("measured only: %d calls had an id more than %v from the call (%d ids measured)", a.r.Counts["G3"], TimeSlack, checked))
		if worst != 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("the worst id was %v from its call", worst))
		}
		return r
	}
	a.r.Notes = append(a.r.Notes, fmt.Sprintf("%d ids checked against their calls' wall-clock times", checked))
	if worst != 0 {
		a.r.Notes = append(a.r.Notes, fmt.Sprintf("the worst id is %v outside its call", worst))
	}
	return a.r
}

// FinalIDs checks that after healing every node answered ids calls (the
// records of clients final-<node>). A node that never did makes the
// verdict unknown, as a failed final read does.
func FinalIDs(ops []record.Op) *Result {
	r := &Result{Valid: Unknown}
	ok, tried := map[string]int{}, map[string]int{}
	lastErr := map[string]string{}
	for _, o := range ops {
		if !strings.HasPrefix(o.Client, "final-") || o.F != record.IDs {
			continue
		}
		tried[o.Node]++
		if o.Type == record.OK {
			ok[o.Node]++
		} else {
			lastErr[o.Node] = o.Type + " " + o.Error
		}
	}
	if len(tried) == 0 {
		r.Notes = append(r.Notes, "no final ids calls (the run was interrupted or stopped before them)")
		return r
	}
	r.Valid = Valid
	for _, n := range slices.Sorted(maps.Keys(tried)) {
		if ok[n] == 0 {
			r.Valid = Unknown
			r.Notes = append(r.Notes, fmt.Sprintf("%s: no successful ids call in %d attempts after healing (last: %s)", n, tried[n], lastErr[n]))
			continue
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %d of %d ids calls succeeded", n, ok[n], tried[n]))
	}
	return r
}

// maxHolderSample bounds the holders listed per worker.
const maxHolderSample = 8

// Flake computes the flake statistics.
func Flake(ops []record.Op) *FlakeStats {
	st := &FlakeStats{}
	nss := Namespaces(ops)
	type acc struct {
		ws      WorkerStats
		holders map[string]bool
	}
	perNS := map[string]map[uint64]*acc{}
	idsNS := map[string]int{}
	for _, o := range ops {
		if !o.IsCall() || o.F != record.IDs {
			continue
		}
		st.Calls++
		if o.Type != record.OK {
			continue
		}
		st.OKCalls++
		st.IDs += len(o.Values)
		idsNS[o.Namespace] += len(o.Values)
		info, ok := nss[o.Namespace]
		if !ok || info.obfuscation != "" {
			continue
		}
		if perNS[o.Namespace] == nil {
			perNS[o.Namespace] = map[uint64]*acc{}
		}
		holder := o.Holder
		if holder == "" {
			holder = "?"
		}
		counted := map[uint64]bool{}
		for _, id := range o.Values {
			d, err := info.layout.Decode(int64(id))
			if err != nil {
				continue
			}
			a := perNS[o.Namespace][d.Worker]
			if a == nil {
				a = &acc{ws: WorkerStats{Worker: d.Worker, FirstMs: d.UnixMs, LastMs: d.UnixMs}, holders: map[string]bool{}}
				perNS[o.Namespace][d.Worker] = a
			}
			a.ws.IDs++
			a.ws.FirstMs, a.ws.LastMs = min(a.ws.FirstMs, d.UnixMs), max(a.ws.LastMs, d.UnixMs)
			if !counted[d.Worker] {
				counted[d.Worker] = true
				a.ws.Calls++
				a.holders[holder] = true
			}
		}
	}
	names := map[string]bool{}
	for n := range nss {
		names[n] = true
	}
	for n := range idsNS {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		ns := NamespaceStats{Name: n, IDs: idsNS[n]}
		if info, ok := nss[n]; ok {
			l := info.layout
			ns.Layout = fmt.Sprintf("%d time bits of %d ms, %d worker bits, %d sequence bits", l.TimeBits, l.UnitMs, l.WorkerBits, l.SequenceBits)
			ns.Obfuscation = info.obfuscation
		}
		for _, a := range perNS[n] {
			hs := slices.Sorted(maps.Keys(a.holders))
			a.ws.Holders = len(hs)
			a.ws.Sample = hs[:min(len(hs), maxHolderSample)]
			ns.Workers = append(ns.Workers, a.ws)
		}
		sort.Slice(ns.Workers, func(i, j int) bool { return ns.Workers[i].Worker < ns.Workers[j].Worker })
		st.Namespaces = append(st.Namespaces, ns)
	}
	return st
}
