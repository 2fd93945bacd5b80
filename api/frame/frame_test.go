package frame_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/seqd/seqd/api/frame"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// TestFramesRoundTripInOrder: messages appended one after the other read
// back whole and in order, through a reader that hands out a few bytes at a
// time; a length over MaxMessage is refused before anything is allocated,
// and a cut frame is an error.
func TestFramesRoundTripInOrder(t *testing.T) {
	var wire []byte
	var err error
	msgs := []*seqv1.NextStreamRequest{{Space: "a", Keys: []uint64{1, 2}}, {Keys: make([]uint64, 10_000)}, {}}
	for _, m := range msgs {
		if wire, err = frame.Append(wire, m); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReaderSize(&trickle{b: wire}, 16)
	var buf []byte
	for i, want := range msgs {
		if buf, err = frame.Read(r, buf); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		got := &seqv1.NextStreamRequest{}
		if err := proto.Unmarshal(buf, got); err != nil || !proto.Equal(got, want) {
			t.Fatalf("message %d: %v (%v), want %v", i, got, err, want)
		}
	}
	if _, err := frame.Read(r, buf); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last message: %v, want EOF", err)
	}
	long := bufio.NewReader(bytes.NewReader(binary.AppendUvarint(nil, frame.MaxMessage+1)))
	if _, err := frame.Read(long, nil); !errors.Is(err, frame.ErrTooLong) {
		t.Fatalf("a length over the limit: %v", err)
	}
	cut := bufio.NewReader(bytes.NewReader(wire[:len(wire)/2]))
	frame.Read(cut, nil) //nolint:errcheck // the first message is whole
	if _, err := frame.Read(cut, nil); err == nil {
		t.Fatal("a cut frame read without an error")
	}
}

// TestRefusedUpgradeCodes: the statuses a server refuses an upgrade with
// stand for the codes of the same refusal on a unary call.
func TestRefusedUpgradeCodes(t *testing.T) {
	for status, want := range map[int]connect.Code{
		http.StatusNotFound:           connect.CodeUnimplemented,
		http.StatusUnauthorized:       connect.CodeUnauthenticated,
		http.StatusServiceUnavailable: connect.CodeUnavailable,
		http.StatusBadRequest:         connect.CodeUnknown,
	} {
		if got := frame.Refused("h", &http.Response{StatusCode: status, Status: http.StatusText(status)}).Code(); got != want {
			t.Errorf("status %d: %v, want %v", status, got, want)
		}
	}
}

// trickle reads a few bytes at a time.
type trickle struct{ b []byte }

func (t *trickle) Read(p []byte) (int, error) {
	if len(t.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 3)], t.b)
	t.b = t.b[n:]
	return n, nil
}
