// Command interop calls a running seqd node with a stock grpc-go client: the
// standard health service (grpc.health.v1) and SequenceService through
// grpc-go's own codec and transport, with seqd's generated message types.
// It exits non-zero on any failure. It lives in its own module so that seqd
// itself does not depend on grpc-go.
//
//	go run . -addr 127.0.0.1:7700
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7700", "seqd API address")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()

	hc := healthpb.NewHealthClient(conn)
	for {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "seq.v1.SequenceService"})
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("health never SERVING: %v %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println("grpc-go health: SERVING")
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		return fmt.Errorf("health of an unknown service: %v, want NotFound", err)
	}

	var a, b seqv1.NextResponse
	if err := conn.Invoke(ctx, "/seq.v1.SequenceService/Next", &seqv1.NextRequest{Space: "default", Keys: []uint64{7, 7}}, &a); err != nil {
		return fmt.Errorf("Next: %w", err)
	}
	if err := conn.Invoke(ctx, "/seq.v1.SequenceService/Next", &seqv1.NextRequest{Keys: []uint64{7}}, &b); err != nil {
		return fmt.Errorf("Next: %w", err)
	}
	v := a.GetValues()
	if len(v) != 2 || v[1] <= v[0] || len(b.GetValues()) != 1 || b.GetValues()[0] <= v[1] {
		return fmt.Errorf("values not increasing: %v then %v", v, b.GetValues())
	}
	fmt.Printf("grpc-go Next: %v then %v\n", v, b.GetValues())
	err = conn.Invoke(ctx, "/seq.v1.SequenceService/Next", &seqv1.NextRequest{Space: "nope", Keys: []uint64{1}}, &b)
	if status.Code(err) != codes.NotFound {
		return fmt.Errorf("unknown space: %v, want NotFound", err)
	}
	fmt.Println("grpc-go unknown space: NotFound")
	return nil
}
