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

// laneFake leads every group: its Next waits while a request holds the
// key held, and answers unavailable while a request holds the key down.
type laneFake struct {
	seqv1connect.UnimplementedSequenceServiceHandler
	held, down uint64
	release    chan struct{} // closed: held keys pass
	up         atomic.Bool   // set: down keys pass
	mu         sync.Mutex
	cur        map[uint64]uint64
}

func (f *laneFake) Next(ctx context.Context, req *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	keys := req.Msg.GetKeys()
	if slices.Contains(keys, f.held) {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if slices.Contains(keys, f.down) && !f.up.Load() {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the group has no leader"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	vals := make([]uint64, len(keys))
	for i, k := range keys {
		f.cur[k]++
		vals[i] = k*1000 + f.cur[k]
	}
	resp := connect.NewResponse(&seqv1.NextResponse{Values: vals})
	resp.Header().Set(seqd.HeaderRoutingVersion, strconv.FormatUint(1<<32|1, 10)) // the table's
	return resp, nil
}

// TestOneGroupsOutageHoldsNotTheOtherGroupsOfItsServer: calls of two
// groups that one server leads share a request (their lane); when that
// request fails because one group has no leader, the calls of the other
// group are answered at once, and those of the group without a leader
// once it has one, not together after the longest retry.
func TestOneGroupsOutageHoldsNotTheOtherGroupsOfItsServer(t *testing.T) {
	var status atomic.Pointer[seqv1.ClusterStatusResponse]
	f := &laneFake{cur: map[uint64]uint64{}, release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle(seqv1connect.NewSequenceServiceHandler(f))
	mux.Handle(seqv1connect.NewAdminServiceHandler(groupFakeAdmin{f: &groupFake{status: &status}}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	status.Store(fakeStatus(1<<32|1, addr, addr, 1, addr, 1, addr, 1))
	cl, err := client.New([]string{addr}, client.Options{RetryFor: time.Minute, MaxBatchWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	k0, k0b, k1 := keyOfGroup(0, 1), keyOfGroup(0, 1001), keyOfGroup(1, 1)
	f.held, f.down = k0b, k1
	// The table first: every group led by the one server.
	deadline := time.Now().Add(10 * time.Second)
	for {
		leaders, _ := cl.GroupLeaders()
		if len(leaders) == 3 && leaders[0] == addr && leaders[1] == addr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the table never named %s for every group: %v", addr, leaders)
		}
		if _, err := cl.Next(ctx, "", k0); err != nil {
			t.Fatal(err)
		}
	}

	// A request of group 0 held in flight, and a call of each group
	// queued behind it: they leave together.
	type answer struct {
		vals []uint64
		err  error
		at   time.Time
	}
	call := func(k uint64) chan answer {
		ch := make(chan answer, 1)
		go func() {
			v, err := cl.Next(ctx, "", k)
			ch <- answer{v, err, time.Now()}
		}()
		return ch
	}
	before := cl.BatchStats().Calls
	held := call(k0b)
	waitCalls(t, cl, before+1)
	a, b := call(k0), call(k1)
	waitCalls(t, cl, before+3)
	close(f.release)
	if r := <-held; r.err != nil {
		t.Fatalf("the held call: %v", r.err)
	}
	var got answer
	select {
	case got = <-a:
	case r := <-b:
		t.Fatalf("the call of the group without a leader was answered first: %v %v", r.vals, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the call of the group with a leader waits for the other group's leader")
	}
	if got.err != nil || len(got.vals) != 1 || got.vals[0]/1000 != k0 {
		t.Fatalf("the call of the group with a leader: %v %v", got.vals, got.err)
	}
	select {
	case r := <-b:
		t.Fatalf("the call of the group without a leader answered before it had one: %v %v", r.vals, r.err)
	default:
	}
	f.up.Store(true)
	if r := <-b; r.err != nil || len(r.vals) != 1 || r.vals[0]/1000 != k1 {
		t.Fatalf("once its group has a leader: %v %v", r.vals, r.err)
	}
}
