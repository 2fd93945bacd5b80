package holder

import (
	"context"
	"errors"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
)

// kickRenew asks w's renewal loop to renew at once.
func (w *held) kickRenew() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// acquireOne acquires one more worker; concurrent callers share one
// acquisition.
func (h *Holder) acquireOne(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	ch := h.acquire
	if ch == nil {
		// The acquisition runs on its own, not under the caller's context:
		// a grant committed after the caller gave up is still installed,
		// rather than left to hold a worker until its lease lapses.
		ch = make(chan struct{})
		h.acquire = ch
		h.wg.Add(1)
		go h.acquireAsync(ch)
	}
	h.mu.Unlock()
	select {
	case <-ch:
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.acqErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// acquireTimeout bounds one acquisition.
const acquireTimeout = 10 * time.Second

// acquireAsync acquires one worker and installs it, then closes ch.
func (h *Holder) acquireAsync(ch chan struct{}) {
	defer h.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), acquireTimeout)
	defer cancel()
	go func() {
		select {
		case <-h.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	sent := h.cfg.Clock()
	g, err := h.cfg.Granter.Acquire(ctx, h.cfg.Namespace, h.id, h.cfg.Label)
	got := h.cfg.Clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { h.acquire = nil; close(ch) }()
	h.acqErr = err
	if err != nil {
		return
	}
	if h.cfg.Layout.UnitMs > 0 && g.Layout != h.cfg.Layout {
		h.acqErr = ErrLayoutMismatch
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		defer rcancel()
		_ = h.cfg.Granter.Release(rctx, g, h.id)
		return
	}
	gen, err := flake.NewGenerator(g.Layout, g.Worker, g.Lo, g.Hi, leadUnits(g.Layout, h.cfg.Lead))
	if err != nil {
		h.acqErr = err
		return
	}
	if h.closed {
		h.acqErr = ErrClosed
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		defer rcancel()
		_ = h.cfg.Granter.Release(rctx, g, h.id)
		return
	}
	h.ref.Observe(g.LeaderMs, got)
	w := &held{g: g, gen: gen, leaseEnd: sent + time.Duration(g.LeaseMs)*time.Millisecond, kick: make(chan struct{}, 1)}
	h.workers = append(h.workers, w)
	h.log.Info("flake worker acquired", "worker", g.Worker, "token", g.Token, "lo", g.Lo, "hi", g.Hi)
	h.wg.Add(1)
	go h.renewLoop(w)
}

func leadUnits(l flake.Layout, lead time.Duration) uint64 {
	return max(1, uint64(lead.Milliseconds())/uint64(l.UnitMs))
}

// renewLoop renews w every third of its lease until the holder closes or
// the grant is fenced.
func (h *Holder) renewLoop(w *held) {
	defer h.wg.Done()
	failed := false
	for {
		h.mu.Lock()
		period := time.Duration(w.g.LeaseMs) * time.Millisecond / 3
		h.mu.Unlock()
		if failed {
			// Retry soon: a failover takes a few seconds, and the lease
			// must not lapse for want of a retry.
			period = min(period, renewRetry)
		}
		t := time.NewTimer(period)
		select {
		case <-h.stop:
			t.Stop()
			return
		case <-w.kick:
			t.Stop()
		case <-t.C:
		}
		keep, ok := h.renew(w)
		if !keep {
			return
		}
		failed = !ok
	}
}

// renewRetry is how soon a failed renewal is retried.
const renewRetry = 250 * time.Millisecond

// renew renews w once; it answers keep false once w is fenced, and ok
// whether the renewal succeeded.
func (h *Holder) renew(w *held) (keep, ok bool) {
	h.mu.Lock()
	g := w.g
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(g.LeaseMs)*time.Millisecond/3)
	defer cancel()
	sent := h.cfg.Clock()
	ng, err := h.cfg.Granter.Renew(ctx, g, h.id)
	got := h.cfg.Clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case errors.Is(err, seqd.ErrFenced):
		h.fenced.Add(1)
		w.fenced = true
		h.drop(w)
		h.log.Warn("flake worker fenced: acquiring anew", "worker", g.Worker, "token", g.Token)
		return false, false
	case err != nil:
		h.log.Warn("flake worker renewal failed", "worker", g.Worker, "err", err)
		return true, false
	}
	h.renewNs.Store(int64(got - sent))
	h.ref.Observe(ng.LeaderMs, got)
	w.g.Hi, w.g.LeaseMs = ng.Hi, ng.LeaseMs
	w.gen.Extend(ng.Hi)
	w.leaseEnd = max(w.leaseEnd, sent+time.Duration(ng.LeaseMs)*time.Millisecond)
	return true, true
}

// drop removes w from the held workers; the caller holds h.mu.
func (h *Holder) drop(w *held) {
	for i, x := range h.workers {
		if x == w {
			h.workers = append(h.workers[:i], h.workers[i+1:]...)
			return
		}
	}
}

// Close stops issuing, stops the renewals and releases every worker (best
// effort, within ctx).
func (h *Holder) Close(ctx context.Context) error {
	var errs error
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		ws := h.workers
		h.workers = nil
		h.mu.Unlock()
		close(h.stop)
		h.wg.Wait()
		for _, w := range ws {
			if err := h.cfg.Granter.Release(ctx, w.g, h.id); err != nil && !errors.Is(err, seqd.ErrFenced) {
				errs = errors.Join(errs, err)
			}
		}
	})
	return errs
}
