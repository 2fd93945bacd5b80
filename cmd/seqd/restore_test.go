package main_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/fsm"
)

// writeBackup builds a backup file of cluster "c1" with one space (step 500)
// and one raised section, as `seqd backup` would write it.
func writeBackup(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	f, err := fsm.Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, cmd := range [][]byte{
		fsm.EncodeCluster("c1", 2),
		fsm.EncodeCreateSpace(seqd.Space{Name: "s", Step: 500, SectionSize: 10}),
		fsm.EncodeRaise([]seqd.Mark{{Space: "s", Section: 0, Max: 1500}}),
	} {
		if err, ok := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: cmd}).(error); ok {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "backup.db")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteBackup(out, fsm.BackupInfo{ClusterID: "c1", Term: 4, Index: 3, Taken: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// editedCopy returns a copy of the backup file at src in which the 8-byte
// value v is put under key in bucket.
func editedCopy(t *testing.T, src, bucket, key string, v uint64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edited.db")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucket)).Put([]byte(key), binary.BigEndian.AppendUint64(nil, v))
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRestoreRefusesBadInput: every refusal of `seqd restore` exits 2 with
// a clear message and writes nothing into the data directory; a good
// restore prints the minimum margin and the new cluster ID.
func TestRestoreRefusesBadInput(t *testing.T) {
	backup := writeBackup(t)
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a backup ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := editedCopy(t, backup, "meta", "format", 9)
	withState := t.TempDir()
	if err := os.WriteFile(filepath.Join(withState, "raft.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory that belonged to a server fenced by a newer generation of
	// the backup's lineage (c1), and one fenced in another lineage.
	fencedNewer, fencedOther := t.TempDir(), t.TempDir()
	for dir, by := range map[string]string{fencedNewer: "c1/5/c9", fencedOther: "zz/9/zq"} {
		if err := os.WriteFile(filepath.Join(dir, "fenced"), []byte(`{"generation":"x/0/x","by":"`+by+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The minimum for 10 values and 2 terms with step 500.
	min, err := fsm.MinMargin(10, 2, 500)
	if err != nil {
		t.Fatal(err)
	}
	bounds := []string{"--values-since", "10", "--terms-since", "2"}
	cases := []struct {
		name string
		args []string
		dir  string
		msg  string
	}{
		{"no bounds for a backup taken before protocol 5", []string{"--margin", "1000000000"}, "", "--values-since and --terms-since"},
		{"values without terms", []string{"--values-since", "10"}, "", "go together"},
		{"zero terms", []string{"--values-since", "10", "--terms-since", "0"}, "", "at least 1"},
		{"margin below the minimum", append(bounds, "--margin", "2000"), "", "below"},
		{"garbage", bounds, "", "not a usable backup"},
		{"newer format", bounds, "", "newer seqd"},
		{"another cluster", append(bounds, "--from-cluster", "c9"), "", "another cluster"},
		{"directory with state", bounds, withState, "already has state"},
		{"a directory fenced by a newer generation", bounds, fencedNewer, "older than a generation"},
		{"a directory fenced in another lineage", bounds, fencedOther, "already has state"},
		{"step above the largest", append(bounds, "--max-step", "9999999999999"), "", "step"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = filepath.Join(t.TempDir(), "d")
			}
			file := backup
			switch tc.name {
			case "garbage":
				file = garbage
			case "newer format":
				file = newer
			}
			before, _ := os.ReadDir(dir)
			args := append(append([]string{"restore"}, tc.args...), "--id", "r1", "--data-dir", dir, "--raft-addr", "127.0.0.1:7711", file)
			out, errOut, code := runCLI(t, nil, args...)
			if code != 2 || !strings.Contains(errOut, tc.msg) {
				t.Fatalf("exit %d, stderr %q (stdout %q); want 2 and %q", code, errOut, out, tc.msg)
			}
			after, _ := os.ReadDir(dir)
			if len(after) != len(before) {
				t.Fatalf("a refused restore wrote into %s: %v", dir, after)
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "ok")
	out, errOut, code := runCLI(t, nil, append(append([]string{"restore"}, bounds...), "--from-cluster", "c1",
		"--id", "r1", "--data-dir", dir, "--raft-addr", "127.0.0.1:7711", backup)...)
	if code != 0 {
		t.Fatalf("restore: exit %d %s %s", code, out, errOut)
	}
	for _, want := range []string{"cluster c1", "largest step 500", "minimum margin for 10 values and 2 terms since the backup: " + strconv.FormatUint(min, 10), "as new cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("restore output lacks %q:\n%s", want, out)
		}
	}
}

// TestRestoreFlakeFloor: a backup with flake namespaces restores only with
// a --flake-floor after its highest grant (exit 2 and nothing written
// otherwise); without the flag the floor is the restore's time plus a
// minute.
func TestRestoreFlakeFloor(t *testing.T) {
	dir := t.TempDir()
	f, err := fsm.Open(filepath.Join(dir, "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	now := time.Now().UnixMilli()
	l, _ := flake.Preset("snowflake")
	for i, cmd := range [][]byte{
		fsm.EncodeCluster("c1", 3),
		fsm.EncodeFlake(now, []fsm.FlakeOp{{Type: fsm.OpCreateNamespace, Namespace: "orders", Layout: l},
			{Type: fsm.OpAcquire, Namespace: "orders", Holder: "h", Label: "old", Span: 30000, LeaseMs: 10000}}),
	} {
		if err, ok := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: cmd}).(error); ok {
			t.Fatal(err)
		}
	}
	backup := filepath.Join(dir, "backup.db")
	out, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteBackup(out, fsm.BackupInfo{ClusterID: "c1", Term: 2, Index: 2, Taken: time.Now()}); err != nil {
		t.Fatal(err)
	}
	out.Close()
	restore := func(extra ...string) (string, string, int, string) {
		d := filepath.Join(t.TempDir(), "d")
		args := append(append([]string{"restore", "--values-since", "10", "--terms-since", "2"}, extra...), "--id", "r1", "--data-dir", d, "--raft-addr", "127.0.0.1:7711", backup)
		o, e, code := runCLI(t, nil, args...)
		return o, e, code, d
	}
	rfc := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	for _, extra := range [][]string{{"--flake-floor", rfc(now)}, {"--flake-floor", rfc(now + 29_000)}} {
		_, e, code, d := restore(extra...)
		if code != 2 || !strings.Contains(e, "time floor") {
			t.Fatalf("restore %v: exit %d, %q; want 2 naming the time floor", extra, code, e)
		}
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Fatalf("a refused restore wrote %v", entries)
		}
	}
	if _, e, code, _ := restore("--flake-floor", "yesterday"); code != 2 || !strings.Contains(e, "--flake-floor") {
		t.Fatalf("a malformed floor: exit %d, %q", code, e)
	}
	o, e, code, _ := restore("--flake-floor", rfc(now+31_000))
	if code != 0 || !strings.Contains(o, "flake: 1 namespaces") || !strings.Contains(o, "time floor "+rfc(now+31_000)) {
		t.Fatalf("restore: exit %d, %q %q", code, o, e)
	}
	before := time.Now().Truncate(time.Millisecond)
	o, e, code, _ = restore()
	after := time.Now()
	_, got, _ := strings.Cut(o, "time floor ")
	got, _, _ = strings.Cut(got, "\n")
	floor, err := time.Parse(time.RFC3339Nano, got)
	if code != 0 || err != nil || floor.Before(before.Add(time.Minute)) || floor.After(after.Add(time.Minute)) {
		t.Fatalf("restore with the default floor: exit %d, floor %v (%v), want the restore's time plus a minute; %q %q", code, floor, err, o, e)
	}
}

// writeGroupsBackup builds the backup of cluster "c3" of three raft groups
// (as `seqd backup` merges it from each group's part): space "s" (step 500)
// with one raised section per group, parts taken at terms 4, 6 and 9.
func writeGroupsBackup(t *testing.T) string {
	t.Helper()
	const n = 3
	dir := t.TempDir()
	var parts []string
	for g, term := range []uint64{4, 6, 9} {
		f, err := fsm.Open(filepath.Join(dir, fmt.Sprintf("fsm-%d.db", g)), nil)
		if err != nil {
			t.Fatal(err)
		}
		sec := uint64(0)
		for seqd.SlotGroup(seqd.SlotOf("s", sec), n) != g {
			sec++
		}
		for i, cmd := range [][]byte{
			// Protocol 4, the last before the raise budget: a backup of
			// the previous release, whose restore needs the bounds.
			fsm.EncodeClusterGroups("c3", 4, n),
			fsm.EncodeCreateSpace(seqd.Space{Name: "s", Step: 500, SectionSize: 10}),
			fsm.EncodeRaise([]seqd.Mark{{Space: "s", Section: sec, Max: 1500 * uint64(g+1)}}),
		} {
			if err, ok := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: cmd}).(error); ok {
				t.Fatal(err)
			}
		}
		part := filepath.Join(dir, fmt.Sprintf("part-%d.db", g))
		out, err := os.Create(part)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteBackup(out, fsm.BackupInfo{ClusterID: "c3", Term: term, Index: 3, Taken: time.Now()}); err != nil {
			t.Fatal(err)
		}
		out.Close()
		f.Close()
		parts = append(parts, part)
	}
	path := filepath.Join(dir, "backup.db")
	if _, err := fsm.MergeBackups(path, parts); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRestoreGroups: a backup of three raft groups restores into a data
// directory laid out for three groups (group 0 at the top, groups/1 and
// groups/2, the group-count file), with or without --groups 3, and prints
// each group's term and how to bound the terms since; --groups 2, or a
// backup of another slot count, is refused with exit status 2 and nothing
// written. A backup of one group written by the previous build restores
// into one group, as before.
func TestRestoreGroups(t *testing.T) {
	backup := writeGroupsBackup(t)
	otherSlots := editedCopy(t, backup, "backup", "slots", 1024)
	// As a build of another slot count would have written it: sealed with
	// its digest. Unsealed, the same edit is damage.
	damaged := editedCopy(t, backup, "backup", "slots", 1024)
	if err := fsm.SealBackup(otherSlots); err != nil {
		t.Fatal(err)
	}
	restore := func(file string, extra ...string) (string, string, int, string) {
		d := filepath.Join(t.TempDir(), "d")
		args := append(append([]string{"restore", "--values-since", "10", "--terms-since", "2"}, extra...), "--id", "r1", "--data-dir", d, "--raft-addr", "127.0.0.1:7711", file)
		o, e, code := runCLI(t, nil, args...)
		return o, e, code, d
	}
	for _, tc := range []struct {
		name, file string
		extra      []string
		msg        string
	}{
		{"another group count", backup, []string{"--groups", "2"}, "raft group count is 3; --groups 2 cannot change it"},
		{"one group asked for", backup, []string{"--groups", "1"}, "--groups 1 cannot change it"},
		{"another slot count", otherSlots, nil, "1024 slots"},
		{"a damaged backup", damaged, nil, "the backup is damaged: its contents do not match the digest"},
	} {
		o, e, code, d := restore(tc.file, tc.extra...)
		if code != 2 || !strings.Contains(e, tc.msg) {
			t.Fatalf("%s: exit %d, stderr %q (stdout %q); want 2 and %q", tc.name, code, e, o, tc.msg)
		}
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: a refused restore created %s (%v)", tc.name, d, err)
		}
	}
	for _, extra := range [][]string{nil, {"--groups", "3"}} {
		o, e, code, d := restore(backup, extra...)
		if code != 0 {
			t.Fatalf("restore %v: exit %d %s %s", extra, code, o, e)
		}
		for _, want := range []string{"cluster c3, raft term 4", "3 raft groups over 4096 slots", "group 1: raft term 6", "group 2: raft term 9",
			"largest increase of any group's seqd_group_raft_term", "(3 raft groups)", "highest mark 4500 -> "} {
			if !strings.Contains(o, want) {
				t.Errorf("restore %v output lacks %q:\n%s", extra, want, o)
			}
		}
		if c, err := os.ReadFile(filepath.Join(d, "group-count")); err != nil || strings.TrimSpace(string(c)) != "3" {
			t.Fatalf("group-count: %q %v", c, err)
		}
		for _, g := range []string{".", "groups/1", "groups/2"} {
			if _, err := os.Stat(filepath.Join(d, g, "raft.db")); err != nil {
				t.Fatalf("group directory %s: %v", g, err)
			}
		}
	}
	old := filepath.Join(t.TempDir(), "old.db")
	b, err := os.ReadFile(filepath.Join("..", "..", "fsm", "testdata", "backup-format2.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, e, code, _ := restore(old, "--groups", "3"); code != 2 || !strings.Contains(e, "raft group count is 1; --groups 3") {
		t.Fatalf("an old backup restored into 3 groups: exit %d, %q", code, e)
	}
	o, e, code, d := restore(old)
	if code != 0 || !strings.Contains(o, "cluster c-old, raft term 7, index 4") || !strings.Contains(o, "(one raft group)") || strings.Contains(o, "slots") {
		t.Fatalf("restore of the previous build's backup: exit %d %s %s", code, o, e)
	}
	if _, err := os.Stat(filepath.Join(d, "groups")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a backup of one group restored with groups/: %v", err)
	}
}

// lastBuildBeforeGroupBackups is the last commit whose backups and restores
// knew one raft group only (its backup of several groups was refused).
const lastBuildBeforeGroupBackups = "83443f4"

// TestPreviousBuildRefusesBackupOfGroups: the build before backups of
// several groups refuses one (format 4) with exit status 2, saying it was
// written by a newer seqd, and writes nothing: it never restores one group
// of it as a whole cluster.
func TestPreviousBuildRefusesBackupOfGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous build")
	}
	prev := buildPrevious(t, lastBuildBeforeGroupBackups)
	backup := writeGroupsBackup(t)
	d := filepath.Join(t.TempDir(), "d")
	cmd := exec.Command(prev, "restore", "--values-since", "10", "--terms-since", "2", "--id", "r1", "--data-dir", d, "--raft-addr", "127.0.0.1:7711", backup)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "was written by a newer seqd") {
		t.Fatalf("the previous build's restore of a backup of groups: %v\n%s", err, out)
	}
	if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the previous build's refused restore created %s (%v)", d, err)
	}
}
