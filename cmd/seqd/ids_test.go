package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/internal/proctest"
)

// TestIDCommands runs `seqd id` against a real single-node process whose
// wall clock is offset through --unsafe-clock-offset-file: ids, decode,
// namespaces, workers and the exit status of bad input; and the leader's
// clock stepping back an hour at run time never lowers or repeats an id.
func TestIDCommands(t *testing.T) {
	offset := filepath.Join(t.TempDir(), "offset")
	if err := os.WriteFile(offset, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := proctest.Start(t, 1, "--unsafe-clock-offset-file", offset)
	proctest.WaitHealthy(t, ps, 30*time.Second)
	addr := "--addr=" + ps[0].API
	next := func(n int) []int64 {
		t.Helper()
		var out string
		for deadline := time.Now().Add(20 * time.Second); ; {
			o, stderr, code := runCLI(t, nil, "id", "next", addr, strconv.Itoa(n))
			if code == 0 {
				out = o
				break
			}
			if !strings.Contains(stderr, "unavailable") || time.Now().After(deadline) {
				t.Fatalf("id next: exit %d: %s", code, stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var ids []int64
		for _, f := range strings.Fields(out) {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("id next printed %q", out)
			}
			ids = append(ids, id)
		}
		if len(ids) != n {
			t.Fatalf("id next %d printed %d ids", n, len(ids))
		}
		return ids
	}
	first := next(5)
	for i := 1; i < len(first); i++ {
		if first[i] <= first[i-1] {
			t.Fatalf("ids not increasing: %v", first)
		}
	}
	out, stderr, code := runCLI(t, nil, "id", "decode", addr, strconv.FormatInt(first[0], 10))
	if code != 0 || !strings.Contains(out, " p1") {
		t.Fatalf("id decode: exit %d, %q %q", code, out, stderr)
	}
	// The leader's clock steps back an hour (a new file, renamed over the
	// old one, as harnesses do). A new namespace's grants and the default
	// namespace's renewals carry the earlier time; ids still only rise.
	tmp := offset + ".tmp"
	if err := os.WriteFile(tmp, []byte("-3600000"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, offset); err != nil {
		t.Fatal(err)
	}
	last := first[len(first)-1]
	for range 20 {
		for _, id := range next(50) {
			if id <= last {
				t.Fatalf("id %d after %d with the clock an hour back", id, last)
			}
			last = id
		}
	}
	// The workers list names the holder.
	if out, _, code := runCLI(t, nil, "id", "workers", addr); code != 0 || !strings.Contains(out, "p1") {
		t.Fatalf("id workers: exit %d, %q", code, out)
	}
	if _, _, code := runCLI(t, nil, "id", "namespace", "create", addr, "short", "--layout", "js"); code != 0 {
		t.Fatalf("namespace create: exit %d", code)
	}
	if out, _, code := runCLI(t, nil, "id", "namespace", "list", addr); code != 0 || !strings.Contains(out, "short time_bits=39") {
		t.Fatalf("namespace list: exit %d, %q", code, out)
	}
	js, _ := flake.Preset("js")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"id"}, 2, "subcommand"},
		{[]string{"id", "next", addr, "0"}, 2, "COUNT"},
		{[]string{"id", "next", addr, "10001"}, 2, "COUNT"},
		{[]string{"id", "next", addr, "--namespace", "nope"}, 1, "not_found"},
		{[]string{"id", "next", addr, "--namespace", "Bad"}, 1, "invalid_argument"},
		{[]string{"id", "decode", addr, "abc"}, 2, "positive"},
		{[]string{"id", "decode", addr, "--namespace", "short", strconv.FormatInt(1<<js.Bits(), 10)}, 1, "invalid_argument"},
		{[]string{"id", "namespace", "create", addr, "short", "--layout", "wide"}, 1, "already_exists"},
		{[]string{"id", "namespace", "create", addr, "z", "--layout", "tiny"}, 1, "invalid_argument"},
		{[]string{"id", "namespace", "create", addr, "z", "--obfuscation", "ff1"}, 1, "failed_precondition"},
	} {
		_, stderr, code := runCLI(t, nil, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("seqd %v: exit %d, %q; want %d mentioning %q", c.args, code, stderr, c.code, c.msg)
		}
	}
}
