package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/internal/proctest"
)

// TestFloorAndSpaceCommands runs `seqd floor`, `seqd space update|delete`
// and `seqd id ... --shard` against a real process: a bulk import sets
// every key's floor (one floor per section), a malformed line is named and
// nothing from it on is set, --check sets nothing, and bad input exits 2
// (usage) or 1 (refused by the server).
func TestFloorAndSpaceCommands(t *testing.T) {
	ps := proctest.Start(t, 1)
	proctest.WaitHealthy(t, ps, 30*time.Second)
	addr := "--addr=" + ps[0].API
	must := func(args ...string) string {
		t.Helper()
		out, stderr, code := runCLI(t, nil, append(args, addr)...)
		if code != 0 {
			t.Fatalf("seqd %v: exit %d: %s", args, code, stderr)
		}
		return out
	}
	next := func(space string, key uint64) uint64 {
		t.Helper()
		v, err := strconv.ParseUint(strings.TrimSpace(must("next", "--space", space, strconv.FormatUint(key, 10))), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	must("space", "create", "s", "--step", "10", "--section-size", "10")
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	// 25,000 keys, 2,500 sections: a floor of 1000 + 3 key each.
	var b strings.Builder
	b.WriteString("# a dump of a Redis counter per key\n")
	for k := range 25000 {
		fmt.Fprintf(&b, "%d %d\n", k, 1000+3*k)
	}
	file := write("floors", b.String())
	if _, stderr, code := runCLI(t, nil, "floor", "import", "--space", "s", "--check", addr, file); code != 0 || !strings.Contains(stderr, "25000 floors read") {
		t.Fatalf("--check: exit %d: %s", code, stderr)
	}
	if v := next("s", 24999); v > 1000+3*24999 {
		t.Fatalf("--check set a floor: %d", v)
	}
	_, stderr, code := runCLI(t, nil, "floor", "import", "--space", "s", addr, file)
	if code != 0 || !strings.Contains(stderr, "25000 floors read, 2500 section floors set") {
		t.Fatalf("floor import: exit %d: %s", code, stderr)
	}
	for _, k := range []uint64{0, 7, 12345, 24998} {
		// Every key of a section continues above the largest floor of
		// the section's keys.
		if v, want := next("s", k), uint64(1000+3*(k/10*10+9)); v <= want {
			t.Fatalf("key %d: %d after its section's floor %d", k, v, want)
		}
	}
	// A malformed line: named, the lines before it set, none from it on.
	bad := write("bad", "100000 50000\n100010 50000\n100020 x\n100030 50000\n")
	_, stderr, code = runCLI(t, nil, "floor", "import", "--space", "s", addr, bad)
	if code != 1 || !strings.Contains(stderr, "line 3") || !strings.Contains(stderr, "none from line 3 on") {
		t.Fatalf("a malformed line: exit %d: %s", code, stderr)
	}
	if v := next("s", 100010); v <= 50000 {
		t.Fatalf("a line before the malformed one was not set: %d", v)
	}
	if v := next("s", 100030); v > 50000 {
		t.Fatalf("a line after the malformed one was set: %d", v)
	}
	// floor set, and what it refuses.
	must("floor", "set", "--space", "s", "9000000", "200000", "200001")
	if v := next("s", 200001); v <= 9000000 {
		t.Fatalf("floor set: %d", v)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"floor", "set", "9223372036854775808", "1"}, 2},        // above 2^63-1
		{[]string{"floor", "set", "5"}, 2},                               // no key
		{[]string{"space", "update", "s", "--step", "0"}, 2},             // step 0
		{[]string{"space", "update", "s", "--step", "1099511627777"}, 2}, // above 2^40
		{[]string{"space", "update", "nope", "--step", "5"}, 1},          // not_found
		{[]string{"space", "delete", "default"}, 1},                      // invalid_argument
		{[]string{"floor", "import", "--space", "nope", file}, 1},        // no such space
	} {
		if _, stderr, code := runCLI(t, nil, append(c.args, addr)...); code != c.code {
			t.Errorf("seqd %v: exit %d, want %d: %s", c.args, code, c.code, stderr)
		}
	}
	// A space's step changes; a deleted space is refused, and created
	// again it continues above.
	if out := must("space", "update", "s", "--step", "500"); !strings.Contains(out, "step=500 section_size=10") {
		t.Fatalf("space update printed %q", out)
	}
	before := next("s", 3)
	must("space", "delete", "s")
	if _, stderr, code := runCLI(t, nil, "next", "--space", "s", addr, "3"); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Fatalf("next on a deleted space: exit %d: %s", code, stderr)
	}
	if strings.Contains(must("space", "list"), "\ns ") {
		t.Fatal("space list shows a deleted space")
	}
	must("space", "create", "s", "--step", "10", "--section-size", "10")
	if v := next("s", 3); v <= before {
		t.Fatalf("created again: %d after %d", v, before)
	}

	// Shards: an instagram namespace.
	must("id", "namespace", "create", "photos", "--layout", "instagram")
	var ids string
	for deadline := time.Now().Add(20 * time.Second); ; {
		o, stderr, code := runCLI(t, nil, "id", "next", "--namespace", "photos", "--shard", "4321", addr, "3")
		if code == 0 {
			ids = o
			break
		}
		if !strings.Contains(stderr, "unavailable") || time.Now().After(deadline) {
			t.Fatalf("id next --shard: exit %d: %s", code, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fields := strings.Fields(ids)
	if out := must("id", "decode", "--namespace", "photos", fields[0]); !strings.Contains(out, " 4321 ") {
		t.Fatalf("id decode of a shard-4321 id:\n%s", out)
	}
	if _, stderr, code := runCLI(t, nil, "id", "next", "--namespace", "photos", "--shard", "8192", addr); code != 1 || !strings.Contains(stderr, "invalid_argument") {
		t.Fatalf("shard 8192 of 13 bits: exit %d: %s", code, stderr)
	}
	must("id", "namespace", "delete", "photos")
	if out := must("id", "namespace", "list"); strings.Contains(out, "photos") {
		t.Fatalf("a deleted namespace listed:\n%s", out)
	}
}

// TestFloorImportStepsFloorsAboveTheRiseLimit: a floor more than
// seqd.MaxFloorRise above its key's value is set in steps of it,
// seqd.FloorRiseInterval apart, and the keys continue above it; one that
// would take more than an hour of steps is refused (exit 1, saying how long
// it would take) before any floor of its batch is set.
func TestFloorImportStepsFloorsAboveTheRiseLimit(t *testing.T) {
	ps := proctest.Start(t, 1)
	proctest.WaitHealthy(t, ps, 30*time.Second)
	addr := "--addr=" + ps[0].API
	next := func(key uint64) uint64 {
		t.Helper()
		out, stderr, code := runCLI(t, nil, "next", addr, strconv.FormatUint(key, 10))
		if code != 0 {
			t.Fatalf("next %d: exit %d: %s", key, code, stderr)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	// Two steps: 1.5 times the limit above key 5's value.
	floor := uint64(seqd.MaxFloorRise) * 3 / 2
	start := time.Now()
	_, stderr, code := runCLI(t, nil, "floor", "import", addr, write("big", fmt.Sprintf("5 %d\n", floor)))
	if code != 0 || !strings.Contains(stderr, "step 2 of 2") {
		t.Fatalf("floor import of a floor 1.5 times the limit: exit %d: %s", code, stderr)
	}
	if took := time.Since(start); took < seqd.FloorRiseInterval {
		t.Fatalf("two steps took %v, less than the %v between them", took, seqd.FloorRiseInterval)
	}
	if v := next(5); v <= floor {
		t.Fatalf("key 5: %d after a floor of %d", v, floor)
	}
	// More than an hour of steps: refused, nothing of the batch set.
	huge := uint64(1) << 62
	_, stderr, code = runCLI(t, nil, "floor", "import", addr, write("huge", fmt.Sprintf("7000000 1000\n9000000 %d\n", huge)))
	if code != 1 || !strings.Contains(stderr, "invalid_argument") && !strings.Contains(stderr, "invalid argument") || !strings.Contains(stderr, "steps") {
		t.Fatalf("a floor of 2^62: exit %d: %s", code, stderr)
	}
	if v := next(9000000); v >= huge {
		t.Fatalf("a refused floor was set: %d", v)
	}
	if v := next(7000000); v > 1000 {
		t.Fatalf("a floor of the refused batch was set: %d", v)
	}
}

// writeFile writes text to the file name in dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
