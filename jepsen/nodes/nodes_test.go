package nodes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/clockoffset"
)

func TestFlags(t *testing.T) {
	args := []string{"serve", "--id", "n1", "--join", "a:1,b:2", "--lease", "500ms", "--bootstrap-expect", "3", "--unsafe-disable-lease", "--lease=700ms", "-lease", "1s"}
	if got := DropFlag(args, "lease"); !slices.Equal(got, []string{"serve", "--id", "n1", "--join", "a:1,b:2", "--bootstrap-expect", "3", "--unsafe-disable-lease"}) {
		t.Errorf("DropFlag: %q", got)
	}
	got := SetFlag(args, "lease", "3s")
	if v, ok := FlagValue(got, "lease"); !ok || v != "3s" || slices.Contains(got, "500ms") || slices.Contains(got, "--lease=700ms") {
		t.Errorf("SetFlag: %q (value %q %v)", got, v, ok)
	}
	if v, ok := FlagValue(args, "lease"); !ok || v != "1s" {
		t.Errorf("FlagValue: last of three spellings: %q %v", v, ok)
	}
	if _, ok := FlagValue(args, "lease-margin"); ok {
		t.Error("FlagValue found a flag that is not there")
	}
	// A flag whose name is a prefix of another's is not confused with it.
	if got := DropFlag([]string{"--lease-margin", "50ms", "--lease", "1s"}, "lease"); !slices.Equal(got, []string{"--lease-margin", "50ms"}) {
		t.Errorf("DropFlag prefix: %q", got)
	}
	// A value equal to a flag name is a value.
	if got := DropFlag([]string{"--id", "lease"}, "lease"); !slices.Equal(got, []string{"--id", "lease"}) {
		t.Errorf("DropFlag value: %q", got)
	}
	seed := SeedArgs(args)
	if _, ok := FlagValue(seed, "join"); ok {
		t.Errorf("SeedArgs keeps --join: %q", seed)
	}
	if v, _ := FlagValue(seed, "bootstrap-expect"); v != "1" {
		t.Errorf("SeedArgs: bootstrap-expect %q", v)
	}
	if v, _ := FlagValue(seed, "lease"); v != "1s" || seed[0] != "serve" {
		t.Errorf("SeedArgs changed other flags: %q", seed)
	}
}

func TestMountPoints(t *testing.T) {
	mi := "21 26 0:20 / /proc rw,relatime - proc proc rw\n" +
		"99 26 0:55 / /tmp/a\\040b/n2.disk rw,nosuid - tmpfs sqj-1-n2 rw,size=32768k\n" +
		"short line\n"
	got := MountPoints(mi)
	if want := []string{"/proc", "/tmp/a b/n2.disk"}; !slices.Equal(got, want) {
		t.Errorf("MountPoints: %q, want %q", got, want)
	}
}

func TestCopyDir(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "snapshots", "1-2-3"), 0o750))
	must(os.WriteFile(filepath.Join(src, "raft.db"), []byte("log"), 0o600))
	must(os.WriteFile(filepath.Join(src, "snapshots", "1-2-3", "state.bin"), []byte("snap"), 0o640))
	dst := filepath.Join(t.TempDir(), "copy")
	must(CopyDir(src, dst))
	b, err := os.ReadFile(filepath.Join(dst, "snapshots", "1-2-3", "state.bin"))
	if err != nil || string(b) != "snap" {
		t.Errorf("copied snapshot: %q %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(dst, "raft.db"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("copied raft.db: %v %v", fi, err)
	}
	if err := CopyDir(src, dst); err == nil {
		t.Error("CopyDir over an existing directory succeeded")
	}
	// ReplaceData puts a copy in place of the data directory.
	n := &Node{ID: "n1", DataDir: filepath.Join(t.TempDir(), "n1")}
	must(os.MkdirAll(n.DataDir, 0o755))
	must(os.WriteFile(filepath.Join(n.DataDir, "newer"), nil, 0o600))
	must(n.ReplaceData(dst))
	if _, err := os.Stat(filepath.Join(n.DataDir, "newer")); !os.IsNotExist(err) {
		t.Error("ReplaceData kept a file of the replaced directory")
	}
	if b, _ := os.ReadFile(filepath.Join(n.DataDir, "raft.db")); string(b) != "log" {
		t.Errorf("ReplaceData: raft.db %q", b)
	}
}

// TestClockOffset checks that the offset the harness writes is what seqd's
// --unsafe-clock-offset-file reader sees, and that every node gets the flag.
func TestClockOffset(t *testing.T) {
	dir := t.TempDir()
	c, err := New(Spec{N: 2, Bin: "seqd", DataDir: filepath.Join(dir, "data"), LogDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	n := c.Nodes[1]
	if v, ok := FlagValue(n.Args(), ClockFlag); !ok || v != n.ClockPath || filepath.Dir(n.ClockPath) != filepath.Join(dir, "data") {
		t.Fatalf("--%s %q (%v), clock file %s", ClockFlag, v, ok, n.ClockPath)
	}
	clock := clockoffset.New(n.ClockPath) // no file yet: offset 0
	if clock.Offset() != 0 {
		t.Fatalf("offset %d before the file exists", clock.Offset())
	}
	if err := n.SetClockOffset(-10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := clockoffset.New(n.ClockPath).Offset(); got != -10_000 || n.ClockOffset() != -10*time.Second {
		t.Fatalf("offset read %d ms, recorded %v", got, n.ClockOffset())
	}
	if err := n.SetClockOffset(0); err != nil {
		t.Fatal(err)
	}
	if got := clockoffset.New(n.ClockPath).Offset(); got != 0 {
		t.Fatalf("offset after reset %d", got)
	}
}

// A spare slot lays out a server that is not one of the nodes: its own
// addresses, and per server made on it an ID, data directory and log.
func TestSpare(t *testing.T) {
	dir := t.TempDir()
	c, err := New(Spec{N: 3, Bin: "/bin/seqd", DataDir: filepath.Join(dir, "data"), LogDir: dir, Args: []string{"--lease", "500ms"}, Spare: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 3 || c.SpareAPI() == "" || slices.Contains(c.APIs(), c.SpareAPI()) {
		t.Fatalf("nodes %d, spare %q, nodes' APIs %v", len(c.Nodes), c.SpareAPI(), c.APIs())
	}
	r, err := c.Spare("r1", "--join", c.Nodes[0].Gossip)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "r1" || r.API != c.SpareAPI() || r.Index != 3 || r.DataDir != filepath.Join(dir, "data", "r1") || r.LogPath != filepath.Join(dir, "r1.log") {
		t.Errorf("r1: %+v", r)
	}
	args := r.Args()
	for flag, want := range map[string]string{"id": "r1", "data-dir": r.DataDir, "api-addr": r.API, "join": c.Nodes[0].Gossip, "lease": "500ms"} {
		if v, _ := FlagValue(args, flag); v != want {
			t.Errorf("--%s %q, want %q (%q)", flag, v, want, args)
		}
	}
	if _, ok := FlagValue(args, "bootstrap-expect"); ok {
		t.Errorf("a spare server bootstraps nothing: %q", args)
	}
	r2, _ := c.Spare("r2")
	if got := c.Extra(); len(got) != 2 || got[0] != r || got[1] != r2 || r2.API != r.API {
		t.Errorf("extra %v", got)
	}
	c, err = New(Spec{N: 3, Bin: "/bin/seqd", DataDir: dir, LogDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Spare("r1"); err == nil || c.SpareAPI() != "" {
		t.Error("a spare server made without a spare slot")
	}
}
