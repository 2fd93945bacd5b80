package fsm

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// ---- helpers ----

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
