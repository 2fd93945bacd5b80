package api

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
)

// Sequences serves Next, Current and Reserve in this process for the front
// ends that speak other protocols than Connect: the Redis protocol (resp/)
// and Leaf's HTTP API (leaf.go). Their callers are plain clients (redis-cli,
// a Leaf client, curl) that know nothing of groups, leaders or retries, so
// Sequences does for them what the Go client does for its callers:
//
//   - Every call takes the one serving path of a Connect call (keysCall in
//     keys.go): split by raft group, each group's share served here if
//     this server leads the group, or forwarded once to its leader (a Next
//     share on the forward stream to that leader, fwdstream.go).
//   - Concurrent calls of one kind, space and group are coalesced into one
//     share (group commit): a call finding fewer than frontInFlight shares
//     of its kind in flight goes at once, the others wait and go together
//     in the next share as soon as one finishes. The keys of one call for
//     one group always travel in one share, in the call's order, and the
//     allocator hands out values key by key in that order, so a call that
//     names a key twice gets increasing values, and a call that began after
//     another completed gets larger values for the same key (C2).
//   - A share that fails unavailable (no leader, a leader still waiting out
//     its predecessor's lease, a forward that did not reach the leader) is
//     retried with backoff for up to frontRetryFor: a value is returned at
//     most once, so a retry can leave a gap, never a repeat (C4).
//
// Errors are Connect errors (*connect.Error, from toConnect: the one place
// that decides codes and hides internal text), one per group, so a front end
// maps a code to its own protocol's error and the keys of a group that
// answered keep their values.
type Sequences struct {
	s *Server

	hdrOnce  sync.Once
	hdr      http.Header // header's, never written once made
	deadline sharedDeadline

	mu       sync.Mutex
	batchers map[frontKey]*frontBatcher
}

// Front-end coalescing and retries.
const (
	frontInFlight   = 2
	frontRetryFor   = 2 * time.Second
	frontMinBackoff = 10 * time.Millisecond
	frontMaxBackoff = 200 * time.Millisecond
)

type frontKey struct {
	kind  keysKind
	space string
	group int
}

// header is the header of a call through Sequences: the server's own token
// (the front end checked its client's), which a forward to a group's leader
// carries, and Seqd-Entry naming this server: the calls of these front ends
// count for the leaders that follow the traffic (keys.go, noteValues). It
// is made once and only read (keysCall.hdr is never written).
func (q *Sequences) header() http.Header {
	q.hdrOnce.Do(func() {
		h := http.Header{}
		if q.s.token != "" {
			h.Set("Authorization", "Bearer "+q.s.token)
		}
		h.Set(seqd.HeaderEntry, q.s.node.ID())
		q.hdr = h
	})
	return q.hdr
}

// deadlineGrain is how long the shares of Sequences share one deadline.
const deadlineGrain = 100 * time.Millisecond

// sharedDeadline hands out a context that ends frontRetryFor to
// frontRetryFor+deadlineGrain from now, one for every call of a grain, so
// that a share served through Sequences costs no timer of its own.
type sharedDeadline struct {
	cur atomic.Pointer[deadlineCtx]
}

type deadlineCtx struct {
	ctx    context.Context
	cancel context.CancelFunc // not called: the context ends at its deadline
	until  time.Time          // the last moment it is handed out
}

func (d *sharedDeadline) get() context.Context {
	now := time.Now()
	if c := d.cur.Load(); c != nil && now.Before(c.until) {
		return c.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(frontRetryFor+deadlineGrain))
	d.cur.Store(&deadlineCtx{ctx: ctx, cancel: cancel, until: now.Add(deadlineGrain)})
	return ctx
}

// Sequences returns the server's in-process sequence calls (one per Server).
func (s *Server) Sequences() *Sequences { return &s.seqs }

// Next takes the next value of each key of space ("" is the default space),
// in the keys' order. errs is nil when every key has its value; otherwise
// errs[i] is key i's error, nil for the keys that have a value (the keys of a
// group whose share failed all carry its error).
func (q *Sequences) Next(ctx context.Context, space string, keys []uint64) (vals []uint64, errs []error) {
	return q.keys(ctx, kindNext, space, keys)
}

// Current returns the current value of each key, as Next returns values.
func (q *Sequences) Current(ctx context.Context, space string, keys []uint64) (vals []uint64, errs []error) {
	return q.keys(ctx, kindCurrent, space, keys)
}

// Reserve takes count consecutive values of key and returns the first.
func (q *Sequences) Reserve(ctx context.Context, space string, key, count uint64) (uint64, error) {
	s := q.s
	err := s.admit(seqv1connect.SequenceServiceReserveProcedure, q.header())
	var name string
	if err == nil {
		name, err = spaceName(space)
	}
	if err == nil {
		err = checkCount(count)
	}
	if err != nil {
		return 0, s.toConnect(err)
	}
	c := &keysCall{kind: kindReserve, space: name, asked: name, keys: []uint64{key}, count: uint32(count), hdr: q.header(), via: viaFront}
	var first uint64
	err = frontRetry(ctx, func(ctx context.Context) error {
		a, err := s.serveKeys(ctx, c)
		if err == nil {
			first = a.vals[0]
		}
		return s.toConnect(err)
	})
	return first, err
}

func (q *Sequences) keys(ctx context.Context, kind keysKind, space string, keys []uint64) ([]uint64, []error) {
	s := q.s
	procedure := seqv1connect.SequenceServiceNextProcedure
	if kind == kindCurrent {
		procedure = seqv1connect.SequenceServiceCurrentProcedure
	}
	err := s.admit(procedure, q.header())
	var name string
	if err == nil {
		name, err = spaceName(space)
	}
	if err == nil {
		err = checkKeys(keys)
	}
	var shares []share
	if err == nil {
		// Retried only when it fails (a known space's split asks nothing),
		// within frontRetryFor of the first try.
		start := time.Now()
		if shares, err = s.splitKeys(ctx, name, keys); err != nil && connect.CodeOf(s.toConnect(err)) == connect.CodeUnavailable {
			rctx, cancel := context.WithDeadline(ctx, start.Add(frontRetryFor))
			err = retryUnavailable(rctx, func(ctx context.Context) error {
				var err error
				shares, err = s.splitKeys(ctx, name, keys)
				return s.toConnect(err)
			})
			cancel()
		}
	}
	if err != nil {
		return nil, fill(len(keys), s.toConnect(err))
	}
	// A group this server leads is served here, from this goroutine: the
	// allocator orders concurrent calls itself, and a call costs it less
	// than a hand-off to another goroutine. Every other group's share joins
	// its batcher; the batches this call dispatched are sent from new
	// goroutines, the last of them from this one.
	type wait struct {
		b    *frontBatch // the share's batch, forwarded; nil: served here
		off  int
		sh   share
		vals []uint64 // served here
		err  error
	}
	var waitBuf [4]wait // a call spans few groups: no allocation
	waits := waitBuf[:]
	if len(shares) > len(waitBuf) {
		waits = make([]wait, len(shares))
	}
	waits = waits[:len(shares)]
	var sends []*frontBatch
	var senders []*frontBatcher
	for i, sh := range shares {
		waits[i].sh = sh
		if s.node.Group(sh.group).IsLeader() {
			continue
		}
		b := q.batcher(kind, name, sh.group)
		var send *frontBatch
		waits[i].b, waits[i].off, send = b.add(sh.keys)
		if send != nil {
			sends, senders = append(sends, send), append(senders, b)
		}
	}
	for j := 0; j+1 < len(sends); j++ {
		go senders[j].send(sends[j], false)
	}
	for i := range waits {
		if w := &waits[i]; w.b == nil {
			w.vals, w.err = q.serve(kind, name, w.sh.group, w.sh.keys)
		}
	}
	if n := len(sends); n > 0 {
		senders[n-1].send(sends[n-1], true)
	}
	vals := make([]uint64, len(keys))
	var errs []error
	for _, w := range waits {
		if w.b != nil {
			select {
			case <-w.b.done:
			case <-ctx.Done():
				return nil, fill(len(keys), s.toConnect(ctx.Err()))
			}
			w.vals, w.err = w.b.vals[min(w.off, len(w.b.vals)):], w.b.err
		}
		if w.err != nil {
			if errs == nil {
				errs = make([]error, len(keys))
			}
			for _, p := range w.sh.pos {
				errs[p] = w.err
			}
			continue
		}
		for i, p := range w.sh.pos {
			vals[p] = w.vals[i]
		}
	}
	return vals, errs
}

func fill(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

func (q *Sequences) batcher(kind keysKind, space string, group int) *frontBatcher {
	k := frontKey{kind, space, group}
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.batchers[k]
	if b == nil {
		if q.batchers == nil {
			q.batchers = make(map[frontKey]*frontBatcher)
		}
		b = &frontBatcher{q: q, key: k}
		q.batchers[k] = b
	}
	return b
}

// frontBatcher coalesces the calls of one kind, space and group.
type frontBatcher struct {
	q   *Sequences
	key frontKey

	mu       sync.Mutex
	inFlight int
	queue    []*frontBatch // waiting, oldest first; only the last takes more keys
}

// frontBatch is one share: the keys of its calls, in the order they came.
type frontBatch struct {
	keys []uint64
	done chan struct{} // closed once vals or err is set
	vals []uint64
	err  error
}

// add queues keys, all in one batch, and returns the batch, the offset of
// the first of them in it, and a batch the caller is to send (a slot was
// free), or nil.
func (b *frontBatcher) add(keys []uint64) (*frontBatch, int, *frontBatch) {
	b.mu.Lock()
	var bt *frontBatch
	if n := len(b.queue); n > 0 && len(b.queue[n-1].keys)+len(keys) <= seqd.MaxKeys {
		bt = b.queue[n-1]
	} else {
		bt = &frontBatch{done: make(chan struct{})}
		b.queue = append(b.queue, bt)
	}
	off := len(bt.keys)
	bt.keys = append(bt.keys, keys...)
	next := b.nextLocked()
	b.mu.Unlock()
	return bt, off, next
}

// nextLocked takes the oldest queued batch if a slot is free.
func (b *frontBatcher) nextLocked() *frontBatch {
	if len(b.queue) == 0 || b.inFlight >= frontInFlight {
		return nil
	}
	bt := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	b.inFlight++
	return bt
}

// send serves bt, then the batches queued meanwhile while a slot is free:
// itself, or (inline: the caller waits for its own answer) from a new
// goroutine.
func (b *frontBatcher) send(bt *frontBatch, inline bool) {
	for bt != nil {
		bt.vals, bt.err = b.q.serve(b.key.kind, b.key.space, b.key.group, bt.keys)
		close(bt.done)
		b.mu.Lock()
		b.inFlight--
		bt = b.nextLocked()
		b.mu.Unlock()
		if bt != nil && inline {
			go b.send(bt, false)
			return
		}
	}
}

// serve serves one group's keys through the path of every call
// (serveShare: here, or forwarded once to the group's leader), retrying
// unavailable errors, and returns a Connect error.
func (q *Sequences) serve(kind keysKind, space string, group int, keys []uint64) ([]uint64, error) {
	s := q.s
	c := &keysCall{kind: kind, space: space, asked: space, keys: keys, hdr: q.header(), via: viaFront, stream: kind == kindNext}
	var vals []uint64
	err := retryUnavailable(q.deadline.get(), func(ctx context.Context) error {
		var err error
		vals, _, _, _, err = s.serveShare(ctx, c, share{group: group, keys: keys})
		return s.toConnect(err)
	})
	return vals, err
}

// frontRetry runs call until it returns nil or an error other than
// unavailable, for up to frontRetryFor (and ctx), with jittered exponential
// backoff between attempts.
func frontRetry(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, frontRetryFor)
	defer cancel()
	return retryUnavailable(ctx, call)
}

// retryUnavailable runs call until it returns nil or an error other than
// unavailable, until ctx ends, with jittered exponential backoff between
// attempts.
func retryUnavailable(ctx context.Context, call func(context.Context) error) error {
	backoff := frontMinBackoff
	for {
		err := call(ctx)
		if err == nil || connect.CodeOf(err) != connect.CodeUnavailable {
			return err
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, frontMaxBackoff)
	}
}
