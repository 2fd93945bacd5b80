package fsm

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

func TestBackupAndPrepareRestore(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	apply := func(i uint64, b []byte) {
		t.Helper()
		if err, ok := f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: b}).(error); ok {
			t.Fatal(err)
		}
	}
	apply(1, EncodeCreateSpace(Space{Name: "a", Step: 10, SectionSize: 100}))
	apply(2, EncodeCreateSpace(Space{Name: "b", Step: 10, SectionSize: 100}))
	apply(3, EncodeRaise([]Mark{{Space: "a", Section: 3, Max: 100}, {Space: "a", Section: 4, Max: 50}}))

	var buf bytes.Buffer
	if _, err := f.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	// Raises after the backup are not in it.
	apply(4, EncodeRaise([]Mark{{Space: "a", Section: 3, Max: 200}}))

	path := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRestore(path, 0); err == nil {
		t.Fatal("a restore without a margin was accepted")
	}
	sum, err := PrepareRestore(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Spaces != 2 || sum.Sections != 2 || sum.HighestBefore != 100 || sum.HighestAfter != 1100 {
		t.Fatalf("summary %+v", sum)
	}
	r, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct {
		space string
		sec   uint64
		want  uint64
	}{{"a", 3, 1100}, {"a", 4, 1050}, {"a", 9, 1000}, {"b", 0, 1000}, {"nope", 0, 0}} {
		if got := r.Max(c.space, c.sec); got != c.want {
			t.Errorf("Max(%s, %d) = %d, want %d", c.space, c.sec, got, c.want)
		}
	}
	if r.AppliedIndex() != 0 {
		t.Errorf("applied index %d survived the restore", r.AppliedIndex())
	}
	// A raise below the base does not lower Max; one above it counts.
	if err, ok := r.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeRaise([]Mark{{Space: "b", Section: 0, Max: 5}})}).(error); ok {
		t.Fatal(err)
	}
	if got := r.Max("b", 0); got != 1000 {
		t.Fatalf("Max after a raise below the base = %d", got)
	}
	// The restored state survives a snapshot round trip (bases included).
	var snap bytes.Buffer
	if _, err := r.Backup(&snap); err != nil {
		t.Fatal(err)
	}
	r2, err := Open(filepath.Join(dir, "r2.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.Restore(nopCloser{&snap}); err != nil {
		t.Fatal(err)
	}
	if got := r2.Max("a", 9); got != 1000 {
		t.Fatalf("base lost in a snapshot round trip: Max = %d", got)
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

func TestPrepareRestoreRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("x"), 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRestore(garbage, 10); err == nil {
		t.Fatal("garbage accepted as a backup")
	}
	if _, err := PrepareRestore(filepath.Join(dir, "missing"), 10); err == nil {
		t.Fatal("a missing file accepted as a backup")
	}
	f, err := Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCreateSpace(Space{Name: "a", Step: 10, SectionSize: 100})})
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeRaise([]Mark{{Space: "a", Section: 0, Max: math.MaxInt64 - 5}})})
	var buf bytes.Buffer
	if _, err := f.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	f.Close()
	path := filepath.Join(dir, "b.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRestore(path, 10); !errors.Is(err, ErrMarginTooLarge) {
		t.Fatalf("margin past 2^63-1: %v", err)
	}
}

func TestServerSeen(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if seen, _ := f.ServerSeen("n1"); seen {
		t.Fatal("n1 seen before any entry")
	}
	for i, idx := range []uint64{10, 30, 20, 30} { // kept as a maximum; replays are harmless
		if err, ok := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: EncodeServerSeen("n1", idx)}).(error); ok {
			t.Fatal(err)
		}
	}
	if err, ok := f.Apply(&raft.Log{Index: 9, Type: raft.LogCommand, Data: EncodeServerSeen("", 1)}).(error); !ok || err == nil {
		t.Fatal("an empty server id was accepted")
	}
	f.Close()
	f, err = Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if seen, idx := f.ServerSeen("n1"); !seen || idx != 30 {
		t.Fatalf("n1: seen %v index %d, want true 30", seen, idx)
	}
	if seen, _ := f.ServerSeen("n2"); seen {
		t.Fatal("n2 seen")
	}
}
