package main_test

import (
	"os"
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

// TestRestoreRefusesBadInput: every refusal of `seqd restore` exits 2 with
// a clear message and writes nothing into the data directory; a good
// restore prints the minimum margin and the new cluster ID.
func TestRestoreRefusesBadInput(t *testing.T) {
	backup := writeBackup(t)
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a backup ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(t.TempDir(), "newer.db")
	b, _ := os.ReadFile(backup)
	if err := os.WriteFile(newer, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(newer, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("format"), []byte{0, 0, 0, 0, 0, 0, 0, 9})
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	withState := t.TempDir()
	if err := os.WriteFile(filepath.Join(withState, "raft.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
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
		{"no bounds", []string{"--margin", "1000000000"}, "", "--values-since and --terms-since"},
		{"zero terms", []string{"--values-since", "10", "--terms-since", "0"}, "", "at least 1"},
		{"margin below the minimum", append(bounds, "--margin", "2000"), "", "below"},
		{"garbage", bounds, "", "not a usable backup"},
		{"newer format", bounds, "", "newer seqd"},
		{"another cluster", append(bounds, "--from-cluster", "c9"), "", "another cluster"},
		{"directory with state", bounds, withState, "already has state"},
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
