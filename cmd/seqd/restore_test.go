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
