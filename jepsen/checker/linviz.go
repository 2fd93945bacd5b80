package checker

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/seqd/seqd/internal/history"
	"github.com/seqd/seqd/jepsen/record"
)

// counterState is the per-key model's state: Last is the highest value
// returned by a take linearized so far, Bound the highest value a Current
// linearized so far has reported. A take must return values above both; a
// Current must report at least Last.
type counterState struct{ Last, Bound uint64 }

type counterInput struct {
	Kind history.Kind
	Rec  record.Op
}

// CounterModel is a porcupine model of one key of seqd: a counter whose
// takes (Next, Reserve) return values above everything taken or read
// before, and whose reads (Current) return at least the last value taken.
// It is the sequential specification behind C1-C3 (DESIGN.md §2): Linear
// checks every key's history against it, and Visualize draws the timelines
// of anomalies with it. A Current may read more than the last value taken
// (after a failover it reads a jump), and every take after it must then
// exceed what it read.
func CounterModel(init counterState) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			s := state.(counterState)
			in := input.(counterInput)
			v := output.([2]uint64) // first, last
			if in.Kind == history.Take {
				if v[0] <= s.Last || v[0] <= s.Bound {
					return false, s
				}
				return true, counterState{Last: v[1], Bound: s.Bound}
			}
			if v[1] < s.Last {
				return false, s
			}
			return true, counterState{Last: s.Last, Bound: max(s.Bound, v[1])}
		},
		DescribeOperation: func(input, output any) string {
			in := input.(counterInput)
			v := output.([2]uint64)
			what := in.Rec.F
			val := fmt.Sprint(v[0])
			if v[1] != v[0] {
				val = fmt.Sprintf("%d..%d", v[0], v[1])
			}
			return fmt.Sprintf("%s → %s @%s #%d", what, val, in.Rec.Node, in.Rec.Index)
		},
		DescribeState: func(state any) string {
			s := state.(counterState)
			if s.Bound > s.Last {
				return fmt.Sprintf("last %d, read %d", s.Last, s.Bound)
			}
			return fmt.Sprintf("last %d", s.Last)
		},
	}
}

// maxVizOps bounds the operations drawn around one anomaly.
const maxVizOps = 120

// Visualize writes an HTML timeline (porcupine's visualization) of the
// operations on key around anomaly a: the successful calls on that key
// invoked from a little before the anomaly's first operation to a little after
// its last, with the nemesis windows as annotations. It returns porcupine's
// verdict on that excerpt ("Ok" would mean the excerpt alone is
// linearizable).
func Visualize(path string, a Anomaly, ops []record.Op, windows []record.Window) (porcupine.CheckResult, error) {
	if len(a.Ops) == 0 {
		return porcupine.Unknown, fmt.Errorf("anomaly without operations")
	}
	lo, hi := a.Ops[0].Invoke, a.Ops[0].Complete
	for _, o := range a.Ops {
		lo, hi = min(lo, o.Invoke), max(hi, o.Complete)
	}
	byIndex := map[int64]record.Op{}
	for _, o := range ops {
		byIndex[o.Index] = o
	}
	// The key's operations, as per-key history ops.
	var keyOps []history.Op
	for _, h := range record.ToHistory(ops) {
		if h.Key == a.Key {
			keyOps = append(keyOps, h)
		}
	}
	// Widen the window around the anomaly until it holds about maxVizOps.
	margin := 200 * time.Millisecond
	var in []history.Op
	for range 8 {
		in = in[:0]
		for _, h := range keyOps {
			if h.Start >= lo-margin && h.Start <= hi+margin {
				in = append(in, h)
			}
		}
		if len(in) >= maxVizOps/2 {
			break
		}
		margin *= 2
	}
	// Keep the anomaly's own operations and the nearest others.
	mid := lo + (hi-lo)/2
	must := map[int64]bool{}
	for _, o := range a.Ops {
		must[o.Index] = true
	}
	sort.Slice(in, func(i, j int) bool {
		mi, mj := must[in[i].Ref], must[in[j].Ref]
		if mi != mj {
			return mi
		}
		return absDur(in[i].Start-mid) < absDur(in[j].Start-mid)
	})
	if len(in) > maxVizOps {
		in = in[:maxVizOps]
	}
	start := lo
	for _, h := range in {
		start = min(start, h.Start)
	}
	// The state before the excerpt: everything that completed before it began.
	var before []history.Op
	for _, h := range keyOps {
		if h.End < start {
			before = append(before, h)
		}
	}
	init := advance(counterState{}, before)
	pops := porcupineOps(in, byIndex)
	model := CounterModel(init)
	res, info := porcupine.CheckOperationsVerbose(model, pops, 10*time.Second)
	end := hi + margin
	var anns []porcupine.Annotation
	for _, w := range windows {
		if w.End < start || w.Start > end {
			continue
		}
		anns = append(anns, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           int64(max(w.Start, start)),
			End:             int64(min(w.End, end)),
			Description:     w.Fault + " " + strings.Join(w.Targets, " "),
			Details:         fmt.Sprintf("fault #%d %s from %.3fs to %.3fs", w.ID, w.Fault, w.Start.Seconds(), w.End.Seconds()),
			BackgroundColor: "#fde2e2",
		})
	}
	anns = append(anns, porcupine.Annotation{
		Tag:             "anomaly",
		Start:           int64(lo),
		End:             int64(hi),
		Description:     a.Rule,
		Details:         a.Msg,
		BackgroundColor: "#ffb3b3",
	})
	info.AddAnnotations(anns)
	f, err := os.Create(path)
	if err != nil {
		return res, err
	}
	defer f.Close()
	if err := porcupine.Visualize(model, info, f); err != nil {
		return res, err
	}
	return res, f.Close()
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
