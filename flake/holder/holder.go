package holder

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/bootclock"
	"github.com/seqd/seqd/flake"
)

// Granter is the cluster as a holder sees it: the leader decides grants
// through the Raft log. Renew answers an error wrapping seqd.ErrFenced when
// the grant was taken back.
type Granter interface {
	Acquire(ctx context.Context, namespace, holder, label string) (flake.Grant, error)
	Renew(ctx context.Context, g flake.Grant, holder string) (flake.Grant, error)
	Release(ctx context.Context, g flake.Grant, holder string) error
}

// ErrClosed means the holder was closed.
var ErrClosed = errors.New("flake: holder closed")

// Config configures a Holder.
type Config struct {
	Granter   Granter
	Namespace string
	// Label names the holder for people (a node id, a host or pod name).
	Label string
	// Clock is a clock that never steps and counts time suspended (see
	// Reference): the holder's lease is timed by it, and a clock that
	// stood still while the host was suspended would let the holder issue
	// past its lease. The default is bootclock.Now.
	Clock func() time.Duration
	// Workers is how many workers the holder may hold at once, for more
	// than one worker's rate (default 1).
	Workers int
	// Lead bounds how far ids may run ahead of the reference time by
	// borrowing (default 1 s, at least one unit).
	Lead time.Duration
	// Layout, when set (UnitMs > 0), is the namespace's layout as the
	// holder's owner read it: a grant that carries another layout (from a
	// leader of a build that predates some of its fields) is refused
	// with ErrLayoutMismatch, rather than issuing ids of another shape.
	Layout flake.Layout
	// Logger receives the holder's logs (default: none).
	Logger *slog.Logger
}

// ErrLayoutMismatch means a grant carried another layout than the
// namespace's (Config.Layout): the leader runs a build that does not
// know some of the layout's fields. The acquisition may be retried.
var ErrLayoutMismatch = fmt.Errorf("%w: the leader's layout of the namespace differs from this holder's (a leader of an older build?)", seqd.ErrNotServing)

// Holder issues flake ids of one namespace locally from workers granted to
// it through a Granter: a seqd node in service mode, or an embedded
// generator in a client. It acquires a worker on first use, renews each
// grant in the background every third of its lease and extends its range
// ahead of need, stops issuing from a grant at the first of its lease's end
// (counted from when the last renewal was sent) or its range's end, acquires
// anew when fenced, and releases its workers on Close.
//
// Its incarnation id is random and new for every Holder: a grant belongs to
// this Holder alone and is never persisted, so no restart, clock step or
// reschedule can use one range twice. A Holder is safe for concurrent use.
type Holder struct {
	cfg       Config
	id        string
	log       *slog.Logger
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu      sync.Mutex
	ref     *Reference
	workers []*held
	next    int           // round robin over workers
	acquire chan struct{} // non-nil while an acquire runs; closed, after acqErr is set, when it ends
	acqErr  error
	closed  bool

	issued, fenced atomic.Uint64
	renewNs        atomic.Int64 // the last renewal's round trip
}

// Stats describe a holder for metrics.
type Stats struct {
	// Issued counts the ids issued; Fenced the grants found fenced.
	Issued, Fenced uint64
	// Workers is how many workers are held and usable now.
	Workers int
	// RangeRemaining is, over the usable workers, the most time left in a
	// range before it must be extended (0 without one); Lead the most an
	// id ran ahead of the reference time by borrowing.
	RangeRemaining, Lead time.Duration
	// LastRenewal is the round trip of the last successful renewal.
	LastRenewal time.Duration
}

// Stats reports the holder's state.
func (h *Holder) Stats() Stats {
	st := Stats{Issued: h.issued.Load(), Fenced: h.fenced.Load(), LastRenewal: time.Duration(h.renewNs.Load())}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.cfg.Clock()
	refMs, ok := h.ref.NowMs()
	for _, w := range h.workers {
		if w.fenced || now >= w.leaseEnd || !ok {
			continue
		}
		st.Workers++
		unit := time.Duration(w.g.Layout.UnitMs) * time.Millisecond
		ref := w.g.Layout.Unit(refMs)
		if hi := w.gen.Hi(); hi > ref {
			st.RangeRemaining = max(st.RangeRemaining, time.Duration(hi-ref)*unit)
		}
		st.Lead = max(st.Lead, time.Duration(w.gen.Lead(ref))*unit)
	}
	return st
}

// held is one grant and its generator.
type held struct {
	g        flake.Grant
	gen      *flake.Generator
	leaseEnd time.Duration // a Clock reading: issue only before it
	fenced   bool
	kick     chan struct{} // renew now (the range ran out)
}

// NewHolder returns a holder; it acquires nothing until the first Next.
func New(cfg Config) *Holder {
	if cfg.Clock == nil {
		cfg.Clock = bootclock.Now
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.Lead <= 0 {
		cfg.Lead = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler) // a library logs only where it is told to
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	h := &Holder{cfg: cfg, id: hex.EncodeToString(b), stop: make(chan struct{})}
	h.log = cfg.Logger.With("namespace", cfg.Namespace, "holder", h.id)
	h.ref = NewReference(cfg.Clock)
	return h
}

// ID is the holder's incarnation id.
func (h *Holder) ID() string { return h.id }

// Layout is the layout the holder was configured with (Config.Layout;
// zero if none).
func (h *Holder) Layout() flake.Layout { return h.cfg.Layout }

// Next returns n ids, strictly increasing, from one of the holder's
// workers. It waits, up to ctx's deadline, for a grant, for a range
// extension, and for the reference time when ids would run more than the
// lead ahead of it; it answers an error wrapping seqd.ErrIDsAhead if the
// deadline is too close for that wait.
func (h *Holder) Next(ctx context.Context, n int) ([]int64, error) { return h.NextShard(ctx, n, 0) }

// NextShard is Next with the shard value sh in the layout's shard field
// (an error wrapping ErrInvalidShard if it does not fit). The ids of one
// call strictly increase; the ids of calls with one shard value do too,
// call after call, and ids of different shard values never collide.
func (h *Holder) NextShard(ctx context.Context, n int, sh uint64) ([]int64, error) {
	var buf [4]flake.Run
	runs, err := h.nextRuns(ctx, n, sh, buf[:0])
	if err != nil {
		return nil, err
	}
	return flake.AppendIDs(make([]int64, 0, n), runs...), nil
}

// NextRuns is Next with the ids as runs of consecutive ids, in order (the
// ids of one time unit are consecutive: a call's ids are a few runs). Its
// cost grows with the runs, about one per 4,096 ids in the default layout,
// where Next's grows with every id. A layout whose ids are not consecutive
// (flake.Layout.Consecutive) answers runs of one id.
func (h *Holder) NextRuns(ctx context.Context, n int) ([]flake.Run, error) {
	return h.nextRuns(ctx, n, 0, nil)
}

// NextShardRuns is NextRuns with the shard value sh (see NextShard).
func (h *Holder) NextShardRuns(ctx context.Context, n int, sh uint64) ([]flake.Run, error) {
	return h.nextRuns(ctx, n, sh, nil)
}

func (h *Holder) nextRuns(ctx context.Context, n int, sh uint64, runs []flake.Run) ([]flake.Run, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d ids", seqd.ErrInvalidArgument, n)
	}
	var bound *held // once a call has ids from a worker, it stays on it
	got := 0
	for {
		var wait time.Duration
		var err error
		runs, got, wait, err = h.try(ctx, runs, got, n, sh, &bound)
		if err != nil {
			return nil, err
		}
		if got == n {
			return runs, nil
		}
		if wait == 0 {
			continue
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, fmt.Errorf("%w: %d ids would run more than %v ahead of it before the deadline", seqd.ErrIDsAhead, n, h.cfg.Lead)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-h.stop:
			t.Stop()
			return nil, ErrClosed
		case <-t.C:
		}
	}
}

// ErrLeaseLapsed means every worker the holder may hold has lapsed: their
// renewals have failed for a lease (the leader unreachable, a partition).
// The renewals go on; the call may be retried.
var ErrLeaseLapsed = fmt.Errorf("%w: flake worker leases lapsed; renewing", seqd.ErrNotServing)

// ErrGrantLost means a call's worker stopped being usable (its lease ran
// out or it was fenced) before the call had all its ids; the ids it had
// are dropped (gaps) and the call may be retried.
var ErrGrantLost = fmt.Errorf("%w: flake worker's lease ended during the call", seqd.ErrNotServing)

// try appends what it can to runs (got counts their ids) under the lock,
// from *bound if set and otherwise from the first usable worker (round
// robin), which it then binds. It answers runs and got, and how long to
// wait before trying again (0: at once).
func (h *Holder) try(ctx context.Context, runs []flake.Run, got, n int, sh uint64, bound **held) ([]flake.Run, int, time.Duration, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return runs, got, 0, ErrClosed
	}
	now := h.cfg.Clock()
	usable := func(w *held) bool { return !w.fenced && now < w.leaseEnd }
	w := *bound
	if w != nil && !usable(w) {
		h.mu.Unlock()
		return runs, got, 0, ErrGrantLost
	}
	for i := 0; w == nil && i < len(h.workers); i++ {
		c := h.workers[h.next%len(h.workers)]
		h.next++
		if usable(c) {
			w = c
		}
	}
	if w == nil {
		if len(h.workers) >= h.cfg.Workers {
			// Every worker held has lapsed (renewals failing: no leader,
			// a partition). Acquiring more would only pile up workers
			// held until their leases lapse at the leader; the renewal
			// loops retry, and a worker comes back once one succeeds.
			for _, x := range h.workers {
				x.kickRenew()
			}
			h.mu.Unlock()
			return runs, got, 0, ErrLeaseLapsed
		}
		h.mu.Unlock()
		return runs, got, 0, h.acquireOne(ctx)
	}
	if err := w.g.Layout.CheckShard(sh); err != nil {
		h.mu.Unlock()
		return runs, got, 0, err
	}
	refMs, _ := h.ref.NowMs()
	before, ref := got, w.g.Layout.Unit(refMs)
	var err error
	for got < n && err == nil {
		var r flake.Run
		if r, err = w.gen.NextShardRun(n-got, ref, sh); r.Count > 0 {
			runs = append(runs, r)
			got += r.Count
		}
	}
	if got > before {
		*bound = w
		h.issued.Add(uint64(got - before))
	}
	unit := time.Duration(w.g.Layout.UnitMs) * time.Millisecond
	held := len(h.workers)
	h.mu.Unlock()
	switch {
	case err == nil:
		return runs, got, 0, nil
	case errors.Is(err, flake.ErrLifetime):
		return runs, got, 0, fmt.Errorf("%w: %v", seqd.ErrLifetimeOver, err)
	case errors.Is(err, flake.ErrRangeEnd):
		w.kickRenew() // the renewal extends the range
		return runs, got, min(unit, 5*time.Millisecond), nil
	}
	// ErrAhead: this worker is at its lead. A call not yet bound may use
	// another worker (acquiring one if the holder may hold more);
	// otherwise it waits for the reference to reach the next unit.
	// Another worker is only an addition: when none can be had (every
	// worker taken, or no leader to grant one during a failover), the call
	// waits for the clock on the workers it has rather than fail.
	if *bound == nil && held < h.cfg.Workers {
		if err := h.acquireOne(ctx); err == nil {
			return runs, got, 0, nil
		} else if ctx.Err() != nil {
			return runs, got, 0, err
		}
	}
	return runs, got, unit, nil
}
