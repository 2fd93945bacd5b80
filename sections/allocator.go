package sections

import (
	"context"
	"fmt"
	"log/slog"
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

// SpaceFinder is implemented by a Store whose spaces may lag the state
// that decides them (a raft group other than the one deciding spaces). A
// call for a space the allocator has not loaded calls FindSpace first,
// without holding any of the allocator's locks: it makes the Store hold the
// space if it exists anywhere (Space returns it afterwards), asking
// elsewhere if it must. A space that exists nowhere is not an error (the
// call then fails as for an unknown space); an error is one of finding out
// (no leader to ask, say), which the call returns.
type SpaceFinder interface {
	FindSpace(ctx context.Context, name string) error
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
	// Owns, when set, reports whether this allocator's group owns a section
	// (see seqd.SlotOf); a key of a section it does not own fails with
	// seqd.ErrNotOwner before anything is read or raised. nil owns every
	// section.
	Owns func(space string, section uint64) bool
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

	taken      atomic.Uint64 // values taken (see ValuesTaken)
	raiseCalls atomic.Uint64 // Store.Raise calls (one raft entry each)
}

type spaceState struct {
	name        string
	sectionSize uint64        // never changes (see seqd.Space)
	denseAt     int           // of sectionSize (keys.go)
	step        atomic.Uint64 // may change (see SpaceChanged)
	sections    map[uint64]*section
}

// MaxRaiseStep is the most a section is raised ahead of need at once: a
// space's step, or this when the step is larger (2^32, about a second of
// the raise budget, fsm.RaiseRatePerUs). The budget lends a section some
// 10 s of raises; a step far above that (up to seqd.MaxStep, 2^40: about
// 268 s) would spend a section's budget in one raise, and a new leader,
// which must raise a section before it hands out anything, would then wait
// minutes for the budget after a failover. Raising less than the step
// loses nothing: a step only bounds how far ahead the mark runs (the gap a
// failover leaves).
const MaxRaiseStep = 1 << 32

// raiseStep is how far ahead of need the space's sections are raised.
func (s *spaceState) raiseStep() uint64 { return min(s.step.Load(), MaxRaiseStep) }

func newSpaceState(sp seqd.Space) *spaceState {
	s := &spaceState{name: sp.Name, sectionSize: sp.SectionSize, denseAt: denseAt(sp.SectionSize), sections: make(map[uint64]*section)}
	s.step.Store(sp.Step)
	return s
}

type section struct {
	mu    sync.Mutex
	space *spaceState
	id    uint64
	epoch uint64    // lease epoch this section was loaded in
	keys  *keyCount // the keys counter of that epoch
	// dropped: SpaceChanged dropped the section (its space was deleted);
	// it serves no call any more, since a section loaded again from the
	// committed mark may hand out what a raise of this one would cover.
	dropped bool

	max   uint64 // committed high-water mark; every value returned is <= max
	floor uint64 // a key not in memory continues from here
	hi    uint64 // highest value returned in this section

	young map[uint64]uint64 // cur per key (recent generation)
	old   map[uint64]uint64 // older generation, evicted as a whole (bounded mode only)
	// dense replaces young once it holds denseAt keys (unbounded mode
	// only): cur by the key's offset in the section, 0 for a key not held;
	// denseN counts the keys held.
	dense  []uint64
	denseN int

	raising   bool
	raiseDone chan struct{} // closed when the in-flight raise finishes
	raiseErr  error         // result of the last finished raise
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

// find makes the Store hold space before a call loads it (see SpaceFinder).
// A space already loaded costs one map read under the read lock; an
// allocator without the lease asks nobody (the call then fails on the
// lease, as before any finding).
func (a *Allocator) find(ctx context.Context, space string) error {
	f, ok := a.store.(SpaceFinder)
	if !ok {
		return nil
	}
	a.mu.RLock()
	loaded := a.spaces[space] != nil
	a.mu.RUnlock()
	if loaded || !a.Serving() {
		return nil // without the lease, the call fails as it would
	}
	return f.FindSpace(ctx, space)
}

// section returns the in-memory state of (space, section of key), loading it
// from the Store at its committed max if needed. Sections are loaded only
// while the lease is held (at now, the call's reading of the clock), so their
// max is never older than what the previous leader committed.
func (a *Allocator) section(name string, key uint64, now time.Duration) (*section, error) {
	a.mu.RLock()
	sp := a.spaces[name]
	if sp != nil {
		if sec := sp.sections[key/sp.sectionSize]; sec != nil {
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
		return nil, seqd.ErrLeaseNotHeld
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
		sp = newSpaceState(cfg)
		a.spaces[name] = sp
	}
	id := key / sp.sectionSize
	if sec := sp.sections[id]; sec != nil {
		return sec, nil
	}
	if a.opts.Owns != nil && !a.opts.Owns(name, id) {
		return nil, fmt.Errorf("%w: space %q section %d", seqd.ErrNotOwner, name, id)
	}
	m := a.store.Max(name, id)
	sec := &section{space: sp, id: id, epoch: l.epoch, keys: a.keys.Load(), max: m, floor: m, hi: m, young: make(map[uint64]uint64)}
	sp.sections[id] = sec
	return sec, nil
}
