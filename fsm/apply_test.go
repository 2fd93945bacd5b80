package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
)

// ---- helpers ----

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

// TestAMoveToAProtocolThisBuildDoesNotSpeakStopsTheNode: an entry that
// moves the cluster to a newer protocol than this build speaks is written
// by a leader of a newer build (it moves to its own protocol) and commits
// only once every server it asked speaks it, so a replica of this build
// that meets one was left behind by the move: it must stop, as on a kind
// it does not know, not refuse the entry as a bad command and carry on
// at the older protocol. A replica that carried on would hold another
// protocol than every other replica at the same index, apply the newer
// build's entries by this build's rules until the first kind it does not
// know, and could lead the group meanwhile.
func TestAMoveToAProtocolThisBuildDoesNotSpeakStopsTheNode(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeClusterGroups("c", ProtocolVersion, 1))
	applied := f.AppliedIndex()
	func() {
		defer func() {
			r := recover()
			if r == nil {
				t.Fatalf("a move to protocol %d was applied by a build of protocol %d without stopping it (protocol now %d, applied index %d)",
					ProtocolVersion+1, ProtocolVersion, f.Protocol(), f.AppliedIndex())
			}
			if msg := fmt.Sprint(r); !strings.Contains(msg, "index 40") || !strings.Contains(msg, fmt.Sprint(ProtocolVersion+1)) {
				t.Fatalf("panic message %q lacks the index or the protocol", msg)
			}
		}()
		f.Apply(&raft.Log{Index: 40, Term: 2, Type: raft.LogCommand, Data: EncodeClusterGroups("c", ProtocolVersion+1, 1)})
	}()
	if f.Protocol() != ProtocolVersion || f.AppliedIndex() != applied {
		t.Fatalf("after the refused move: protocol %d, applied index %d; want %d, %d", f.Protocol(), f.AppliedIndex(), ProtocolVersion, applied)
	}
}
