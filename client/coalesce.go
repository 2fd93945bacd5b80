package client

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
)

// Coalescing (group commit on the client).
//
// One RPC per value costs far more than the allocator's work: on a 2-core
// machine the HTTP/2 + Connect round trip is the limit. So concurrent Next
// calls for the same space share requests: a call that finds no request of
// its kind in flight is sent at once, on its own, from the caller's goroutine
// (no added latency when idle); calls that arrive while MaxInFlight requests
// are in flight queue up and go together in the next multi-key request, as
// soon as one of those requests finishes (or once they have waited
// MaxBatchWait). The keys of a coalesced request keep the order in which the
// calls arrived, and the server hands out values key by key in that order,
// so a call that completed before another began still gets the smaller value
// (per-key order), and each caller gets exactly the values for its own keys.
// Current calls are coalesced the same way. In a cluster of several raft
// groups, calls are coalesced per space and group: a call's share of each
// group goes through that group's batcher, so that a coalesced request goes
// to one group's leader (see routing.go). Next calls on streams go through
// their group's lane instead (groupTable.lane): one batcher for the groups
// one server leads, so that server gets one message per round trip.
//
// A coalesced request is retried as a whole (see Client.call). If it fails
// with resource_exhausted (one key near 2^63), each of its calls whose caller
// still waits is retried on its own, so that the error reaches only the
// calls whose keys caused it. A request that mixes the groups of a lane
// and fails with an error worth retrying sends its calls to their own
// groups' batchers instead (batcher.split), so that the calls of one group
// wait for no other group's leader.

// Coalescing defaults.
const (
	DefaultMaxBatchKeys = 1000
	// DefaultMaxInFlight is 1: measured on a 2-core machine with 3 servers
	// (BENCHMARKS.md, "One request in flight per group"), one request in
	// flight per group doubled the keys per request and gave more ids/s,
	// less CPU per id and a lower p99 than 4, with one group and with
	// three, at 16, 64 and 256 callers: every request costs each side a
	// read and a write, whatever it carries.
	DefaultMaxInFlight  = 1
	DefaultMaxBatchWait = 5 * time.Millisecond
	// maxOverLimit bounds the requests sent over MaxInFlight by the
	// MaxBatchWait rule, so that a stalled cluster does not collect an
	// unbounded number of retrying requests.
	maxOverLimit = 3
	// maxServerKeys is the server's limit on keys per call.
	maxServerKeys = 10000
)

type batchKind uint8

const (
	kindNext batchKind = iota
	kindCurrent
	// kindIDs coalesces NextIds calls of one namespace (the batcher's
	// space): each call's "keys" only count the ids it wants, and it gets
	// a contiguous, so increasing, slice of one response's ids.
	kindIDs
)

type batcherKey struct {
	kind  batchKind
	space string
	group int // the raft group whose keys it sends (noGroup: any keys)
}

// batcher coalesces the calls of one kind for one space, and in a cluster
// of several raft groups for one group, so that each request goes to one
// group's leader.
//
// Dispatch rule: a queued batch is sent when no request is in flight; or
// when fewer than MaxInFlight are in flight and the last request left at
// least rtt/MaxInFlight ago (rtt: a moving average of request round trips),
// which spreads the requests in flight evenly over a round trip instead of
// sending each early arrival on its own; or once it has waited MaxBatchWait
// (then at most maxOverLimit requests over MaxInFlight).
type batcher struct {
	c     *Client
	kind  batchKind
	space string
	group int

	mu       sync.Mutex
	inFlight int
	queue    []*batch // waiting to be sent, oldest first; only the last accepts more calls
	lastSend time.Time
	rtt      time.Duration // moving average of request round trips
	timer    *time.Timer
	timerAt  time.Time   // when the timer fires; zero if not armed
	work     chan *batch // hands batches to idle senders
}

// workerIdle is how long a sender goroutine waits for another batch before it
// exits. Reusing senders keeps their grown stacks: a fresh goroutine per
// request spends much of its time growing its stack through connect-go.
const workerIdle = 10 * time.Second

// launch sends bt on its node's stream (stream.go), or from an idle sender
// goroutine, or a new one.
func (b *batcher) launch(bt *batch) {
	if b.sendStream(bt) {
		return
	}
	select {
	case b.work <- bt:
	default:
		go b.worker(bt)
	}
}

func (b *batcher) worker(bt *batch) {
	b.send(context.Background(), bt)
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case bt := <-b.work:
			b.send(context.Background(), bt)
			t.Reset(workerIdle)
		case <-t.C:
			return
		}
	}
}

// batch is one request: the concatenated keys of its calls.
type batch struct {
	keys    []uint64
	waiters []*waiter
	created time.Time
	live    atomic.Int32 // callers still waiting
	// mixed: the batch holds keys of another raft group than its
	// batcher's, in its lane (set under the batcher's lock, before it is
	// sent); split: its calls went to their own groups' batchers (split).
	mixed, split bool
}

// gone reports whether every caller of bt gave up: its request is then not
// sent, or not retried.
func (bt *batch) gone() bool { return bt.live.Load() == 0 }

// waiter is one call waiting in a batch.
type waiter struct {
	off, n int
	group  int           // the raft group of its keys (noGroup: of several)
	done   chan struct{} // receives once, when vals/err are set
	vals   []uint64
	err    error
	// gaveUp is set when the caller stopped waiting (such a waiter is
	// never reused): its call is then not retried on its own.
	gaveUp atomic.Bool
	// cancel stops the call split sent again (nil: not split).
	cancel atomic.Pointer[context.CancelFunc]
}

// BatchStats counts the coalesced calls of a Client and the requests that
// carried them.
type BatchStats struct {
	// Calls is the number of Next, Current and NextIds calls that went through
	// coalescing; Requests the number of requests sent for them; Keys the
	// keys in those requests.
	Calls, Requests, Keys uint64
	// Streamed is the number of those requests sent as NextStream messages
	// (stream.go); the others went as unary calls.
	Streamed uint64
}

// BatchStats returns the client's coalescing counters since New.
func (c *Client) BatchStats() BatchStats {
	return BatchStats{Calls: c.bCalls.Load(), Requests: c.bRequests.Load(), Keys: c.bKeys.Load(), Streamed: c.bStreamed.Load()}
}

var waiterPool = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

func (c *Client) batcher(kind batchKind, space string, group int) *batcher {
	k := batcherKey{kind, space, group}
	if b, ok := c.batchers.Load(k); ok {
		return b.(*batcher)
	}
	b, _ := c.batchers.LoadOrStore(k, &batcher{c: c, kind: kind, space: space, group: group, work: make(chan *batch)})
	return b.(*batcher)
}

// do runs one call through the batcher.
func (b *batcher) do(ctx context.Context, keys []uint64) ([]uint64, error) {
	return b.join(ctx, keys, b.group)
}

// join runs one call, of keys of raft group home (noGroup: of several),
// through the batcher.
func (b *batcher) join(ctx context.Context, keys []uint64, home int) ([]uint64, error) {
	return b.enter(ctx, keys, home, true)
}

// enter is join; a call split off a failed batch (split) enters again
// without counting in BatchStats.Calls (counted: false).
func (b *batcher) enter(ctx context.Context, keys []uint64, home int, counted bool) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err)
	}
	w := waiterPool.Get().(*waiter)
	now := time.Now()
	b.mu.Lock()
	var bt *batch
	if n := len(b.queue); n > 0 && len(b.queue[n-1].keys)+len(keys) <= b.c.opts.MaxBatchKeys {
		bt = b.queue[n-1]
	} else {
		bt = &batch{keys: make([]uint64, 0, max(len(keys), 8)), created: now}
		b.queue = append(b.queue, bt)
	}
	w.off, w.n, w.group = len(bt.keys), len(keys), home
	bt.mixed = bt.mixed || home != b.group
	bt.keys = append(bt.keys, keys...)
	bt.waiters = append(bt.waiters, w)
	bt.live.Add(1)
	if counted {
		b.c.bCalls.Add(1) // counted once queued (tests wait on it)
	}
	if b.inFlight == 0 && len(b.queue) == 1 && len(bt.waiters) == 1 {
		// Idle: this call is the whole batch. Send it now, from here, under
		// the caller's own context.
		b.queue = b.queue[:0]
		b.inFlight++
		b.lastSend = now
		b.mu.Unlock()
		b.send(ctx, bt)
	} else {
		next := b.dispatchLocked(now)
		b.mu.Unlock()
		if next != nil {
			b.launch(next)
		}
	}
	select {
	case <-w.done:
	default:
		select {
		case <-w.done:
		case <-ctx.Done():
			// Give up. The batch may still write w, so w is not reused.
			// When nobody waits any more, the request is not sent, or not
			// retried after its current attempt.
			w.gaveUp.Store(true)
			if cancel := w.cancel.Load(); cancel != nil {
				(*cancel)() // split sent the call again: stop it too
			}
			bt.live.Add(-1)
			return nil, ctxError(ctx.Err())
		}
	}
	vals, err := w.vals, w.err
	*w = waiter{done: w.done}
	waiterPool.Put(w)
	return vals, err
}

// dispatchLocked returns the oldest queued batch if the dispatch rule says it
// goes now (counted in flight), or nil; and arms the timer for the next time
// the rule may say so.
func (b *batcher) dispatchLocked(now time.Time) *batch {
	if len(b.queue) == 0 {
		return nil
	}
	k := b.c.opts.MaxInFlight
	var slotAt time.Time // when the spacing rule lets the next request go
	if b.inFlight < k {
		slotAt = b.lastSend.Add(b.rtt / time.Duration(k))
		if b.inFlight == 0 || !now.Before(slotAt) {
			return b.popLocked(now)
		}
	}
	waitAt := time.Time{}
	if b.c.opts.MaxBatchWait > 0 && b.inFlight < k+maxOverLimit {
		waitAt = b.queue[0].created.Add(b.c.opts.MaxBatchWait)
		if !now.Before(waitAt) {
			return b.popLocked(now) // waited long enough: over the limit
		}
	}
	at := waitAt
	if !slotAt.IsZero() && (at.IsZero() || slotAt.Before(at)) {
		at = slotAt
	}
	if !at.IsZero() && (b.timerAt.IsZero() || at.Before(b.timerAt)) {
		b.timerAt = at
		if b.timer == nil {
			b.timer = time.AfterFunc(at.Sub(now), b.tick)
		} else {
			b.timer.Reset(at.Sub(now))
		}
	}
	return nil
}

// tick re-applies the dispatch rule when the timer fires.
func (b *batcher) tick() {
	now := time.Now()
	b.mu.Lock()
	b.timerAt = time.Time{}
	next := b.dispatchLocked(now)
	b.mu.Unlock()
	if next != nil {
		b.launch(next)
	}
}

// popLocked takes the oldest batch off the queue and counts it in flight.
func (b *batcher) popLocked(now time.Time) *batch {
	bt := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	if len(b.queue) == 0 {
		b.queue = b.queue[:0:0] // let the array go
	}
	b.inFlight++
	b.lastSend = now
	return bt
}

// send runs the request of bt under ctx (or sends it on its node's stream,
// which finishes it when the answer comes), lets the next queued batch go,
// and delivers the results.
func (b *batcher) send(ctx context.Context, bt *batch) {
	if b.sendStream(bt) {
		return
	}
	var vals []uint64
	var err error
	start := time.Now()
	if !bt.gone() {
		b.c.bRequests.Add(1)
		b.c.bKeys.Add(uint64(len(bt.keys)))
		vals, err = b.whole(ctx, bt)
	} else {
		err = context.Canceled // every caller gave up before it was sent
	}
	b.finish(bt, start, vals, err)
}

// finish ends the request of bt, sent at start: it delivers vals, or err,
// to the calls of bt, and then lets the next queued batch go.
//
// The order matters for throughput: the calls just answered are woken
// first, and the batcher yields once (runtime.Gosched) before it releases
// its slot, so that those of them that call again at once (a loop of
// callers, or a server's request handlers) queue their next calls before
// the next request leaves, and ride in it rather than in the one after it.
// Every request costs each side a read, a write and the wake-up of a
// process that slept, whatever it carries: on a 2-core machine with three
// groups and 64 callers this took the keys per request from about 8.5 to
// 12.5 and gave about a third more ids/s for less CPU per id (BENCHMARKS.md,
// "Answer first, then send"). Without it, a
// loop of callers splits into cohorts that never meet: the calls queued
// while a request was in flight leave the moment it is answered, before
// its own callers are woken.
func (b *batcher) finish(bt *batch, start time.Time, vals []uint64, err error) {
	took := time.Since(start)
	perCall := err != nil && len(bt.waiters) > 1 && connect.CodeOf(err) == connect.CodeResourceExhausted
	if !perCall && !bt.split {
		for _, w := range bt.waiters {
			if err != nil {
				w.err = err
			} else {
				w.vals = vals[w.off : w.off+w.n : w.off+w.n]
			}
			w.done <- struct{}{}
		}
		runtime.Gosched()
	}
	b.mu.Lock()
	b.inFlight--
	if err == nil && !bt.split { // a split batch's attempt failed
		if b.rtt == 0 {
			b.rtt = took
		} else {
			b.rtt += (took - b.rtt) / 8
		}
	}
	next := b.dispatchLocked(time.Now())
	b.mu.Unlock()
	if next != nil {
		b.launch(next)
	}
	if !perCall {
		return
	}
	// The error belongs to some keys only: retry each call on its own,
	// but not the calls whose callers gave up.
	var wg sync.WaitGroup
	for _, w := range bt.waiters {
		if w.gaveUp.Load() {
			w.err = context.Canceled
			w.done <- struct{}{}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.vals, w.err = b.c.multi(context.Background(), b.kind, b.space, bt.keys[w.off:w.off+w.n:w.off+w.n], w.gaveUp.Load, routeOf(w.group, b.group))
			w.done <- struct{}{}
		}()
	}
	wg.Wait()
}

func ctxError(err error) error {
	if err == context.DeadlineExceeded {
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeCanceled, err)
}
