package fsm

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
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
	apply(1, EncodeCreateSpace(seqd.Space{Name: "a", Step: 10, SectionSize: 100}))
	apply(2, EncodeCreateSpace(seqd.Space{Name: "b", Step: 10, SectionSize: 100}))
	apply(3, EncodeRaise([]seqd.Mark{{Space: "a", Section: 3, Max: 100}, {Space: "a", Section: 4, Max: 50}}))

	var buf bytes.Buffer
	if _, err := f.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	// Raises after the backup are not in it.
	apply(4, EncodeRaise([]seqd.Mark{{Space: "a", Section: 3, Max: 200}}))

	path := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRestore(path, RestoreOptions{ClusterID: "new"}); err == nil {
		t.Fatal("a restore without a margin was accepted")
	}
	if _, err := PrepareRestore(path, RestoreOptions{Margin: 1000}); err == nil {
		t.Fatal("a restore without a new cluster ID was accepted")
	}
	sum, err := PrepareRestore(path, RestoreOptions{Margin: 1000, ClusterID: "new"})
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
	checkMax(t, r, maxWant{"a", 3, 1100}, maxWant{"a", 4, 1050}, maxWant{"a", 9, 1000}, maxWant{"b", 0, 1000}, maxWant{"nope", 0, 1000})
	if r.AppliedIndex() != 0 {
		t.Errorf("applied index %d survived the restore", r.AppliedIndex())
	}
	if r.ClusterID() != "new" || r.Protocol() != ProtocolVersion || r.Floor() != 1000 {
		t.Errorf("restored cluster %q protocol %d floor %d", r.ClusterID(), r.Protocol(), r.Floor())
	}
	// A space created after the restore (as an application does on start)
	// starts above the floor: values it handed out in the old cluster after
	// the backup are never handed out again.
	if err, ok := r.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCreateSpace(seqd.Space{Name: "late", Step: 10, SectionSize: 100})}).(error); ok {
		t.Fatal(err)
	}
	if got := r.Max("late", 7); got != 1000 {
		t.Fatalf("Max of a space created after the restore = %d, want the floor 1000", got)
	}
	// A raise below the base does not lower Max; one above it counts.
	if err, ok := r.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeRaiseAt(time.Now().UnixMilli(), []seqd.Mark{{Space: "b", Section: 0, Max: 5}})}).(error); ok {
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
	if got := r2.Max("late", 3); got != 1000 || r2.ClusterID() != "new" {
		t.Fatalf("floor or cluster lost in a snapshot round trip: Max = %d, cluster %q", got, r2.ClusterID())
	}
}

// maxWant is a section's expected high-water mark.
type maxWant struct {
	space     string
	sec, want uint64
}

func checkMax(t *testing.T, f *FSM, want ...maxWant) {
	t.Helper()
	for _, c := range want {
		if got := f.Max(c.space, c.sec); got != c.want {
			t.Errorf("Max(%s, %d) = %d, want %d", c.space, c.sec, got, c.want)
		}
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
	if _, err := PrepareRestore(garbage, RestoreOptions{Margin: 10, ClusterID: "x"}); err == nil {
		t.Fatal("garbage accepted as a backup")
	}
	if _, err := PrepareRestore(filepath.Join(dir, "missing"), RestoreOptions{Margin: 10, ClusterID: "x"}); err == nil {
		t.Fatal("a missing file accepted as a backup")
	}
	f, err := Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCreateSpace(seqd.Space{Name: "a", Step: 10, SectionSize: 100})})
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeRaise([]seqd.Mark{{Space: "a", Section: 0, Max: math.MaxInt64 - 5}})})
	var buf bytes.Buffer
	if _, err := f.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	f.Close()
	path := filepath.Join(dir, "b.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRestore(path, RestoreOptions{Margin: 10, ClusterID: "x"}); !errors.Is(err, ErrMarginTooLarge) {
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

// TestWriteBackupRecordsItsOrigin: a backup written with WriteBackup carries
// where and when it was taken; InspectBackup reads it back; a restore that
// expects another cluster, or would keep the old cluster's ID, is refused,
// and a backup of a newer format is refused with a clear error.
func TestWriteBackupRecordsItsOrigin(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCluster("c1", 2)})
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: EncodeCreateSpace(seqd.Space{Name: "a", Step: 700, SectionSize: 100})})
	f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: EncodeRaise([]seqd.Mark{{Space: "a", Section: 0, Max: 1400}})})
	taken := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	path := filepath.Join(dir, "b.db")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteBackup(out, BackupInfo{ClusterID: "c1", Term: 7, Index: 3, Taken: taken}); err != nil {
		t.Fatal(err)
	}
	out.Close()
	sum, err := InspectBackup(path)
	if err != nil {
		t.Fatal(err)
	}
	want := BackupInfo{ClusterID: "c1", Term: 7, Index: 3, Taken: taken}
	if !reflect.DeepEqual(sum.Info, want) || sum.MaxStep != 700 || sum.HighestBefore != 1400 || sum.Spaces != 1 || sum.Sections != 1 {
		t.Fatalf("inspect: %+v", sum)
	}
	if _, err := PrepareRestore(path, RestoreOptions{Margin: 10, ClusterID: "c2", FromCluster: "other"}); !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("a backup of another cluster: %v", err)
	}
	if _, err := PrepareRestore(path, RestoreOptions{Margin: 10, ClusterID: "c1"}); err == nil {
		t.Fatal("a restore that keeps the old cluster's ID was accepted")
	}
	// A newer format is refused.
	newer := filepath.Join(dir, "newer.db")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(newer, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(newer, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, u64(formatVersion+1)) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := InspectBackup(newer); err == nil || !strings.Contains(err.Error(), "newer seqd") {
		t.Fatalf("a backup of a newer format: %v", err)
	}
	sum, err = PrepareRestore(path, RestoreOptions{Margin: 10, ClusterID: "c2", FromCluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.ClusterID() != "c2" || r.Max("a", 0) != 1410 {
		t.Fatalf("restored: cluster %q, Max %d", r.ClusterID(), r.Max("a", 0))
	}
}

// TestMinMarginCoversRestartsAndValues replays the case that broke the old
// rule: step 1000, a backup at mark 1001, then four restarts each followed
// by one Next (the mark climbs 2002, 3003, 4004, 5005 while only 4 values
// are handed out). A margin of 2000 (the old rule: "the values handed out
// since, at least the largest step") does not cover it; the minimum for 4
// values and 5 terms does.
func TestMinMarginCoversRestartsAndValues(t *testing.T) {
	const step, backupMark, finalMark = 1000, 1001, 5005
	m, err := MinMargin(4, 5, step)
	if err != nil {
		t.Fatal(err)
	}
	if backupMark+2000 >= finalMark {
		t.Fatal("the example no longer shows the old rule failing")
	}
	if backupMark+m < finalMark {
		t.Fatalf("MinMargin(4, 5, %d) = %d does not cover the final mark %d", step, m, finalMark)
	}
	if m != 4+5*(MaxCallValues+2*step) {
		t.Fatalf("MinMargin = %d", m)
	}
	if _, err := MinMargin(0, 1, seqd.MaxStep+1); err == nil {
		t.Fatal("a step above the largest allowed was accepted")
	}
	if _, err := MinMargin(1, math.MaxInt64/2, seqd.MaxStep); !errors.Is(err, ErrMarginTooLarge) {
		t.Fatalf("overflow: %v", err)
	}
}
