package api

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"connectrpc.com/connect"
)

// TestLimitedBody: a body of exactly the limit reads whole; one byte more
// fails with invalid_argument, however the reads are cut (one byte at a
// time, or reads that return no byte and no error).
func TestLimitedBody(t *testing.T) {
	for _, c := range []struct {
		size int
		over bool
	}{{0, false}, {10, false}, {maxMessageBytes, false}, {maxMessageBytes + 1, true}, {2 * maxMessageBytes, true}} {
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"plain":    func(r io.Reader) io.Reader { return r },
			"one byte": iotest.OneByteReader,
			"empty reads": func(r io.Reader) io.Reader {
				return &emptyReads{r: r}
			},
		} {
			if c.size > 1<<20 && name == "one byte" {
				continue // slow, and no different from a few bytes
			}
			body := &limitedBody{rc: io.NopCloser(wrap(bytes.NewReader([]byte(strings.Repeat("x", c.size))))), left: maxMessageBytes}
			got, err := io.ReadAll(body)
			var ce *connect.Error
			switch {
			case c.over && (!errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument):
				t.Errorf("%s, %d bytes: %v, want invalid_argument", name, c.size, err)
			case c.over && len(got) > maxMessageBytes:
				t.Errorf("%s, %d bytes: read %d, past the limit", name, c.size, len(got))
			case !c.over && (err != nil || len(got) != c.size):
				t.Errorf("%s, %d bytes: read %d, %v", name, c.size, len(got), err)
			}
		}
	}
}

// emptyReads answers every other Read with no byte and no error.
type emptyReads struct {
	r    io.Reader
	skip bool
}

func (e *emptyReads) Read(p []byte) (int, error) {
	e.skip = !e.skip
	if e.skip {
		return 0, nil
	}
	return e.r.Read(p)
}
