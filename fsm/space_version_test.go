package fsm

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// The apply rule of space record versions, as a pure decision.
func TestSupersedes(t *testing.T) {
	at := func(v uint64) SpaceRecord {
		return SpaceRecord{Space: seqd.Space{Name: "s", Step: 5, SectionSize: 10}, Version: v}
	}
	for _, tt := range []struct {
		name    string
		own     SpaceRecord
		have    bool
		version uint64
		want    bool
	}{
		{"no record: any version", SpaceRecord{}, false, 0, true},
		{"no record: a versioned copy", SpaceRecord{}, false, 7, true},
		{"higher version", at(3), true, 4, true},
		{"much higher version", at(3), true, 1 << 40, true},
		{"equal version", at(3), true, 3, false},
		{"lower version", at(3), true, 2, false},
		{"unversioned on a versioned record", at(3), true, 0, false},
		{"unversioned on an unversioned record (before the move)", at(0), true, 0, true},
		{"first version on an unversioned record", at(0), true, 1, true},
		{"tombstone at a version", SpaceRecord{Space: seqd.Space{Name: "s", SectionSize: 10}, Version: 4}, true, 4, false},
		{"re-create above a tombstone", SpaceRecord{Space: seqd.Space{Name: "s", SectionSize: 10}, Version: 4}, true, 5, true},
	} {
		if got := Supersedes(tt.own, tt.have, tt.version); got != tt.want {
			t.Errorf("%s: Supersedes(%+v, %v, %d) = %v, want %v", tt.name, tt.own, tt.have, tt.version, got, tt.want)
		}
	}
}

func TestFollowSpaceCodec(t *testing.T) {
	for _, r := range []SpaceRecord{
		{Space: seqd.Space{Name: "users", Step: 100, SectionSize: 1000}, Version: 3},
		{Space: seqd.Space{Name: "gone", SectionSize: 1000}, Version: 9},
		{Space: seqd.Space{Name: strings.Repeat("x", 200), Step: 1<<64 - 1, SectionSize: 1<<64 - 1}, Version: 1<<64 - 1},
		{},
	} {
		data := EncodeFollowSpace(r)
		got, err := Decode(data)
		want := Command{Kind: KindFollowSpace, Space: r.Space, Version: r.Version}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%x) = %+v, %v; want %+v", data, got, err, want)
		}
		if re := encode(got); !bytes.Equal(re, data) {
			t.Fatalf("re-encoded %x, want %x", re, data)
		}
	}
	full := EncodeFollowSpace(SpaceRecord{Space: seqd.Space{Name: "users", Step: 100, SectionSize: 1000}, Version: 3})
	for name, data := range map[string][]byte{
		"kind only":              {byte(KindFollowSpace)},
		"without version":        full[:len(full)-1],
		"trailing byte":          append(bytes.Clone(full), 0),
		"name truncated":         {byte(KindFollowSpace), 9, 'a'},
		"non-minimal version":    append(bytes.Clone(full[:len(full)-1]), 0x83, 0x00),
		"version overflows":      append(bytes.Clone(full[:len(full)-1]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"an update with version": append(EncodeUpdateSpace("users", 1), 3),
	} {
		if c, err := Decode(data); err == nil {
			t.Errorf("%s: Decode(%x) = %+v, want an error", name, data, c)
		}
	}
	if KindFollowSpace&KindIgnorable != 0 || KindProtocol(KindFollowSpace) != 6 {
		t.Fatalf("KindFollowSpace: ignorable %v, protocol %d; want a kind of protocol 6 every replica applies", KindFollowSpace&KindIgnorable != 0, KindProtocol(KindFollowSpace))
	}
}

// TestAGroupsRecordOnlyMovesForward applies, in a group other than group 0,
// entries that copy group 0's record in the order the paths may commit
// them, and checks the answer and the record after each.
func TestAGroupsRecordOnlyMovesForward(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	live := func(step, v uint64) SpaceRecord {
		return SpaceRecord{Space: seqd.Space{Name: "s", Step: step, SectionSize: 10}, Version: v}
	}
	gone := func(v uint64) SpaceRecord {
		return SpaceRecord{Space: seqd.Space{Name: "s", SectionSize: 10}, Version: v}
	}
	follow := func(r SpaceRecord) []byte { return EncodeFollowSpace(r) }
	a.mustOK(EncodeRaise(nil))
	for i, tt := range []struct {
		name  string
		entry []byte
		err   error
		want  SpaceRecord
	}{
		{"an unversioned create (before the move)", EncodeCreateSpace(live(5, 0).Space), nil, live(5, 0)},
		{"an unversioned step change", EncodeUpdateSpace("s", 6), nil, live(6, 0)},
		{"a copy at version 0 (group 0 unchanged since the move)", follow(live(7, 0)), nil, live(7, 0)},
		{"the first version", follow(live(100, 2)), nil, live(100, 2)},
		{"a higher version", follow(live(200, 3)), nil, live(200, 3)},
		{"an older answer: a no-op", follow(live(100, 2)), nil, live(200, 3)},
		{"the same version again: a no-op", follow(live(300, 3)), nil, live(200, 3)},
		{"version 0 after a version: a no-op", follow(live(7, 0)), nil, live(200, 3)},
		{"an unversioned step change after a version: a no-op", EncodeUpdateSpace("s", 8), nil, live(200, 3)},
		{"an unversioned delete after a version: a no-op", EncodeDeleteSpace("s"), nil, live(200, 3)},
		{"a deletion followed", follow(gone(4)), nil, gone(4)},
		{"an older create: a no-op", follow(live(200, 3)), nil, gone(4)},
		{"an unversioned create after the deletion: a no-op", EncodeCreateSpace(live(200, 0).Space), nil, gone(4)},
		{"created again", follow(live(50, 5)), nil, live(50, 5)},
		{"the deletion again: a no-op", follow(gone(4)), nil, live(50, 5)},
		{"another section size", follow(SpaceRecord{Space: seqd.Space{Name: "s", Step: 1, SectionSize: 11}, Version: 9}), seqd.ErrSpaceExists, live(50, 5)},
		{"an invalid step", follow(SpaceRecord{Space: seqd.Space{Name: "s", Step: seqd.MaxStep + 1, SectionSize: 10}, Version: 9}), seqd.ErrInvalidSpace, live(50, 5)},
	} {
		err := respErr(t, a.apply(tt.entry))
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Fatalf("%d %s: answered %v, want %v", i, tt.name, err, tt.err)
		}
		if got, ok := f.Record("s"); !ok || got != tt.want {
			t.Fatalf("%d %s: record %+v (%v), want %+v", i, tt.name, got, ok, tt.want)
		}
	}

	// A deletion followed where the group has no record leaves a
	// tombstone with its version, which an older create cannot undo.
	fresh := SpaceRecord{Space: seqd.Space{Name: "fresh", SectionSize: 100}, Version: 7}
	a.mustOK(EncodeFollowSpace(fresh))
	if got, ok := f.Record("fresh"); !ok || got != fresh {
		t.Fatalf("the deletion of a space the group had no record of left %+v (%v)", got, ok)
	}
	if size, deleted := f.Deleted("fresh"); !deleted || size != 100 {
		t.Fatalf("Deleted(fresh) = %d, %v", size, deleted)
	}
	a.mustOK(EncodeFollowSpace(SpaceRecord{Space: seqd.Space{Name: "fresh", Step: 1, SectionSize: 100}, Version: 6}))
	if _, ok := f.Space("fresh"); ok {
		t.Fatal("a create older than the deletion followed brought the space back")
	}
	if err := respErr(t, a.apply(EncodeFollowSpace(SpaceRecord{Space: seqd.Space{Name: seqd.DefaultSpaceName, SectionSize: seqd.DefaultSpace.SectionSize}, Version: 1}))); !errors.Is(err, seqd.ErrInvalidArgument) {
		t.Fatalf("a deletion of the default space: %v", err)
	}
}

// Group 0 counts a version in every record it changes from protocol 6 on,
// deletions included, so that a space created again counts on; before the
// move, and in any other group, its changes keep the version.
func TestGroupZeroCountsVersionsFromProtocol6(t *testing.T) {
	f, path := openTest(t)
	f.CountVersions()
	a := &applier{t: t, f: f}
	version := func() uint64 { r, _ := f.Record("s"); return r.Version }
	s := seqd.Space{Name: "s", Step: 5, SectionSize: 10}
	a.mustOK(EncodeClusterGroups("c1", 5, 1))
	a.mustOK(EncodeCreateSpace(s))
	a.mustOK(EncodeUpdateSpace("s", 6))
	if v := version(); v != 0 {
		t.Fatalf("version %d on protocol 5", v)
	}
	if got := fileFormatOf(t, f); got >= versionFormat {
		t.Fatalf("a file on protocol 5 says format %d: older builds could not read it", got)
	}
	a.mustOK(EncodeClusterGroups("c1", 6, 1))
	for i, step := range []struct {
		entry []byte
		want  uint64
	}{
		{EncodeUpdateSpace("s", 7), 1},
		{EncodeUpdateSpace("s", 7), 1}, // no change, no count
		{EncodeCreateSpace(seqd.Space{Name: "s", Step: 7, SectionSize: 10}), 1},
		{EncodeDeleteSpace("s"), 2},
		{EncodeDeleteSpace("s"), 2},
		{EncodeCreateSpace(s), 3},
		{EncodeUpdateSpace("s", 9), 4},
	} {
		a.mustOK(step.entry)
		if v := version(); v != step.want {
			t.Fatalf("change %d: version %d, want %d", i, v, step.want)
		}
	}
	if got := fileFormatOf(t, f); got != versionFormat {
		t.Fatalf("a file holding versions says format %d, want %d", got, versionFormat)
	}
	want, _ := f.Record("s")

	// Kept by a snapshot installed elsewhere and by a reopen.
	g, _ := openTest(t)
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.Record("s"); got != want {
		t.Fatalf("after a snapshot's restore: %+v, want %+v", got, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got, _ := h.Record("s"); got != want {
		t.Fatalf("after a reopen: %+v, want %+v", got, want)
	}

	// Another group on protocol 6 counts nothing: its versions are copies.
	o, _ := openTest(t)
	b := &applier{t: t, f: o}
	b.mustOK(EncodeClusterGroups("c1", 6, 1))
	b.mustOK(EncodeCreateSpace(s))
	b.mustOK(EncodeUpdateSpace("s", 6))
	if r, _ := o.Record("s"); r.Version != 0 {
		t.Fatalf("a group other than group 0 counted version %d", r.Version)
	}
}

// Versions live where builds that read format 5 at most meet the file's
// format first (the key "format" sorts before them in meta), and a file
// that holds versions but says an older format is refused.
func TestVersionsAreRefusedByOlderFormats(t *testing.T) {
	if bytes.Compare(keyVersions, keyFormat) <= 0 {
		t.Fatalf("meta's %q sorts before %q: an older build would refuse the file by it, not by its format", keyVersions, keyFormat)
	}
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeFollowSpace(SpaceRecord{Space: seqd.Space{Name: "s", Step: 1, SectionSize: 10}, Version: 2}))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, u64(generationFormat)) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, quietLogger()); err == nil || !strings.Contains(err.Error(), "versions in a file that says format 5") {
		t.Fatalf("Open of versions in a format 5 file: %v", err)
	}
}

func fileFormatOf(t *testing.T, f *FSM) uint64 {
	t.Helper()
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	var v uint64
	if err := f.db.View(func(tx *bolt.Tx) error { v = metaFormat(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

// A backup keeps group 0's versions: merged from the groups' parts and
// restored into every group's state, each group holds group 0's records at
// their versions (the restored groups all start as copies of group 0).
func TestBackupsAndRestoresKeepVersions(t *testing.T) {
	const n = 3
	a := SpaceRecord{Space: seqd.Space{Name: "a", Step: 10, SectionSize: 100}, Version: 3}
	gone := SpaceRecord{Space: seqd.Space{Name: "gone", SectionSize: 100}, Version: 5}
	cluster := EncodeClusterGroups("c1", versionProtocol, n)
	var parts []string
	for g := range n {
		parts = append(parts, writePart(t, "p"+string(rune('0'+g))+".db",
			BackupInfo{ClusterID: "c1", Term: 2, Index: 4, Taken: taken.Add(time.Duration(g) * time.Millisecond)},
			cluster, EncodeFollowSpace(a), EncodeFollowSpace(gone),
			EncodeRaise([]seqd.Mark{{Space: "a", Section: sectionOf(t, "a", g, n), Max: 100}})))
	}
	dir := t.TempDir()
	merged := filepath.Join(dir, "merged.db")
	if _, err := MergeBackups(merged, parts); err != nil {
		t.Fatal(err)
	}
	var out []string
	for g := range n {
		out = append(out, filepath.Join(dir, "g"+string(rune('0'+g))+".db"))
	}
	o := RestoreOptions{Margin: 1000, ClusterID: "new"}
	if _, err := PrepareRestoreGroups(merged, out, o); err != nil {
		t.Fatal(err)
	}
	for g, path := range out {
		f, err := Open(path, quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []SpaceRecord{a, gone} {
			if got, ok := f.Record(want.Space.Name); !ok || got != want {
				t.Errorf("group %d restored %+v (%v), want %+v", g, got, ok, want)
			}
		}
		_ = f.Close()
	}
}
