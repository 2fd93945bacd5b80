package workload

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/jepsen/record"
)

func TestParseMix(t *testing.T) {
	m, err := ParseMix("next=40, multi=15,reserve=0,current=30")
	if err != nil || m != (Mix{Next: 40, Multi: 15, Current: 30}) {
		t.Errorf("%+v %v", m, err)
	}
	for _, bad := range []string{"", "next=0", "next=x", "jump=3", "next"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	wire := func(code connect.Code) error {
		// A wire error: as the client sees an error the server sent.
		e := connect.NewWireError(code, errors.New("x"))
		return e
	}
	cases := []struct {
		err  error
		ctx  context.Context
		want string
	}{
		{nil, live, record.OK},
		{errShape, live, record.OK},
		{wire(connect.CodeUnavailable), live, record.Fail},
		{wire(connect.CodeInvalidArgument), live, record.Fail},
		{wire(connect.CodeInternal), live, record.Info},
		{wire(connect.CodeUnavailable), done, record.Info}, // timed out
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), live, record.Fail},
		{errors.New("connection reset by peer"), live, record.Info},
		{connect.NewError(connect.CodeUnavailable, errors.New("client-side")), live, record.Info},
	}
	for _, c := range cases {
		if got := Classify(c.err, c.ctx); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestLimiter(t *testing.T) {
	l := newLimiter(1000)
	start := time.Now()
	for range 50 {
		if !l.wait(context.Background()) {
			t.Fatal("wait failed")
		}
	}
	if d := time.Since(start); d < 40*time.Millisecond || d > 2*time.Second {
		t.Errorf("50 slots at 1000/s took %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if newLimiter(1).wait(ctx) {
		t.Error("wait on a cancelled context succeeded")
	}
	if !newLimiter(0).wait(context.Background()) {
		t.Error("unlimited wait failed")
	}
}

func TestClassifyLocal(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		err  error
		ctx  context.Context
		want string
	}{
		{nil, live, record.OK},
		{errors.New("no free worker"), live, record.Fail},
		{fmt.Errorf("waiting: %w", context.DeadlineExceeded), live, record.Info},
		{errors.New("whatever"), done, record.Info},
	}
	for _, c := range cases {
		if got := ClassifyLocal(c.err, c.ctx); got != c.want {
			t.Errorf("ClassifyLocal(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if err := SmallLayout(3, 4).Validate(); err != nil || SmallLayout(3, 4).Workers() != 8 {
		t.Errorf("SmallLayout(3, 4): %v", err)
	}
}
