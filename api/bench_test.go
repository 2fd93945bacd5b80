package api_test

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// The handler benchmarks run against a real one-node cluster (raft, bbolt,
// lease) in this process. Run them with -cpuprofile to see where a call's
// time goes; compare runs with benchstat.
//
//	go test -run '^$' -bench . -benchtime 2s -count 6 ./api | tee new.txt

func benchLeader(b *testing.B) *testcluster.Member {
	b.Helper()
	c := testcluster.Start(b, 1, testcluster.Options{})
	return c.WaitServingLeader(20 * time.Second)
}

// BenchmarkHandlerNextDirect calls the Next handler as a Go function: the
// server's own cost per call (validation, routing, allocator, lease check),
// without HTTP.
func BenchmarkHandlerNextDirect(b *testing.B) {
	s := api.New(benchLeader(b).Node(), nil)
	ctx := context.Background()
	var k uint64
	for b.Loop() {
		k++
		if _, err := s.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{k % 1000000}})); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandlerNextDirect64Keys is a coalesced request of 64 keys, per key.
func BenchmarkHandlerNextDirect64Keys(b *testing.B) {
	s := api.New(benchLeader(b).Node(), nil)
	ctx := context.Background()
	keys := make([]uint64, 64)
	var k uint64
	for b.Loop() {
		k = spreadKeys(keys, k)
		if _, err := s.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: keys})); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/id")
}

func benchHTTPNext(b *testing.B, addr string, opts ...connect.ClientOption) {
	c := seqv1connect.NewSequenceServiceClient(api.NewH2CClient(), "http://"+addr, opts...)
	ctx := context.Background()
	var n atomic.Uint64
	b.SetParallelism(8)
	b.ResetTimer() // not the cluster's start
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := n.Add(7919) % 1000000
			if _, err := c.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{k}})); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHTTPNext1000Keys is one Next of 1000 random keys per call over h2c
// (Connect protocol), 2 callers per CPU; ns/id is per key. The response
// (about 3 KB) is above connect-go's default compression threshold.
func BenchmarkHTTPNext1000Keys(b *testing.B) {
	addr := benchLeader(b).APIAddr
	c := seqv1connect.NewSequenceServiceClient(api.NewH2CClient(), "http://"+addr)
	ctx := context.Background()
	var n atomic.Uint64
	b.SetParallelism(2)
	b.ResetTimer() // not the cluster's start
	b.RunParallel(func(pb *testing.PB) {
		keys := make([]uint64, 1000)
		for pb.Next() {
			for i := range keys {
				keys[i] = n.Add(7919) % 1000000
			}
			if _, err := c.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: keys})); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/id")
}

// BenchmarkHTTPNext1000LargeValues is one Next of the same 1000 keys per
// call over h2c, whose values are above 100000 (3-byte varints: a ~3 KB
// response, as for keys in use for a while).
func BenchmarkHTTPNext1000LargeValues(b *testing.B) {
	leader := benchLeader(b)
	ctx := context.Background()
	keys := make([]uint64, 1000)
	for i := range keys {
		keys[i] = uint64(i)
		if _, err := leader.Node().Group(0).Allocator().Reserve(ctx, "default", keys[i], 100000); err != nil {
			b.Fatal(err)
		}
	}
	c := seqv1connect.NewSequenceServiceClient(api.NewH2CClient(), "http://"+leader.APIAddr)
	for b.Loop() {
		if _, err := c.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: keys})); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/id")
}

// BenchmarkHTTPNextUnary is one Next of one key per call over h2c (Connect
// protocol), 8 callers per CPU: client and server in this process.
func BenchmarkHTTPNextUnary(b *testing.B) {
	benchHTTPNext(b, benchLeader(b).APIAddr)
}

// BenchmarkHTTPNextUnaryGRPC is the same over gRPC.
func BenchmarkHTTPNextUnaryGRPC(b *testing.B) {
	benchHTTPNext(b, benchLeader(b).APIAddr, connect.WithGRPC())
}

// BenchmarkHTTPBaselineUnary is the same against a bare connect-go handler
// that increments a counter: the ceiling for BenchmarkHTTPNextUnary.
func BenchmarkHTTPBaselineUnary(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle(seqv1connect.NewSequenceServiceHandler(&counter{},
		connect.WithReadMaxBytes(4<<20), connect.WithCompressMinBytes(math.MaxInt32)))
	ln := listen(b)
	srv := api.NewHTTPServer(mux)
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	benchHTTPNext(b, ln.Addr().String())
}

// BenchmarkClientNextCoalesced is Next of one key per caller through package
// client with coalescing, 32 callers per CPU; ns/op is per id.
func BenchmarkClientNextCoalesced(b *testing.B) {
	benchClient(b, client.Options{})
}

// BenchmarkClientNextUnary is the same without coalescing.
func BenchmarkClientNextUnary(b *testing.B) {
	benchClient(b, client.Options{DisableCoalescing: true})
}

// BenchmarkClientNextCoalescedThreeGroups is BenchmarkClientNextCoalesced
// against one server that leads three raft groups, keys spread over them:
// the client's lane (one per server) sends their calls as one message per
// round trip, so keys/req stays near one group's.
func BenchmarkClientNextCoalescedThreeGroups(b *testing.B) {
	benchClientGroups(b, 3, client.Options{})
}

// benchClient reports, next to ns/op, the raft entries the allocator wrote
// per million ids (raises; lease renewals are not counted).
func benchClient(b *testing.B, opts client.Options) { benchClientGroups(b, 1, opts) }

// benchClientGroups is benchClient against a server leading groups raft
// groups, once the client has read the routing table; it reports the keys
// per request too.
func benchClientGroups(b *testing.B, groups int, opts client.Options) {
	c0 := testcluster.Start(b, 1, testcluster.Options{Groups: groups})
	leader := c0.WaitServingLeader(20 * time.Second)
	c, err := client.New([]string{leader.APIAddr}, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); groups > 1 && c.Routing().Refreshes == 0; {
		if time.Now().After(deadline) {
			b.Fatal("the client never learned every group's leader")
		}
		if _, err := c.Next(ctx, "default", 1); err != nil {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n atomic.Uint64
	raises := func() (r uint64) {
		for g := range groups {
			r += leader.Node().Group(g).Allocator().Raises()
		}
		return r
	}
	before, stats := raises(), c.BatchStats()
	b.SetParallelism(32)
	b.ResetTimer() // not the cluster's start
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx, "default", n.Add(7919)%1000000); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(raises()-before)*1e6/float64(b.N), "entries/Mid")
	if after := c.BatchStats(); after.Requests > stats.Requests {
		b.ReportMetric(float64(after.Keys-stats.Keys)/float64(after.Requests-stats.Requests), "keys/req")
	}
}

type counter struct {
	seqv1connect.UnimplementedSequenceServiceHandler
	n atomic.Uint64
}

func (c *counter) Next(_ context.Context, req *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	vals := make([]uint64, len(req.Msg.GetKeys()))
	for i := range vals {
		vals[i] = c.n.Add(1)
	}
	return connect.NewResponse(&seqv1.NextResponse{Values: vals}), nil
}

func listen(b testing.TB) net.Listener {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return ln
}

// BenchmarkClientNextCoalescedConnectStream is BenchmarkClientNextCoalesced
// with a given HTTP client (h2c), with which the client streams over
// Connect (HTTP/2) instead of the framed transport.
func BenchmarkClientNextCoalescedConnectStream(b *testing.B) {
	benchClient(b, client.Options{HTTPClient: api.NewH2CClient()})
}

// BenchmarkClientNextCoalescedUnary is BenchmarkClientNextCoalesced with
// the coalesced requests sent as unary calls instead of NextStream
// messages.
func BenchmarkClientNextCoalescedUnary(b *testing.B) {
	benchClient(b, client.Options{DisableStreaming: true})
}

// BenchmarkNextStream64Keys is one NextStream message of 64 keys and its
// answer at a time, on one stream over h2c to the node; ns/op is per
// message (compare BenchmarkHTTPNextUnary, one unary call of one key).
func BenchmarkNextStream64Keys(b *testing.B) {
	leader := benchLeader(b)
	st := openStream(b, context.Background(), leader.APIAddr, nil)
	keys := make([]uint64, 64)
	var k uint64
	for b.Loop() {
		k = spreadKeys(keys, k)
		if r := roundTrip(b, st, "", keys...); r.GetCode() != 0 {
			b.Fatal(r.GetMessage())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/id")
}

// BenchmarkNextStreamPipelined keeps 4 messages of 16 keys in flight on
// one Connect stream (HTTP/2) to the node, as the client's batchers do;
// ns/op is per message.
func BenchmarkNextStreamPipelined(b *testing.B) {
	st := openStream(b, context.Background(), benchLeader(b).APIAddr, nil)
	pipelined(b, st.Send, st.Receive)
}

// BenchmarkFramedStreamPipelined is BenchmarkNextStreamPipelined on
// NextStream's framed transport (an upgraded HTTP/1.1 connection), the Go
// client's default.
func BenchmarkFramedStreamPipelined(b *testing.B) {
	f, code := dialFramed(b, benchLeader(b).APIAddr, "")
	if f == nil {
		b.Fatalf("upgrade: status %d", code)
	}
	pipelined(b, f.send, f.receive)
}

// pipelined sends b.N messages of 16 keys with send, at most 4 unanswered,
// and reads their answers with receive in another goroutine.
func pipelined(b *testing.B, send func(*seqv1.NextStreamRequest) error, receive func() (*seqv1.NextStreamResponse, error)) {
	slots := make(chan struct{}, 4)
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		for range b.N {
			r, err := receive()
			if err == nil && r.GetCode() != 0 {
				err = errors.New(r.GetMessage())
			}
			if err != nil {
				done <- err
				return
			}
			<-slots
		}
		done <- nil
	}()
	keys := make([]uint64, 16)
	var k uint64
	for range b.N {
		k = spreadKeys(keys, k)
		select {
		case slots <- struct{}{}:
		case err := <-done:
			b.Fatal(err)
		}
		if err := send(&seqv1.NextStreamRequest{Keys: keys}); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// spreadKeys fills keys with keys spread over 1,000,000, continuing from k,
// and returns where it stopped.
func spreadKeys(keys []uint64, k uint64) uint64 {
	for i := range keys {
		k += 7919
		keys[i] = k % 1000000
	}
	return k
}
