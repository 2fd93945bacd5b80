package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
)

// laneFake leads every group: a message or request holding the key held
// waits until release is closed, and one holding the key down is answered
// unavailable until up is set. It serves NextStream (over h2c) and Next.
type laneFake struct {
	seqv1connect.UnimplementedSequenceServiceHandler
	held, down uint64
	code       connect.Code // the down key's answer (unavailable if 0)
	release    chan struct{}
	up         atomic.Bool
	both       atomic.Bool   // a message held the keys of both groups
	counted    uint64        // requests holding this key are counted
	requests   atomic.Uint64 // in count
	downs      atomic.Uint64 // answers refused for the down key
	mu         sync.Mutex
	cur        map[uint64]uint64
}

// laneVersion is the routing version of the fake's table.
const laneVersion = 1<<32 | 1

func (f *laneFake) answer(ctx context.Context, keys []uint64) ([]uint64, error) {
	if slices.Contains(keys, f.counted) {
		f.requests.Add(1)
	}
	if slices.Contains(keys, f.held) {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if slices.Contains(keys, f.down) && !f.up.Load() {
		f.downs.Add(1)
		code := f.code
		if code == 0 {
			code = connect.CodeUnavailable
		}
		return nil, connect.NewError(code, errors.New("the group has no leader"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	vals := make([]uint64, len(keys))
	for i, k := range keys {
		f.cur[k]++
		vals[i] = k*1000 + f.cur[k]
	}
	return vals, nil
}

func (f *laneFake) Next(ctx context.Context, req *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	vals, err := f.answer(ctx, req.Msg.GetKeys())
	if err != nil {
		return nil, err
	}
	resp := connect.NewResponse(&seqv1.NextResponse{Values: vals})
	resp.Header().Set(seqd.HeaderRoutingVersion, strconv.FormatUint(laneVersion, 10))
	return resp, nil
}

func (f *laneFake) NextStream(ctx context.Context, st *connect.BidiStream[seqv1.NextStreamRequest, seqv1.NextStreamResponse]) error {
	for {
		in, err := st.Receive()
		if err != nil {
			return nil // the client closed the stream
		}
		keys := in.GetKeys()
		if len(keys) > 1 && slices.ContainsFunc(keys, func(k uint64) bool { return k != f.down }) && slices.Contains(keys, f.down) {
			f.both.Store(true)
		}
		out := &seqv1.NextStreamResponse{RoutingVersion: laneVersion}
		if vals, err := f.answer(ctx, keys); err != nil {
			out.Code, out.Message = uint32(connect.CodeOf(err)), err.Error()
		} else {
			out.Values = vals
		}
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

// TestOneGroupsOutageHoldsNotTheOtherGroupsOfItsServer: calls of two
// groups that one server leads share a request (their lane); when that
// request fails because one group has no leader, the calls of the other
// group are answered at once, and those of the group without a leader
// once it has one, not together after the longest retry; and the calls
// go again coalesced, in a few requests, not one each.
func TestOneGroupsOutageHoldsNotTheOtherGroupsOfItsServer(t *testing.T) {
	f, _, _, b := laneFailure(t, 0, 0)
	f.up.Store(true)
	for _, ch := range b {
		if r := <-ch; r.err != nil || len(r.vals) != 1 || r.vals[0]/1000 != f.down {
			t.Fatalf("once its group has a leader: %v %v", r.vals, r.err)
		}
	}
}

// TestOneGroupsErrorReachesOnlyItsCalls: any error of one group in a
// lane's request (aborted, say: not one worth retrying) reaches the calls
// of that group only.
func TestOneGroupsErrorReachesOnlyItsCalls(t *testing.T) {
	_, _, _, b := laneFailure(t, connect.CodeAborted, 0)
	for _, ch := range b {
		if r := <-ch; connect.CodeOf(r.err) != connect.CodeAborted {
			t.Fatalf("a call of the group that failed: %v %v, want aborted", r.vals, r.err)
		}
	}
}

// TestCallsSplitOffAFailedLaneStopWithTheirCallers: a call of the group
// without a leader, sent again through its group's batcher, is given up
// with its caller: once every caller gave up, the group is asked no more.
func TestCallsSplitOffAFailedLaneStopWithTheirCallers(t *testing.T) {
	f, _, _, b := laneFailure(t, 0, 500*time.Millisecond)
	for _, ch := range b {
		if r := <-ch; connect.CodeOf(r.err) != connect.CodeDeadlineExceeded {
			t.Fatalf("a call whose caller gave up: %v %v, want deadline_exceeded", r.vals, r.err)
		}
	}
	// The retries in flight end with their attempt: then no more.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := f.downs.Load()
		time.Sleep(time.Second) // a negative: no condition to wait for
		if f.downs.Load() == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group without a leader is still asked %v after its callers gave up", time.Since(deadline.Add(-10*time.Second)))
		}
	}
}

type laneAnswer struct {
	vals []uint64
	err  error
}

// laneFailure starts a fake server leading 3 groups whose group 1 has no
// leader (its key answers code, unavailable if 0), and a client on its
// stream; it holds one request of group 0 in flight, queues 30 calls of
// group 0 and 30 of group 1 behind it (each of group 1 with a deadline of
// giveUp, if not 0), and lets them go as one request of the lane. It
// checks that the calls of group 0 are answered, in a few requests, while
// group 1 has no leader and none of its calls is answered yet (giveUp 0,
// unavailable), and returns the channels of both groups' answers.
func laneFailure(t *testing.T, code connect.Code, giveUp time.Duration) (f *laneFake, cl *client.Client, a, b []chan laneAnswer) {
	t.Helper()
	var status atomic.Pointer[seqv1.ClusterStatusResponse]
	k0, k0b, k1 := keyOfGroup(0, 1), keyOfGroup(0, 1001), keyOfGroup(1, 1)
	f = &laneFake{held: k0b, down: k1, code: code, counted: k0, cur: map[uint64]uint64{}, release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle(seqv1connect.NewSequenceServiceHandler(f))
	mux.Handle(seqv1connect.NewAdminServiceHandler(groupFakeAdmin{f: &groupFake{status: &status}}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var h2c http.Protocols
	h2c.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &h2c}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	status.Store(fakeStatus(1<<32|1, addr, addr, 1, addr, 1, addr, 1))
	var h2cOnly http.Protocols
	h2cOnly.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &h2cOnly}}
	// The Connect stream (a given HTTP client), on which the groups of
	// one server share a lane.
	cl, err = client.New([]string{addr}, client.Options{HTTPClient: hc, RetryFor: time.Minute, MaxBatchWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx := context.Background()
	// The table first, every group led by the one server, and the stream.
	deadline := time.Now().Add(10 * time.Second)
	for {
		leaders, _ := cl.GroupLeaders()
		if len(leaders) == 3 && leaders[0] == addr && leaders[1] == addr && cl.BatchStats().Streamed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the table never named %s for every group: %v", addr, leaders)
		}
		if _, err := cl.Next(ctx, "", k0); err != nil {
			t.Fatal(err)
		}
	}

	// A request of group 0 held in flight, and calls of each group queued
	// behind it: they leave together.
	call := func(k uint64, giveUp time.Duration) chan laneAnswer {
		ch := make(chan laneAnswer, 1)
		go func() {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if giveUp > 0 {
				ctx, cancel = context.WithTimeout(ctx, giveUp)
			}
			defer cancel()
			v, err := cl.Next(ctx, "", k)
			ch <- laneAnswer{v, err}
		}()
		return ch
	}
	const calls = 30
	f.requests.Store(0)
	before := cl.BatchStats().Calls
	held := call(k0b, 0)
	waitCalls(t, cl, before+1)
	for range calls {
		a, b = append(a, call(k0, 0)), append(b, call(k1, giveUp))
	}
	waitCalls(t, cl, before+1+2*calls)
	close(f.release)
	if r := <-held; r.err != nil {
		t.Fatalf("the held call: %v", r.err)
	}
	seen := map[uint64]bool{}
	timeout := time.After(10 * time.Second)
	for _, ch := range a {
		select {
		case got := <-ch:
			if got.err != nil || len(got.vals) != 1 || got.vals[0]/1000 != k0 || seen[got.vals[0]] {
				t.Fatalf("a call of the group with a leader: %v %v", got.vals, got.err)
			}
			seen[got.vals[0]] = true
		case <-timeout:
			t.Fatal("the calls of the group with a leader wait for the other group's leader")
		}
	}
	if code == 0 && giveUp == 0 {
		for _, ch := range b {
			select {
			case r := <-ch:
				t.Fatalf("a call of the group without a leader answered before it had one: %v %v", r.vals, r.err)
			default:
			}
		}
	}
	if !f.both.Load() {
		t.Fatal("no message held the keys of both groups: the lane was not tried")
	}
	// The held request, the failed one, and group 0's requests after it:
	// coalesced, so far fewer than one a call.
	if n := f.requests.Load(); n > 8 {
		t.Fatalf("%d requests carried the %d calls of group 0: not coalesced again", n, calls)
	}
	return f, cl, a, b
}
