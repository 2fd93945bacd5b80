package fsm

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
)

// Applying a KindFlake command: each op against a copy-on-write working
// copy (flakeTxn), then one transaction, then the mirror.

// applyFlake applies the ops of one KindFlake command against a working
// copy of the touched namespaces, writes what changed in one transaction,
// and then installs it in the mirror.
func (f *FSM) applyFlake(l *raft.Log, nowMs int64, ops []FlakeOp) any {
	if l.Index <= f.loaded.Load() {
		// A replay: when a server restarts, raft applies its log again
		// from the last snapshot, over a file that already holds every
		// entry up to the index it was opened at. Unlike the sequence
		// commands, flake ops are not idempotent (an acquire takes the
		// next free worker and raises its token), so applying one twice
		// would make this replica diverge from the others.
		res := make([]FlakeResult, len(ops))
		for i := range res {
			res[i].Err = fmt.Errorf("%w: entry %d", errReplayed, l.Index)
		}
		return &FlakeResponse{Results: res}
	}
	f.mu.RLock()
	w := flakeTxn{index: l.Index, now: nowMs, floorMs: f.flake.floorMs, base: f.flake.spaces, touched: map[string]*flakeNS{},
		trustClock: f.trustClock.Load()}
	res := make([]FlakeResult, len(ops))
	for i, op := range ops {
		res[i] = w.apply(op)
	}
	f.mu.RUnlock()
	if len(w.touched) > 0 || w.floorMs != f.flake.floorMs {
		if err := f.write(l, func(tx *bolt.Tx) error { return w.persist(tx) }); err != nil {
			return err
		}
		f.mu.Lock()
		f.flake.floorMs = w.floorMs
		maps.Copy(f.flake.spaces, w.touched)
		f.mu.Unlock()
	}
	return &FlakeResponse{Results: res}
}

// errReplayed answers a flake entry applied before (see applyFlake).
var errReplayed = errors.New("fsm: flake entry already applied")

// flakeTxn is one command's working copy: namespaces it changed are copied
// into touched (copy on write), the mirror (base) is only read.
type flakeTxn struct {
	index    uint64 // the entry's raft log index
	now      int64
	floorMs  int64
	base     map[string]*flakeNS
	touched  map[string]*flakeNS
	dirtyWks map[string]map[uint64]bool
	// trustClock is SetUnsafeFlakeTrustClock's setting (testing only).
	trustClock bool
}

// get returns the namespace's working copy, copying it from base first.
func (t *flakeTxn) get(name string) (*flakeNS, bool) {
	if n, ok := t.touched[name]; ok {
		return n, true
	}
	b, ok := t.base[name]
	if !ok {
		return nil, false
	}
	n := &flakeNS{ns: b.ns, deleted: b.deleted, workers: maps.Clone(b.workers)}
	t.touched[name] = n
	return n, true
}

func (t *flakeTxn) dirty(ns string, w uint64) {
	if t.dirtyWks == nil {
		t.dirtyWks = map[string]map[uint64]bool{}
	}
	if t.dirtyWks[ns] == nil {
		t.dirtyWks[ns] = map[uint64]bool{}
	}
	t.dirtyWks[ns][w] = true
}

func (t *flakeTxn) apply(op FlakeOp) FlakeResult {
	switch op.Type {
	case OpCreateNamespace:
		return FlakeResult{Err: t.create(op)}
	case OpFloor:
		t.floorMs = max(t.floorMs, op.FloorMs)
		return FlakeResult{}
	}
	n, ok := t.touched[op.Namespace]
	if !ok {
		n, ok = t.base[op.Namespace]
	}
	switch {
	case !ok:
		return FlakeResult{Err: fmt.Errorf("%w: %q", seqd.ErrUnknownNamespace, op.Namespace)}
	case n.deleted && (op.Type == OpRenew || op.Type == OpRelease):
		// Its holders were fenced by the delete: they stop and acquire
		// anew, which finds no namespace.
		return FlakeResult{Err: fmt.Errorf("%w: namespace %q was deleted", seqd.ErrFenced, op.Namespace)}
	case n.deleted:
		return FlakeResult{Err: fmt.Errorf("%w: %q", seqd.ErrUnknownNamespace, op.Namespace)}
	}
	switch op.Type {
	case OpAcquire:
		return t.acquire(op)
	case OpRenew:
		return t.renew(op)
	case OpRelease:
		return FlakeResult{Err: t.release(op)}
	case OpReclaim:
		return FlakeResult{Err: t.reclaim(op)}
	}
	return FlakeResult{Err: fmt.Errorf("%w: flake op %d", seqd.ErrInvalidArgument, op.Type)}
}

// obfuscationName is an obfuscation setting as people read it.
func obfuscationName(o string) string {
	if o == flake.ObfuscateNone {
		return "none"
	}
	return o
}

func (t *flakeTxn) create(op FlakeOp) error {
	if err := flake.ValidateNamespace(op.Namespace, op.Layout, op.Obfuscation); err != nil {
		return err
	}
	if (op.Obfuscation == flake.ObfuscateNone) != (op.KeyCheck == "") || len(op.KeyCheck) > MaxHolderLen {
		return fmt.Errorf("%w: an obfuscated namespace needs a key check, and only it", seqd.ErrInvalidNamespace)
	}
	n, ok := t.touched[op.Namespace]
	if !ok {
		n, ok = t.base[op.Namespace]
	}
	if ok {
		same := n.ns.Layout == op.Layout && n.ns.Obfuscation == op.Obfuscation && n.ns.KeyCheck == op.KeyCheck
		switch {
		case !same && n.deleted:
			return fmt.Errorf("%w: %q was deleted, and keeps its workers' time marks: create it again with its layout (%s), or use another name", seqd.ErrNamespaceExists, op.Namespace, describeLayout(n.ns.Layout))
		case !same:
			return fmt.Errorf("%w: %q has layout %s, obfuscation %s; this call asked for layout %s, obfuscation %s",
				seqd.ErrNamespaceExists, op.Namespace, n.ns.Layout, obfuscationName(n.ns.Obfuscation), op.Layout, obfuscationName(op.Obfuscation))
		case !n.deleted:
			return nil // created before with the same settings
		}
		// Created again after a delete: back with its workers and floor
		// (see namespace_delete.go).
		n, _ = t.get(op.Namespace)
		n.deleted = false
		n.ns.Floor = max(n.ns.Floor, unitCeil(n.ns.Layout, max(t.now, t.floorMs)))
		return nil
	}
	if op.Layout.EpochMs > t.now {
		return fmt.Errorf("%w: epoch %s is after the leader's time %s", seqd.ErrInvalidNamespace, seqd.Date(op.Layout.EpochMs), seqd.Date(t.now))
	}
	if op.Layout.End() <= t.now {
		return fmt.Errorf("%w: %q ended at %s", seqd.ErrLifetimeOver, op.Namespace, seqd.Date(op.Layout.End()))
	}
	t.touched[op.Namespace] = &flakeNS{
		ns:      flake.Namespace{Name: op.Namespace, Layout: op.Layout, Obfuscation: op.Obfuscation, KeyCheck: op.KeyCheck, Floor: unitCeil(op.Layout, max(t.now, t.floorMs))},
		workers: map[uint64]Worker{},
	}
	return nil
}

// floorFor is the namespace's floor raised to the leader's time and the
// restore floor; an op that succeeds stores it.
func (t *flakeTxn) floorFor(n *flakeNS) uint64 {
	return max(n.ns.Floor, n.ns.Layout.Unit(t.now), unitCeil(n.ns.Layout, t.floorMs))
}

// bounds returns what a grant or an extension of worker w starts at or
// above: the namespace's floor (floorFor) and the worker's high-water mark.
// A range starting above both is what keeps the ranges of one worker apart,
// whatever the clocks do.
//
// With SetUnsafeFlakeTrustClock (testing only) it returns the leader's time
// unit and no mark instead: a naive Snowflake, whose ranges start wherever
// the leader's clock says, so that one worker's ranges can overlap.
func (t *flakeTxn) bounds(n *flakeNS, w Worker) (floor, mark uint64) {
	if t.trustClock {
		return n.ns.Layout.Unit(t.now), 0
	}
	return t.floorFor(n), w.HWM
}

// grantTime is the time a grant tells its holder: the leader's time, or
// the floor's if the leader's clock is behind it (after a step back), so
// that a new holder's reference starts where its range does.
func (t *flakeTxn) grantTime(n *flakeNS, floor uint64) int64 {
	return max(t.now, n.ns.Layout.UnitStart(floor))
}

// grantLease is the lease a grant tells its holder: the op's.
func grantLease(op FlakeOp) uint32 { return uint32(min(op.LeaseMs, math.MaxUint32)) }

func validHolder(op FlakeOp) error {
	switch {
	case op.Holder == "" || len(op.Holder) > MaxHolderLen || op.Holder[0] == 0:
		return fmt.Errorf("%w: holder id of %d bytes (want 1 to %d)", seqd.ErrInvalidArgument, len(op.Holder), MaxHolderLen)
	case len(op.Label) > MaxLabelLen:
		return fmt.Errorf("%w: label of %d bytes (at most %d)", seqd.ErrInvalidArgument, len(op.Label), MaxLabelLen)
	case op.Span == 0 || op.LeaseMs == 0:
		return fmt.Errorf("%w: span and lease must be positive", seqd.ErrInvalidArgument)
	}
	return nil
}

func (t *flakeTxn) acquire(op FlakeOp) FlakeResult {
	if err := validHolder(op); err != nil {
		return FlakeResult{Err: err}
	}
	n, _ := t.get(op.Namespace)
	floor := t.floorFor(n)
	if floor >= n.ns.Layout.MaxUnit() {
		return FlakeResult{Err: fmt.Errorf("%w: %q", seqd.ErrLifetimeOver, op.Namespace)}
	}
	permitted := map[uint64]Permit{}
	for _, p := range op.Permits {
		permitted[p.Worker] = p
	}
	// A free worker (released, or held under a valid permit) whose range
	// would start soonest: its hwm may lie up to a range ahead of the
	// floor, and the new holder's ids would have to wait for time to
	// reach it. One never used (the used ones are 0 to len-1) starts at
	// the floor; it is taken when no free used worker does as well.
	id, found := uint64(0), false
	for wid, w := range n.workers {
		if p, ok := permitted[wid]; w.Holder != "" && (!ok || p.Token != w.Token || p.RenewedIndex != w.RenewedIndex) {
			continue
		}
		if !found || w.HWM < n.workers[id].HWM || (w.HWM == n.workers[id].HWM && wid < id) {
			id, found = wid, true
		}
	}
	unused := uint64(len(n.workers))
	if (!found || n.workers[id].HWM > floor) && unused < n.ns.Layout.Workers() {
		id, found = unused, true
	}
	if !found {
		return FlakeResult{Err: fmt.Errorf("%w: all %d workers of %q are held", seqd.ErrNoWorker, n.ns.Layout.Workers(), op.Namespace)}
	}
	w := n.workers[id]
	floor, mark := t.bounds(n, w)
	n.ns.Floor = max(n.ns.Floor, floor)
	g := flake.Grant{Namespace: op.Namespace, Layout: n.ns.Layout, Worker: id, LeaderMs: t.grantTime(n, floor), LeaseMs: grantLease(op)}
	if w.Holder != "" {
		g.Reclaimed, g.ReclaimedOld = true, w.Label
	}
	w.ID = id
	w.Token++
	g.Token = w.Token
	g.Lo = max(mark, floor)
	g.Hi = g.Lo + min(op.Span, n.ns.Layout.MaxUnit()-g.Lo)
	w.HWM = g.Hi
	w.Holder, w.Label, w.LeaseMs, w.RenewedMs, w.RenewedIndex = op.Holder, op.Label, op.LeaseMs, t.now, t.index
	w.History = append(w.History, Use{Label: op.Label, Token: w.Token, Lo: g.Lo, Hi: g.Hi})
	if len(w.History) > historyLen {
		w.History = slices.Clone(w.History[len(w.History)-historyLen:])
	}
	n.workers[id] = w
	t.dirty(op.Namespace, id)
	return FlakeResult{Grant: g}
}

// fenced checks that op's holder still holds the worker with op's token.
func (t *flakeTxn) fenced(n *flakeNS, op FlakeOp) (Worker, error) {
	w, ok := n.workers[op.Worker]
	if !ok || w.Holder == "" || w.Holder != op.Holder || w.Token != op.Token || op.Holder[0] == 0 {
		return w, fmt.Errorf("%w: worker %d of %q (token %d)", seqd.ErrFenced, op.Worker, op.Namespace, op.Token)
	}
	return w, nil
}

func (t *flakeTxn) renew(op FlakeOp) FlakeResult {
	if err := validHolder(op); err != nil {
		return FlakeResult{Err: err}
	}
	n, _ := t.get(op.Namespace)
	w, err := t.fenced(n, op)
	if err != nil {
		return FlakeResult{Err: err}
	}
	floor, mark := t.bounds(n, w)
	n.ns.Floor = max(n.ns.Floor, floor)
	hi := max(mark, floor+min(op.Span, n.ns.Layout.MaxUnit()-min(floor, n.ns.Layout.MaxUnit())))
	lo := w.HWM
	if k := len(w.History); k > 0 && w.History[k-1].Token == w.Token {
		lo = w.History[k-1].Lo
		w.History = slices.Clone(w.History)
		w.History[k-1].Hi = hi
	}
	w.HWM = hi
	w.LeaseMs, w.RenewedMs, w.RenewedIndex = op.LeaseMs, t.now, t.index
	n.workers[op.Worker] = w
	t.dirty(op.Namespace, op.Worker)
	return FlakeResult{Grant: flake.Grant{Namespace: op.Namespace, Layout: n.ns.Layout, Worker: w.ID, Token: w.Token, Lo: lo, Hi: hi,
		LeaderMs: t.grantTime(n, floor), LeaseMs: grantLease(op)}}
}

func (t *flakeTxn) release(op FlakeOp) error {
	n, _ := t.get(op.Namespace)
	w, err := t.fenced(n, op)
	if err != nil {
		return err
	}
	w.Holder = ""
	n.workers[op.Worker] = w
	t.dirty(op.Namespace, op.Worker)
	return nil
}

func (t *flakeTxn) reclaim(op FlakeOp) error {
	n, _ := t.get(op.Namespace)
	w, ok := n.workers[op.Worker]
	if !ok {
		return fmt.Errorf("%w: worker %d of %q was never used", seqd.ErrInvalidArgument, op.Worker, op.Namespace)
	}
	if w.Holder == "" || w.Holder == ReclaimedHolder {
		return nil
	}
	// The holder is fenced at once (its token is gone), but it may issue
	// until its own lease ends: the worker stays held, by no one, until a
	// leader watched this entry stand for two leases (a permit), so that
	// no new holder's ids can come before the old one's last (G2).
	w.Holder = ReclaimedHolder
	w.Token++
	w.RenewedMs, w.RenewedIndex = t.now, t.index
	n.workers[op.Worker] = w
	t.dirty(op.Namespace, op.Worker)
	return nil
}

// ReclaimedHolder holds a worker an operator reclaimed until a permit
// frees it. It starts with a zero byte, which validHolder refuses in a
// real holder's id.
const ReclaimedHolder = "\x00reclaimed"
