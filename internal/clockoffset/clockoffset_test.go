package clockoffset

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOffsetFollowsThePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "offset")
	c := New(path)
	if c.Offset() != 0 {
		t.Fatalf("no file: offset %d", c.Offset())
	}
	write := func(s string) {
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // a new inode, as harnesses do
			t.Fatal(err)
		}
	}
	wait := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for c.Offset() != want {
			if time.Now().After(deadline) {
				t.Fatalf("offset %d, want %d", c.Offset(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	write("-3600000") // no newline
	wait(-3600000)
	before := time.Now().UnixMilli()
	if got := c.NowMs(); got > before-3600000+1000 || got < before-3600000-1000 {
		t.Fatalf("NowMs %d, want about %d", got, before-3600000)
	}
	write("250\n")
	wait(250)
	write("garbage") // keeps the last value
	c.load(time.Now())
	if c.Offset() != 250 {
		t.Fatalf("a malformed file changed the offset to %d", c.Offset())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	c.load(time.Now())
	if c.Offset() != 250 {
		t.Fatalf("a missing file changed the offset to %d", c.Offset())
	}
}
