package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
)

// ---- helpers ----

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openTest(t testing.TB) (*FSM, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fsm.db")
	f, err := Open(path, quietLogger())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, path
}

// applier hands out increasing raft indices.
type applier struct {
	t     testing.TB
	f     *FSM
	index uint64
}

func (a *applier) apply(data []byte) interface{} {
	a.index++
	return a.f.Apply(&raft.Log{Index: a.index, Term: 1, Type: raft.LogCommand, Data: data})
}

func (a *applier) mustOK(data []byte) {
	a.t.Helper()
	if resp := a.apply(data); resp != nil {
		a.t.Fatalf("Apply: unexpected response %v", resp)
	}
}

func respErr(t *testing.T, resp interface{}) error {
	t.Helper()
	if resp == nil {
		return nil
	}
	err, ok := resp.(error)
	if !ok {
		t.Fatalf("Apply response %T is not an error", resp)
	}
	return err
}

// dump is a comparable picture of the whole FSM state.
type dump struct {
	Spaces []seqd.Space
	Marks  map[string]map[uint64]uint64
}

func dumpState(f *FSM) dump {
	d := dump{Spaces: f.Spaces(), Marks: map[string]map[uint64]uint64{}}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for name, m := range f.marks {
		c := map[uint64]uint64{}
		for k, v := range m {
			c[k] = v
		}
		d.Marks[name] = c
	}
	return d
}

// bufSink is a raft.SnapshotSink backed by a bytes.Buffer.
type bufSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { s.cancelled = true; return nil }
func (s *bufSink) Close() error  { s.closed = true; return nil }

func persist(t *testing.T, snap raft.FSMSnapshot) []byte {
	t.Helper()
	defer snap.Release()
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v, want closed only", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return persist(t, snap)
}

// encode re-encodes a decoded command.
func encode(c Command) []byte {
	switch c.Kind {
	case KindCreateSpace:
		return EncodeCreateSpace(c.Space)
	case KindRaise:
		return EncodeRaise(c.Marks)
	case KindNoop:
		return EncodeNoop()
	case KindServerSeen:
		return EncodeServerSeen(c.Server, c.Index)
	case KindCluster:
		return EncodeClusterGroups(c.ClusterID, c.Protocol, c.Groups)
	case KindLease:
		return EncodeLease(c.Lease, c.LeaseMargin)
	case KindFlake:
		return EncodeFlake(c.NowMs, c.Flake)
	case KindRelease:
		return EncodeRelease()
	case KindUpdateSpace:
		return EncodeUpdateSpace(c.Space.Name, c.Space.Step)
	case KindDeleteSpace:
		return EncodeDeleteSpace(c.Space.Name)
	case KindDeleteNamespace:
		return EncodeDeleteNamespace(c.Namespace)
	}
	panic(fmt.Sprintf("unknown kind %d", c.Kind))
}

// ---- codec ----

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

func TestCreateSpace(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	users := seqd.Space{Name: "users", Step: 10000, SectionSize: 100000}

	a.mustOK(EncodeCreateSpace(users))
	if got, ok := f.Space("users"); !ok || got != users {
		t.Fatalf("Space = %+v, %v", got, ok)
	}
	// Identical replay is idempotent.
	a.mustOK(EncodeCreateSpace(users))

	// Different settings conflict and change nothing.
	err := respErr(t, a.apply(EncodeCreateSpace(seqd.Space{Name: "users", Step: 1, SectionSize: 100000})))
	if !errors.Is(err, seqd.ErrSpaceExists) {
		t.Fatalf("conflicting create: %v, want ErrSpaceExists", err)
	}
	if got, _ := f.Space("users"); got != users {
		t.Fatalf("Space after conflict = %+v", got)
	}

	// Invalid settings are rejected and change nothing.
	for _, s := range []seqd.Space{{Name: "Bad", Step: 1, SectionSize: 1}, {Name: "ok", Step: 0, SectionSize: 1}, {Name: "ok", Step: 1, SectionSize: 0}, {Name: "ok", Step: 1<<40 + 1, SectionSize: 1}} {
		err := respErr(t, a.apply(EncodeCreateSpace(s)))
		if !errors.Is(err, seqd.ErrInvalidSpace) {
			t.Fatalf("create %+v: %v, want ErrInvalidSpace", s, err)
		}
	}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "orders", Step: 5, SectionSize: 7}))
	want := []seqd.Space{{Name: "orders", Step: 5, SectionSize: 7}, users}
	if got := f.Spaces(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Spaces = %+v, want %+v", got, want)
	}
	if got := f.AppliedIndex(); got != a.index {
		t.Fatalf("AppliedIndex = %d, want %d", got, a.index)
	}
}

func TestRaiseIsMaximum(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "orders", Step: 100, SectionSize: 1000}))

	if got := f.Max("users", 3); got != 0 {
		t.Fatalf("Max of never-raised section = %d", got)
	}
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 3, Max: 500}, {Space: "orders", Section: 3, Max: 700}}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 3, Max: 200}})) // lower: no effect
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 3, Max: 600}, {Space: "users", Section: 3, Max: 650}, {Space: "users", Section: 3, Max: 100}}))
	if got := f.Max("users", 3); got != 650 {
		t.Fatalf("Max(users,3) = %d, want 650", got)
	}
	if got := f.Max("orders", 3); got != 700 {
		t.Fatalf("Max(orders,3) = %d, want 700", got)
	}
	if got := f.Max("users", 4); got != 0 {
		t.Fatalf("Max(users,4) = %d, want 0", got)
	}
	if got := f.Max("nope", 3); got != 0 {
		t.Fatalf("Max(nope,3) = %d, want 0", got)
	}
}

func TestReplayInAnyOrder(t *testing.T) {
	entries := [][]byte{
		EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}),
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 300}, {Space: "users", Section: 2, Max: 50}}),
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 100}}),
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 2, Max: 400}, {Space: "users", Section: 9, Max: 9}}),
		EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 250}, {Space: "users", Section: 9, Max: 1}}),
	}
	raises := entries[1:]

	var want dump
	perm := []int{0, 1, 2, 3}
	for n := range 24 { // every permutation of the four raises
		order := permutation(perm, n)
		f, _ := openTest(t)
		a := &applier{t: t, f: f}
		a.mustOK(entries[0])
		for _, i := range order {
			a.mustOK(raises[i])
		}
		// Replay everything again, including the create.
		for _, e := range entries {
			a.mustOK(e)
		}
		got := dumpState(f)
		if n == 0 {
			want = got
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("order %v: state %+v, want %+v", order, got, want)
		}
	}
	if m := want.Marks["users"]; m[1] != 300 || m[2] != 400 || m[9] != 9 {
		t.Fatalf("final marks %v", m)
	}
}

// permutation returns the n-th (0 <= n < len(p)!) permutation of p.
func permutation(p []int, n int) []int {
	rest := append([]int(nil), p...)
	out := make([]int, 0, len(p))
	for len(rest) > 0 {
		f := 1
		for i := 2; i < len(rest); i++ {
			f *= i
		}
		i := n / f
		n %= f
		out = append(out, rest[i])
		rest = append(rest[:i], rest[i+1:]...)
	}
	return out
}

func TestRaiseUnknownSpaceChangesNothing(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 100}}))
	before := dumpState(f)
	idx := a.index

	err := respErr(t, a.apply(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 999}, {Space: "users", Section: 2, Max: 5}, {Space: "ghost", Section: 1, Max: 5}})))
	if !errors.Is(err, seqd.ErrUnknownSpace) {
		t.Fatalf("raise with unknown space: %v, want ErrUnknownSpace", err)
	}
	if got := dumpState(f); !reflect.DeepEqual(got, before) {
		t.Fatalf("state changed: %+v, want %+v", got, before)
	}
	// Nothing was written to disk either.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := dumpState(g); !reflect.DeepEqual(got, before) {
		t.Fatalf("state on disk: %+v, want %+v", got, before)
	}
	if got := g.AppliedIndex(); got != idx {
		t.Fatalf("persisted AppliedIndex = %d, want %d", got, idx)
	}
}

func TestNoop(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 100}}))
	before := dumpState(f)
	changed := a.index

	for range 5 {
		a.mustOK(EncodeNoop())
		if got := f.AppliedIndex(); got != a.index {
			t.Fatalf("AppliedIndex = %d, want %d", got, a.index)
		}
	}
	if got := dumpState(f); !reflect.DeepEqual(got, before) {
		t.Fatalf("noop changed state: %+v", got)
	}
	// Noops are not written to bbolt: the persisted index is that of the last
	// state-changing entry.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := g.AppliedIndex(); got != changed {
		t.Fatalf("persisted AppliedIndex = %d, want %d", got, changed)
	}
}

// TestIgnorableKindIsSkipped: an unknown kind with the KindIgnorable bit is
// applied as a no-op (a later build's command), one without it stops the
// node (see TestUndecodableEntryPanics).
func TestIgnorableKindIsSkipped(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	before := dumpState(f)
	a.mustOK([]byte{0x80 | 0x11, 1, 2, 3})
	if got := dumpState(f); !reflect.DeepEqual(got, before) {
		t.Fatalf("an ignorable command changed state: %+v", got)
	}
}

// TestClusterAndLeaseRecords: the first cluster ID applied wins, the
// protocol only rises, a lease record is kept as the last one applied, and
// all of it survives a reopen and a snapshot, with the file marked format 2
// once it holds them.
func TestClusterAndLeaseRecords(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	if f.ClusterID() != "" || f.Protocol() != 1 {
		t.Fatalf("a new FSM: cluster %q protocol %d", f.ClusterID(), f.Protocol())
	}
	if _, ok := f.LeaseRecord(); ok {
		t.Fatal("a new FSM has a lease record")
	}
	a.mustOK(EncodeCluster("first", 2))
	a.mustOK(EncodeCluster("second", 2))
	if err, ok := f.Apply(&raft.Log{Index: 99, Type: raft.LogCommand, Data: EncodeCluster("third", 9)}).(error); !ok || err == nil {
		t.Fatal("a protocol this build does not know was accepted")
	}
	if f.ClusterID() != "first" || f.Protocol() != 2 {
		t.Fatalf("cluster %q protocol %d, want first 2", f.ClusterID(), f.Protocol())
	}
	a.mustOK(EncodeLease(4*time.Second, 400*time.Millisecond))
	a.mustOK(EncodeLease(100*time.Millisecond, 50*time.Millisecond))
	want := LeaseRecord{Lease: 100 * time.Millisecond, Margin: 50 * time.Millisecond}
	if rec, ok := f.LeaseRecord(); !ok || rec != want {
		t.Fatalf("lease record %+v %v, want %+v", rec, ok, want)
	}
	var snap bytes.Buffer
	if _, err := f.Backup(&snap); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if got := binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keyFormat)); got != 2 {
			t.Errorf("a file with a cluster ID and a lease record says format %d, want 2", got)
		}
		return nil
	})
	db.Close()
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if rec, _ := g.LeaseRecord(); g.ClusterID() != "first" || g.Protocol() != 2 || rec != want {
		t.Fatalf("after reopen: cluster %q protocol %d lease %+v", g.ClusterID(), g.Protocol(), rec)
	}
	h, _ := openTest(t)
	if err := h.Restore(io.NopCloser(&snap)); err != nil {
		t.Fatal(err)
	}
	if rec, _ := h.LeaseRecord(); h.ClusterID() != "first" || rec != want {
		t.Fatalf("after a snapshot: cluster %q lease %+v", h.ClusterID(), rec)
	}
}

func TestNonCommandLogIgnored(t *testing.T) {
	f, _ := openTest(t)
	for _, typ := range []raft.LogType{raft.LogConfiguration, raft.LogBarrier, raft.LogNoop} {
		if resp := f.Apply(&raft.Log{Index: 7, Type: typ, Data: []byte{0xde, 0xad}}); resp != nil {
			t.Fatalf("Apply(%v) = %v, want nil", typ, resp)
		}
	}
	if len(f.Spaces()) != 0 {
		t.Fatal("state changed")
	}
}

func TestUndecodableEntryPanics(t *testing.T) {
	var logs bytes.Buffer
	path := filepath.Join(t.TempDir(), "fsm.db")
	f, err := Open(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	for _, data := range [][]byte{nil, {0x42, 1, 2}, append(EncodeNoop(), 0)} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatalf("Apply(%x) did not panic", data)
				}
				if msg := fmt.Sprint(r); !strings.Contains(msg, "index 12") || !strings.Contains(msg, "decode") {
					t.Fatalf("panic message %q lacks index or cause", msg)
				}
			}()
			f.Apply(&raft.Log{Index: 12, Term: 3, Type: raft.LogCommand, Data: data})
		}()
	}
	out := logs.String()
	for _, want := range []string{"level=ERROR", "index=12", "term=3", "data_hex=420102"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log %q lacks %q", out, want)
		}
	}
}

func TestApplyAfterClosePanics(t *testing.T) {
	f, _ := openTest(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Apply after Close did not panic")
		}
	}()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCreateSpace(seqd.Space{Name: "users", Step: 1, SectionSize: 1})})
}

// ---- persistence ----

func TestStateSurvivesReopen(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "empty", Step: 1, SectionSize: 1}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 100}, {Space: "users", Section: 1<<64 - 1, Max: 1<<64 - 1}}))
	want := dumpState(f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	g, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := dumpState(g); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen %+v, want %+v", got, want)
	}
	if got := g.AppliedIndex(); got != a.index {
		t.Fatalf("AppliedIndex = %d, want %d", got, a.index)
	}
}

func TestOpenGarbage(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.db")
	if err := os.WriteFile(small, []byte("this is not a bbolt file"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.db")
	garbage := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(big, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.db")
	{
		f, err := Open(truncated, quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		a := &applier{t: t, f: f}
		a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 1, SectionSize: 1}))
		for i := range 200 {
			a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: uint64(i), Max: 1}}))
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(truncated)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(truncated, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{small, big, truncated} {
		f, err := Open(p, quietLogger())
		if err == nil {
			f.Close()
			t.Fatalf("Open(%s) succeeded", p)
		}
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not name the path", err)
		}
	}
}

func TestOpenForeignBboltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "foreign.db")
	writeForeignDB(t, path)
	if f, err := Open(path, quietLogger()); err == nil {
		f.Close()
		t.Fatal("Open of a bbolt file with foreign contents succeeded")
	}
}

func writeForeignDB(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("other"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenLockedFileTimesOut(t *testing.T) {
	_, path := openTest(t)
	start := time.Now()
	g, err := Open(path, quietLogger())
	if err == nil {
		g.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Open took %v", d)
	}
}

// ---- snapshots ----

func TestSnapshotRestore(t *testing.T) {
	src, _ := openTest(t)
	a := &applier{t: t, f: src}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "orders", Step: 7, SectionSize: 9}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 100}, {Space: "orders", Section: 5, Max: 50}, {Space: "users", Section: 1 << 50, Max: 3}}))
	a.mustOK(EncodeNoop())
	data := snapshotBytes(t, src)

	dst, _ := openTest(t)
	b := &applier{t: t, f: dst}
	b.mustOK(EncodeCreateSpace(seqd.Space{Name: "stale", Step: 1, SectionSize: 1})) // must be discarded
	b.mustOK(EncodeRaise([]seqd.Mark{{Space: "stale", Section: 1, Max: 1}}))
	restores := 0
	dst.SetRestoreHook(func() { restores++ })
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if restores != 1 {
		t.Fatalf("restore hook called %d times, want 1", restores)
	}
	if got, want := dumpState(dst), dumpState(src); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %+v, want %+v", got, want)
	}
	if got := dst.AppliedIndex(); got != 3 {
		t.Fatalf("AppliedIndex after restore = %d, want 3 (last state change)", got)
	}
	if _, ok := dst.Space("stale"); ok {
		t.Fatal("pre-restore state survived")
	}
	// The restored FSM keeps working and persists.
	b.index = 10
	b.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 200}}))
	if got := dst.Max("users", 1); got != 200 {
		t.Fatalf("Max after restore+raise = %d", got)
	}
	if _, err := os.Stat(restorePath(dst.path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restore temp file left behind: %v", err)
	}
	want := dumpState(dst)
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(dst.path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if got := dumpState(reopened); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened after restore %+v, want %+v", got, want)
	}
}

func TestSnapshotIsConsistent(t *testing.T) {
	src, _ := openTest(t)
	a := &applier{t: t, f: src}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 100}}))
	atSnapshot := dumpState(src)

	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Applies that happen after Snapshot but before/while Persist runs.
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 500}, {Space: "users", Section: 2, Max: 5}}))
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "later", Step: 1, SectionSize: 1}))
	data := persist(t, snap)

	dst, _ := openTest(t)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if got := dumpState(dst); !reflect.DeepEqual(got, atSnapshot) {
		t.Fatalf("snapshot contains later applies: %+v, want %+v", got, atSnapshot)
	}
	if got := dst.AppliedIndex(); got != 2 {
		t.Fatalf("AppliedIndex = %d, want 2", got)
	}
}

func TestSnapshotConcurrentWithApply(t *testing.T) {
	src, _ := openTest(t)
	a := &applier{t: t, f: src}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	for i := range 100 {
		a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: uint64(i), Max: 100}}))
	}
	want := dumpState(src)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	var wg sync.WaitGroup
	wg.Go(func() { data = persist(t, snap) })
	for i := range 50 {
		a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: uint64(i), Max: 1000}}))
	}
	wg.Wait()
	dst, _ := openTest(t)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if got := dumpState(dst); !reflect.DeepEqual(got, want) {
		t.Fatal("snapshot taken concurrently with applies is inconsistent")
	}
}

type failingSink struct{ bufSink }

func (s *failingSink) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestPersistErrorCancelsSink(t *testing.T) {
	f, _ := openTest(t)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink failingSink
	if err := snap.Persist(&sink); err == nil {
		t.Fatal("Persist into a failing sink succeeded")
	}
	if !sink.cancelled || sink.closed {
		t.Fatalf("sink cancelled=%v closed=%v, want cancelled only", sink.cancelled, sink.closed)
	}
	snap.Release() // twice is fine
}

func TestRestoreInvalidKeepsState(t *testing.T) {
	good, _ := openTest(t)
	g := &applier{t: t, f: good}
	g.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	g.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: 100}}))
	valid := snapshotBytes(t, good)

	foreignPath := filepath.Join(t.TempDir(), "foreign.db")
	writeForeignDB(t, foreignPath)
	foreign, err := os.ReadFile(foreignPath)
	if err != nil {
		t.Fatal(err)
	}
	badValue := corruptSpaceValue(t, valid)

	garbage := make([]byte, 32<<10)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range garbage {
		garbage[i] = byte(r.Uint32())
	}

	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "orders", Step: 7, SectionSize: 9}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "orders", Section: 3, Max: 33}}))
	before := dumpState(f)
	beforeIdx := f.AppliedIndex()

	cases := map[string][]byte{
		"empty":             {},
		"text":              []byte("not a snapshot"),
		"random":            garbage,
		"truncated":         valid[:len(valid)/2],
		"foreign bucket":    foreign,
		"bad space value":   badValue,
		"two pages of meta": valid[:2*os.Getpagesize()],
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err == nil {
				t.Fatal("Restore succeeded")
			}
			if got := dumpState(f); !reflect.DeepEqual(got, before) {
				t.Fatalf("state changed: %+v", got)
			}
			if got := f.AppliedIndex(); got != beforeIdx {
				t.Fatalf("AppliedIndex changed to %d", got)
			}
			if _, err := os.Stat(restorePath(f.path)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("restore temp file left behind: %v", err)
			}
		})
	}
	// Still usable: applies, snapshots and a valid restore work.
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "orders", Section: 3, Max: 44}}))
	if got := f.Max("orders", 3); got != 44 {
		t.Fatalf("Max after failed restores = %d", got)
	}
	if len(snapshotBytes(t, f)) == 0 {
		t.Fatal("empty snapshot")
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(valid))); err != nil {
		t.Fatalf("valid Restore after failures: %v", err)
	}
	if got := f.Max("users", 1); got != 100 {
		t.Fatalf("Max after valid restore = %d", got)
	}
}

// corruptSpaceValue returns a copy of snapshot in which the stored settings of
// every space are invalid (step 0), written through bbolt so that the file
// itself is well-formed.
func corruptSpaceValue(t *testing.T, snapshot []byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(path, snapshot, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSpaces)
		return b.ForEach(func(k, _ []byte) error { return b.Put(k, make([]byte, spaceValueLen)) })
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ---- concurrency ----

func TestConcurrentReads(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				m := f.Max("users", 1)
				if m < last {
					t.Errorf("Max went backwards: %d < %d", m, last)
					return
				}
				last = m
				f.Spaces()
				f.Space("users")
				f.AppliedIndex()
			}
		})
	}
	for i := range 50 {
		a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: 1, Max: uint64(i+1) * 100}}))
		a.mustOK(EncodeNoop())
	}
	data := snapshotBytes(t, f)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
}

// ---- benchmark ----

func BenchmarkApplyRaise(b *testing.B) {
	f, _ := openTest(b)
	a := &applier{t: b, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 10000, SectionSize: 100000}))
	var hi uint64
	for b.Loop() {
		hi += 10000
		a.mustOK(EncodeRaise([]seqd.Mark{{Space: "users", Section: hi % 64, Max: hi}}))
	}
}

// TestDataFormatVersion: a new file records format 1 (until it holds
// format 2 state); a file without the
// key (written before it existed) opens as format 1; a file of a later
// format, or a snapshot of one, is refused with a clear error.
func TestDataFormatVersion(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1000}))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	setMeta := func(v []byte) {
		t.Helper()
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Update(func(tx *bolt.Tx) error {
			m := tx.Bucket(bucketMeta)
			if got := m.Get(keyFormat); v == nil && binary.BigEndian.Uint64(got) != 1 {
				t.Errorf("a new file records format %x, want 1 (readable by the first release)", got)
			}
			if v == nil {
				return m.Delete(keyFormat)
			}
			return m.Put(keyFormat, v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	setMeta(nil) // as written before the key existed
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatalf("a file without a format key: %v", err)
	}
	if _, ok := g.Space("users"); !ok {
		t.Fatal("space lost")
	}
	g.Close()

	setMeta(u64(formatVersion + 1))
	if _, err := Open(path, quietLogger()); err == nil || !strings.Contains(err.Error(), "newer seqd") {
		t.Fatalf("a later format opened: %v", err)
	}
	// The same file as a snapshot from a newer leader: refused.
	h, _ := openTest(t)
	snap, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Restore(io.NopCloser(bytes.NewReader(snap))); err == nil || !strings.Contains(err.Error(), "newer seqd") {
		t.Fatalf("Restore of a later format: %v", err)
	}
	setMeta(u64(0))
	if _, err := Open(path, quietLogger()); err == nil || !strings.Contains(err.Error(), "format 0") {
		t.Fatalf("format 0 opened: %v", err)
	}
}

// TestDiskFullWaitsInsteadOfPanicking puts the FSM on a 2 MB tmpfs, fills
// the file system and applies an entry that needs new pages: the apply
// waits (reporting the full disk) instead of stopping the node, completes
// once space returns, and a Stop while waiting gives up without applying.
// It needs root (mount); it is skipped otherwise.
func TestDiskFullWaitsInsteadOfPanicking(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	f, err := Open(filepath.Join(dir, "fsm.db"), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events := make(chan bool, 4)
	f.SetDiskHook(func(full bool, err error) {
		if full && !IsDiskFull(err) {
			t.Errorf("reported full with %v", err)
		}
		events <- full
	})
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "users", Step: 100, SectionSize: 1}))
	filler := filepath.Join(dir, "filler")
	fill := func() {
		fh, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		for {
			if _, err := fh.Write(buf); err != nil {
				break
			}
		}
		fh.Close()
	}
	bigRaise := func(base uint64) []byte {
		marks := make([]seqd.Mark, 20000)
		for i := range marks {
			marks[i] = seqd.Mark{Space: "users", Section: base + uint64(i), Max: 100}
		}
		return EncodeRaise(marks)
	}
	fill()
	done := make(chan any, 1)
	go func() {
		done <- f.Apply(&raft.Log{Index: 100, Type: raft.LogCommand, Data: bigRaise(0)})
	}()
	select {
	case full := <-events:
		if !full {
			t.Fatal("first disk event is not 'full'")
		}
	case r := <-done:
		t.Fatalf("the apply completed on a full disk: %v", r)
	case <-time.After(30 * time.Second):
		t.Fatal("no disk-full report")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r != nil {
			t.Fatalf("apply after space returned: %v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the apply did not complete after space returned")
	}
	if full := <-events; full {
		t.Fatal("no recovery report")
	}
	if f.Max("users", 19999) != 100 || f.AppliedIndex() != 100 {
		t.Fatalf("after recovery: Max %d applied %d", f.Max("users", 19999), f.AppliedIndex())
	}
	// Stop while waiting: the entry is answered with an error, not applied.
	fill()
	go func() {
		done <- f.Apply(&raft.Log{Index: 101, Type: raft.LogCommand, Data: bigRaise(100000)})
	}()
	if full := <-events; !full {
		t.Fatal("no second disk-full report")
	}
	f.Stop()
	select {
	case r := <-done:
		if err, ok := r.(error); !ok || !errors.Is(err, errStopping) {
			t.Fatalf("apply stopped while waiting: %v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not end the wait")
	}
	if f.AppliedIndex() != 100 || f.Max("users", 100000) != 0 {
		t.Fatal("the entry abandoned at Stop was applied")
	}
}

// A release is the last lease entry until a renewal follows it; it is
// forgotten when a snapshot is installed and when the state machine is
// opened again (memory only: a new leader then waits, as it always may).
func TestLeaseReleased(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	if f.LeaseReleased() {
		t.Fatal("released before any entry")
	}
	a.mustOK(EncodeCreateSpace(seqd.DefaultSpace))
	a.mustOK(EncodeLease(time.Second, 100*time.Millisecond))
	a.mustOK(EncodeRelease())
	if !f.LeaseReleased() {
		t.Fatal("not released after a release")
	}
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "default", Section: 0, Max: 5}}))
	if !f.LeaseReleased() {
		t.Fatal("a raise cleared the release")
	}
	a.mustOK(EncodeLease(time.Second, 100*time.Millisecond))
	if f.LeaseReleased() {
		t.Fatal("still released after a renewal")
	}
	a.mustOK(EncodeRelease())
	data := snapshotBytes(t, f)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if f.LeaseReleased() {
		t.Fatal("released after a snapshot install")
	}
	a.mustOK(EncodeRelease())
	f.Close()
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.LeaseReleased() {
		t.Fatal("released after reopening")
	}
	if c, err := Decode(EncodeRelease()); err != nil || c.Kind != KindRelease {
		t.Fatalf("Decode(EncodeRelease()) = %v, %v", c, err)
	}
}

// From protocol 4 the cluster entry records the raft group count: the first
// count applied wins, an entry with another count is refused, the count
// survives a reopen and a snapshot, and entries of earlier protocols
// record none (one group). A build of protocol 3 cannot decode the entry
// (trailing bytes), so it stops rather than serve from the state.
func TestClusterRecordsGroups(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCluster("c", 3))
	if n, ok := f.Groups(); ok || n != 1 {
		t.Fatalf("protocol 3: groups %d recorded %v, want 1 unrecorded", n, ok)
	}
	a.mustOK(EncodeClusterGroups("c", 4, 6))
	if n, ok := f.Groups(); !ok || n != 6 {
		t.Fatalf("after protocol 4 with 6 groups: %d %v", n, ok)
	}
	a.mustOK(EncodeClusterGroups("c", 4, 6)) // the same again: fine
	if err := respErr(t, a.apply(EncodeClusterGroups("c", 4, 2))); err == nil || !strings.Contains(err.Error(), "runs 6 raft groups") {
		t.Fatalf("another count: %v, want a refusal", err)
	}
	if c, err := Decode(EncodeClusterGroups("c", 4, 6)); err != nil || c.Groups != 6 || c.Protocol != 4 {
		t.Fatalf("decode: %+v %v", c, err)
	}
	if _, err := Decode(EncodeClusterGroups("c", 4, 0)); err == nil {
		t.Fatal("a count of 0 decoded")
	}
	// What a protocol 3 decoder sees: the protocol 3 layout plus a byte.
	if _, err := Decode(append(EncodeCluster("c", 3), 6)); err == nil {
		t.Fatal("a protocol 3 entry with a trailing count decoded")
	}
	data := snapshotBytes(t, f)
	f.Close()
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n, ok := g.Groups(); !ok || n != 6 {
		t.Fatalf("after reopening: %d %v", n, ok)
	}
	h, _ := openTest(t)
	if err := h.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if n, ok := h.Groups(); !ok || n != 6 {
		t.Fatalf("after a snapshot install: %d %v", n, ok)
	}
}
