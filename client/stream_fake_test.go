package client_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/history"
)

// lateStream is the fake with NextStream (over Connect), which holds,
// signals and exhausts messages as the fake does unary calls, and answers
// every slowEvery-th message of a stream late (after slow to 2 × slow),
// having taken its values first: as a node that stalls with messages in
// flight.
type lateStream struct {
	*fake
	slowEvery int64
	slow      time.Duration
	streams   atomic.Int64
	messages  atomic.Int64
}

func (f *lateStream) NextStream(ctx context.Context, s *connect.BidiStream[seqv1.NextStreamRequest, seqv1.NextStreamResponse]) error {
	f.streams.Add(1)
	for {
		req, err := s.Receive()
		if err != nil {
			return nil
		}
		keys := req.GetKeys()
		f.mu.Lock()
		hold, arrived := f.hold, f.arrived
		f.mu.Unlock()
		if arrived != nil {
			arrived <- struct{}{}
		}
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if f.exhaust != 0 && slices.Contains(keys, f.exhaust) {
			if err := s.Send(&seqv1.NextStreamResponse{Code: uint32(connect.CodeResourceExhausted), Message: "exhausted"}); err != nil {
				return nil
			}
			continue
		}
		vals := make([]uint64, len(keys))
		f.mu.Lock()
		for i, k := range keys {
			f.cur[k]++
			vals[i] = f.cur[k]
			if f.tagged {
				vals[i] |= k << 32
			}
		}
		f.mu.Unlock()
		if f.messages.Add(1)%f.slowEvery == 0 {
			t := time.NewTimer(f.slow + rand.N(f.slow))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		if err := s.Send(&seqv1.NextStreamResponse{Values: vals}); err != nil {
			return nil
		}
	}
}

// TestStreamTimeoutsLeaveGapsNotRepeats: the stream's server answers some
// messages about when the attempt time-out passes (before or after), while
// the stream's reader is answering the messages before them (waking their
// calls, yielding, letting the next batches go, some on the same stream).
// A message not answered in time fails the stream: its messages in flight
// go to the unary path and are retried, which leaves gaps (the late
// message's values were taken) but never repeats a value or breaks per-key
// order (C1, C2), and every call gets a value of its own key.
func TestStreamTimeoutsLeaveGapsNotRepeats(t *testing.T) {
	f := &lateStream{fake: &fake{tagged: true, cur: map[uint64]uint64{}}, slowEvery: 60, slow: 30 * time.Millisecond}
	c := newClient(t, startService(t, f), client.Options{
		HTTPClient:     api.NewH2CClient(),
		DisableRouting: true,
		MaxInFlight:    3,
		AttemptTimeout: 40 * time.Millisecond,
	})
	rec := history.NewRecorder()
	var wg sync.WaitGroup
	var failed atomic.Int64
	deadline := time.Now().Add(20 * time.Second)
	for g := range 16 {
		space, keys := "a", uint64(0)
		if g%2 == 1 {
			space, keys = "b", 4
		}
		wg.Go(func() {
			for i := range 250 {
				if time.Now().After(deadline) {
					t.Errorf("caller %d: %d calls in 20s", g, i)
					return
				}
				k := keys + uint64((g/2+i)%4)
				start := rec.Now()
				vals, err := c.Next(context.Background(), space, k)
				end := rec.Now()
				if err != nil {
					failed.Add(1)
					if c := connect.CodeOf(err); c != connect.CodeUnavailable && c != connect.CodeDeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("call for key %d: %v", k, err)
						return
					}
					continue
				}
				if vals[0]>>32 != k {
					t.Errorf("a call for key %d got %#x, a value of key %d", k, vals[0], vals[0]>>32)
					return
				}
				rec.Add(history.Op{Kind: history.Take, Key: k, First: vals[0], Last: vals[0], Start: start, End: end, Client: space})
			}
		})
	}
	wg.Wait()
	ops := rec.Ops()
	st := c.BatchStats()
	t.Logf("%d calls succeeded, %d failed; %d streams, %d messages; %d of %d requests streamed, %d attempts retried",
		len(ops), failed.Load(), f.streams.Load(), f.messages.Load(), st.Streamed, st.Requests, c.RetriedAttempts())
	if as := history.Check(ops, 10); len(as) > 0 {
		t.Fatalf("%d operations, anomalies: %v", len(ops), as)
	}
	if f.streams.Load() < 2 || c.RetriedAttempts() == 0 {
		t.Fatalf("%d streams and %d retried attempts: no stream timed out", f.streams.Load(), c.RetriedAttempts())
	}
	if st.Streamed == 0 || len(ops) < 16*250*9/10 {
		t.Fatalf("%d streamed requests, %d calls succeeded of %d", st.Streamed, len(ops), 16*250)
	}
}

// TestStreamResourceExhaustedReachesOnlyItsCaller: a stream message of two
// coalesced calls is answered resource_exhausted because of one call's key.
// As with a unary answer, the error is the request's (it is not retried as
// a whole, nor counted as a failed attempt that moves the client on), and
// each call is then retried on its own (as a unary call): the error
// reaches only the call whose key caused it, and the other call gets its
// value.
func TestStreamResourceExhaustedReachesOnlyItsCaller(t *testing.T) {
	f := &lateStream{fake: &fake{hold: make(chan struct{}), arrived: make(chan struct{}, 16), exhaust: 9, cur: map[uint64]uint64{}}, slowEvery: 1 << 40}
	c := newClient(t, startService(t, f), client.Options{HTTPClient: api.NewH2CClient(), DisableRouting: true, MaxInFlight: 1, MaxBatchWait: time.Hour, AttemptTimeout: time.Minute})
	first := make(chan error, 1)
	go func() {
		_, err := c.Next(context.Background(), "s", 1)
		first <- err
	}()
	within(t, f.arrived, "the first message")
	exhausted, served := make(chan error, 1), make(chan []uint64, 1)
	go func() {
		_, err := c.Next(context.Background(), "s", 9)
		exhausted <- err
	}()
	waitCalls(t, c, 2)
	go func() {
		v, err := c.Next(context.Background(), "s", 3)
		if err != nil {
			t.Error(err)
		}
		served <- v
	}()
	waitCalls(t, c, 3)
	close(f.hold) // release everything from now on
	if err := within(t, first, "the first call"); err != nil {
		t.Fatal(err)
	}
	if err := within(t, exhausted, "the call for key 9"); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("the call for key 9: %v, want resource_exhausted", err)
	}
	if v := within(t, served, "the call for key 3"); !slices.Equal(v, []uint64{1}) {
		t.Fatalf("the call for key 3 got %v, want [1]", v)
	}
	if st := c.BatchStats(); st.Streamed != 2 {
		t.Fatalf("%+v: want the first call and the coalesced one as stream messages", st)
	}
	reqs := f.reqs() // the unary calls
	slices.SortFunc(reqs, slices.Compare)
	if len(reqs) != 2 || !slices.Equal(reqs[0], []uint64{3}) || !slices.Equal(reqs[1], []uint64{9}) {
		t.Fatalf("unary requests %v, want [3] and [9], each call on its own", reqs)
	}
	if n := c.RetriedAttempts(); n != 0 {
		t.Fatalf("%d retried attempts, want none: resource_exhausted is not worth retrying", n)
	}
}
