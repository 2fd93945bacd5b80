package sections

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/seqd/seqd"
)

// SetFloor makes every value handed out for keys from now on larger than
// floor (a migration's starting point: a table's auto-increment, a Redis
// counter). A floor is a raise of a section's mark, never a value kept per
// key: per section of the keys, it raises the in-memory floor and the
// current value of every key held in memory to floor, and raises the
// section's committed mark to floor through the Store (the sections of one
// call in one Store.Raise), before it returns. So every key of such a
// section jumps to floor, not only the keys named, a floor at or below a
// key's current value changes nothing for it, and the floor holds after a
// failover because it is in the mark. It fails with seqd.ErrInvalidArgument
// for no keys, a floor above seqd.MaxValue, or one more than
// seqd.MaxFloorRise above its section's mark, and like Next without the
// lease. A call that fails may have raised some of the sections.
func (a *Allocator) SetFloor(ctx context.Context, space string, keys []uint64, floor uint64) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: no keys", seqd.ErrInvalidArgument)
	}
	floors := make([]uint64, len(keys))
	for i := range floors {
		floors[i] = floor
	}
	return a.SetFloors(ctx, space, keys, floors)
}

// SetFloors is SetFloor with a floor per key (floors[i] for keys[i]): each
// section is raised once, to the largest floor of its keys, so a bulk
// import costs one raise per section.
func (a *Allocator) SetFloors(ctx context.Context, space string, keys, floors []uint64) error {
	switch {
	case len(keys) == 0:
		return fmt.Errorf("%w: no keys", seqd.ErrInvalidArgument)
	case len(floors) != len(keys):
		return fmt.Errorf("%w: %d floors for %d keys", seqd.ErrInvalidArgument, len(floors), len(keys))
	}
	order := make([]int, len(keys))
	for i := range order {
		if floors[i] > seqd.MaxValue {
			return fmt.Errorf("%w: floor %d is above 2^63-1", seqd.ErrInvalidArgument, floors[i])
		}
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(keys[x], keys[y]) })
	if err := a.find(ctx, space); err != nil {
		return err
	}
	now := a.callNow()
	var reqs []raiseReq
	type pending struct {
		sec    *section
		target uint64
	}
	var wait []pending
	for i := 0; i < len(order); {
		sec, err := a.section(space, keys[order[i]], now)
		if err != nil {
			a.queueRaises(reqs)
			return err
		}
		var floor uint64
		for ; i < len(order) && keys[order[i]]/sec.space.sectionSize == sec.id; i++ {
			floor = max(floor, floors[order[i]])
		}
		sec.mu.Lock()
		if err := a.checkLocked(sec, now); err != nil {
			sec.mu.Unlock()
			a.queueRaises(reqs)
			return err
		}
		if floor > sec.max && floor-sec.max > seqd.MaxFloorRise {
			sec.mu.Unlock()
			a.queueRaises(reqs)
			return fmt.Errorf("%w: floor %d is %d above the mark of section %d of %q (%d); one floor may raise a section by at most %d, so that the raise budget a restore relies on is kept: set it in steps, 10 s apart",
				seqd.ErrInvalidArgument, floor, floor-sec.max, sec.id, space, sec.max, uint64(seqd.MaxFloorRise))
		}
		sec.floor = max(sec.floor, floor)
		for k, v := range sec.young {
			sec.young[k] = max(v, floor)
		}
		for k, v := range sec.old {
			sec.old[k] = max(v, floor)
		}
		for i, v := range sec.dense {
			if v != 0 {
				sec.dense[i] = max(v, floor)
			}
		}
		if sec.max < floor {
			if !sec.raising {
				sec.raising = true
				sec.raiseDone = make(chan struct{})
				reqs = append(reqs, raiseReq{sec: sec, target: floor})
			}
			wait = append(wait, pending{sec, floor})
		}
		sec.mu.Unlock()
	}
	a.queueRaises(reqs)
	for _, p := range wait {
		if err := a.raiseTo(ctx, p.sec, p.target); err != nil {
			return err
		}
	}
	return nil
}

// raiseTo waits until sec's mark is at least target, raising it (again)
// when no raise in flight will get it there.
func (a *Allocator) raiseTo(ctx context.Context, sec *section, target uint64) error {
	for {
		sec.mu.Lock()
		if sec.max >= target {
			sec.mu.Unlock()
			return nil
		}
		if err := a.checkLocked(sec, a.callNow()); err != nil {
			sec.mu.Unlock()
			return err
		}
		if !sec.raising {
			a.startRaiseLocked(sec, target)
		}
		done := sec.raiseDone
		sec.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		sec.mu.Lock()
		err, covered := sec.raiseErr, sec.max >= target
		sec.mu.Unlock()
		if err != nil && !covered {
			return err
		}
	}
}

// SpaceChanged reads a space's settings from the Store again (every
// space's, for name ""), after they changed in the replicated state: a new
// step applies to the raises from then on, and a space the Store no longer
// holds (deleted) is dropped with its sections, so that calls for it fail
// as for an unknown space, and a space created again later is loaded from
// its committed marks. A call that took a dropped section before fails
// (seqd.ErrLeaseNotHeld, as after Revoke) when it next checks the section:
// a raise of the dropped section that commits after the reload read the
// mark (one in flight, or one the call starts) would cover values the
// reloaded section hands out too.
func (a *Allocator) SpaceChanged(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for n, sp := range a.spaces {
		if name != "" && n != name {
			continue
		}
		cfg, ok := a.store.Space(n)
		if ok && cfg.SectionSize == sp.sectionSize {
			sp.step.Store(cfg.Step)
			continue
		}
		delete(a.spaces, n)
		for _, sec := range sp.sections {
			sec.mu.Lock()
			sec.keys.n.Add(-int64(sec.held()))
			sec.keys = new(keyCount) // detached: a call still on it counts there
			sec.dropped = true
			sec.mu.Unlock()
		}
	}
}
