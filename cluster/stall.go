package cluster

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/lease"
)

// Stalls. A process that is paused (SIGSTOP, a frozen VM, a host that
// stops scheduling it) hears nothing while it is: no gossip, no knock of a
// restore that replaced its cluster. The listen rule (WaitListening) must
// therefore count only time this process ran: a leader paused in its lease
// wait, or between listening and its renewal, must listen again before it
// serves, or it would serve beside a cluster that a restore started while
// it was paused and whose servers it could not hear (the lease model found
// that order: internal/leasemodel, a restore paused in its lease wait while
// its source came back).
//
// The watch ticks every stallTick; a gap between ticks longer than
// stallAfter is a stall that ended at the later tick, and a tick overdue by
// more than stallAfter is a stall in progress, taken to end now. Go's
// monotonic clock runs on while the process is stopped, so the gap shows.
// stallAfter is below the knock interval: a stall shorter than that cannot
// hide a restore's knocks for a whole listen window.
const (
	stallTick  = 100 * time.Millisecond
	stallAfter = lease.KnockInterval
)

// stallWatch records the end of this process's last stall (see above).
// Times are nanoseconds since origin (monotonic), +1 so that 0 is none;
// a watch not started (no tick yet) knows of no stall.
type stallWatch struct {
	origin    time.Time
	lastTick  atomic.Int64
	lastStall atomic.Int64
	stalls    atomic.Int64
}

func newStallWatch() *stallWatch { return &stallWatch{origin: time.Now()} }

// start begins the watch at now (its first tick).
func (w *stallWatch) start(now time.Time) { w.lastTick.Store(int64(now.Sub(w.origin)) + 1) }

// tick notes a tick at now and reports how long the stall it ended
// lasted (0 for none).
func (w *stallWatch) tick(now time.Time) time.Duration {
	at := int64(now.Sub(w.origin)) + 1
	gap := time.Duration(at - w.lastTick.Swap(at))
	if gap <= stallAfter {
		return 0
	}
	w.stalls.Add(1)
	for {
		old := w.lastStall.Load()
		if old >= at || w.lastStall.CompareAndSwap(old, at) {
			return gap
		}
	}
}

// last returns when this process's last stall ended as of now: now while
// a tick is overdue by more than stallAfter; the zero time for none.
func (w *stallWatch) last(now time.Time) time.Time {
	at := int64(now.Sub(w.origin)) + 1
	if t := w.lastTick.Load(); t > 0 && time.Duration(at-t) > stallAfter {
		return now
	}
	if s := w.lastStall.Load(); s > 0 {
		return w.origin.Add(time.Duration(s - 1))
	}
	return time.Time{}
}

// stallLoop ticks the watch until the node closes, and logs each stall.
func (n *Node) stallLoop() {
	defer n.wg.Done()
	t := time.NewTicker(stallTick)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case now := <-t.C:
			if d := n.stall.tick(time.Now()); d > 0 {
				n.log.Warn("this process stalled (paused, or not scheduled): a leader listens to the cluster again before it serves",
					"for", d.Round(time.Millisecond), "ticked", now.Format(time.RFC3339Nano))
			}
		}
	}
}

// WaitListening implements group.Host: it waits until gossip has run for
// lease.ListenWindow, uninterrupted by a stall of this process, since it
// started, since the last stall, and since since when that is later (the
// listen rule: a restored cluster's servers knock every
// lease.KnockInterval, so a server of the cluster it replaced hears of it
// and is fenced before it could serve beside it).
func (n *Node) WaitListening(ctx context.Context, since time.Time) bool {
	for {
		from := n.gossipStarted
		for _, t := range []time.Time{since, n.stall.last(time.Now())} {
			if t.After(from) {
				from = t
			}
		}
		d := time.Until(from.Add(lease.ListenWindow))
		if d <= 0 {
			return ctx.Err() == nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// StalledSince implements group.Host: whether this process stalled (see
// above) after t, or is stalled now.
func (n *Node) StalledSince(t time.Time) bool { return n.stall.last(time.Now()).After(t) }
