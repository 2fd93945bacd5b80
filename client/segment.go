package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
)

// Segments: Leaf-segment mode. A Segment hands out the values of one key
// from memory, out of ranges it reserves (Reserve) ahead of need: the
// range in use and a prefetched next one (Leaf's double buffer). So it
// keeps issuing while the cluster is unreachable, for as long as the values
// in hand last, and says how long that is (Stats).
//
// The rules, which every seqd client's segment keeps alike (docs/segments.md):
//
//   - The first Next reserves the first range, of Initial values, and waits
//     for it.
//   - When the share Prefetch of the range in use is taken, the next range
//     is reserved in the background. Its size follows consumption: the time
//     since the previous reservation is how long a range lasted; below
//     Target the size doubles, at or above twice Target it halves, within
//     Min and Max (Leaf's dynamic step).
//   - When the range in use is spent, the prefetched one takes over. When
//     both are spent, Next waits for the reservation in flight, or fails at
//     once with unavailable while the last attempt failed (the cluster is
//     unreachable); the reservation is tried again in the background, every
//     RetryEvery, and Next succeeds again once one does.
//   - Values are unique across every client of the key: each comes from a
//     Reserve. A Segment's values increase (a Next that begins after
//     another returned gets a larger value): a range is reserved only after
//     the one before it came back, and a reservation that begins after
//     another completed returns larger values. Across clients (and
//     Segments) values are only trend-increasing: each Segment hands out its
//     own range, and another Segment's range may lie below or above it.
//   - Values in hand at Close or a crash are skipped, never handed out
//     again (gaps, as after a failover).

// SegmentOptions configure a Segment. The zero value takes the defaults.
type SegmentOptions struct {
	// Initial is the first range's size (default 1000, within Min and Max).
	Initial uint32
	// Min and Max bound a range's size (defaults 1 and 1,000,000, the most
	// one Reserve takes).
	Min, Max uint32
	// Target is how long one range should last (default 15 minutes, as in
	// Leaf): the size doubles while ranges last less, and halves when one
	// lasted twice as long or more.
	Target time.Duration
	// Prefetch is the share of the range in use taken when the next range
	// is reserved (default 0.1, as in Leaf; 0 < Prefetch ≤ 1).
	Prefetch float64
	// FetchTimeout bounds one reservation (default 3s); RetryEvery is the
	// pause between failed ones (default 250ms).
	FetchTimeout, RetryEvery time.Duration
}

func (o SegmentOptions) withDefaults() SegmentOptions {
	if o.Min == 0 {
		o.Min = 1
	}
	if o.Max == 0 || o.Max > seqd.MaxReserveCount {
		o.Max = seqd.MaxReserveCount
	}
	o.Max = max(o.Max, o.Min)
	if o.Initial == 0 {
		o.Initial = 1000
	}
	o.Initial = min(max(o.Initial, o.Min), o.Max)
	if o.Target <= 0 {
		o.Target = 15 * time.Minute
	}
	if o.Prefetch <= 0 || o.Prefetch > 1 {
		o.Prefetch = 0.1
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 3 * time.Second
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = 250 * time.Millisecond
	}
	return o
}

// ErrSegmentClosed is what Next answers after Close.
var ErrSegmentClosed = errors.New("client: segment closed")

// Segment hands out one key's values from reserved ranges (see above). It
// is safe for concurrent use.
type Segment struct {
	c     *Client
	space string
	key   uint64
	opts  SegmentOptions
	clock func() time.Time

	cur    atomic.Pointer[segRange] // the range in use (nil before the first)
	issued atomic.Uint64
	shut   atomic.Bool // Close was called

	mu        sync.Mutex
	nxt       *segRange     // the prefetched range
	size      uint32        // the size of the next reservation
	lastFetch time.Time     // when the last reservation came back
	failing   error         // the last reservation's error, until one succeeds
	changed   chan struct{} // closed when a reservation ends (well or not)
	closed    bool
	fetches   uint64
	failures  uint64
	rate      rateMeter

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// segRange is a reserved range [first, end]; taken counts the values
// claimed from it, and may run past its size (claims past it are void).
type segRange struct {
	first, end uint64
	taken      atomic.Uint64
	prefetchAt uint64      // claims at which the next range is reserved
	asked      atomic.Bool // the next range was asked for
}

func (r *segRange) size() uint64 { return r.end - r.first + 1 }

// Segment returns a segment of key in space ("" is the default space). It
// reserves nothing until the first Next. Close it to stop its background
// reservations.
func (c *Client) Segment(space string, key uint64, opts SegmentOptions) *Segment {
	if space == "" {
		space = seqd.DefaultSpaceName
	}
	opts = opts.withDefaults()
	s := &Segment{c: c, space: space, key: key, opts: opts, clock: time.Now, size: opts.Initial,
		changed: make(chan struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.rate.reset(s.clock(), 0)
	go s.fetcher()
	return s
}

// Next returns the segment's next value.
func (s *Segment) Next(ctx context.Context) (uint64, error) {
	for {
		if s.shut.Load() {
			return 0, ErrSegmentClosed
		}
		r := s.cur.Load()
		if r != nil {
			if v, n := s.claim(r, 1); n == 1 {
				return v, nil
			}
		}
		if err := s.refill(ctx, r); err != nil {
			return 0, err
		}
	}
}

// NextN returns n values (1 to seqd.MaxReserveCount), increasing; they are
// consecutive within a range and may span two. If it fails after taking
// some, those are skipped.
func (s *Segment) NextN(ctx context.Context, n int) ([]uint64, error) {
	if n < 1 || n > seqd.MaxReserveCount {
		return nil, fmt.Errorf("%w: %d values, want 1 to %d", seqd.ErrInvalidArgument, n, seqd.MaxReserveCount)
	}
	out := make([]uint64, 0, n)
	for len(out) < n {
		if s.shut.Load() {
			return nil, ErrSegmentClosed
		}
		r := s.cur.Load()
		if r != nil {
			v, got := s.claim(r, uint64(n-len(out)))
			for i := range got {
				out = append(out, v+i)
			}
			if len(out) == n {
				return out, nil
			}
		}
		if err := s.refill(ctx, r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// claim takes up to want values from r: the first of them and how many
// (fewer than want, or none, when r runs out). It asks for the next range
// once the prefetch share of r is claimed.
func (s *Segment) claim(r *segRange, want uint64) (first, got uint64) {
	t := r.taken.Add(want)
	start := t - want
	if start >= r.size() {
		return 0, 0
	}
	got = min(want, r.size()-start)
	s.issued.Add(got)
	if t >= r.prefetchAt && !r.asked.Load() && !r.asked.Swap(true) {
		s.wake()
	}
	return r.first + start, got
}

// wake asks the fetcher for the next range.
func (s *Segment) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// refill replaces old, the range in use (nil: none yet), once it is spent:
// with the prefetched range, or, when there is none, the one being
// reserved (waiting for it, within ctx). It fails with unavailable while
// the last reservation failed.
func (s *Segment) refill(ctx context.Context, old *segRange) error {
	s.mu.Lock()
	for {
		switch {
		case s.closed:
			s.mu.Unlock()
			return ErrSegmentClosed
		case s.cur.Load() != old:
			s.mu.Unlock() // another call moved on
			return nil
		case s.nxt != nil:
			s.cur.Store(s.nxt)
			s.nxt = nil
			s.mu.Unlock()
			return nil
		case s.failing != nil:
			err := connect.NewError(connect.CodeUnavailable,
				fmt.Errorf("segment of key %d of space %q: both ranges are spent and reserving the next failed (%v); retrying in the background", s.key, s.space, s.failing))
			s.mu.Unlock()
			return err
		}
		s.wake()
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
	}
}

// fetcher reserves the next range whenever asked and none is in hand,
// trying again every RetryEvery until one comes back or the segment
// closes.
func (s *Segment) fetcher() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		}
		s.mu.Lock()
		if s.nxt != nil {
			s.mu.Unlock()
			continue
		}
		now := s.clock()
		if !s.lastFetch.IsZero() {
			s.size = nextSize(s.size, now.Sub(s.lastFetch), s.opts)
		}
		size := s.size
		s.mu.Unlock()
		for !s.fetchOnce(size) {
			t := time.NewTimer(s.opts.RetryEvery)
			select {
			case <-s.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// fetchOnce makes one reservation of size values and reports whether it
// succeeded; either way it wakes the calls waiting for it.
func (s *Segment) fetchOnce(size uint32) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.FetchTimeout)
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	first, err := s.c.Reserve(ctx, s.space, s.key, size)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { close(s.changed); s.changed = make(chan struct{}) }()
	s.fetches++
	if err != nil {
		s.failures++
		s.failing = err
		return s.closed
	}
	r := &segRange{first: first, end: first + uint64(size) - 1}
	r.prefetchAt = max(1, uint64(float64(size)*s.opts.Prefetch))
	s.failing, s.lastFetch = nil, s.clock()
	if s.cur.Load() == nil {
		s.cur.Store(r)
	} else {
		s.nxt = r
	}
	return true
}

// nextSize is Leaf's dynamic step: the next range's size after one that
// lasted d.
func nextSize(size uint32, d time.Duration, o SegmentOptions) uint32 {
	switch {
	case d < o.Target:
		size = uint32(min(2*uint64(size), uint64(o.Max)))
	case d >= 2*o.Target:
		size /= 2
	}
	return min(max(size, o.Min), o.Max)
}

// Close stops the segment's reservations; its values in hand are skipped
// (never handed out again), and Next fails with ErrSegmentClosed.
func (s *Segment) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.shut.Store(true)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	close(s.stop)
	<-s.done
}

// SegmentStats describe a Segment.
type SegmentStats struct {
	// Issued counts the values handed out.
	Issued uint64
	// InHand is how many values are left in the range in use and the
	// prefetched one; Prefetched says whether the latter is in hand.
	InHand     uint64
	Prefetched bool
	// NextSize is the size of the next reservation.
	NextSize uint32
	// Rate is the values handed out per second lately (over the last ten
	// seconds or so), and Lasts how long InHand lasts at that rate: how
	// long the segment rides out an unreachable cluster from now (0 when
	// nothing was handed out lately).
	Rate  float64
	Lasts time.Duration
	// Reservations counts the Reserve calls made, and Failures those that
	// failed; Unreachable is the last one's error while it failed (nil once
	// one succeeds).
	Reservations, Failures uint64
	Unreachable            error
}

// Stats reports the segment's state.
func (s *Segment) Stats() SegmentStats {
	st := SegmentStats{Issued: s.issued.Load()}
	if r := s.cur.Load(); r != nil {
		if t := r.taken.Load(); t < r.size() {
			st.InHand = r.size() - t
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nxt != nil {
		st.InHand += s.nxt.size()
		st.Prefetched = true
	}
	st.NextSize, st.Reservations, st.Failures, st.Unreachable = s.size, s.fetches, s.failures, s.failing
	st.Rate = s.rate.observe(s.clock(), st.Issued)
	if st.Rate > 0 {
		st.Lasts = time.Duration(float64(st.InHand) / st.Rate * float64(time.Second))
	}
	return st
}

// rateMeter measures a rate between observations at least a second apart,
// over a window restarted every ten seconds.
type rateMeter struct {
	at    time.Time
	count uint64
	last  float64
}

func (m *rateMeter) reset(at time.Time, count uint64) { m.at, m.count = at, count }

func (m *rateMeter) observe(now time.Time, count uint64) float64 {
	d := now.Sub(m.at)
	if d >= time.Second {
		m.last = float64(count-m.count) / d.Seconds()
	}
	if d >= 10*time.Second {
		m.reset(now, count)
	}
	return m.last
}
