package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
	bolt "go.etcd.io/bbolt"
)

// writePart applies cmds to a new FSM and writes its backup, as group g's
// serving leader does, to a file it returns.
func writePart(t *testing.T, name string, info BackupInfo, cmds ...[]byte) string {
	t.Helper()
	dir := t.TempDir()
	f, err := Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, c := range cmds {
		if err, ok := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c}).(error); ok {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name)
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteBackup(out, info); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// sectionOf returns the first section of space owned by group g of n.
func sectionOf(t *testing.T, space string, g, n int) uint64 {
	t.Helper()
	for s := uint64(0); s < 100000; s++ {
		if seqd.SlotGroup(seqd.SlotOf(space, s), n) == g {
			return s
		}
	}
	t.Fatalf("no section of %s in group %d of %d", space, g, n)
	return 0
}

var taken = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)

// threeParts returns the parts of a backup of cluster c1 of three groups:
// space "a" (step 10) everywhere, with one raised section per group
// (marks 100, 200, 300), a flake namespace in group 0, and space "late"
// known only to group 2 (created after group 0's part was taken), with a
// mark in group 2. Group 2 records no group count yet.
func threeParts(t *testing.T) (parts []string, secs []uint64, late uint64) {
	t.Helper()
	const n = 3
	a := seqd.Space{Name: "a", Step: 10, SectionSize: 100}
	for g := range n {
		secs = append(secs, sectionOf(t, "a", g, n))
	}
	late = sectionOf(t, "late", 2, n)
	l, _ := flake.Preset("snowflake")
	cluster := EncodeClusterGroups("c1", groupsProtocol, n)
	parts = []string{
		writePart(t, "p0.db", BackupInfo{ClusterID: "c1", Term: 7, Index: 4, Taken: taken},
			cluster, EncodeCreateSpace(a), EncodeRaise([]seqd.Mark{{Space: "a", Section: secs[0], Max: 100}}),
			EncodeFlake(taken.UnixMilli(), []FlakeOp{{Type: OpCreateNamespace, Namespace: "orders", Layout: l}})),
		writePart(t, "p1.db", BackupInfo{ClusterID: "c1", Term: 3, Index: 3, Taken: taken.Add(time.Millisecond)},
			cluster, EncodeCreateSpace(a), EncodeRaise([]seqd.Mark{{Space: "a", Section: secs[1], Max: 200}})),
		writePart(t, "p2.db", BackupInfo{ClusterID: "c1", Term: 5, Index: 4, Taken: taken.Add(2 * time.Millisecond)},
			EncodeCreateSpace(a), EncodeRaise([]seqd.Mark{{Space: "a", Section: secs[2], Max: 300}}),
			EncodeCreateSpace(seqd.Space{Name: "late", Step: 20, SectionSize: 10}),
			EncodeRaise([]seqd.Mark{{Space: "late", Section: late, Max: 400}})),
	}
	return parts, secs, late
}

// TestMergeBackupsAndRestoreGroups: the parts of three groups merge into one
// backup (format 4) that records the counts and every part's term, index
// and time; it restores into three states, each holding its group's marks
// raised by the margin and the floor under everything else, the new
// cluster ID and the group count, flake namespaces in group 0 only; and it
// does not restore into another number of groups.
func TestMergeBackupsAndRestoreGroups(t *testing.T) {
	parts, secs, late := threeParts(t)
	dir := t.TempDir()
	merged := filepath.Join(dir, "merged.db")
	info, err := MergeBackups(merged, parts)
	if err != nil {
		t.Fatal(err)
	}
	want := BackupInfo{ClusterID: "c1", Term: 7, Index: 4, Taken: taken, Groups: 3, Slots: seqd.SlotCount, Parts: []GroupPart{
		{Term: 7, Index: 4, Taken: taken, Protocol: groupsProtocol}, {Term: 3, Index: 3, Taken: taken.Add(time.Millisecond), Protocol: groupsProtocol},
		{Term: 5, Index: 4, Taken: taken.Add(2 * time.Millisecond)},
	}}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("merged info\n%+v, want\n%+v", info, want)
	}
	if got := fileFormat(t, merged); got != generationFormat {
		t.Fatalf("merged backup of format %d, want %d", got, groupsBackupFormat)
	}
	sum, err := InspectBackup(merged)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Spaces != 2 || sum.Sections != 4 || sum.HighestBefore != 400 || sum.MaxStep != 20 || !reflect.DeepEqual(sum.Info, want) {
		t.Fatalf("inspect: %+v", sum)
	}
	before, _ := os.ReadFile(merged)

	o := RestoreOptions{Margin: 1000, ClusterID: "new", FlakeFloorMs: taken.UnixMilli() + 60_000}
	if _, err := PrepareRestore(merged, o); !errors.Is(err, ErrGroupCount) {
		t.Fatalf("a backup of 3 groups restored into one: %v", err)
	}
	out := []string{filepath.Join(dir, "g0.db"), filepath.Join(dir, "g1.db"), filepath.Join(dir, "g2.db")}
	if _, err := PrepareRestoreGroups(merged, out[:2], o); !errors.Is(err, ErrGroupCount) {
		t.Fatalf("a backup of 3 groups restored into 2: %v", err)
	}
	sum, err = PrepareRestoreGroups(merged, out, o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.HighestBefore != 400 || sum.HighestAfter != 1400 || sum.FlakeNamespaces != 1 {
		t.Fatalf("restore summary %+v", sum)
	}
	if after, _ := os.ReadFile(merged); string(after) != string(before) {
		t.Fatal("the restore changed the backup")
	}
	for g, path := range out {
		if got := fileFormat(t, path); got != versionFormat {
			t.Errorf("group %d's state of format %d, want %d (a restored cluster is on protocol 6, and records its generation)", g, got, versionFormat)
		}
		f, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if n, rec := f.Groups(); n != 3 || !rec || f.ClusterID() != "new" || f.Protocol() != ProtocolVersion || f.AppliedIndex() != 0 || f.Floor() != 1000 {
			t.Errorf("group %d: groups %d (%v), cluster %q, protocol %d, applied %d, floor %d", g, n, rec, f.ClusterID(), f.Protocol(), f.AppliedIndex(), f.Floor())
		}
		for h, sec := range secs {
			want := uint64(1000) // another group's section: the floor
			if h == g {
				want = uint64(100*(g+1)) + 1000
			}
			if got := f.Max("a", sec); got != want {
				t.Errorf("group %d: Max(a, %d) (group %d's) = %d, want %d", g, sec, h, got, want)
			}
		}
		wantLate := uint64(1000)
		if g == 2 {
			wantLate = 1400
		}
		if _, ok := f.Space("late"); !ok || f.Max("late", late) != wantLate {
			t.Errorf("group %d: space late %v, Max %d, want %d", g, ok, f.Max("late", late), wantLate)
		}
		if ns := f.Namespaces(); len(ns) != map[bool]int{true: 1, false: 0}[g == 0] {
			t.Errorf("group %d holds %d flake namespaces", g, len(ns))
		}
	}
}

// fileFormat reads the data format recorded in the file at path.
func fileFormat(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v uint64
	if err := db.View(func(tx *bolt.Tx) error { v = metaFormat(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

// metaFormat is the data format tx's meta bucket says (0: none).
func metaFormat(tx *bolt.Tx) uint64 {
	if b := tx.Bucket(bucketMeta).Get(keyFormat); len(b) == 8 {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// TestMergeBackupsRefusesPartsThatDoNotBelong: parts of another cluster or
// another group count, a mark of a section another group owns, flake state
// outside group 0, a space with two settings, or a single part are refused.
func TestMergeBackupsRefusesPartsThatDoNotBelong(t *testing.T) {
	parts, secs, _ := threeParts(t)
	a := seqd.Space{Name: "a", Step: 10, SectionSize: 100}
	l, _ := flake.Preset("snowflake")
	info := BackupInfo{ClusterID: "c1", Term: 2, Index: 3, Taken: taken}
	cases := []struct {
		name string
		g    int // the part replaced
		part string
		msg  string
	}{
		{"another cluster", 1, writePart(t, "x.db", BackupInfo{ClusterID: "c9", Term: 2, Index: 2, Taken: taken},
			EncodeClusterGroups("c9", groupsProtocol, 3), EncodeCreateSpace(a)), "cluster"},
		{"group 0 of another count", 0, writePart(t, "x.db", info, EncodeClusterGroups("c1", groupsProtocol, 2), EncodeCreateSpace(a)), "records 2 groups"},
		{"group 0 without a count", 0, writePart(t, "x.db", info, EncodeCluster("c1", 3), EncodeCreateSpace(a)), "records 1 groups"},
		{"another group's mark", 1, writePart(t, "x.db", info, EncodeClusterGroups("c1", groupsProtocol, 3), EncodeCreateSpace(a),
			EncodeRaise([]seqd.Mark{{Space: "a", Section: secs[2], Max: 50}})), "which group 2 owns"},
		{"flake outside group 0", 2, writePart(t, "x.db", info, EncodeClusterGroups("c1", groupsProtocol, 3),
			EncodeFlake(taken.UnixMilli(), []FlakeOp{{Type: OpCreateNamespace, Namespace: "n", Layout: l}})), "flake"},
		// A step may differ (a group lags group 0's change of it); a
		// section size never does.
		{"a space with another section size", 1, writePart(t, "x.db", info, EncodeCreateSpace(seqd.Space{Name: "a", Step: 11, SectionSize: 101})), "section size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := append([]string(nil), parts...)
			ps[tc.g] = tc.part
			dst := filepath.Join(t.TempDir(), "m.db")
			if _, err := MergeBackups(dst, ps); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("merge: %v, want an error naming %q", err, tc.msg)
			}
		})
	}
	if _, err := MergeBackups(filepath.Join(t.TempDir(), "m.db"), parts[:1]); err == nil {
		t.Fatal("a backup of one part merged")
	}
	// A merged backup is not a part.
	merged := filepath.Join(t.TempDir(), "m.db")
	if _, err := MergeBackups(merged, parts); err != nil {
		t.Fatal(err)
	}
	if _, err := MergeBackups(filepath.Join(t.TempDir(), "m2.db"), []string{merged, parts[1], parts[2]}); err == nil {
		t.Fatal("a merged backup taken as a part")
	}
}

// TestBackupOfGroupsFormat: a backup of several groups whose slot count is
// not this build's is refused (ErrSlotCount); a file that says format 4
// without recording several groups, or records them in an older format,
// is refused; a build that reads format 3 at most refuses format 4 as
// written by a newer seqd (this build's check, one format further).
func TestBackupOfGroupsFormat(t *testing.T) {
	parts, _, _ := threeParts(t)
	merged := filepath.Join(t.TempDir(), "m.db")
	if _, err := MergeBackups(merged, parts); err != nil {
		t.Fatal(err)
	}
	edit := func(name string, fn func(tx *bolt.Tx) error) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), name)
		b, _ := os.ReadFile(merged)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// Sealed again, as the file of a build that wrote it so would be
		// (a file changed after its digest is TestBackupCorruptedMarkIsRefused's).
		if err := db.Update(func(tx *bolt.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return tx.Bucket(bucketBackup).Put(keyInfoDigest, contentDigest(tx))
		}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	slots := edit("slots.db", func(tx *bolt.Tx) error { return tx.Bucket(bucketBackup).Put(keyInfoSlots, u64(1024)) })
	if _, err := InspectBackup(slots); !errors.Is(err, ErrSlotCount) {
		t.Fatalf("a backup of 1024 slots: %v", err)
	}
	if _, err := PrepareRestoreGroups(slots, []string{slots + "0", slots + "1", slots + "2"}, RestoreOptions{Margin: 10, ClusterID: "x", FlakeFloorMs: taken.UnixMilli() + 60_000}); !errors.Is(err, ErrSlotCount) {
		t.Fatalf("restore of a backup of 1024 slots: %v", err)
	}
	for name, fn := range map[string]func(tx *bolt.Tx) error{
		"format 3 with groups": func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, u64(3)) },
		"the groups' record removed": func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketBackup)
			if err := b.DeleteBucket(bucketInfoParts); err != nil {
				return err
			}
			return errors.Join(b.Delete(keyInfoGroups), b.Delete(keyInfoSlots))
		},
		"a part missing": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketBackup).Bucket(bucketInfoParts).Delete(u64(1))
		},
	} {
		if _, err := InspectBackup(edit("bad.db", fn)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	newer := edit("newer.db", func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, u64(formatVersion+1)) })
	if _, err := InspectBackup(newer); err == nil || !strings.Contains(err.Error(), "newer seqd") {
		t.Fatalf("a backup of a newer format: %v", err)
	}
}

// TestPreviousBuildBackupRestores: a backup file written by the build
// before backups of several groups (testdata/backup-format2.db: cluster
// c-old, term 7, index 4; space a with step 10 and marks 100 and 50 in
// sections 3 and 4, space b with step 500 and mark 1500 in section 0)
// still reads and restores into one group, as before.
func TestPreviousBuildBackupRestores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	b, err := os.ReadFile(filepath.Join("testdata", "backup-format2.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := fileFormat(t, path); got != 2 {
		t.Fatalf("the fixture is of format %d, want 2", got)
	}
	sum, err := InspectBackup(path)
	if err != nil {
		t.Fatal(err)
	}
	want := BackupInfo{ClusterID: "c-old", Term: 7, Index: 4, Taken: taken}
	if !reflect.DeepEqual(sum.Info, want) || sum.Info.GroupCount() != 1 || sum.Spaces != 2 || sum.Sections != 3 || sum.HighestBefore != 1500 || sum.MaxStep != 500 {
		t.Fatalf("inspect: %+v", sum)
	}
	o := RestoreOptions{Margin: 1000, ClusterID: "new"}
	if _, err := PrepareRestoreGroups(path, []string{path + "0", path + "1"}, o); !errors.Is(err, ErrGroupCount) {
		t.Fatalf("a backup of one group restored into two: %v", err)
	}
	if _, err := PrepareRestore(path, o); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checkMax(t, f, maxWant{"a", 3, 1100}, maxWant{"a", 4, 1050}, maxWant{"a", 5, 1000}, maxWant{"b", 0, 2500}, maxWant{"new", 0, 1000})
	if n, _ := f.Groups(); n != 1 || f.ClusterID() != "new" {
		t.Fatalf("restored: %d groups, cluster %q", n, f.ClusterID())
	}
}

// TestBackupCorruptedMarkIsRefused: a backup of 3 groups in which one bit
// of one group's mark has flipped (bit rot in the file, a bad copy) still
// passes every check seqd makes (bbolt's consistency check checks page
// structure, not values; the backup carries no checksum of its contents),
// and restores that section a margin above the lowered mark: below values
// the old cluster handed out. A restore must refuse a backup whose contents
// changed since `seqd backup` wrote it.
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
