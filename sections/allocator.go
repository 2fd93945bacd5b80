package sections

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd"
)

// Store is the replicated state the allocator builds on.
type Store interface {
	// Space returns the committed settings of the named space.
	Space(name string) (seqd.Space, bool)
	// Max returns the committed high-water mark of a section (0 if never raised).
	Max(space string, section uint64) uint64
	// Raise makes every mark durable: it returns nil only after the marks are
	// committed by a quorum and applied to the state that Max reads. A raise
	// is applied as a maximum, so repeating one is harmless.
	Raise(ctx context.Context, marks []seqd.Mark) error
}

// Options tunes an Allocator. The zero value is valid.
type Options struct {
	// MaxKeysPerSection bounds the keys held in memory per section; 0 means
	// unbounded. When a section's recent keys reach half of it, the older
	// half is evicted (floor is raised to cover their values first), so a
	// section holds at most MaxKeysPerSection keys. An evicted key continues
	// from floor, which may skip values (allowed: gaps, never repeats).
	MaxKeysPerSection int
	// RaiseTimeout bounds one Store.Raise; default 10s.
	RaiseTimeout time.Duration
	// Logger receives raise failures; default slog.Default().
	Logger *slog.Logger
	// OnRaise, when set, is called after every Store.Raise with the number
	// of marks, the time it took, and its error (for metrics).
	OnRaise func(marks int, took time.Duration, err error)
	// Clock times the lease; nil means BootClock. It must count time the
	// host spends suspended (see Clock).
	Clock Clock
}

// Allocator hands out values. All methods are safe for concurrent use.
type Allocator struct {
	store Store
	opts  Options
	log   *slog.Logger

	clock Clock // times the lease
	lease atomic.Pointer[lease]

	mu     sync.RWMutex // guards spaces and the sections maps (not their contents)
	spaces map[string]*spaceState
	// keys counts the keys held in the sections of the current epoch. It is
	// replaced (under mu, with spaces) by Revoke.
	keys atomic.Pointer[keyCount]

	raises chan []raiseReq // each slice is handed over whole, to share one entry
	queued atomic.Int64    // requests handed to raises and not yet received
	stop   chan struct{}
	done   chan struct{}

	taken       atomic.Uint64 // values taken (see ValuesTaken)
	raiseCalls  atomic.Uint64 // Store.Raise calls (one raft entry each)
	marksRaised atomic.Uint64 // marks carried by them
}

// lease is immutable once published.
type lease struct {
	epoch  uint64
	expiry time.Duration // a reading of Allocator.clock; noLease = no lease
}

// noLease is the expiry of a lease not (or no longer) granted: every reading
// of the clock is at or past it.
const noLease = time.Duration(math.MinInt64)

// keyCount counts the keys held in the sections of one lease epoch. Each
// section keeps the counter that was current when it was loaded (under
// Allocator.mu), and Revoke replaces the allocator's counter under the same
// lock as it drops the sections. A call that passed the lease check before a
// Revoke may still add keys to (or evict keys from) a section that the Revoke
// dropped; it then updates that earlier epoch's detached counter, so KeysHeld
// is exactly the number of keys held in the current epoch's sections.
type keyCount struct{ n atomic.Int64 }

type spaceState struct {
	seqd.Space
	sections map[uint64]*section
}

type section struct {
	mu    sync.Mutex
	space *spaceState
	id    uint64
	epoch uint64    // lease epoch this section was loaded in
	keys  *keyCount // the keys counter of that epoch

	max   uint64 // committed high-water mark; every value returned is <= max
	floor uint64 // a key not in memory continues from here
	hi    uint64 // highest value returned in this section

	young map[uint64]uint64 // cur per key (recent generation)
	old   map[uint64]uint64 // older generation, evicted as a whole (bounded mode only)

	raising   bool
	raiseDone chan struct{} // closed when the in-flight raise finishes
	raiseErr  error         // result of the last finished raise
}

type raiseReq struct {
	sec    *section
	target uint64
}

// New returns an allocator that does not serve until Grant is called. Close
// stops its background raiser.
func New(store Store, opts Options) *Allocator {
	if opts.RaiseTimeout <= 0 {
		opts.RaiseTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = BootClock
	}
	a := &Allocator{
		store:  store,
		opts:   opts,
		log:    opts.Logger,
		clock:  opts.Clock,
		spaces: make(map[string]*spaceState),
		raises: make(chan []raiseReq, 1024),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	a.lease.Store(&lease{epoch: 1, expiry: noLease})
	a.keys.Store(new(keyCount))
	go a.raiser()
	return a
}

// Close stops the background raiser; in-flight raises are abandoned and the
// calls waiting on them fail with ErrNotServing.
func (a *Allocator) Close() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// Now returns a reading of the allocator's clock (Options.Clock, BootClock by
// default), the clock that Grant's until is read from. The caller of Grant
// takes it before submitting the consensus entry whose commit renews the
// lease.
func (a *Allocator) Now() time.Duration { return a.clock() }

// callNow reads the clock for the lease checks of one call. Next, Reserve
// and Current read it once, after the call has begun, and use that reading
// for every lease check the call makes (take reads it again after waiting for
// a raise) instead of reading it for each value: on Linux a reading of
// CLOCK_BOOTTIME is a system call (Go reads CLOCK_MONOTONIC through the vDSO,
// but has no such path for CLOCK_BOOTTIME), too costly to make for every key
// of a call.
//
// A reading taken after the call began and before it returns is as good as
// one taken at the moment each value is taken. A new leader serves only once
// the old leader's lease has run out (it waits the lease out first), so a
// call that begins after a new leader started serving reads a time past the
// old lease, and the old leader refuses it. Every call an old leader does
// serve therefore began before the new leader served anything, and every
// value the old leader hands out is at or below a committed max, which the
// new leader (it starts every section at the committed max) starts above. So
// such a call can be ordered before every call of the new leader: no value is
// repeated and no key's values go backwards, however late within the call
// its values are taken.
func (a *Allocator) callNow() time.Duration { return a.clock() }

// Epoch returns the current lease epoch. Revoke starts a new one.
func (a *Allocator) Epoch() uint64 { return a.lease.Load().epoch }

// Grant extends the lease of the given epoch to until, a reading of the
// allocator's clock (see Now). It has no effect if epoch is not the current
// epoch (the grant comes from a leadership term that has since ended) or if
// the lease already runs longer.
//
// The caller guarantees the lease is safe: until = t + L where t = Now() was
// taken before submitting a consensus entry that then committed, and any
// leader elected later waits L (plus a margin for clock-rate drift) before
// serving. Because the clock counts time suspended, a lease whose holder was
// suspended past until has ended when the holder resumes.
func (a *Allocator) Grant(epoch uint64, until time.Duration) {
	for {
		cur := a.lease.Load()
		if cur.epoch != epoch || cur.expiry >= until {
			return
		}
		if a.lease.CompareAndSwap(cur, &lease{epoch: epoch, expiry: until}) {
			return
		}
	}
}

// Revoke ends the lease at once, starts a new epoch and drops every section
// held in memory, so nothing loaded under an earlier lease is used again. It
// returns the new epoch, for the next Grant.
func (a *Allocator) Revoke() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var next uint64
	for {
		cur := a.lease.Load()
		next = cur.epoch + 1
		if a.lease.CompareAndSwap(cur, &lease{epoch: next, expiry: noLease}) {
			break
		}
	}
	a.spaces = make(map[string]*spaceState)
	a.keys.Store(new(keyCount))
	return next
}

// Withhold ends the lease at once but keeps the epoch and the sections held
// in memory, and returns the epoch: a later Grant of the same epoch serves
// again from where the allocator stopped, without reloading any section (so
// without the jump of up to a step that a reload costs). Use it to pause
// serving while this node stays the leader of the same term (a change that
// may or may not end its leadership); any leadership change must still go
// through Revoke, which makes a later Grant of the old epoch a no-op.
func (a *Allocator) Withhold() uint64 {
	for {
		cur := a.lease.Load()
		if a.lease.CompareAndSwap(cur, &lease{epoch: cur.epoch, expiry: noLease}) {
			return cur.epoch
		}
	}
}

// Serving reports whether the allocator holds an unexpired lease.
func (a *Allocator) Serving() bool {
	l := a.lease.Load()
	return a.clock() < l.expiry
}

// LeaseRemaining returns how long the current lease still runs (0 if none).
func (a *Allocator) LeaseRemaining() time.Duration {
	l := a.lease.Load()
	if l.expiry == noLease {
		return 0
	}
	if d := l.expiry - a.clock(); d > 0 {
		return d
	}
	return 0
}

// SectionsHeld returns how many sections are loaded in memory.
func (a *Allocator) SectionsHeld() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	n := 0
	for _, sp := range a.spaces {
		n += len(sp.sections)
	}
	return n
}

// RaisesQueued returns how many section raises wait for the next entry.
func (a *Allocator) RaisesQueued() int { return int(a.queued.Load()) }

// KeysHeld returns how many keys are held in memory across the sections of
// the current epoch (those a call can still use). Sections dropped by Revoke
// are not counted, even while a call that began before the Revoke finishes
// with one of them.
func (a *Allocator) KeysHeld() int64 { return a.keys.Load().n.Load() }

// Raises returns how many Store.Raise calls (each one raft entry) this
// allocator has made since New, successful or not. Every raise moves a
// section's mark one step (or more) ahead, so over a steady load it grows by
// at most ids/step per section per second.
func (a *Allocator) Raises() uint64 { return a.raiseCalls.Load() }

// ValuesTaken returns how many values this allocator has taken since New:
// the values calls returned, and the values of calls that failed after
// taking some (those are skipped: gaps). A section's high-water mark grows
// with the values taken, not only with those returned, which is why a
// restore's margin is bounded by values taken (see fsm.MinMargin).
func (a *Allocator) ValuesTaken() uint64 { return a.taken.Load() }

// MarksRaised returns how many section marks those Store.Raise calls carried
// (several sections' raises share one entry).
func (a *Allocator) MarksRaised() uint64 { return a.marksRaised.Load() }

// checkLocked reports whether sec may serve at now, the call's reading of
// the clock (see callNow). Call with sec.mu held.
func (a *Allocator) checkLocked(sec *section, now time.Duration) error {
	l := a.lease.Load()
	if l.epoch != sec.epoch || now >= l.expiry {
		return seqd.ErrNotServing
	}
	return nil
}

// section returns the in-memory state of (space, section of key), loading it
// from the Store at its committed max if needed. Sections are loaded only
// while the lease is held (at now, the call's reading of the clock), so their
// max is never older than what the previous leader committed.
func (a *Allocator) section(name string, key uint64, now time.Duration) (*section, error) {
	a.mu.RLock()
	sp := a.spaces[name]
	if sp != nil {
		if sec := sp.sections[key/sp.SectionSize]; sec != nil {
			a.mu.RUnlock()
			return sec, nil
		}
	}
	a.mu.RUnlock()

	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.lease.Load()
	// Loading reads the state machine now, so the lease must hold now: a
	// fresh reading, not the call's (the call may have stalled since it
	// began, and a leader that lost its lease may by now have applied a
	// newer leader's raises; a section loaded at such a mark could hand out
	// values that the newer leader hands out too). Loads are rare.
	if now >= l.expiry || a.clock() >= l.expiry {
		return nil, seqd.ErrNotServing
	}
	sp = a.spaces[name]
	if sp == nil {
		cfg, ok := a.store.Space(name)
		if !ok {
			return nil, fmt.Errorf("%w %q", seqd.ErrUnknownSpace, name)
		}
		if cfg.SectionSize == 0 || cfg.Step == 0 {
			return nil, fmt.Errorf("space %q has invalid settings (step %d, section_size %d)", name, cfg.Step, cfg.SectionSize)
		}
		sp = &spaceState{Space: cfg, sections: make(map[uint64]*section)}
		a.spaces[name] = sp
	}
	id := key / sp.SectionSize
	if sec := sp.sections[id]; sec != nil {
		return sec, nil
	}
	m := a.store.Max(name, id)
	sec := &section{space: sp, id: id, epoch: l.epoch, keys: a.keys.Load(), max: m, floor: m, hi: m, young: make(map[uint64]uint64)}
	sp.sections[id] = sec
	return sec, nil
}

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
		size := sec.space.SectionSize
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
			reqs = append(reqs, raiseReq{sec: sec, target: addCap(need, sec.space.Step)})
		}
		sec.mu.Unlock()
		i = j
	}
	return nil
}

// Reserve returns the first of count consecutive new values for key: the
// caller owns first .. first+count-1.
func (a *Allocator) Reserve(ctx context.Context, space string, key, count uint64) (uint64, error) {
	if count == 0 {
		return 0, fmt.Errorf("%w: count must be at least 1", seqd.ErrInvalidArgument)
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
		out[i] = sec.get(k)
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
			a.startRaiseLocked(sec, addCap(last, sec.space.Step))
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
		return 0, 0, false, fmt.Errorf("%w (space %q, key %d)", seqd.ErrExhausted, sec.space.Name, key)
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
	if step := sec.space.Step; !sec.raising && sec.max < seqd.MaxValue && sec.max-sec.hi < step/2+1 {
		a.startRaiseLocked(sec, addCap(sec.max, step))
	}
	return cur + 1, last, true, nil
}

// addCap returns a+b, or MaxValue if that is larger.
func addCap(a, b uint64) uint64 {
	if b > seqd.MaxValue-a {
		return seqd.MaxValue
	}
	return a + b
}

func (s *section) get(key uint64) uint64 {
	if v, ok := s.young[key]; ok {
		return v
	}
	if v, ok := s.old[key]; ok {
		return v
	}
	return s.floor
}

// set records v as key's current value, evicting the older generation of
// keys when the section is over its bound. Call with sec.mu held.
func (a *Allocator) set(s *section, key, v uint64) {
	if _, ok := s.young[key]; ok {
		s.young[key] = v
		return
	}
	if s.old != nil {
		if _, ok := s.old[key]; ok {
			delete(s.old, key)
			s.young[key] = v
			return
		}
	}
	limit := a.opts.MaxKeysPerSection
	if limit > 0 && len(s.young) >= (limit+1)/2 {
		// Evict the older generation: floor first covers each evicted value.
		for _, ov := range s.old {
			if ov > s.floor {
				s.floor = ov
			}
		}
		s.keys.n.Add(-int64(len(s.old)))
		s.old = s.young
		s.young = make(map[uint64]uint64, len(s.old))
	}
	s.young[key] = v
	s.keys.n.Add(1)
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

// sendRaises sends reqs (already counted in queued) to the raiser, or fails
// them if the allocator is closed.
func (a *Allocator) sendRaises(reqs []raiseReq) {
	select {
	case a.raises <- reqs:
	case <-a.stop:
		a.queued.Add(-int64(len(reqs)))
		for _, r := range reqs {
			a.finishRaise(r, seqd.ErrNotServing)
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
			marks[i] = seqd.Mark{Space: r.sec.space.Name, Section: r.sec.id, Max: r.target}
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
		a.marksRaised.Add(uint64(len(marks)))
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
				a.finishRaise(r, seqd.ErrNotServing)
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
