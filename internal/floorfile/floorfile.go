// Package floorfile reads floor files: the starting points of keys moved to
// seqd from another id source (a Leaf table's max_id per tag, a Redis
// counter per key, a table's auto-increment), as `seqd floor import` takes
// them.
//
// A floor file is text, one floor per line: a key and a floor, both
// decimal, separated by spaces or tabs:
//
//	# key floor
//	1001 52000
//	1002 17
//
// Blank lines and lines whose first non-blank character is '#' are
// skipped; a line may end in "\r\n". Keys are 0 to 2^64-1 and floors 0 to
// 2^63-1 (the largest value a sequence reaches); a key may appear more than
// once (its largest floor counts). Anything else is malformed. It owns the
// format only: what a floor does is its callers' (see
// sections.Allocator.SetFloor). Standard library only.
package floorfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ErrMalformed means a line of a floor file is not a floor, a comment or
// blank; errors wrapping it are *LineError.
var ErrMalformed = errors.New("malformed floor file")

// LineError is a malformed line: its number (from 1) and what is wrong.
type LineError struct {
	Line int
	Text string // the line, cut to 80 bytes
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: %v: %q", e.Line, e.Err, e.Text)
}

func (e *LineError) Unwrap() []error { return []error{ErrMalformed, e.Err} }

// MaxLine is the longest line read.
const MaxLine = 4096

// Scan reads a floor file from r, streaming, and calls fn with every floor
// in file order, with its line number. At the first malformed line it
// stops before calling fn for it, or for any later line, and returns a
// *LineError naming the line; an error from fn or from r stops it too and
// is returned as it is.
func Scan(r io.Reader, fn func(line int, key, floor uint64) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), MaxLine)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSuffix(sc.Text(), "\r")
		key, floor, ok, err := parse(text)
		if err != nil {
			return &LineError{Line: n, Text: cut(text), Err: err}
		}
		if !ok {
			continue
		}
		if err := fn(n, key, floor); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &LineError{Line: n + 1, Err: fmt.Errorf("longer than %d bytes", MaxLine)}
		}
		return err
	}
	return nil
}

// parse reads one line: ok is false for a blank line or a comment.
func parse(text string) (key, floor uint64, ok bool, err error) {
	f := strings.Fields(text)
	switch {
	case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		return 0, 0, false, nil
	case len(f) != 2:
		return 0, 0, false, fmt.Errorf("want a key and a floor, got %d fields", len(f))
	}
	key, err = strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, 0, false, fmt.Errorf("key %q is not a decimal number of 0 to 2^64-1", f[0])
	}
	floor, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil || floor > math.MaxInt64 {
		return 0, 0, false, fmt.Errorf("floor %q is not a decimal number of 0 to 2^63-1", f[1])
	}
	return key, floor, true, nil
}

func cut(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
