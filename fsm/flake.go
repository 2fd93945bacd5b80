package fsm

import (
	"maps"
	"slices"
	"strings"

	"github.com/seqd/seqd/flake"
)

// The flake id family's replicated state (see the package flake): per
// namespace its layout, obfuscation setting and reference floor, and per
// worker the highest time unit ever granted to it (hwm), its holder and its
// fencing token. Uniqueness of flake ids rests on one rule kept here: a
// worker's new range starts at or above its hwm and above the namespace's
// floor, and every grant or extension raises the hwm to the range's end, so
// the ranges of one worker never overlap. No apply reads a clock: the
// leader's time travels in the entry (Command.NowMs).

// Limits of the flake commands.
const (
	// MaxHolderLen bounds a holder's incarnation id.
	MaxHolderLen = 64
	// MaxLabelLen bounds a holder's label (a node id or pod name).
	MaxLabelLen = 128
	// historyLen is how many past uses each worker remembers.
	historyLen = 8
)

// Worker is the replicated state of one worker of a namespace.
type Worker struct {
	ID uint64
	// HWM is the highest time unit ever granted to the worker: the end of
	// its last range. No later range starts below it.
	HWM uint64
	// Token is the fencing token: it rises on every grant and reclaim.
	Token uint64
	// Holder is the holding incarnation's id, "" when the worker is free.
	Holder string
	// Label names the holder for people (the last holder once free).
	Label string
	// LeaseMs is the lease the holder renews within, RenewedMs the
	// leader's wall-clock time of the last grant or renewal (for people),
	// and RenewedIndex its raft log index. A held worker is taken from
	// its holder only by an acquire that carries a Permit naming its token
	// and RenewedIndex: the leader issues one once its own steady clock has
	// seen that renewal stand for two leases (see group.Group.ApplyFlake),
	// never by comparing wall clocks, which may step.
	LeaseMs      uint64
	RenewedMs    int64
	RenewedIndex uint64
	// History lists the last uses of the worker, oldest first, for
	// forensics: which holder label issued ids in which time range.
	History []Use
}

// Use is one holder's range of a worker: time units (Lo, Hi].
type Use struct {
	Label  string
	Token  uint64
	Lo, Hi uint64
}

// Permit lets an acquire take worker Worker from its holder: the leader
// saw its last renewal (RenewedIndex, with fencing token Token) stand for
// longer than the lease plus a grace on its own steady clock. The permit is
// void if the worker was renewed, released or granted since.
type Permit struct {
	Worker, Token, RenewedIndex uint64
}

// OpType is the type of one operation in a KindFlake command.
type OpType uint8

// The flake operations. The values are part of the replicated log format.
const (
	OpCreateNamespace OpType = 1
	OpAcquire         OpType = 2
	OpRenew           OpType = 3
	OpRelease         OpType = 4
	OpReclaim         OpType = 5
	OpFloor           OpType = 6
)

// FlakeOp is one operation of a KindFlake command. Which fields count
// depends on Type:
//
//   - OpCreateNamespace: Namespace, Layout, Obfuscation, KeyCheck.
//   - OpAcquire: Namespace, Holder, Label, Span (units), LeaseMs, and
//     Permits for held workers it may take.
//   - OpRenew: Namespace, Worker, Token, Holder, Span, LeaseMs.
//   - OpRelease: Namespace, Worker, Token, Holder.
//   - OpReclaim: Namespace, Worker (an operator's forced reclaim).
//   - OpFloor: FloorMs (a restore's time floor, for every namespace).
type FlakeOp struct {
	Type        OpType
	Namespace   string
	Layout      flake.Layout
	Obfuscation string
	KeyCheck    string
	Holder      string
	Label       string
	Worker      uint64
	Token       uint64
	Span        uint64
	LeaseMs     uint64
	FloorMs     int64
	Permits     []Permit
}

// FlakeResult answers one FlakeOp: Grant for acquire and renew (the grant
// its holder uses, with the namespace's layout, the leader's time the entry
// carried and the op's lease), and Err,
// nil or an error wrapping one of the root package's errors
// (ErrUnknownNamespace, ErrInvalidNamespace, ErrNamespaceExists, ErrNoWorker,
// ErrLifetimeOver, ErrFenced). A failed op changes nothing.
type FlakeResult struct {
	Grant flake.Grant
	Err   error
}

// FlakeResponse is what Apply answers a KindFlake command with: one result
// per op, in order.
type FlakeResponse struct {
	Results []FlakeResult
}

// flakeNS is one namespace in the mirror. A deleted namespace keeps its
// layout, floor and workers (see namespace_delete.go).
type flakeNS struct {
	ns      flake.Namespace
	deleted bool
	workers map[uint64]Worker
}

// flakeState is the mirror of the flake bucket.
type flakeState struct {
	floorMs int64 // a restore's time floor under every namespace
	spaces  map[string]*flakeNS
}

// Namespace returns the named namespace, its floor raised to the
// cluster-wide time floor.
func (f *FSM) Namespace(name string) (flake.Namespace, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.flake.spaces[name]
	if !ok || n.deleted {
		return flake.Namespace{}, false
	}
	return f.flake.effective(n.ns), true
}

// Namespaces returns every namespace, sorted by name.
func (f *FSM) Namespaces() []flake.Namespace {
	f.mu.RLock()
	out := make([]flake.Namespace, 0, len(f.flake.spaces))
	for _, n := range f.flake.spaces {
		if !n.deleted {
			out = append(out, f.flake.effective(n.ns))
		}
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b flake.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Workers returns the workers of the namespace that have ever been used,
// sorted by id, and false for an unknown namespace.
func (f *FSM) Workers(name string) ([]Worker, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.flake.spaces[name]
	if !ok || n.deleted {
		return nil, false
	}
	out := slices.Collect(maps.Values(n.workers))
	for i := range out {
		out[i].History = slices.Clone(out[i].History)
	}
	slices.SortFunc(out, func(a, b Worker) int { return cmpU64(a.ID, b.ID) })
	return out, true
}

// SetUnsafeFlakeTrustClock (TESTING ONLY: `seqd serve
// --unsafe-flake-trust-clock`) makes flake grants and extensions start at
// the leader's time unit, ignoring the worker's high-water mark, the
// namespace's floor and a restore's floor: a naive Snowflake that trusts
// the leader's clock, for showing that a chaos test catches the duplicate
// ids it then issues when clocks step back and workers are reused. Every
// server of a cluster must have the same setting; call it before Apply.
func (f *FSM) SetUnsafeFlakeTrustClock(on bool) { f.trustClock.Store(on) }

// FlakeFloorMs is the cluster-wide time floor a restore set (0 if none).
func (f *FSM) FlakeFloorMs() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.flake.floorMs
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// effective returns ns with its floor raised to the cluster's time floor.
func (s *flakeState) effective(ns flake.Namespace) flake.Namespace {
	if s.floorMs > 0 {
		ns.Floor = max(ns.Floor, unitCeil(ns.Layout, s.floorMs))
	}
	return ns
}

// unitCeil is the first unit that starts at or after ms: a floor above
// every unit that ms could have been in.
func unitCeil(l flake.Layout, ms int64) uint64 {
	t := l.Unit(ms)
	if l.UnitStart(t) < ms {
		t++
	}
	return t
}
