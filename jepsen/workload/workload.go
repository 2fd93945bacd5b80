// Package workload runs the chaos test's clients: pinned clients that call
// one node each with no retries (as Jepsen's clients do, which is what
// exposes a deposed leader that still answers) and smart clients that use
// package client (leader tracking, retries over all nodes). Every call is
// recorded with its outcome: ok, fail (certainly no effect) or info (unknown;
// timeouts are never failures).
package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/jepsen/record"
)

// Mix is the share (weights) of each kind of operation.
type Mix struct {
	Next    int // Next of one key
	Multi   int // Next of several keys, one listed twice
	Reserve int // Reserve of 1..MaxReserve values
	Current int // Current of one or two keys
}

// ParseMix parses "next=40,multi=15,reserve=15,current=30".
func ParseMix(s string) (Mix, error) {
	var m Mix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return m, fmt.Errorf("bad mix entry %q (want name=weight)", part)
		}
		switch k {
		case "next":
			m.Next = n
		case "multi":
			m.Multi = n
		case "reserve":
			m.Reserve = n
		case "current":
			m.Current = n
		default:
			return m, fmt.Errorf("unknown operation %q in mix (want next, multi, reserve, current)", k)
		}
	}
	if m.Next+m.Multi+m.Reserve+m.Current == 0 {
		return m, errors.New("the mix has no operations")
	}
	return m, nil
}

func (m Mix) String() string {
	return fmt.Sprintf("next=%d,multi=%d,reserve=%d,current=%d", m.Next, m.Multi, m.Reserve, m.Current)
}

// Target is a node clients can call.
type Target struct {
	ID  string
	API string
}

// Config configures the workload.
type Config struct {
	Space          string
	Keys           uint64 // keys 0..Keys-1
	Rate           float64
	PinnedPerNode  int
	Smart          int
	OpTimeout      time.Duration // pinned clients: one call
	SmartTimeout   time.Duration // smart clients: one call with its retries
	AttemptTimeout time.Duration // smart clients: one attempt on one node
	Mix            Mix
	MaxReserve     uint32
	Seed           uint64
}

// Workload is a running set of clients.
type Workload struct {
	cfg     Config
	rec     *record.Recorder
	targets []Target
	byAPI   map[string]string
	lim     *limiter
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	tally
}

// tally counts a workload's calls by outcome.
type tally struct {
	ok, failed, info atomic.Int64
}

// add counts one call of outcome typ.
func (t *tally) add(typ string) {
	switch typ {
	case record.OK:
		t.ok.Add(1)
	case record.Fail:
		t.failed.Add(1)
	default:
		t.info.Add(1)
	}
}

// Counts returns the number of ok, failed and info calls so far.
func (t *tally) Counts() (ok, fail, info int64) {
	return t.ok.Load(), t.failed.Load(), t.info.Load()
}

// caller is one client's way of calling the cluster.
type caller interface {
	next(ctx context.Context, space string, keys []uint64) ([]uint64, error)
	reserve(ctx context.Context, space string, key uint64, n uint32) (uint64, error)
	current(ctx context.Context, space string, keys []uint64) ([]uint64, error)
	node() string
	pinned() bool
}

type smart struct {
	c     *client.Client
	byAPI map[string]string
}

func (s smart) next(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	return s.c.Next(ctx, space, keys...)
}
func (s smart) reserve(ctx context.Context, space string, key uint64, n uint32) (uint64, error) {
	return s.c.Reserve(ctx, space, key, n)
}
func (s smart) current(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	return s.c.Current(ctx, space, keys...)
}
func (s smart) node() string {
	a := s.c.Leader()
	if id, ok := s.byAPI[a]; ok {
		return id
	}
	return a
}
func (s smart) pinned() bool { return false }

// Pinned calls one node, with no retries.
type Pinned struct {
	ID string
	c  seqv1connect.SequenceServiceClient
}

// NewPinned returns a client of the node at api (with its own connections).
func NewPinned(id, api string) *Pinned {
	return &Pinned{ID: id, c: seqv1connect.NewSequenceServiceClient(pinnedHTTP(), "http://"+api)}
}

// pinnedHTTP returns a pinned client's own HTTP client (its own
// connections, a short dial timeout).
func pinnedHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}}
}

func (p *Pinned) next(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	r, err := p.c.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: space, Keys: keys}))
	if err != nil {
		return nil, err
	}
	if len(r.Msg.GetValues()) != len(keys) {
		return r.Msg.GetValues(), errShape
	}
	return r.Msg.GetValues(), nil
}
func (p *Pinned) reserve(ctx context.Context, space string, key uint64, n uint32) (uint64, error) {
	r, err := p.c.Reserve(ctx, connect.NewRequest(&seqv1.ReserveRequest{Space: space, Key: key, Count: n}))
	if err != nil {
		return 0, err
	}
	return r.Msg.GetFirst(), nil
}
func (p *Pinned) current(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	r, err := p.c.Current(ctx, connect.NewRequest(&seqv1.CurrentRequest{Space: space, Keys: keys}))
	if err != nil {
		return nil, err
	}
	if len(r.Msg.GetValues()) != len(keys) {
		return r.Msg.GetValues(), errShape
	}
	return r.Msg.GetValues(), nil
}

// Current reads keys through this node (used for the final reads).
func (p *Pinned) Current(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	return p.current(ctx, space, keys)
}
func (p *Pinned) node() string { return p.ID }
func (p *Pinned) pinned() bool { return true }

// errShape marks a response with the wrong number of values: recorded as ok
// with its values so that the shape checker reports it.
var errShape = errors.New("wrong number of values")

// Start starts the clients; they run until Stop or ctx ends.
func Start(ctx context.Context, cfg Config, targets []Target, rec *record.Recorder) (*Workload, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &Workload{cfg: cfg, rec: rec, targets: targets, byAPI: map[string]string{}, cancel: cancel, lim: newLimiter(cfg.Rate)}
	var apis []string
	for _, t := range targets {
		apis = append(apis, t.API)
		w.byAPI[t.API] = t.ID
	}
	seed := cfg.Seed
	for i := range cfg.Smart {
		c, err := client.New(apis, client.Options{
			RetryFor:       cfg.SmartTimeout,
			AttemptTimeout: min(cfg.AttemptTimeout, cfg.SmartTimeout),
			MaxBackoff:     200 * time.Millisecond,
		})
		if err != nil {
			cancel()
			return nil, err
		}
		w.run(ctx, fmt.Sprintf("s%d", i), smart{c: c, byAPI: w.byAPI}, seed)
	}
	for _, t := range targets {
		for j := range cfg.PinnedPerNode {
			w.run(ctx, fmt.Sprintf("p-%s-%d", t.ID, j), NewPinned(t.ID, t.API), seed)
		}
	}
	return w, nil
}

func (w *Workload) run(ctx context.Context, name string, c caller, seed uint64) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		h := fnv.New64a()
		h.Write([]byte(name))
		rng := rand.New(rand.NewPCG(seed, h.Sum64()))
		for ctx.Err() == nil {
			if !w.lim.wait(ctx) {
				return
			}
			typ := w.one(ctx, name, c, rng)
			if typ != record.OK {
				// Do not spin on a node that refuses or is down.
				sleep(ctx, time.Duration(10+rng.IntN(40))*time.Millisecond)
			}
		}
	}()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// one runs one random operation and records it.
func (w *Workload) one(ctx context.Context, name string, c caller, rng *rand.Rand) string {
	timeout := w.cfg.OpTimeout
	if !c.pinned() {
		timeout = w.cfg.SmartTimeout
	}
	m := w.cfg.Mix
	k := rng.Uint64N(w.cfg.Keys)
	op := record.Op{Client: name, Node: c.node()}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var err error
	op.Invoke = w.rec.Now()
	switch p := rng.IntN(m.Next + m.Multi + m.Reserve + m.Current); {
	case p < m.Next:
		op.F, op.Keys = record.Next, []uint64{k}
		op.Values, err = c.next(cctx, w.cfg.Space, op.Keys)
	case p < m.Next+m.Multi:
		// A key listed twice must get two increasing values.
		op.F, op.Keys = record.Next, []uint64{k, rng.Uint64N(w.cfg.Keys), k}
		op.Values, err = c.next(cctx, w.cfg.Space, op.Keys)
	case p < m.Next+m.Multi+m.Reserve:
		n := uint32(1 + rng.IntN(int(max(w.cfg.MaxReserve, 1))))
		op.F, op.Keys, op.Count = record.Reserve, []uint64{k}, n
		var first uint64
		if first, err = c.reserve(cctx, w.cfg.Space, k, n); err == nil {
			op.Values = []uint64{first, first + uint64(n) - 1}
		}
	default:
		op.F, op.Keys = record.Current, []uint64{k}
		if rng.IntN(2) == 0 {
			op.Keys = append(op.Keys, (k+1)%w.cfg.Keys)
		}
		op.Values, err = c.current(cctx, w.cfg.Space, op.Keys)
	}
	op.Complete = w.rec.Now()
	if !c.pinned() {
		op.Node = c.node()
	}
	op.Type = Classify(err, cctx)
	if err != nil && !errors.Is(err, errShape) {
		op.Values = nil
		op.Error = errString(err)
	}
	w.rec.Add(op)
	w.add(op.Type)
	return op.Type
}

// Classify maps a call's error to an outcome. Only errors that certainly
// mean the call had no effect are failures: an answer from the server with a
// definite error code, or a connection that could not be made. Timeouts and
// broken connections are info: the call may or may not have taken values
// (which only leaves a gap). A response of the wrong shape is recorded as ok,
// for the checkers to see.
func Classify(err error, ctx context.Context) string {
	if err == nil || errors.Is(err, errShape) {
		return record.OK
	}
	if ctx.Err() != nil {
		return record.Info
	}
	if connect.IsWireError(err) {
		switch connect.CodeOf(err) {
		case connect.CodeUnavailable, connect.CodeInvalidArgument, connect.CodeNotFound,
			connect.CodeResourceExhausted, connect.CodeAlreadyExists, connect.CodeFailedPrecondition:
			return record.Fail
		}
		return record.Info
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return record.Fail
	}
	return record.Info
}

func errString(err error) string {
	s := err.Error()
	if ce := new(connect.Error); errors.As(err, &ce) {
		s = ce.Code().String() + ": " + ce.Message()
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// Stop stops the clients and waits for their calls to end (each is bounded
// by its timeout).
func (w *Workload) Stop() {
	w.cancel()
	w.wg.Wait()
}

// limiter spaces calls of all clients to a total rate (0: unlimited).
type limiter struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

func newLimiter(rate float64) *limiter {
	l := &limiter{}
	if rate > 0 {
		l.interval = time.Duration(float64(time.Second) / rate)
	}
	return l
}

// wait blocks until the caller's slot; it reports false if ctx ended. Slots
// missed while every client was blocked are not made up in a burst.
func (l *limiter) wait(ctx context.Context) bool {
	if l.interval == 0 {
		return ctx.Err() == nil
	}
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	t := l.next
	l.next = l.next.Add(l.interval)
	l.mu.Unlock()
	if d := time.Until(t); d > 0 {
		sleep(ctx, d)
	}
	return ctx.Err() == nil
}

// FinalReads reads every key with a Current through a smart client (retrying
// up to timeout) and through each node once, and records the reads. It
// reports whether the smart read of every key succeeded.
func FinalReads(ctx context.Context, space string, keys uint64, targets []Target, rec *record.Recorder, timeout time.Duration) (bool, error) {
	var apis []string
	byAPI := map[string]string{}
	for _, t := range targets {
		apis = append(apis, t.API)
		byAPI[t.API] = t.ID
	}
	all := make([]uint64, keys)
	for i := range all {
		all[i] = uint64(i)
	}
	c, err := client.New(apis, client.Options{RetryFor: timeout, AttemptTimeout: 2 * time.Second})
	if err != nil {
		return false, err
	}
	ok := false
	var lastErr error
	deadline := time.Now().Add(timeout)
	for attempt := 0; attempt < 100 && time.Now().Before(deadline) && ctx.Err() == nil; attempt++ {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		op := record.Op{Client: "final", F: record.Current, Keys: all, Invoke: rec.Now()}
		op.Values, err = c.Current(cctx, space, all...)
		op.Complete = rec.Now()
		op.Node = smart{c: c, byAPI: byAPI}.node()
		op.Type = Classify(err, cctx)
		cancel()
		if err != nil {
			op.Values, op.Error = nil, errString(err)
		}
		rec.Add(op)
		if err == nil {
			ok = true
			break
		}
		lastErr = err
		sleep(ctx, 200*time.Millisecond)
	}
	// One read through each node (a follower forwards to the leader).
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := NewPinned(t.ID, t.API)
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			op := record.Op{Client: "final-" + t.ID, Node: t.ID, F: record.Current, Keys: all, Invoke: rec.Now()}
			var err error
			op.Values, err = p.current(cctx, space, all)
			op.Complete = rec.Now()
			op.Type = Classify(err, cctx)
			if err != nil {
				op.Values, op.Error = nil, errString(err)
			}
			rec.Add(op)
		}()
	}
	wg.Wait()
	if !ok {
		return false, fmt.Errorf("final reads failed for %v: %v", timeout, lastErr)
	}
	return true, nil
}

// Clients lists the client names of a config over targets (for the summary).
func Clients(cfg Config, targets []Target) []string {
	var out []string
	for i := range cfg.Smart {
		out = append(out, fmt.Sprintf("s%d", i))
	}
	for _, t := range targets {
		for j := range cfg.PinnedPerNode {
			out = append(out, fmt.Sprintf("p-%s-%d", t.ID, j))
		}
	}
	sort.Strings(out)
	return out
}
