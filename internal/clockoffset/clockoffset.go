// Package clockoffset is the test-only wall clock of `seqd serve
// --unsafe-clock-offset-file`: the wall clock plus a number of milliseconds
// read from a file that a harness rewrites at run time, so it can step one
// node's clock back and forth without touching the host's.
package clockoffset

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// reread is how long a value read from the file is used before the file
// is read again.
const reread = 100 * time.Millisecond

// Clock reads the wall clock plus the offset in a file.
type Clock struct {
	path string

	mu     sync.Mutex
	offset int64     // ms
	readAt time.Time // monotonic reading of the last read
}

// New returns a clock whose offset is read from path. It reads the file
// once now; a missing or malformed file counts as offset 0 until it holds
// a value.
func New(path string) *Clock {
	c := &Clock{path: path}
	c.load(time.Now())
	return c
}

// load re-reads the file by its path (a harness replaces it by a rename, so
// the path is opened anew each time); a missing, unreadable or malformed
// file keeps the last value.
func (c *Clock) load(now time.Time) {
	c.readAt = now
	b, err := os.ReadFile(c.path)
	if err != nil {
		return
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return
	}
	c.offset = v
}

// Offset returns the offset in ms, re-reading the file when the last read
// is more than 100 ms old.
func (c *Clock) Offset() int64 {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.readAt) >= reread {
		c.load(now)
	}
	return c.offset
}

// NowMs is the wall clock plus the offset, in Unix ms.
func (c *Clock) NowMs() int64 { return time.Now().UnixMilli() + c.Offset() }
