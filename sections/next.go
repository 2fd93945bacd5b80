package sections

import (
	"context"
	"fmt"
	"time"

	"github.com/seqd/seqd"
)

// Next returns one new value per key, in order; a key listed twice gets two
// increasing values. On error no value of this call is returned (values
// already taken for earlier keys are skipped: a gap, never a repeat).
//
// Values are taken key by key. At the first key whose section's max does not
// cover it, before waiting, Next starts the raises of every section that the
// rest of the call needs (see raiseForCall), so that a call over many cold
// sections waits for one Store.Raise (one raft entry), not one per section.
func (a *Allocator) Next(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", seqd.ErrInvalidArgument)
	}
	if err := a.find(ctx, space); err != nil {
		return nil, err
	}
	now := a.callNow()
	out := make([]uint64, len(keys))
	raised := len(keys) == 1 // take alone raises for a single key
	for i, k := range keys {
		sec, err := a.section(space, k, now)
		if err != nil {
			return nil, err
		}
		if !raised {
			sec.mu.Lock()
			v, _, ok, err := a.takeLocked(sec, k, 1, now)
			sec.mu.Unlock()
			if err != nil {
				return nil, err
			}
			if ok {
				out[i] = v
				continue
			}
			raised = true
			if err := a.raiseForCall(space, keys[i:], now); err != nil {
				return nil, err
			}
		}
		v, err := a.take(ctx, sec, k, 1, &now)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// Reserve returns the first of count consecutive new values for key: the
// caller owns first .. first+count-1.
func (a *Allocator) Reserve(ctx context.Context, space string, key, count uint64) (uint64, error) {
	if count == 0 {
		return 0, fmt.Errorf("%w: count must be at least 1", seqd.ErrInvalidArgument)
	}
	if err := a.find(ctx, space); err != nil {
		return 0, err
	}
	now := a.callNow()
	sec, err := a.section(space, key, now)
	if err != nil {
		return 0, err
	}
	return a.take(ctx, sec, key, count, &now)
}

// Current returns, per key, the last value returned for it (or a larger value
// after a failover or an eviction), with no side effects.
func (a *Allocator) Current(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", seqd.ErrInvalidArgument)
	}
	if err := a.find(ctx, space); err != nil {
		return nil, err
	}
	now := a.callNow()
	out := make([]uint64, len(keys))
	for i, k := range keys {
		sec, err := a.section(space, k, now)
		if err != nil {
			return nil, err
		}
		sec.mu.Lock()
		if err := a.checkLocked(sec, now); err != nil {
			sec.mu.Unlock()
			return nil, err
		}
		// Nothing above the committed mark is reported: a floor whose
		// raise has not committed (or failed) is not there yet, and a
		// leader after a restart continues from the mark.
		out[i] = min(sec.get(k), sec.max)
		sec.mu.Unlock()
	}
	return out, nil
}

// take returns the first of count new values for key, raising max first if
// the values are not yet covered. *now is the call's reading of the clock
// (see callNow); after waiting for a raise take reads the clock again into it.
func (a *Allocator) take(ctx context.Context, sec *section, key, count uint64, now *time.Duration) (uint64, error) {
	for {
		sec.mu.Lock()
		first, last, ok, err := a.takeLocked(sec, key, count, *now)
		if err != nil || ok {
			sec.mu.Unlock()
			return first, err
		}
		if !sec.raising {
			a.startRaiseLocked(sec, addCap(last, sec.space.raiseStep()))
		}
		wait := sec.raiseDone
		sec.mu.Unlock()

		select {
		case <-wait:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		*now = a.callNow()
		sec.mu.Lock()
		err = sec.raiseErr
		covered := last <= sec.max
		sec.mu.Unlock()
		if err != nil && !covered {
			return 0, err
		}
	}
}

// takeLocked takes count new values for key if sec's max covers them: it
// returns the first and ok. If they are not covered it takes nothing and
// returns the last value needed, last. now is the call's reading of the
// clock (see callNow). Call with sec.mu held.
func (a *Allocator) takeLocked(sec *section, key, count uint64, now time.Duration) (first, last uint64, ok bool, err error) {
	if err := a.checkLocked(sec, now); err != nil {
		return 0, 0, false, err
	}
	cur := sec.get(key)
	if count > seqd.MaxValue-cur {
		return 0, 0, false, fmt.Errorf("%w (space %q, key %d)", seqd.ErrExhausted, sec.space.name, key)
	}
	last = cur + count
	if last > sec.max {
		return 0, last, false, nil
	}
	a.set(sec, key, last)
	a.taken.Add(count)
	if last > sec.hi {
		sec.hi = last
	}
	// Raise ahead of need once less than half a step is left.
	if step := sec.space.raiseStep(); !sec.raising && sec.max < seqd.MaxValue && sec.max-sec.hi < step/2+1 {
		a.startRaiseLocked(sec, addCap(sec.max, step))
	}
	return cur + 1, last, true, nil
}
