package flake

import (
	"errors"
	"testing"
	"time"

	"github.com/sony/sonyflake"
)

// TestSonyflakePresetDecomposes: sonyflake's own Decompose of ids that a
// Generator of the "sonyflake" preset issues gives seqd's decode: the same
// time (10 ms units since 2014-09-01), sequence and machine id (the
// worker), and ids issued now decode to now.
func TestSonyflakePresetDecomposes(t *testing.T) {
	l, _ := Preset("sonyflake")
	if l.EpochMs != time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC).UnixMilli() || l.UnitMs != 10 ||
		l.TimeBits != sonyflake.BitLenTime || l.SequenceBits != sonyflake.BitLenSequence || l.WorkerBits != sonyflake.BitLenMachineID {
		t.Fatalf("sonyflake preset %+v does not match sonyflake's widths and epoch", l)
	}
	nowMs := time.Now().UnixMilli()
	now := l.Unit(nowMs)
	for _, w := range []uint64{0, 1, 0x1234, l.Workers() - 1} {
		g, err := NewGenerator(l, w, now-1, now+100, 50)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := g.Next(nil, 600, now) // more than a unit's 256: borrows
		if err != nil {
			t.Fatal(err)
		}
		last := int64(0)
		for _, id := range ids {
			if id <= last {
				t.Fatalf("worker %d: id %d after %d", w, id, last)
			}
			last = id
			d, err := l.Decode(id)
			if err != nil {
				t.Fatal(err)
			}
			sf := sonyflake.Decompose(uint64(id))
			if sf["time"] != d.Unit || sf["sequence"] != d.Sequence || sf["machine-id"] != d.Worker || sf["msb"] != 0 {
				t.Fatalf("id %d: sonyflake decomposes %v, seqd decodes %+v", id, sf, d)
			}
			if d.Worker != w {
				t.Fatalf("id %d: worker %d, want %d", id, d.Worker, w)
			}
		}
		first, _ := l.Decode(ids[0])
		if first.UnixMs < nowMs-10 || first.UnixMs > nowMs {
			t.Fatalf("an id issued now decodes to %d, now is %d", first.UnixMs, nowMs)
		}
		// sonyflake's ElapsedTime reads the same 10 ms units.
		if got := sonyflake.ElapsedTime(uint64(ids[0])); got != time.Duration(first.Unit)*10*time.Millisecond {
			t.Fatalf("sonyflake.ElapsedTime = %v, want %v", got, time.Duration(first.Unit)*10*time.Millisecond)
		}
	}
}

// TestInstagramPresetBitPositions: the "instagram" preset puts the time
// from bit 23 up and the shard at bits 10 to 22, where Instagram's ids
// have them, and the worker and sequence share the low 10 bits.
func TestInstagramPresetBitPositions(t *testing.T) {
	l, _ := Preset("instagram")
	id := l.ComposeShard(123456789, 5000, 17, 9)
	if u := uint64(id); u>>23 != 123456789 || u>>10&(1<<13-1) != 5000 || u&(1<<10-1) != 17<<5|9 {
		t.Fatalf("instagram id %x: time %d, shard %d, low %d", id, uint64(id)>>23, uint64(id)>>10&8191, uint64(id)&1023)
	}
	if l.Bits() != 63 || l.Shards() != 8192 || l.Workers() != 32 || l.MaxSequence() != 31 {
		t.Fatalf("instagram preset %+v", l)
	}
}

// TestShardAndClusterFields: the cluster value and the caller's shard land
// in their fields and decode back; a shard that does not fit is refused,
// an id of another cluster value does not decode, and a cluster value
// that does not fit its bits is an invalid layout.
func TestShardAndClusterFields(t *testing.T) {
	l := Layout{EpochMs: DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 41, ClusterBits: 3, Cluster: 5, ShardBits: 6, WorkerBits: 5, SequenceBits: 8}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	id := l.ComposeShard(1000, 63, 31, 255)
	d, err := l.Decode(id)
	if err != nil || d.Unit != 1000 || d.Cluster != 5 || d.Shard != 63 || d.Worker != 31 || d.Sequence != 255 {
		t.Fatalf("Decode = %+v, %v", d, err)
	}
	if err := l.CheckShard(64); !errors.Is(err, ErrInvalidShard) {
		t.Fatalf("CheckShard(64) = %v, want ErrInvalidShard", err)
	}
	plain, _ := Preset("snowflake")
	if err := plain.CheckShard(1); !errors.Is(err, ErrInvalidShard) {
		t.Fatalf("a shard on a layout without a shard field: %v", err)
	}
	other := l
	other.Cluster = 4
	if _, err := l.Decode(other.ComposeShard(1000, 1, 1, 1)); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("an id of cluster 4 under cluster 5's layout: %v", err)
	}
	for name, mut := range map[string]func(*Layout){
		"cluster value too large": func(l *Layout) { l.Cluster = 8 },
		"cluster value, no bits":  func(l *Layout) { l.ClusterBits, l.Cluster = 0, 1 },
		"too many shard bits":     func(l *Layout) { l.ShardBits = MaxShardBits + 1; l.TimeBits = 20 },
		"too many cluster bits":   func(l *Layout) { l.ClusterBits = MaxClusterBits + 1; l.TimeBits = 20 },
		"64 bits":                 func(l *Layout) { l.SequenceBits = 9 },
	} {
		bad := l
		mut(&bad)
		if err := bad.Validate(); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidLayout", name, err)
		}
	}
}

// TestShardsNeverCollide: one generator's ids over every shard value are
// all distinct and, per shard value, strictly increasing: the shard only
// adds bits to a (time, worker, sequence) that is issued once.
func TestShardsNeverCollide(t *testing.T) {
	l := Layout{EpochMs: DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 41, ShardBits: 3, WorkerBits: 4, SequenceBits: 2}
	g, err := NewGenerator(l, 9, 99, 10_000, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	last := map[uint64]int64{}
	for i := range 5000 {
		sh := uint64(i*7) % l.Shards()
		r, err := g.NextShardRun(3, 100, sh)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range AppendIDs(nil, r) {
			if seen[id] || id <= last[sh] {
				t.Fatalf("shard %d: id %d repeated or not increasing (last %d)", sh, id, last[sh])
			}
			seen[id], last[sh] = true, id
			if d, _ := l.Decode(id); d.Shard != sh || d.Worker != 9 {
				t.Fatalf("id %d decodes to %+v", id, d)
			}
		}
	}
}

// TestObfuscatorRefusesFields: a layout with fields beyond time, worker and
// sequence is never obfuscated (its fields are meant to be read).
func TestObfuscatorRefusesFields(t *testing.T) {
	key, _, _ := DeriveKey([]byte("0123456789abcdef-cluster-secret"), "n")
	for _, name := range []string{"sonyflake", "instagram"} {
		l, _ := Preset(name)
		if _, err := NewObfuscator(l, ObfuscateFF1, key); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("%s: NewObfuscator = %v, want ErrInvalidLayout", name, err)
		}
	}
}
