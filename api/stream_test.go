package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/testcluster"
)

type nextStream = connect.BidiStreamForClient[seqv1.NextStreamRequest, seqv1.NextStreamResponse]

// openStream opens a NextStream to the node at addr over h2c; hdr, if not
// nil, is set on the stream's request.
func openStream(t testing.TB, ctx context.Context, addr string, hdr http.Header) *nextStream {
	t.Helper()
	st := seqv1connect.NewSequenceServiceClient(api.NewH2CClient(), "http://"+addr).NextStream(ctx)
	for k, v := range hdr {
		st.RequestHeader()[k] = v
	}
	return st
}

// roundTrip sends one message on st and reads its answer.
func roundTrip(t testing.TB, st *nextStream, space string, keys ...uint64) *seqv1.NextStreamResponse {
	t.Helper()
	return exchange(t, st.Send, st.Receive, space, keys...)
}

// exchange sends one message with send and reads its answer with receive.
func exchange(t testing.TB, send func(*seqv1.NextStreamRequest) error, receive func() (*seqv1.NextStreamResponse, error),
	space string, keys ...uint64) *seqv1.NextStreamResponse {
	t.Helper()
	if err := send(&seqv1.NextStreamRequest{Space: space, Keys: keys}); err != nil {
		t.Fatalf("send: %v", err)
	}
	resp, err := receive()
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return resp
}

// served is exchange for a message that should take values: an answer
// unavailable (a raise that failed on a loaded machine, say) is a correct
// answer too, so the message is sent again, up to 50 times.
func served(t testing.TB, send func(*seqv1.NextStreamRequest) error, receive func() (*seqv1.NextStreamResponse, error),
	space string, keys ...uint64) *seqv1.NextStreamResponse {
	t.Helper()
	for range 50 {
		r := exchange(t, send, receive, space, keys...)
		if connect.Code(r.GetCode()) != connect.CodeUnavailable {
			return r
		}
		t.Logf("answered unavailable (%s); again", r.GetMessage())
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("answered unavailable 50 times")
	return nil
}

// leaderAndFollower starts 3 nodes and returns the serving leader and a
// follower.
func leaderAndFollower(t *testing.T) (leader, follower *testcluster.Member) {
	t.Helper()
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader = c.WaitServingLeader(20 * time.Second)
	for _, m := range c.Nodes {
		if m != leader {
			follower = m
		}
	}
	return leader, follower
}

// TestNextStreamAnswersLikeUnaryNext: on one stream, to the leader and to a
// follower (which forwards each message to the leader), every message is
// answered in order as a unary Next would be: values increasing per key,
// the unary call's error code for bad input without ending the stream, and
// the headers a client learns from (the routing version; the leader a
// follower forwarded to). With Seqd-Forwarded on the stream, a follower
// forwards nothing: each message fails unavailable with the leader hint.
func TestNextStreamAnswersLikeUnaryNext(t *testing.T) {
	leader, follower := leaderAndFollower(t)
	ctx := context.Background()
	for _, m := range []*testcluster.Member{leader, follower} {
		st := openStream(t, ctx, m.APIAddr, nil)
		var last uint64
		for i := range 3 {
			r := served(t, st.Send, st.Receive, "", 5, 6)
			if r.GetCode() != 0 || len(r.GetValues()) != 2 || r.GetValues()[0] <= last {
				t.Fatalf("%s: answer %d: %v, want two values above %d", m.ID, i, r, last)
			}
			last = r.GetValues()[0]
			if r.GetRoutingVersion() == 0 {
				t.Fatalf("%s: no routing version in %v", m.ID, r)
			}
			if wantLeader := ""; m == follower {
				if r.GetLeader() != leader.APIAddr {
					t.Fatalf("follower's answer names leader %q, want %q", r.GetLeader(), leader.APIAddr)
				}
			} else if r.GetLeader() != wantLeader {
				t.Fatalf("leader's answer names leader %q, want none", r.GetLeader())
			}
			for _, bad := range []struct {
				space string
				keys  []uint64
				code  connect.Code
			}{
				{"Bad Name", []uint64{1}, connect.CodeInvalidArgument},
				{"", nil, connect.CodeInvalidArgument},
				{"", make([]uint64, seqd.MaxKeys+1), connect.CodeInvalidArgument},
				{"nope", []uint64{1}, connect.CodeNotFound},
			} {
				r := roundTrip(t, st, bad.space, bad.keys...)
				if connect.Code(r.GetCode()) != bad.code || r.GetMessage() == "" || len(r.GetValues()) != 0 {
					t.Fatalf("%s: space %q, %d keys: answer code %v %q values %v, want %v", m.ID, bad.space, len(bad.keys),
						connect.Code(r.GetCode()), r.GetMessage(), r.GetValues(), bad.code)
				}
			}
		}
		if err := st.CloseRequest(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Receive(); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: after the client closed: %v, want EOF", m.ID, err)
		}
	}

	hdr := http.Header{}
	hdr.Set(seqd.HeaderForwarded, "someone")
	st := openStream(t, ctx, follower.APIAddr, hdr)
	for range 2 {
		r := roundTrip(t, st, "", 5)
		if connect.Code(r.GetCode()) != connect.CodeUnavailable || r.GetLeader() != leader.APIAddr || r.GetLeaderId() != leader.ID {
			t.Fatalf("a forwarded stream's message on a follower: %v, want unavailable naming %s at %s", r, leader.ID, leader.APIAddr)
		}
	}
}

// TestNextStreamChecksTheToken: with --token-sequence, a stream without
// the token fails unauthenticated, and one with it is served.
func TestNextStreamChecksTheToken(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	ln := listen(t)
	srv := api.NewHTTPServer(api.New(leader.Node(), nil, api.WithToken("s3cret", true)).Handler())
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	st := openStream(t, ctx, ln.Addr().String(), nil)
	_ = st.Send(&seqv1.NextStreamRequest{Keys: []uint64{1}})
	if _, err := st.Receive(); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without the token: %v, want unauthenticated", err)
	}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer s3cret")
	st = openStream(t, ctx, ln.Addr().String(), hdr)
	if r := served(t, st.Send, st.Receive, "", 1); r.GetCode() != 0 || len(r.GetValues()) != 1 {
		t.Fatalf("with the token: %v", r)
	}
}

// TestNextStreamSlowConsumerBoundedMemory: a client that sends messages of
// 1000 keys as fast as it can and reads no answer is stopped by flow
// control after a bounded number of messages (the server reads a message
// only after it sent the last answer), without the server's memory
// growing with what the client tries to send; once the client reads, every
// message it sent is answered, in order.
func TestNextStreamSlowConsumerBoundedMemory(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openStream(t, ctx, leader.APIAddr, nil)
	slowConsumer(t, st.Send, st.Receive, cancel)
}

// slowConsumer sends messages of 1000 keys with send, reading nothing,
// until sending stalls for a second; checks that it stalled after a
// bounded number of messages and heap; then reads every answer with
// receive, in order (each the message's values, or unavailable); stop
// ends the stream.
func slowConsumer(t *testing.T, send func(*seqv1.NextStreamRequest) error, receive func() (*seqv1.NextStreamResponse, error), stop func()) {
	t.Helper()
	keys := make([]uint64, 1000)
	for i := range keys {
		keys[i] = uint64(i) * 997
	}
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)

	const most = 100000 // a bound on the loop: far more than flow control lets through
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		for range most {
			if err := send(&seqv1.NextStreamRequest{Keys: keys}); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
		done <- nil
	}()
	// Wait until sending stalls: no progress for a second.
	last, since := int64(-1), time.Now()
	for time.Since(since) < time.Second {
		select {
		case err := <-done:
			t.Fatalf("the client sent %d messages unread without being held back (err %v)", sent.Load(), err)
		case <-time.After(50 * time.Millisecond):
		}
		if n := sent.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	held := int64(m1.HeapInuse) - int64(m0.HeapInuse)
	t.Logf("sending stalled after %d messages of 1000 keys (%d ids asked for); heap in use grew by %d KiB", last, last*1000, held>>10)
	// About 2,500 on this build over HTTP/2 (its windows, a few MB of
	// messages and answers, and the sockets' buffers); fewer framed.
	if last > 10000 {
		t.Fatalf("sending stalled only after %d messages: flow control does not bound the stream", last)
	}
	if held > 64<<20 {
		t.Fatalf("heap in use grew by %d MiB while the client did not read", held>>20)
	}

	// Reading now: every message sent gets its answer, in order. The
	// sender goes on meanwhile; stop it once this side has read enough.
	for i := int64(0); i < last; i++ {
		r, err := receive()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		// Unavailable is an answer too: a leader whose lease renewal
		// was late (a loaded machine, the race detector) refuses a call.
		ok := r.GetCode() == 0 && len(r.GetValues()) == len(keys)
		if !ok && (connect.Code(r.GetCode()) != connect.CodeUnavailable || len(r.GetValues()) != 0) {
			t.Fatalf("answer %d: code %d, %d values", i, r.GetCode(), len(r.GetValues()))
		}
	}
	stop()
	<-done
}

// streamReport is one NextStream message a server reported answering
// (api.WithStreamAnswers).
type streamReport struct {
	code   connect.Code
	issued int
}

// TestEveryStreamMessageIsReported: a server reports every NextStream
// message it answers, on the Connect stream and on the framed transport
// alike, with the answer's code and the values it issued itself (none when
// it forwarded the message to the leader, or answered an error): the
// reports are the answers the client read, one for one, in order.
func TestEveryStreamMessageIsReported(t *testing.T) {
	leader, follower := leaderAndFollower(t)
	for _, m := range []*testcluster.Member{leader, follower} {
		var (
			mu      sync.Mutex
			reports []streamReport
		)
		srv := api.New(m.Node(), nil, api.WithStreamAnswers(func(code connect.Code, issued int, took time.Duration) {
			if took <= 0 {
				t.Errorf("a message reported as served in %v", took)
			}
			mu.Lock()
			reports = append(reports, streamReport{code, issued})
			mu.Unlock()
		}))
		ln := listen(t)
		hs := api.NewHTTPServer(srv.Handler())
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close() })
		addr := ln.Addr().String()

		st := openStream(t, context.Background(), addr, nil)
		f, status := dialFramed(t, addr, "")
		if f == nil {
			t.Fatalf("upgrade: status %d", status)
		}
		var want []streamReport
		for _, tr := range []struct {
			name    string
			send    func(*seqv1.NextStreamRequest) error
			receive func() (*seqv1.NextStreamResponse, error)
		}{{"connect", st.Send, st.Receive}, {"framed", f.send, f.receive}} {
			for _, msg := range []struct {
				space string
				keys  []uint64
			}{{"", []uint64{3, 4}}, {"nope", []uint64{1}}, {"Bad Name", []uint64{1}}, {"", []uint64{5}}} {
				r := exchange(t, tr.send, tr.receive, msg.space, msg.keys...)
				w := streamReport{connect.Code(r.GetCode()), len(r.GetValues())}
				if m == follower {
					w.issued = 0 // the leader issued them
				}
				want = append(want, w)
			}
		}
		mu.Lock()
		got := slices.Clone(reports)
		mu.Unlock()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: reported %v, want the answers read: %v", m.ID, got, want)
		}
		if !slices.ContainsFunc(want, func(r streamReport) bool { return r.code == connect.CodeNotFound }) ||
			!slices.ContainsFunc(want, func(r streamReport) bool { return r.code == 0 }) {
			t.Fatalf("%s: the answers %v lack a not_found or a served message", m.ID, want)
		}
	}
}
