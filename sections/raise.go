package sections

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/seqd/seqd"
)

type raiseReq struct {
	sec    *section
	target uint64
}

// raiseForCall starts, as one unit handed to the raiser (so in one
// Store.Raise), the raises that taking one value per listed key needs. Per
// section, the call needs the highest of cur(key) + (times key is listed)
// over its keys; every section whose max is below that and that has no raise
// in flight is raised to that plus one step. A section with a raise already
// in flight is left to it: if that raise falls short, take raises the section
// again on its own. Keys whose values would pass MaxValue are left to take,
// which reports ErrExhausted. now is the call's reading of the clock.
func (a *Allocator) raiseForCall(space string, keys []uint64, now time.Duration) error {
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	var reqs []raiseReq
	defer func() { a.queueRaises(reqs) }()
	for i := 0; i < len(sorted); {
		sec, err := a.section(space, sorted[i], now)
		if err != nil {
			return err
		}
		size := sec.space.sectionSize
		j := i + 1
		for j < len(sorted) && sorted[j]/size == sec.id {
			j++
		}
		sec.mu.Lock()
		if err := a.checkLocked(sec, now); err != nil {
			sec.mu.Unlock()
			return err
		}
		var need uint64
		for p := i; p < j; {
			q := p + 1
			for q < j && sorted[q] == sorted[p] {
				q++
			}
			cur, n := sec.get(sorted[p]), uint64(q-p)
			if n <= seqd.MaxValue-cur && cur+n > need {
				need = cur + n
			}
			p = q
		}
		if need > sec.max && !sec.raising {
			sec.raising = true
			sec.raiseDone = make(chan struct{})
			reqs = append(reqs, raiseReq{sec: sec, target: addCap(need, sec.space.raiseStep())})
		}
		sec.mu.Unlock()
		i = j
	}
	return nil
}

// addCap returns a+b, or MaxValue if that is larger.
func addCap(a, b uint64) uint64 {
	if b > seqd.MaxValue-a {
		return seqd.MaxValue
	}
	return a + b
}

// startRaiseLocked queues a raise of sec to target. Call with sec.mu held.
func (a *Allocator) startRaiseLocked(sec *section, target uint64) {
	sec.raising = true
	sec.raiseDone = make(chan struct{})
	reqs := []raiseReq{{sec: sec, target: target}}
	a.queued.Add(1)
	select {
	case a.raises <- reqs:
	default:
		// The queue is full: raise from a goroutine so the caller never blocks
		// while holding sec.mu.
		go a.sendRaises(reqs)
	}
}

// queueRaises hands reqs (sections already marked raising) to the raiser as
// one unit, so that they go to the Store in the same Store.Raise. It may
// block, so call it with no section lock held.
func (a *Allocator) queueRaises(reqs []raiseReq) {
	if len(reqs) == 0 {
		return
	}
	a.queued.Add(int64(len(reqs)))
	a.sendRaises(reqs)
}

// errClosed fails the raises still queued when the allocator closes.
var errClosed = fmt.Errorf("%w: shutting down", seqd.ErrNotServing)

// sendRaises sends reqs (already counted in queued) to the raiser, or fails
// them if the allocator is closed.
func (a *Allocator) sendRaises(reqs []raiseReq) {
	select {
	case a.raises <- reqs:
	case <-a.stop:
		a.queued.Add(-int64(len(reqs)))
		for _, r := range reqs {
			a.finishRaise(r, errClosed)
		}
	}
}

// raiser runs Store.Raise for queued requests, one batch at a time: requests
// that arrive while a raise is in flight share the next entry. Each slice
// received is taken whole, so the raises one call queues together always
// share an entry (an entry may then carry more than 4096 marks).
func (a *Allocator) raiser() {
	defer close(a.done)
	var batch []raiseReq
	for {
		batch = batch[:0]
		select {
		case rs := <-a.raises:
			a.queued.Add(-int64(len(rs)))
			batch = append(batch, rs...)
		case <-a.stop:
			a.drainRaises()
			return
		}
	collect:
		for len(batch) < 4096 {
			select {
			case rs := <-a.raises:
				a.queued.Add(-int64(len(rs)))
				batch = append(batch, rs...)
			default:
				break collect
			}
		}
		marks := make([]seqd.Mark, len(batch))
		for i, r := range batch {
			marks[i] = seqd.Mark{Space: r.sec.space.name, Section: r.sec.id, Max: r.target}
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.opts.RaiseTimeout)
		go func() {
			select {
			case <-a.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		a.raiseCalls.Add(1)
		start := time.Now()
		err := a.store.Raise(ctx, marks)
		took := time.Since(start)
		cancel()
		if a.opts.OnRaise != nil {
			a.opts.OnRaise(len(marks), took, err)
		}
		if err != nil {
			a.log.Warn("raising high-water marks failed", "marks", len(marks), "took", took, "err", err)
			err = fmt.Errorf("%w: raising the high-water mark failed", seqd.ErrNotServing)
		}
		for _, r := range batch {
			a.finishRaise(r, err)
		}
	}
}

func (a *Allocator) drainRaises() {
	for {
		select {
		case rs := <-a.raises:
			a.queued.Add(-int64(len(rs)))
			for _, r := range rs {
				a.finishRaise(r, errClosed)
			}
		default:
			return
		}
	}
}

func (a *Allocator) finishRaise(r raiseReq, err error) {
	s := r.sec
	s.mu.Lock()
	if err == nil && r.target > s.max {
		s.max = r.target
	}
	s.raiseErr = err
	s.raising = false
	close(s.raiseDone)
	s.mu.Unlock()
}
