package flake

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/seqd/seqd"
)

// ErrInvalidLayout means a layout's bit widths, unit or epoch are out of
// range.
var ErrInvalidLayout = errors.New("invalid id layout")

// Layout is the shape of a namespace's ids: TimeBits of time units of UnitMs
// milliseconds since EpochMs (Unix milliseconds), then WorkerBits of worker,
// then SequenceBits of sequence, from the most significant bit down. The sum
// of the three is at most 63, so every id is a positive int64; JavaScript
// layouts sum to at most 53, so that every id is exactly representable as a
// JavaScript number. A namespace's layout is fixed when it is created: a new
// layout is a new namespace.
type Layout struct {
	EpochMs      int64
	UnitMs       uint32
	TimeBits     uint8
	WorkerBits   uint8
	SequenceBits uint8
}

// The limits Validate enforces.
const (
	// MaxIDBits is the widest layout: ids are positive int64s.
	MaxIDBits = 63
	// JSSafeBits is the widest layout whose ids are all exact JavaScript
	// numbers (Number.MAX_SAFE_INTEGER is 2^53-1).
	JSSafeBits = 53
	// MinTimeBits bounds a layout's lifetime from below: 2^20 units.
	MinTimeBits = 20
	// MaxWorkerBits bounds the worker table a namespace can need.
	MaxWorkerBits = 24
	// MaxSequenceBits bounds a unit's sequence.
	MaxSequenceBits = 24
	// MaxUnitMs is the longest time unit: one day.
	MaxUnitMs = 24 * 60 * 60 * 1000
)

// DefaultEpoch is the epoch of the preset layouts: 2026-01-01T00:00:00Z.
var DefaultEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultLayoutName names the layout a namespace gets when none is given.
const DefaultLayoutName = "snowflake"

// presets are the named layouts, all on DefaultEpoch.
var presets = map[string]Layout{
	// Twitter's shape: 41 bits of ms (about 69 years), 1024 workers,
	// 4096 ids per ms per worker.
	"snowflake": {UnitMs: 1, TimeBits: 41, WorkerBits: 10, SequenceBits: 12},
	// Sonyflake's shape, long-lived: 39 bits of 10 ms (about 174 years),
	// 65536 workers, 256 ids per 10 ms per worker.
	"sonyflake": {UnitMs: 10, TimeBits: 39, WorkerBits: 16, SequenceBits: 8},
	// For large fleets: 31 bits of seconds (about 68 years), about a million
	// workers, 4096 ids per second per worker.
	"wide": {UnitMs: 1000, TimeBits: 31, WorkerBits: 20, SequenceBits: 12},
	// JavaScript-safe: 39 bits of 10 ms (about 174 years), 256 workers, 64
	// ids per 10 ms per worker.
	"js": {UnitMs: 10, TimeBits: 39, WorkerBits: 8, SequenceBits: 6},
	// JavaScript-safe with more workers: 32 bits of seconds (about 136
	// years), 1024 workers, 2048 ids per second per worker.
	"js-seconds": {UnitMs: 1000, TimeBits: 32, WorkerBits: 10, SequenceBits: 11},
}

// Preset returns the named preset layout (see PresetNames) and whether it
// exists.
func Preset(name string) (Layout, bool) {
	l, ok := presets[name]
	if ok {
		l.EpochMs = DefaultEpoch.UnixMilli()
	}
	return l, ok
}

// PresetNames lists the preset layouts, the default first.
func PresetNames() []string {
	return []string{"snowflake", "sonyflake", "wide", "js", "js-seconds"}
}

// String describes the layout for people, as its preset's name when it is
// one ("snowflake"), its widths and unit otherwise, and its epoch as a date.
func (l Layout) String() string {
	for _, name := range PresetNames() {
		if p, _ := Preset(name); p == l {
			return name
		}
	}
	return fmt.Sprintf("time_bits=%d worker_bits=%d sequence_bits=%d unit_ms=%d epoch=%s",
		l.TimeBits, l.WorkerBits, l.SequenceBits, l.UnitMs, seqd.Date(l.EpochMs))
}

// Bits is the width of the layout's ids.
func (l Layout) Bits() int { return int(l.TimeBits) + int(l.WorkerBits) + int(l.SequenceBits) }

// JSSafe reports whether every id of the layout is an exact JavaScript number.
func (l Layout) JSSafe() bool { return l.Bits() <= JSSafeBits }

// Workers is the number of worker ids the layout has.
func (l Layout) Workers() uint64 { return 1 << l.WorkerBits }

// MaxSequence is the highest sequence within one unit.
func (l Layout) MaxSequence() uint64 { return 1<<l.SequenceBits - 1 }

// MaxUnit is the last time unit the layout can express; ids need T ≥ 1, so
// the layout's lifetime is units 1 to MaxUnit.
func (l Layout) MaxUnit() uint64 { return 1<<l.TimeBits - 1 }

// End is the first instant (Unix ms) the layout cannot express: its end of
// life. It saturates at the largest int64.
func (l Layout) End() int64 {
	hi, lo := bits.Mul64(l.MaxUnit()+1, uint64(l.UnitMs))
	if hi != 0 || lo > uint64(1<<63-1-max(l.EpochMs, 0)) {
		return 1<<63 - 1
	}
	return l.EpochMs + int64(lo)
}

// Validate checks the layout's widths, unit and epoch. It does not read a
// clock: whether the layout's life has ended is the caller's check (End).
func (l Layout) Validate() error {
	switch {
	case l.Bits() > MaxIDBits:
		return fmt.Errorf("%w: %d+%d+%d bits is more than %d", ErrInvalidLayout, l.TimeBits, l.WorkerBits, l.SequenceBits, MaxIDBits)
	case l.TimeBits < MinTimeBits:
		return fmt.Errorf("%w: time bits %d, need at least %d", ErrInvalidLayout, l.TimeBits, MinTimeBits)
	case l.WorkerBits < 1 || l.WorkerBits > MaxWorkerBits:
		return fmt.Errorf("%w: worker bits %d, need 1 to %d", ErrInvalidLayout, l.WorkerBits, MaxWorkerBits)
	case l.SequenceBits < 1 || l.SequenceBits > MaxSequenceBits:
		return fmt.Errorf("%w: sequence bits %d, need 1 to %d", ErrInvalidLayout, l.SequenceBits, MaxSequenceBits)
	case l.UnitMs < 1 || l.UnitMs > MaxUnitMs:
		return fmt.Errorf("%w: unit %d ms, need 1 to %d", ErrInvalidLayout, l.UnitMs, MaxUnitMs)
	case l.EpochMs < 0:
		return fmt.Errorf("%w: epoch %d ms is before 1970", ErrInvalidLayout, l.EpochMs)
	case l.End() == 1<<63-1:
		return fmt.Errorf("%w: a lifetime of 2^%d units of %d ms from %s overflows 64-bit Unix milliseconds", ErrInvalidLayout, l.TimeBits, l.UnitMs, seqd.Date(l.EpochMs))
	}
	return nil
}

// Unit returns the time unit that contains Unix time ms: 0 for any time
// before the first full unit after the epoch (and before the epoch).
func (l Layout) Unit(ms int64) uint64 {
	if ms < l.EpochMs {
		return 0
	}
	return uint64(ms-l.EpochMs) / uint64(l.UnitMs)
}

// UnitStart is the Unix ms at which unit t starts.
func (l Layout) UnitStart(t uint64) int64 { return l.EpochMs + int64(t*uint64(l.UnitMs)) }

// Compose builds the id of time unit t, worker w and sequence s. The caller
// keeps each part within the layout (t ≤ MaxUnit, w < Workers, s ≤
// MaxSequence); Compose masks nothing.
func (l Layout) Compose(t, w, s uint64) int64 {
	return int64(t<<(l.WorkerBits+l.SequenceBits) | w<<l.SequenceBits | s)
}

// ID is an id decoded under its layout.
type ID struct {
	Unit     uint64 // time units since the epoch
	UnixMs   int64  // the start of Unit, in Unix ms
	Worker   uint64
	Sequence uint64
}

// Decode splits id into its parts. It fails for ids that no generator of
// the layout can issue: zero, negative, or wider than the layout.
func (l Layout) Decode(id int64) (ID, error) {
	if id <= 0 || bits.Len64(uint64(id)) > l.Bits() {
		return ID{}, fmt.Errorf("%w: id %d is not an id of a %d-bit layout", ErrInvalidID, id, l.Bits())
	}
	u := uint64(id)
	t := u >> (l.WorkerBits + l.SequenceBits)
	if t == 0 {
		return ID{}, fmt.Errorf("%w: id %d has time unit 0", ErrInvalidID, id)
	}
	return ID{
		Unit:     t,
		UnixMs:   l.UnitStart(t),
		Worker:   u >> l.SequenceBits & (l.Workers() - 1),
		Sequence: u & l.MaxSequence(),
	}, nil
}

// ErrInvalidID means an id cannot have been issued under the layout.
var ErrInvalidID = errors.New("invalid id")

// LowerBound is the smallest id of the layout whose decoded time (UnixMs)
// is at or after Unix time ms, for range scans: the ids decoded to ms or
// later are exactly those ≥ LowerBound(ms). It answers false when no id of
// the layout decodes to ms or later (ms is at or past End).
func (l Layout) LowerBound(ms int64) (int64, bool) {
	t := l.Unit(ms)
	if ms > l.EpochMs && uint64(ms-l.EpochMs)%uint64(l.UnitMs) != 0 {
		t++ // the unit that contains ms started before ms
	}
	t = max(t, 1)
	if t > l.MaxUnit() {
		return 0, false
	}
	return l.Compose(t, 0, 0), true
}
