package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
)

// ---- helpers ----

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want Command
	}{
		{"noop", EncodeNoop(), Command{Kind: KindNoop}},
		{"create", EncodeCreateSpace(seqd.Space{Name: "users", Step: 10000, SectionSize: 100000}),
			Command{Kind: KindCreateSpace, Space: seqd.Space{Name: "users", Step: 10000, SectionSize: 100000}}},
		{"create extremes", EncodeCreateSpace(seqd.Space{Name: strings.Repeat("x", 300), Step: 1<<64 - 1, SectionSize: 0}),
			Command{Kind: KindCreateSpace, Space: seqd.Space{Name: strings.Repeat("x", 300), Step: 1<<64 - 1, SectionSize: 0}}},
		{"raise empty", EncodeRaise(nil), Command{Kind: KindRaise}},
		{"raise one", EncodeRaise([]seqd.Mark{{Space: "users", Section: 3, Max: 40000}}),
			Command{Kind: KindRaise, Marks: []seqd.Mark{{Space: "users", Section: 3, Max: 40000}}}},
		{"raise several spaces", EncodeRaise([]seqd.Mark{{Space: "a", Section: 0, Max: 1}, {Space: "b", Section: 1<<64 - 1, Max: 1<<64 - 1}, {Space: "a", Section: 7, Max: 0}, {Space: "", Section: 0, Max: 0}}),
			Command{Kind: KindRaise, Marks: []seqd.Mark{{Space: "a", Section: 0, Max: 1}, {Space: "b", Section: 1<<64 - 1, Max: 1<<64 - 1}, {Space: "a", Section: 7, Max: 0}, {Space: "", Section: 0, Max: 0}}}},
		{"cluster", EncodeCluster("0123abcd", 2), Command{Kind: KindCluster, ClusterID: "0123abcd", Protocol: 2}},
		{"lease", EncodeLease(4*time.Second, 400*time.Millisecond), Command{Kind: KindLease, Lease: 4 * time.Second, LeaseMargin: 400 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode = %+v, want %+v", got, tt.want)
			}
			if re := encode(got); !bytes.Equal(re, tt.data) {
				t.Fatalf("re-encoded %x, want %x", re, tt.data)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := EncodeRaise([]seqd.Mark{{Space: "users", Section: 3, Max: 40000}})
	tests := []struct {
		name string
		data []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"kind zero", []byte{0}},
		{"unknown kind", []byte{99}},
		{"noop trailing", []byte{byte(KindNoop), 0}},
		{"create no fields", []byte{byte(KindCreateSpace)}},
		{"create name truncated", []byte{byte(KindCreateSpace), 5, 'a', 'b'}},
		{"create name length absurd", []byte{byte(KindCreateSpace), 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'}},
		{"create missing section size", []byte{byte(KindCreateSpace), 1, 'a', 1}},
		{"create trailing", append(EncodeCreateSpace(seqd.Space{Name: "a", Step: 1, SectionSize: 1}), 0)},
		{"create varint overflow", []byte{byte(KindCreateSpace), 1, 'a', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1}},
		{"create non-minimal varint", []byte{byte(KindCreateSpace), 1, 'a', 0x81, 0x00, 1}},
		{"create truncated varint", []byte{byte(KindCreateSpace), 1, 'a', 1, 0x80}},
		{"raise no count", []byte{byte(KindRaise)}},
		{"raise count absurd", []byte{byte(KindRaise), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
		{"raise count exceeds data", []byte{byte(KindRaise), 2, 0, 0, 0}},
		{"raise truncated", valid[:len(valid)-1]},
		{"raise trailing", append(append([]byte{}, valid...), 0)},
		{"raise non-minimal count", []byte{byte(KindRaise), 0x80, 0x00}},
		{"cluster empty id", EncodeCluster("", 2)},
		{"cluster id too long", EncodeCluster(strings.Repeat("x", 65), 2)},
		{"cluster trailing", append(EncodeCluster("c", 2), 0)},
		{"lease truncated", EncodeLease(time.Second, time.Second)[:2]},
		{"lease overflow", binary.AppendUvarint(binary.AppendUvarint([]byte{byte(KindLease)}, 1<<63), 0)},
		{"unknown kind without the ignorable bit", []byte{0x7f, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := Decode(tt.data); err == nil {
				t.Fatalf("Decode(%x) = %+v, want error", tt.data, c)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(EncodeNoop())
	f.Add(EncodeServerSeen("n1", 42))
	f.Add(EncodeCluster("c", 2))
	f.Add(EncodeLease(time.Second, 100*time.Millisecond))
	f.Add([]byte{0x82, 3})
	f.Add(EncodeFlake(1767225600000, []FlakeOp{{Type: OpAcquire, Namespace: "n", Holder: "h", Span: 5, LeaseMs: 9, Permits: []Permit{{Worker: 1, Token: 2, RenewedIndex: 3}}}, {Type: OpFloor, FloorMs: 7}}))
	f.Add(EncodeCreateSpace(seqd.Space{Name: "users", Step: 10000, SectionSize: 100000}))
	f.Add(EncodeRaise([]seqd.Mark{{Space: "a", Section: 1, Max: 2}, {Space: "b", Section: 1 << 40, Max: 1<<64 - 1}}))
	f.Add([]byte{byte(KindRaise), 0xff, 0xff, 0x03})
	f.Add(EncodeUpdateSpace("users", 500))
	f.Add(EncodeDeleteSpace("users"))
	f.Add(EncodeDeleteNamespace("orders"))
	f.Add(EncodeFlake(1767225600000, []FlakeOp{{Type: OpCreateNamespace, Namespace: "n", Layout: flake.Layout{EpochMs: 1, UnitMs: 1, TimeBits: 41, ShardBits: 13, WorkerBits: 5, SequenceBits: 4}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		if _, known := commands[c.Kind]; !known && c.Kind&KindIgnorable != 0 {
			if !reflect.DeepEqual(c, Command{Kind: c.Kind}) {
				t.Fatalf("an ignorable command decoded to %+v", c)
			}
			return
		}
		re := encode(c)
		if !bytes.Equal(re, data) {
			t.Fatalf("re-encoding %+v gave %x, input was %x", c, re, data)
		}
		c2, err := Decode(re)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("Decode(re-encoded) = %+v, %v; want %+v", c2, err, c)
		}
	})
}

func TestValidateSpace(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		s  seqd.Space
		ok bool
	}{
		{seqd.Space{Name: "users", Step: 1, SectionSize: 1}, true},
		{seqd.Space{Name: "0", Step: 1 << 40, SectionSize: 1<<64 - 1}, true},
		{seqd.Space{Name: "a.b-c_d", Step: 100, SectionSize: 100}, true},
		{seqd.Space{Name: long, Step: 1, SectionSize: 1}, true},
		{seqd.Space{Name: long + "a", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: "", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: "Users", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: "_users", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: "-users", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: ".users", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: "us ers", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: "usérs", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: "users/x", Step: 1, SectionSize: 1}, false},
		{seqd.Space{Name: "users", Step: 0, SectionSize: 1}, false},
		{seqd.Space{Name: "users", Step: 1<<40 + 1, SectionSize: 1}, false},
		{seqd.Space{Name: "users", Step: 1, SectionSize: 0}, false},
	}
	for _, tt := range tests {
		err := seqd.ValidateSpace(tt.s)
		if tt.ok && err != nil {
			t.Errorf("ValidateSpace(%+v) = %v, want nil", tt.s, err)
		}
		if !tt.ok && !errors.Is(err, seqd.ErrInvalidSpace) {
			t.Errorf("ValidateSpace(%+v) = %v, want ErrInvalidSpace", tt.s, err)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, name := range []string{"a", "0", "users", "a.b-c_d", "9_", strings.Repeat("z", 64)} {
		if !seqd.ValidName(name) {
			t.Errorf("ValidName(%q) = false", name)
		}
	}
	for _, name := range []string{"", "_a", ".a", "-a", "A", "aB", "a b", "a/b", "a:b", "é", strings.Repeat("z", 65)} {
		if seqd.ValidName(name) {
			t.Errorf("ValidName(%q) = true", name)
		}
	}
}

// ---- Apply ----
