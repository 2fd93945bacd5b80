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
// of the widths is at most 63, so every id is a positive int64; JavaScript
// layouts sum to at most 53, so that every id is exactly representable as a
// JavaScript number. A namespace's layout is fixed when it is created: a new
// layout is a new namespace.
//
// Two optional fields sit between the time and the worker, cluster above
// shard: ClusterBits of a value fixed for the namespace (Cluster: the
// datacenter or cluster the namespace's ids come from, so that clusters
// that never talk to each other issue distinct ids), and ShardBits of a
// value the caller gives with each call (Instagram's ShardingId: the shard
// a row lives on, readable from its id). Neither takes part in uniqueness:
// a worker's granted time range already makes its (time, worker,
// sequence) triples unique, and these fields only add bits to them.
// SequenceFirst puts the sequence above the worker (sonyflake's order:
// time | sequence | worker); a worker's ids then still increase, but
// consecutive ones are not consecutive integers.
type Layout struct {
	EpochMs       int64
	UnitMs        uint32
	TimeBits      uint8
	WorkerBits    uint8
	SequenceBits  uint8
	ShardBits     uint8
	ClusterBits   uint8
	Cluster       uint64
	SequenceFirst bool
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
	// MaxShardBits and MaxClusterBits bound the optional fields.
	MaxShardBits   = 20
	MaxClusterBits = 16
)

// DefaultEpoch is the epoch of the preset layouts: 2026-01-01T00:00:00Z.
var DefaultEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultLayoutName names the layout a namespace gets when none is given.
const DefaultLayoutName = "snowflake"

// SonyflakeEpoch is sonyflake's default start time, 2014-09-01T00:00:00Z:
// the "sonyflake" preset's epoch.
var SonyflakeEpoch = time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC)

// presets are the named layouts, on DefaultEpoch unless they say.
var presets = map[string]Layout{
	// Twitter's shape: 41 bits of ms (about 69 years), 1024 workers,
	// 4096 ids per ms per worker.
	"snowflake": {UnitMs: 1, TimeBits: 41, WorkerBits: 10, SequenceBits: 12},
	// github.com/sony/sonyflake's ids, bit for bit: 39 bits of 10 ms since
	// 2014-09-01 (until 2188), then 8 bits of sequence, then 16 bits of
	// machine id (the worker), so that sonyflake's Decompose of a seqd id
	// gives seqd's own decode. 65536 workers, 256 ids per 10 ms each.
	"sonyflake": {EpochMs: SonyflakeEpoch.UnixMilli(), UnitMs: 10, TimeBits: 39, WorkerBits: 16, SequenceBits: 8, SequenceFirst: true},
	// Instagram's shape, at Instagram's bit positions: ms from bit 23 up,
	// 13 bits of shard (given with each call) from bit 10, and their 10
	// bits of sequence below, split into 5 bits of worker and 5 of
	// sequence: 32 workers, 32 ids per ms per worker. Instagram's sequence
	// was per shard (one Postgres sequence each); here uniqueness comes
	// from the worker's granted range, whatever the shard, so the worker
	// needs bits of its own, taken from the sequence. Instagram's 41 bits
	// of time in a signed 64-bit column turn negative after 2^40 ms; seqd
	// ids stay positive, so the time has 40 bits: 34.8 years from the
	// epoch (until 2060), as Instagram's positive ids have.
	"instagram": {UnitMs: 1, TimeBits: 40, ShardBits: 13, WorkerBits: 5, SequenceBits: 5},
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
	if ok && l.EpochMs == 0 {
		l.EpochMs = DefaultEpoch.UnixMilli()
	}
	return l, ok
}

// PresetNames lists the preset layouts, the default first.
func PresetNames() []string {
	return []string{"snowflake", "sonyflake", "instagram", "wide", "js", "js-seconds"}
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
func (l Layout) Bits() int {
	return int(l.TimeBits) + int(l.ClusterBits) + int(l.ShardBits) + int(l.WorkerBits) + int(l.SequenceBits)
}

// Plain reports whether the layout is time | worker | sequence only: no
// shard or cluster field, the worker above the sequence. Only plain
// layouts may be obfuscated, and builds before the other fields know only
// plain layouts.
func (l Layout) Plain() bool { return l.ShardBits == 0 && l.ClusterBits == 0 && !l.SequenceFirst }

// Shards is the number of shard values the layout has (1 without a shard
// field: shard 0 only).
func (l Layout) Shards() uint64 { return 1 << l.ShardBits }

// Consecutive reports whether a worker's ids within one time unit are
// consecutive integers (the sequence is the lowest field).
func (l Layout) Consecutive() bool { return !l.SequenceFirst }

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
		return fmt.Errorf("%w: %d bits (time %d, cluster %d, shard %d, worker %d, sequence %d) is more than %d", ErrInvalidLayout,
			l.Bits(), l.TimeBits, l.ClusterBits, l.ShardBits, l.WorkerBits, l.SequenceBits, MaxIDBits)
	case l.ShardBits > MaxShardBits:
		return fmt.Errorf("%w: shard bits %d, at most %d", ErrInvalidLayout, l.ShardBits, MaxShardBits)
	case l.ClusterBits > MaxClusterBits:
		return fmt.Errorf("%w: cluster bits %d, at most %d", ErrInvalidLayout, l.ClusterBits, MaxClusterBits)
	case l.Cluster >= 1<<l.ClusterBits:
		return fmt.Errorf("%w: cluster value %d does not fit %d cluster bits", ErrInvalidLayout, l.Cluster, l.ClusterBits)
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

// Compose builds the id of time unit t, worker w and sequence s, with shard
// 0 (see ComposeShard).
func (l Layout) Compose(t, w, s uint64) int64 { return l.ComposeShard(t, 0, w, s) }

// ComposeShard builds the id of time unit t, shard sh, worker w and
// sequence s, with the layout's cluster value. The caller keeps each part
// within the layout (t ≤ MaxUnit, sh < Shards, w < Workers, s ≤
// MaxSequence); ComposeShard masks nothing.
func (l Layout) ComposeShard(t, sh, w, s uint64) int64 {
	low := w<<l.SequenceBits | s
	if l.SequenceFirst {
		low = s<<l.WorkerBits | w
	}
	mid := l.Cluster<<l.ShardBits | sh
	return int64(t<<(l.ClusterBits+l.ShardBits+l.WorkerBits+l.SequenceBits) | mid<<(l.WorkerBits+l.SequenceBits) | low)
}

// ID is an id decoded under its layout.
type ID struct {
	Unit     uint64 // time units since the epoch
	UnixMs   int64  // the start of Unit, in Unix ms
	Worker   uint64
	Sequence uint64
	Shard    uint64 // 0 without a shard field
	Cluster  uint64 // 0 without a cluster field
}

// Decode splits id into its parts. It fails for ids that no generator of
// the layout can issue: zero, negative, wider than the layout, or of
// another cluster value.
func (l Layout) Decode(id int64) (ID, error) {
	if id <= 0 || bits.Len64(uint64(id)) > l.Bits() {
		return ID{}, fmt.Errorf("%w: id %d is not an id of a %d-bit layout", ErrInvalidID, id, l.Bits())
	}
	u := uint64(id)
	low := l.WorkerBits + l.SequenceBits
	t := u >> (l.ClusterBits + l.ShardBits + low)
	if t == 0 {
		return ID{}, fmt.Errorf("%w: id %d has time unit 0", ErrInvalidID, id)
	}
	d := ID{
		Unit:     t,
		UnixMs:   l.UnitStart(t),
		Worker:   u >> l.SequenceBits & (l.Workers() - 1),
		Sequence: u & l.MaxSequence(),
		Shard:    u >> low & (l.Shards() - 1),
		Cluster:  u >> (low + l.ShardBits) & (1<<l.ClusterBits - 1),
	}
	if l.SequenceFirst {
		d.Worker, d.Sequence = u&(l.Workers()-1), u>>l.WorkerBits&l.MaxSequence()
	}
	if d.Cluster != l.Cluster {
		return ID{}, fmt.Errorf("%w: id %d has cluster value %d, the layout's is %d", ErrInvalidID, id, d.Cluster, l.Cluster)
	}
	return d, nil
}

// ErrInvalidShard means a shard value does not fit the layout's shard
// field.
var ErrInvalidShard = errors.New("shard value out of the layout's range")

// CheckShard returns nil if sh fits the layout's shard field, and
// otherwise an error wrapping ErrInvalidShard.
func (l Layout) CheckShard(sh uint64) error {
	if sh >= l.Shards() {
		if l.ShardBits == 0 {
			return fmt.Errorf("%w: shard %d given, and the layout has no shard field", ErrInvalidShard, sh)
		}
		return fmt.Errorf("%w: shard %d does not fit %d shard bits (0 to %d)", ErrInvalidShard, sh, l.ShardBits, l.Shards()-1)
	}
	return nil
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
