package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd"
)

// TestBackupCorruptedMarkIsRefused (found by an adversarial review): a
// backup of 3 groups in which one bit of one group's mark has flipped (bit
// rot in the file, a bad copy) still passes every check seqd makes (bbolt's
// consistency check checks page structure, not values; the backup carries
// no checksum of its contents), and restores that section a margin above
// the lowered mark: below values the old cluster handed out. A restore must
// refuse a backup whose contents changed since `seqd backup` wrote it.
func TestBackupCorruptedMarkIsRefused(t *testing.T) {
	const n = 3
	a := seqd.Space{Name: "a", Step: 10, SectionSize: 100}
	var secs []uint64
	for g := range n {
		secs = append(secs, sectionOf(t, "a", g, n))
	}
	const high = uint64(1)<<40 + 77 // group 2's mark: values up to it were handed out
	cl := EncodeClusterGroups("c1", groupsProtocol, n)
	parts := []string{
		writePart(t, "p0.db", BackupInfo{ClusterID: "c1", Term: 7, Index: 3, Taken: taken},
			cl, EncodeCreateSpace(a), EncodeRaise([]seqd.Mark{{Space: "a", Section: secs[0], Max: 100}})),
		writePart(t, "p1.db", BackupInfo{ClusterID: "c1", Term: 3, Index: 3, Taken: taken.Add(time.Millisecond)},
			cl, EncodeCreateSpace(a), EncodeRaise([]seqd.Mark{{Space: "a", Section: secs[1], Max: 200}})),
		writePart(t, "p2.db", BackupInfo{ClusterID: "c1", Term: 5, Index: 3, Taken: taken.Add(2 * time.Millisecond)},
			cl, EncodeCreateSpace(a), EncodeRaise([]seqd.Mark{{Space: "a", Section: secs[2], Max: high}})),
	}
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	if _, err := MergeBackups(backup, parts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	want := binary.BigEndian.AppendUint64(nil, high)
	if bytes.Count(b, want) != 1 {
		t.Fatalf("the mark's bytes occur %d times", bytes.Count(b, want))
	}
	i := bytes.Index(b, want)
	b[i+2] ^= 0x01 // bit 40 of the big-endian value: the mark becomes 77
	corrupt := filepath.Join(dir, "corrupt.db")
	if err := os.WriteFile(corrupt, b, 0o600); err != nil {
		t.Fatal(err)
	}

	margin, err := MinMargin(1000, 3, a.Step)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := InspectBackup(corrupt)
	if err != nil {
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("refused, but not as damaged: %v", err)
		}
		return // refused: what the test wants
	}
	out := []string{filepath.Join(dir, "g0.db"), filepath.Join(dir, "g1.db"), filepath.Join(dir, "g2.db")}
	if _, err := PrepareRestoreGroups(corrupt, out, RestoreOptions{Margin: margin, ClusterID: "c2"}); err != nil {
		return // refused
	}
	f, err := Open(out[2], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := f.Max("a", secs[2])
	if got <= high {
		t.Fatalf("a backup with one flipped bit passed every check (highest mark %d) and restored group 2's section %d at %d, below the %d handed out before the backup",
			sum.HighestBefore, secs[2], got, high)
	}
}
