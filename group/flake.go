package group

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sections"
)

// flakeProtocol is the replicated-command protocol that brought KindFlake.
var flakeProtocol = fsm.KindProtocol(fsm.KindFlake)

// ErrFlakeProtocol means the group is not yet on the protocol of flake
// commands: a rolling upgrade has not finished (every server must run a
// build that knows them before the leader writes one).
var ErrFlakeProtocol = fmt.Errorf("%w: flake ids need every server on protocol %d (finish the rolling upgrade)", seqd.ErrNotServing, flakeProtocol)

// wallMs reads the wall clock the leader stamps flake grants with.
func (g *Group) wallMs() int64 {
	if g.cfg.WallClock != nil {
		return g.cfg.WallClock()
	}
	return time.Now().UnixMilli()
}

// ApplyFlake decides flake operations on the leader: it stamps them with
// the leader's wall-clock time, gives each acquire the permits this leader
// may issue (see watch), commits them in one entry, and answers one result
// per op (see fsm.FlakeResult). It answers seqd.ErrNotLeader on a follower
// and ErrFlakeProtocol before the group is on protocol 3.
func (g *Group) ApplyFlake(ctx context.Context, ops []fsm.FlakeOp) ([]fsm.FlakeResult, error) {
	if !g.IsLeader() {
		return nil, seqd.ErrNotLeader
	}
	if g.fsm.Protocol() < flakeProtocol {
		return nil, ErrFlakeProtocol
	}
	now := g.wallMs()
	if err := g.host.WallClockOK(); err != nil && !g.cfg.UnsafeFlakeTrustClock {
		// The leader's clock cannot be trusted: no new grants, but its
		// holders may renew and release, stamped with no time (0), so
		// that their leases go on while the floor, and the ranges'
		// extension from it, stay where trusted times put them. (The
		// holders then ride on their ranges.)
		for _, op := range ops {
			if op.Type != fsm.OpRenew && op.Type != fsm.OpRelease {
				return nil, err
			}
		}
		now = 0
	}
	watched := map[string][]fsm.Permit{}
	for i, op := range ops {
		if _, ok := watched[op.Namespace]; !ok {
			watched[op.Namespace] = g.watch(op.Namespace)
		}
		if op.Type == fsm.OpAcquire {
			ops[i].Permits = watched[op.Namespace]
		}
	}
	resp, err := g.applyResponse(ctx, fsm.EncodeFlake(now, ops))
	if err != nil {
		return nil, err
	}
	g.stats.flakeEntries.Add(1)
	r, ok := resp.(*fsm.FlakeResponse)
	if !ok || len(r.Results) != len(ops) {
		return nil, fmt.Errorf("group: flake entry answered %T", resp)
	}
	return r.Results, nil
}

// maxPermits bounds the permits one acquire carries.
const maxPermits = 64

// flakeWatch is what this leader has seen of held workers: per worker, the
// renewal (its raft index) it last saw and when, on its steady clock. It
// belongs to one leadership term: a leader that lost leadership and won it
// back did not see the renewals in between, so it starts over.
type flakeWatch struct {
	mu   sync.Mutex
	term uint64
	seen map[watchKey]watchRec
}

type watchKey struct {
	ns     string
	worker uint64
}

type watchRec struct {
	index uint64
	at    time.Duration
}

// watch records the held workers of the namespace as seen now and answers
// the permits this leader may issue: a held worker whose last renewal this
// leader has watched stand, on its own steady clock (the lease clock, which
// counts suspension), for longer than two of the holder's leases (the
// lease plus a grace of one lease). The holder stopped issuing one lease
// after it sent that renewal, and the renewal was applied after it was
// sent, so by then its lease has ended whatever the wall clocks did. A
// newly elected leader has watched nothing yet: it treats every held
// worker as renewed at its election (DESIGN.md §10).
func (g *Group) watch(ns string) []fsm.Permit {
	ws, ok := g.fsm.Workers(ns)
	if !ok {
		return nil
	}
	clock := g.cfg.LeaseClock
	if clock == nil {
		clock = sections.BootClock
	}
	now, term := clock(), g.raft.CurrentTerm()
	w := &g.flakeWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.term != term || w.seen == nil {
		w.term, w.seen = term, map[watchKey]watchRec{}
	}
	held := map[watchKey]bool{}
	var permits []fsm.Permit
	for _, wk := range ws {
		if wk.Holder == "" {
			continue
		}
		k := watchKey{ns, wk.ID}
		held[k] = true
		r, ok := w.seen[k]
		if !ok || r.index != wk.RenewedIndex {
			w.seen[k] = watchRec{index: wk.RenewedIndex, at: now}
			continue
		}
		if now-r.at > 2*time.Duration(wk.LeaseMs)*time.Millisecond && len(permits) < maxPermits {
			permits = append(permits, fsm.Permit{Worker: wk.ID, Token: wk.Token, RenewedIndex: wk.RenewedIndex})
		}
	}
	for k := range w.seen {
		if k.ns == ns && !held[k] {
			delete(w.seen, k)
		}
	}
	return permits
}

// DeleteNamespace deletes a flake namespace through raft, on the serving
// leader of group 0, once every server of the configuration applies the
// deletion (see fsm's namespace deletion). Deleting a deleted namespace
// succeeds; an unknown one is seqd.ErrUnknownNamespace.
func (g *Group) DeleteNamespace(ctx context.Context, name string) error {
	if err := g.serving(); err != nil {
		return err
	}
	if err := g.kindsReady(fsm.KindBit(fsm.KindDeleteNamespace)); err != nil {
		return err
	}
	return g.apply(ctx, fsm.EncodeDeleteNamespace(name))
}
