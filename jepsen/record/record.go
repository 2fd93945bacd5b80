// Package record is the chaos test's history: every client operation with its
// invocation and completion times on one monotonic clock, its client, node,
// keys, outcome and values, and every nemesis action, written as JSON lines
// while the test runs.
package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/internal/history"
)

// Outcomes (Op.Type), as in Jepsen.
const (
	OK   = "ok"   // the call succeeded: its values constrain the checkers
	Fail = "fail" // the call certainly had no effect the client can see
	Info = "info" // unknown: timed out, or the connection broke mid-call
)

// Operations (Op.F).
const (
	Next    = "next"    // Next over Keys (a key may repeat)
	Reserve = "reserve" // Reserve Count values for Keys[0]; Values = [first, last]
	Current = "current" // Current over Keys
	// IDs is a flake call (the flake workload): Count ids of Namespace,
	// Values the ids returned (positive int64s), WallMs the harness's wall
	// clock when it was invoked.
	IDs = "ids"
	// Segment is a value (or values, increasing) a client.Segment handed
	// out for Keys[0] (the segment workload): Values. A segment's values
	// are unique across every client but only trend-increasing across
	// clients, so they count for uniqueness (C1) and per-segment order,
	// not for C2 or C3 (ToHistory leaves them out).
	Segment = "segment"
	// NamespaceInfo (Client == HarnessClient) records a flake namespace the
	// test created, with its Layout and Obfuscation, for the checkers.
	NamespaceInfo = "namespace"
	// Nemesis actions (Client == NemesisClient).
	FaultStart = "start"
	FaultHeal  = "heal"
	// Finding (Client == NemesisClient) is something a fault saw break
	// that no history checker can see, such as a raft group without a
	// serving leader for longer than the failover target while a majority
	// of its voters ran, or a cluster fenced by a restore that never
	// served: Rule names it, Error describes it, Invoke..Complete is when.
	Finding = "finding"
)

// NemesisClient is the Client of nemesis records.
const NemesisClient = "nemesis"

// HarnessClient is the Client of records about the test's setup (no call).
const HarnessClient = "harness"

// Op is one line of history.jsonl.
type Op struct {
	Index  int64    `json:"index"`
	Client string   `json:"client"`
	Node   string   `json:"node,omitempty"` // node the call went to (smart clients: the last one tried)
	F      string   `json:"f"`
	Keys   []uint64 `json:"keys,omitempty"`
	Count  uint32   `json:"count,omitempty"`
	Type   string   `json:"type"`
	Values []uint64 `json:"values,omitempty"`
	Error  string   `json:"error,omitempty"`
	// Invoke and Complete are nanoseconds since the start of the test.
	Invoke   time.Duration `json:"invoke_ns"`
	Complete time.Duration `json:"complete_ns"`
	// Nemesis records only.
	Fault   string   `json:"fault,omitempty"`
	FaultID int      `json:"fault_id,omitempty"`
	Class   string   `json:"class,omitempty"`
	Targets []string `json:"targets,omitempty"`
	// Outcome (heal records of operator faults) says what the cluster did:
	// refused, served from stale state, exited, rejoined...
	Outcome []string `json:"outcome,omitempty"`
	// Rule names a Finding.
	Rule string `json:"rule,omitempty"`
	// Flake records only (F IDs, NamespaceInfo). Holder names the
	// issuing holder when the client knows it (an embedded generator's
	// incarnation).
	Namespace   string        `json:"namespace,omitempty"`
	WallMs      int64         `json:"wall_ms,omitempty"`
	Holder      string        `json:"holder,omitempty"`
	Layout      *flake.Layout `json:"layout,omitempty"`
	Obfuscation string        `json:"obfuscation,omitempty"`
}

// IsNemesis reports whether o is a nemesis action.
func (o Op) IsNemesis() bool { return o.Client == NemesisClient }

// IsCall reports whether o is a client call (not a nemesis action nor a
// setup record).
func (o Op) IsCall() bool { return !o.IsNemesis() && o.Client != HarnessClient }

// Latency is Complete - Invoke.
func (o Op) Latency() time.Duration { return o.Complete - o.Invoke }

func (o Op) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// Recorder timestamps and stores operations, and appends each to a JSON
// lines file as it is added. It is safe for concurrent use.
type Recorder struct {
	origin time.Time
	mu     sync.Mutex
	ops    []Op
	w      *bufio.Writer
	f      *os.File
	err    error
}

// NewRecorder returns a recorder whose clock starts now, writing to path
// (no file if path is "").
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{origin: time.Now()}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		r.f, r.w = f, bufio.NewWriterSize(f, 1<<16)
	}
	return r, nil
}

// Now returns the time on the recorder's monotonic clock.
func (r *Recorder) Now() time.Duration { return time.Since(r.origin) }

// Origin returns the wall-clock time the clock started.
func (r *Recorder) Origin() time.Time { return r.origin }

// Add assigns op the next index, stores it and writes it out.
func (r *Recorder) Add(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = int64(len(r.ops))
	r.ops = append(r.ops, op)
	if r.w != nil && r.err == nil {
		b, _ := json.Marshal(op)
		b = append(b, '\n')
		_, r.err = r.w.Write(b)
	}
	return op
}

// Ops returns a copy of every operation so far, in the order added.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Flush writes buffered lines out.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil && r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	err := r.Flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
		r.f, r.w = nil, nil
	}
	return err
}

// Read parses a history written by a Recorder.
func Read(rd io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var o Op
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		ops = append(ops, o)
	}
	return ops, sc.Err()
}

// Load reads a history file.
func Load(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// ToHistory converts the successful client operations into the per-key
// operations of internal/history (Ref is the record's Index). Records whose
// values do not fit their call (which the shape checker reports) are skipped.
func ToHistory(ops []Op) []history.Op {
	var out []history.Op
	for _, o := range ops {
		if o.IsNemesis() || o.Type != OK {
			continue
		}
		switch o.F {
		case Next, Current:
			if len(o.Values) != len(o.Keys) {
				continue
			}
			kind := history.Take
			if o.F == Current {
				kind = history.Read
			}
			for i, k := range o.Keys {
				out = append(out, history.Op{Kind: kind, Key: k, First: o.Values[i], Last: o.Values[i],
					Start: o.Invoke, End: o.Complete, Client: o.Client, Ref: o.Index})
			}
		case Reserve:
			if len(o.Values) != 2 || len(o.Keys) != 1 {
				continue
			}
			out = append(out, history.Op{Kind: history.Take, Key: o.Keys[0], First: o.Values[0], Last: o.Values[1],
				Start: o.Invoke, End: o.Complete, Client: o.Client, Ref: o.Index})
		}
	}
	return out
}

// Window is one fault, from the moment it was in place (its injection
// completed; for a membership or operator fault, whose injection takes
// seconds and acts from its first step, when its injection began) to the
// end of its healing.
type Window struct {
	ID      int           `json:"id"`
	Fault   string        `json:"fault"`
	Class   string        `json:"class"`
	Targets []string      `json:"targets"`
	Outcome []string      `json:"outcome,omitempty"`
	Start   time.Duration `json:"start_ns"`
	End     time.Duration `json:"end_ns"`
	// Healing is when healing began (End is when it completed).
	Healing time.Duration `json:"healing_ns"`
}

// Windows pairs the nemesis records into fault windows, ordered by start.
// A fault that was never healed ends at end.
func Windows(ops []Op, end time.Duration) []Window {
	byID := map[int]*Window{}
	var order []int
	for _, o := range ops {
		if !o.IsNemesis() || o.FaultID == 0 || (o.F != FaultStart && o.F != FaultHeal) {
			continue
		}
		w := byID[o.FaultID]
		if w == nil {
			w = &Window{ID: o.FaultID, Fault: o.Fault, Class: o.Class, Targets: o.Targets, Start: -1, End: -1, Healing: -1}
			byID[o.FaultID] = w
			order = append(order, o.FaultID)
		}
		switch o.F {
		case FaultStart:
			w.Start, w.Targets = o.Complete, o.Targets
			if StartsAtInvoke(o.Class) {
				w.Start = o.Invoke
			}
		case FaultHeal:
			w.Healing, w.End = o.Invoke, o.Complete
			if len(o.Outcome) > 0 {
				w.Outcome = o.Outcome
			}
		}
	}
	var out []Window
	for _, id := range order {
		w := *byID[id]
		if w.Start < 0 {
			w.Start = w.Healing
		}
		if w.End < 0 {
			w.End, w.Healing = end, end
		}
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// StartsAtInvoke reports whether the windows of a fault class start when
// the injection begins: membership and operator faults take seconds to
// inject and act from their first step (a removal, a stopped server).
func StartsAtInvoke(class string) bool { return class == "membership" || class == "operator" }

// End returns the largest completion time in ops.
func End(ops []Op) time.Duration {
	var e time.Duration
	for _, o := range ops {
		e = max(e, o.Complete, o.Invoke)
	}
	return e
}
