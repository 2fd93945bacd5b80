package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// giveState makes dir hold raft state (a term), as a server that has
// bootstrapped or joined does.
func giveState(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	ls.Close()
}

// The group count is chosen once: a fresh directory takes --groups (or the
// default) and records it; once group 0 holds state, another --groups is
// refused with an error naming both counts; a previous build's directory
// (state, no record) is a cluster of one group; a damaged record is
// refused rather than guessed.
func TestGroupCountIsFixedOnceStateExists(t *testing.T) {
	dir := t.TempDir()
	if n, err := groupCount(dir, 6, 1); err != nil || n != 6 {
		t.Fatalf("fresh directory, --groups 6: %d, %v", n, err)
	}
	// No state yet: a server that never held any may still be told otherwise.
	if n, err := groupCount(dir, 0, 1); err != nil || n != 6 {
		t.Fatalf("fresh directory restarted without --groups: %d, %v (want the recorded 6)", n, err)
	}
	if n, err := groupCount(dir, 3, 1); err != nil || n != 3 {
		t.Fatalf("stateless directory, --groups 3: %d, %v", n, err)
	}
	giveState(t, dir)
	if n, err := groupCount(dir, 0, 1); err != nil || n != 3 {
		t.Fatalf("with state, no --groups: %d, %v (want 3)", n, err)
	}
	if n, err := groupCount(dir, 3, 1); err != nil || n != 3 {
		t.Fatalf("with state, same --groups: %d, %v", n, err)
	}
	_, err := groupCount(dir, 4, 1)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "3 groups") || !strings.Contains(err.Error(), "--groups 4") {
		t.Fatalf("with state, --groups 4: %v, want a refusal naming both counts", err)
	}

	legacy := t.TempDir()
	giveState(t, legacy)
	if _, err := groupCount(legacy, 2, 1); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "1 group") {
		t.Fatalf("previous build's directory, --groups 2: %v, want a refusal", err)
	}
	if n, err := groupCount(legacy, 0, 1); err != nil || n != 1 {
		t.Fatalf("previous build's directory: %d, %v, want 1", n, err)
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, groupsFile), []byte("six\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := groupCount(bad, 0, 1); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("damaged record: %v", err)
	}
	if _, err := groupCount(t.TempDir(), 300, 1); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("--groups 300: %v", err)
	}
}
