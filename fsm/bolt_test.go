package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// ---- helpers ----

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

func (s *bufSink) ID() string { return "test" }

func (s *bufSink) Cancel() error { s.cancelled = true; return nil }

func (s *bufSink) Close() error { s.closed = true; return nil }

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

func (s *failingSink) Write([]byte) (int, error) { return 0, errors.New("disk full") }

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
