package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
)

// loopback answers Connect unary Next calls in process (a counter per
// call), so that the benchmarks below measure the client alone: coalescing,
// connect-go's marshalling and goroutine hand-offs, no network, no server.
type loopback struct{ n atomic.Uint64 }

func (l *loopback) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	var req seqv1.NextRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	vals := make([]uint64, len(req.GetKeys()))
	last := l.n.Add(uint64(len(vals)))
	for i := range vals {
		vals[i] = last - uint64(len(vals)-1-i)
	}
	out, _ := proto.Marshal(&seqv1.NextResponse{Values: vals})
	h := http.Header{}
	h.Set("Content-Type", "application/proto")
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(bytes.NewReader(out)),
		ContentLength: int64(len(out)), Request: r, Proto: "HTTP/2.0", ProtoMajor: 2}, nil
}

func benchLoopback(b *testing.B, opts client.Options, parallelism int) {
	opts.HTTPClient = &http.Client{Transport: &loopback{}}
	c, err := client.New([]string{"seqd.invalid:1"}, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var k atomic.Uint64
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx, "default", k.Add(1)); err != nil {
				b.Fatal(err)
			}
		}
	})
	st := c.BatchStats()
	if st.Requests > 0 {
		b.ReportMetric(float64(st.Calls)/float64(st.Requests), "calls/request")
	}
}

// BenchmarkClientOnlyCoalesced: 64 callers (32 per CPU), coalescing on.
func BenchmarkClientOnlyCoalesced(b *testing.B) { benchLoopback(b, client.Options{}, 32) }

// BenchmarkClientOnlyUnary: the same with one request per call.
func BenchmarkClientOnlyUnary(b *testing.B) {
	benchLoopback(b, client.Options{DisableCoalescing: true}, 32)
}

// BenchmarkClientOnlySerial: one caller, coalescing on (the idle path).
func BenchmarkClientOnlySerial(b *testing.B) {
	opts := client.Options{HTTPClient: &http.Client{Transport: &loopback{}}}
	c, err := client.New([]string{"seqd.invalid:1"}, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var k uint64
	for b.Loop() {
		k++
		if _, err := c.Next(ctx, "default", k); err != nil {
			b.Fatal(err)
		}
	}
}
